//! The model endpoint's Anthropic Messages format (Claude Code) over real HTTP: SSE and JSON answers, the spawn as Claude Code's `Agent` call, MCP tools by Claude Code's name, attribution by Claude Code's own headers, and tool digests.

use delegation_model::{
    AuthorityRequest, LifecycleCall, LifecycleOp, SpawnRequest, ToolDefinition,
};
use delegation_observers::model_endpoint::{
    AGENT_ID_HEADER, Attribution, INSTANCE_HEADER, NO_LIFECYCLE_TOOL_TEXT, SESSION_ID_HEADER,
};
use delegation_observers::{ModelEndpoint, ModelMatch, ModelReply, ModelRule, WireFormat};
use serde_json::{Value, json};

fn rule(when: ModelMatch, reply: ModelReply) -> ModelRule {
    ModelRule {
        when,
        reply,
        delay_ms: 0,
        attribute_to: None,
    }
}

fn input(text: &str) -> ModelMatch {
    ModelMatch {
        input_contains: Some(text.to_string()),
        ..ModelMatch::default()
    }
}

fn message(text: &str) -> ModelReply {
    ModelReply::Message {
        text: text.to_string(),
    }
}

fn spawn(role: &str, task: &str) -> ModelReply {
    ModelReply::Spawn(SpawnRequest {
        role: role.to_string(),
        task: task.to_string(),
        authority: AuthorityRequest::default(),
        model: None,
        target: None,
        worktree: false,
    })
}

fn tool(name: &str) -> Value {
    json!({ "name": name, "description": format!("the {name} tool"),
            "input_schema": { "type": "object", "properties": {} } })
}

/// A body shaped like Claude Code's: a system-reminder block before the
/// user's text, and a `role: "system"` entry after the user message.
fn body(user_text: &str, tools: &[&str], stream: bool) -> Value {
    json!({
        "model": "claude-test", "stream": stream, "max_tokens": 1000,
        "thinking": { "type": "adaptive" },
        "system": [{ "type": "text", "text": "You are a Claude agent." }],
        "messages": [
            { "role": "user", "content": [
                { "type": "text", "text": "<system-reminder>\nchild task and GO are not mine\n</system-reminder>\n" },
                { "type": "text", "text": user_text } ] },
            { "role": "system", "content": [{ "type": "text", "text": "# Environment" }] },
        ],
        "tools": tools.iter().map(|name| tool(name)).collect::<Vec<_>>(),
    })
}

async fn post(
    endpoint: &ModelEndpoint,
    headers: &[(&str, &str)],
    body: &Value,
) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(format!("{}/v1/messages?beta=true", endpoint.url()))
        .json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("the endpoint answers")
}

/// `(event, data)` of each SSE frame.
fn sse_events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|frame| !frame.trim().is_empty())
        .map(|frame| {
            let mut lines = frame.lines();
            let event = lines
                .next()
                .unwrap()
                .strip_prefix("event: ")
                .unwrap()
                .to_string();
            let data = lines.next().unwrap().strip_prefix("data: ").unwrap();
            (event, serde_json::from_str(data).unwrap())
        })
        .collect()
}

/// The content block an SSE answer streams, reassembled as a client would.
fn streamed_block(events: &[(String, Value)]) -> Value {
    let mut block = events
        .iter()
        .find(|(e, _)| e == "content_block_start")
        .expect("a content block")
        .1["content_block"]
        .clone();
    let mut partial_json = String::new();
    for (event, data) in events {
        if event == "content_block_delta" {
            match data["delta"]["type"].as_str().unwrap() {
                "text_delta" => {
                    let text = block["text"].as_str().unwrap().to_string();
                    block["text"] = json!(text + data["delta"]["text"].as_str().unwrap());
                }
                "input_json_delta" => {
                    partial_json.push_str(data["delta"]["partial_json"].as_str().unwrap())
                }
                other => panic!("unexpected delta {other}"),
            }
        }
    }
    if !partial_json.is_empty() {
        block["input"] = serde_json::from_str(&partial_json).unwrap();
    }
    block
}

#[tokio::test]
async fn stream_is_the_messages_event_sequence_and_a_spawn_is_a_foreground_agent_call() {
    let endpoint = ModelEndpoint::start(vec![rule(input("GO"), spawn("worker", "CHILD_TASK"))])
        .await
        .unwrap();
    let response = post(
        &endpoint,
        &[(SESSION_ID_HEADER, "session-1")],
        &body("GO", &["Agent", "Bash"], true),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let events = sse_events(&response.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    for (name, data) in &events {
        assert_eq!(data["type"], *name);
    }
    assert_eq!(events[0].1["message"]["role"], "assistant");
    assert_eq!(events[4].1["delta"]["stop_reason"], "tool_use");
    let block = streamed_block(&events);
    assert_eq!(block["type"], "tool_use");
    assert_eq!(block["name"], "Agent");
    assert_eq!(
        block["input"],
        json!({ "description": "delegate to worker", "prompt": "CHILD_TASK",
                "subagent_type": "worker", "run_in_background": false })
    );

    let record = &endpoint.requests()[0];
    assert_eq!(record.format, WireFormat::AnthropicMessages);
    // The system-reminder block (which mentions GO too) is not the input.
    assert_eq!(record.input.as_deref(), Some("GO"));
    assert_eq!(record.instance, "session-1");
    assert_eq!(record.attribution, Attribution::Request);
    assert!(!record.auxiliary);
}

#[tokio::test]
async fn without_stream_one_json_message_answers_and_text_ends_the_turn() {
    let endpoint = ModelEndpoint::start(vec![rule(input("hello"), message("hi there"))])
        .await
        .unwrap();
    let response: Value = post(&endpoint, &[], &body("hello", &["Bash"], false))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(response["type"], "message");
    assert_eq!(
        response["content"],
        json!([{ "type": "text", "text": "hi there" }])
    );
    assert_eq!(response["stop_reason"], "end_turn");
    assert_eq!(response["model"], "claude-test");
    // No header at all: nothing attributes it.
    assert_eq!(
        endpoint.requests()[0].attribution,
        Attribution::Unattributed
    );
}

#[tokio::test]
async fn the_spawn_uses_task_when_only_task_is_offered_and_agent_when_neither_is() {
    let endpoint = ModelEndpoint::start(vec![rule(input("GO"), spawn("worker", "CHILD_TASK"))])
        .await
        .unwrap();
    let only_task: Value = post(&endpoint, &[], &body("GO", &["Task", "Bash"], false))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(only_task["content"][0]["name"], "Task");
    // A host that withheld its delegation tool still gets the call: its refusal is what a denied spawn shows.
    let neither: Value = post(&endpoint, &[], &body("GO", &["Bash"], false))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(neither["content"][0]["name"], "Agent");
}

#[tokio::test]
async fn a_follow_up_is_matched_by_its_tool_result() {
    let endpoint = ModelEndpoint::start(vec![
        rule(input("GO"), spawn("worker", "CHILD_TASK")),
        rule(
            ModelMatch {
                tool_result_contains: Some("child done".to_string()),
                ..ModelMatch::default()
            },
            message("parent done"),
        ),
    ])
    .await
    .unwrap();
    let mut follow_up = body("GO", &["Agent"], false);
    let messages = follow_up["messages"].as_array_mut().unwrap();
    messages.push(json!({ "role": "assistant", "content": [
        { "type": "tool_use", "id": "toolu_1", "name": "Agent", "input": {} } ] }));
    messages.push(json!({ "role": "user", "content": [
        { "type": "tool_result", "tool_use_id": "toolu_1",
          "content": [{ "type": "text", "text": "report: child done" }] } ] }));
    let response: Value = post(&endpoint, &[], &follow_up).await.json().await.unwrap();
    assert_eq!(response["content"][0]["text"], "parent done");
    let record = &endpoint.requests()[0];
    assert_eq!(record.rule, Some(1));
    assert_eq!(record.tool_result.as_deref(), Some("report: child done"));
}

#[tokio::test]
async fn requests_are_attributed_by_relay_header_then_agent_id_then_session_id() {
    let endpoint = ModelEndpoint::start(vec![]).await.unwrap();
    let body = body("anything", &["Bash"], false);
    post(&endpoint, &[(SESSION_ID_HEADER, "session-1")], &body).await;
    post(
        &endpoint,
        &[
            (SESSION_ID_HEADER, "session-1"),
            (AGENT_ID_HEADER, "agent-7"),
        ],
        &body,
    )
    .await;
    post(
        &endpoint,
        &[
            (SESSION_ID_HEADER, "session-1"),
            (AGENT_ID_HEADER, "agent-7"),
            (INSTANCE_HEADER, "i-3"),
        ],
        &body,
    )
    .await;
    let instances: Vec<String> = endpoint
        .requests()
        .into_iter()
        .map(|r| r.instance)
        .collect();
    assert_eq!(instances, ["session-1", "agent-7", "i-3"]);
    assert_eq!(endpoint.count_for("agent-7"), 1);
    assert_eq!(endpoint.count_for("session-1"), 1);
}

#[tokio::test]
async fn mcp_tool_calls_go_out_under_claude_codes_name_only_when_the_scripted_name_is_not_offered()
{
    let call = |tool: &str| ModelReply::ToolCall {
        tool: tool.to_string(),
        arguments: json!({ "path": "a" }),
    };
    let endpoint = ModelEndpoint::start(vec![
        rule(input("READ"), call("notes.read")),
        rule(input("PLAIN"), call("Bash")),
        rule(input("AMBIGUOUS"), call("notes.write")),
    ])
    .await
    .unwrap();
    let name_for = |text: &'static str, tools: &'static [&'static str]| {
        let endpoint = endpoint.clone();
        async move {
            let answer: Value = post(&endpoint, &[], &body(text, tools, false))
                .await
                .json()
                .await
                .unwrap();
            assert_eq!(answer["content"][0]["input"], json!({ "path": "a" }));
            answer["content"][0]["name"].as_str().unwrap().to_string()
        }
    };
    assert_eq!(
        name_for("READ", &["Bash", "mcp__harness__notes_read"]).await,
        "mcp__harness__notes_read"
    );
    // The scripted name offered as is wins.
    assert_eq!(
        name_for("READ", &["notes.read", "mcp__harness__notes_read"]).await,
        "notes.read"
    );
    assert_eq!(
        name_for("PLAIN", &["Bash", "mcp__harness__Bash"]).await,
        "Bash"
    );
    // Two servers offer it: no guess, the scripted name goes out.
    assert_eq!(
        name_for("AMBIGUOUS", &["mcp__a__notes_write", "mcp__b__notes_write"]).await,
        "notes.write"
    );
    // Not offered at all: as scripted, so the host's refusal of an unknown tool shows.
    assert_eq!(name_for("READ", &["Bash"]).await, "notes.read");
}

#[tokio::test]
async fn each_offered_tool_is_digested_in_its_anthropic_shape() {
    let endpoint = ModelEndpoint::start(vec![]).await.unwrap();
    post(
        &endpoint,
        &[],
        &body("x", &["Agent", "mcp__harness__notes_read"], false),
    )
    .await;
    let tools = &endpoint.requests()[0].tools;
    assert_eq!(tools.len(), 2);
    let expected = ToolDefinition::from_value(tool("mcp__harness__notes_read"))
        .unwrap()
        .digest;
    assert_eq!(tools["mcp__harness__notes_read"], expected);
    assert_ne!(tools["Agent"], expected);
    let evidence = endpoint.evidence_since(0);
    assert_eq!(
        evidence.model_visible_tools["mcp__harness__notes_read"],
        [expected]
    );
}

#[tokio::test]
async fn requests_without_tools_are_auxiliary_and_failures_are_http_statuses() {
    let endpoint =
        ModelEndpoint::start(vec![rule(input("BREAK"), ModelReply::Fail { status: 529 })])
            .await
            .unwrap();
    let title = post(
        &endpoint,
        &[(SESSION_ID_HEADER, "s")],
        &body("BREAK", &[], false),
    )
    .await;
    assert_eq!(
        title.status(),
        200,
        "an auxiliary request never meets the script"
    );
    let failing = post(
        &endpoint,
        &[(SESSION_ID_HEADER, "s")],
        &body("BREAK", &["Bash"], true),
    )
    .await;
    assert_eq!(failing.status(), 529);
    let records = endpoint.requests();
    assert!(records[0].auxiliary);
    assert_eq!(endpoint.count_for("s"), 1);
    assert_eq!(endpoint.auxiliary_count(), 1);
}

#[tokio::test]
async fn send_input_is_send_message_when_offered_and_other_lifecycle_ops_are_text() {
    let lifecycle = |op, message: Option<&str>| {
        ModelReply::Lifecycle(LifecycleCall {
            op,
            target: "agent-7".to_string(),
            message: message.map(str::to_string),
        })
    };
    let endpoint = ModelEndpoint::start(vec![
        rule(
            input("POKE"),
            lifecycle(LifecycleOp::SendInput, Some("more")),
        ),
        rule(input("CLOSE"), lifecycle(LifecycleOp::Close, None)),
    ])
    .await
    .unwrap();
    let poke: Value = post(&endpoint, &[], &body("POKE", &["SendMessage"], false))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(poke["content"][0]["name"], "SendMessage");
    assert_eq!(poke["content"][0]["input"]["to"], "agent-7");
    assert_eq!(poke["content"][0]["input"]["message"], "more");
    let unoffered: Value = post(&endpoint, &[], &body("POKE", &["Bash"], false))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(unoffered["content"][0]["text"], NO_LIFECYCLE_TOOL_TEXT);
    let close: Value = post(&endpoint, &[], &body("CLOSE", &["SendMessage"], false))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(close["content"][0]["text"], NO_LIFECYCLE_TOOL_TEXT);
}
