//! The model endpoint over real HTTP: each wire format, content-based reply choice under concurrency, attribution, auxiliary counting, failure and delay.

use std::time::{Duration, Instant};

use delegation_model::{
    AuthorityRequest, Evidence, LifecycleCall, LifecycleOp, SpawnRequest, ToolDefinition,
};
use delegation_observers::model_endpoint::{Attribution, INSTANCE_HEADER, UNATTRIBUTED};
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

fn write_note_tool() -> Value {
    json!({
        "name": "write_note",
        "description": "Write a note",
        "inputSchema": { "type": "object", "properties": { "text": { "type": "string" } } }
    })
}

async fn neutral_turn(
    endpoint: &ModelEndpoint,
    instance: &str,
    input: &str,
    tool_result: Option<&str>,
) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/neutral/turn", endpoint.url()))
        .header(INSTANCE_HEADER, instance)
        .json(&json!({
            "instance": instance, "role": "worker", "input": input,
            "tools": [write_note_tool()], "tool_result": tool_result,
        }))
        .send()
        .await
        .expect("the endpoint answers")
}

async fn neutral_reply(endpoint: &ModelEndpoint, instance: &str, input: &str) -> Value {
    let response = neutral_turn(endpoint, instance, input, None).await;
    assert_eq!(response.status(), 200);
    response.json::<Value>().await.expect("JSON reply")["reply"].clone()
}

/// `data:` payloads (and `event:` names, when present) of an SSE body, in order.
fn sse_events(body: &str) -> Vec<(Option<String>, String)> {
    body.split("\n\n")
        .filter(|frame| !frame.trim().is_empty())
        .map(|frame| {
            let mut event = None;
            let mut data = String::new();
            for line in frame.lines() {
                if let Some(name) = line.strip_prefix("event: ") {
                    event = Some(name.to_string());
                } else if let Some(payload) = line.strip_prefix("data: ") {
                    data.push_str(payload);
                } else {
                    panic!("unexpected SSE line {line:?}");
                }
            }
            (event, data)
        })
        .collect()
}

fn chat_body(messages: Value, stream: bool) -> Value {
    json!({
        "model": "fake", "stream": stream, "stream_options": { "include_usage": true },
        "messages": messages,
        "tools": [{ "type": "function",
                    "function": { "name": "task", "description": "delegate", "parameters": {} } }],
    })
}

async fn post(endpoint: &ModelEndpoint, route: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}{route}", endpoint.url()))
        .json(body)
        .send()
        .await
        .expect("the endpoint answers")
}

#[tokio::test]
async fn neutral_format_answers_scripted_reply_and_records_tool_digests() {
    let endpoint = ModelEndpoint::start(vec![rule(input("GO"), spawn("worker", "CHILD_TASK"))])
        .await
        .unwrap();

    let reply = neutral_reply(&endpoint, "root", "GO now").await;
    assert_eq!(
        reply,
        json!({ "spawn": { "role": "worker", "task": "CHILD_TASK", "authority": {} } })
    );
    let parsed: ModelReply = serde_json::from_value(reply).unwrap();
    assert_eq!(parsed, spawn("worker", "CHILD_TASK"));

    let unmatched = neutral_reply(&endpoint, "root", "something else").await;
    assert_eq!(unmatched, json!({ "message": { "text": "ok" } }));

    let records = endpoint.requests();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].rule, Some(0));
    assert_eq!(records[1].rule, None);
    assert_eq!(records[0].format, WireFormat::Neutral);
    assert_eq!(records[0].role.as_deref(), Some("worker"));
    let expected_digest = ToolDefinition::from_value(write_note_tool())
        .unwrap()
        .digest;
    assert_eq!(records[0].tools.get("write_note"), Some(&expected_digest));
    assert_eq!(endpoint.count_for("root"), 2);
    assert_eq!(endpoint.count_for("child"), 0);
}

#[tokio::test]
async fn neutral_format_refuses_a_missing_or_disagreeing_instance_header_and_still_counts_it() {
    let endpoint = ModelEndpoint::start(vec![]).await.unwrap();
    let client = reqwest::Client::new();
    let body = json!({ "instance": "root", "role": "r", "input": "x" });

    let missing = client
        .post(format!("{}/neutral/turn", endpoint.url()))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 400);
    let error: Value = missing.json().await.unwrap();
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("x-delegation-instance"),
        "{error}"
    );

    let disagreeing = client
        .post(format!("{}/neutral/turn", endpoint.url()))
        .header(INSTANCE_HEADER, "other")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(disagreeing.status(), 400);

    let unknown_field = client
        .post(format!("{}/neutral/turn", endpoint.url()))
        .header(INSTANCE_HEADER, "root")
        .json(&json!({ "instance": "root", "role": "r", "input": "x", "extra": 1 }))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown_field.status(), 400);

    // A refused request still happened on the header's behalf: zero-request checks must see it.
    assert_eq!(endpoint.count_for("other"), 1);
    assert_eq!(endpoint.count_for("root"), 1);
    assert_eq!(endpoint.count_for(UNATTRIBUTED), 1);
}

#[tokio::test]
async fn chat_completions_stream_carries_text_and_a_spawn_as_a_task_tool_call() {
    let endpoint = ModelEndpoint::start(vec![
        rule(input("GO"), spawn("explore", "CHILD_TASK find it")),
        rule(input("hello"), message("hi there")),
    ])
    .await
    .unwrap();

    let response = post(
        &endpoint,
        "/v1/chat/completions",
        &chat_body(
            json!([{ "role": "system", "content": "agent" }, { "role": "user", "content": "GO" }]),
            true,
        ),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let events = sse_events(&response.text().await.unwrap());
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|(_, data)| serde_json::from_str(data).expect("each chunk is JSON"))
        .collect();
    let call = chunks
        .iter()
        .find_map(|c| c.pointer("/choices/0/delta/tool_calls/0"))
        .expect("a tool call delta");
    assert_eq!(call["function"]["name"], "task");
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments["prompt"], "CHILD_TASK find it");
    assert_eq!(arguments["subagent_type"], "explore");
    assert!(arguments["description"].is_string());
    assert!(
        chunks
            .iter()
            .any(|c| c.pointer("/choices/0/finish_reason") == Some(&json!("tool_calls")))
    );
    assert!(chunks.iter().any(|c| c.get("usage").is_some()));

    let text_events = sse_events(
        &post(
            &endpoint,
            "/v1/chat/completions",
            &chat_body(
                json!([{ "role": "user", "content": [{ "type": "text", "text": "hello" }] }]),
                true,
            ),
        )
        .await
        .text()
        .await
        .unwrap(),
    );
    let text: String = text_events
        .iter()
        .filter(|(_, data)| data != "[DONE]")
        .filter_map(|(_, data)| {
            let chunk: Value = serde_json::from_str(data).unwrap();
            chunk
                .pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect();
    assert_eq!(text, "hi there");
}

#[tokio::test]
async fn chat_completions_without_stream_answers_one_json_completion() {
    let endpoint = ModelEndpoint::start(vec![rule(
        input("write"),
        ModelReply::ToolCall {
            tool: "write_note".to_string(),
            arguments: json!({ "text": "x" }),
        },
    )])
    .await
    .unwrap();
    let response = post(
        &endpoint,
        "/v1/chat/completions",
        &chat_body(
            json!([{ "role": "user", "content": "please write" }]),
            false,
        ),
    )
    .await;
    assert_eq!(response.status(), 200);
    let completion: Value = response.json().await.unwrap();
    assert_eq!(completion["object"], "chat.completion");
    let call = &completion["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "write_note");
    assert_eq!(
        call["function"]["arguments"],
        json!({ "text": "x" }).to_string()
    );
    assert_eq!(completion["choices"][0]["finish_reason"], "tool_calls");
}

#[tokio::test]
async fn responses_stream_has_created_items_and_completed_and_spawn_is_codex_spawn_agent() {
    let endpoint = ModelEndpoint::start(vec![rule(input("GO"), spawn("worker", "CHILD_TASK"))])
        .await
        .unwrap();
    let body = json!({
        "model": "fake", "stream": true, "instructions": "You are codex.",
        "input": [{ "type": "message", "role": "user",
                    "content": [{ "type": "input_text", "text": "GO" }] }],
        "tools": [{ "type": "function", "name": "shell", "parameters": {} }],
    });
    let response = post(&endpoint, "/v1/responses", &body).await;
    assert_eq!(response.status(), 200);
    let events = sse_events(&response.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_deref().unwrap()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.output_item.done",
            "response.completed"
        ]
    );
    let payloads: Vec<Value> = events
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    for (name, payload) in names.iter().zip(&payloads) {
        assert_eq!(payload["type"], *name);
    }
    let item = &payloads[1]["item"];
    assert_eq!(item["type"], "function_call");
    assert_eq!(item["name"], "spawn_agent");
    assert_eq!(item["namespace"], "multi_agent_v1");
    let arguments: Value = serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(
        arguments,
        json!({ "message": "CHILD_TASK", "agent_type": "worker" })
    );
    assert!(payloads[2]["response"]["usage"]["total_tokens"].is_u64());
    assert_eq!(payloads[2]["response"]["output"][0], *item);

    let records = endpoint.requests();
    assert_eq!(records[0].format, WireFormat::Responses);
    assert_eq!(records[0].input.as_deref(), Some("GO"));
    assert!(records[0].tools.contains_key("shell"));
}

#[tokio::test]
async fn responses_follow_up_is_matched_by_its_function_call_output() {
    let endpoint = ModelEndpoint::start(vec![
        rule(input("GO"), spawn("worker", "CHILD_TASK")),
        rule(
            ModelMatch {
                tool_result_contains: Some("agent_id".to_string()),
                ..ModelMatch::default()
            },
            message("parent done"),
        ),
    ])
    .await
    .unwrap();
    let body = json!({
        "model": "fake", "stream": false,
        "input": [
            { "type": "message", "role": "user", "content": "GO" },
            { "type": "function_call", "call_id": "c1", "name": "spawn_agent", "arguments": "{}" },
            { "type": "function_call_output", "call_id": "c1", "output": "{\"agent_id\":\"t2\"}" },
        ],
        "tools": [{ "type": "function", "name": "spawn_agent", "parameters": {} }],
    });
    let response: Value = post(&endpoint, "/v1/responses", &body)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(response["output"][0]["content"][0]["text"], "parent done");
    assert_eq!(endpoint.requests()[0].rule, Some(1));
}

/// The reason the endpoint exists: a parent's follow-up and a child's first
/// request in flight at once each get their own reply, and the child's is
/// counted for the child although the host sent no instance header.
#[tokio::test]
async fn concurrent_parent_follow_up_and_child_first_request_each_get_their_own_reply() {
    // The parent's follow-up carries the marker too (inside its tool result), so the
    // more specific tool-result rule comes first: first match wins.
    let endpoint = ModelEndpoint::start(vec![
        ModelRule {
            attribute_to: Some("root".to_string()),
            ..rule(
                ModelMatch {
                    tool_result_contains: Some("task started".to_string()),
                    ..ModelMatch::default()
                },
                message("parent wrap-up"),
            )
        },
        ModelRule {
            // Held back, so the parent's request (sent second) is answered first.
            delay_ms: 300,
            attribute_to: Some("child".to_string()),
            ..rule(input("CHILD_TASK"), message("child result"))
        },
    ])
    .await
    .unwrap();
    let child = chat_body(
        json!([{ "role": "system", "content": "subagent" },
               { "role": "user", "content": "CHILD_TASK: count the files" }]),
        false,
    );
    let parent = chat_body(
        json!([{ "role": "user", "content": "GO" },
               { "role": "assistant", "content": null, "tool_calls": [
                   { "id": "c1", "type": "function", "function": { "name": "task", "arguments": "{}" } }] },
               { "role": "tool", "tool_call_id": "c1", "content": "task started: CHILD_TASK" }]),
        false,
    );
    let reply_text = |completion: Value| {
        completion["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (child_reply, parent_reply) = tokio::join!(
        async {
            let response = post(&endpoint, "/v1/chat/completions", &child).await;
            (Instant::now(), response.json::<Value>().await.unwrap())
        },
        async {
            let response = post(&endpoint, "/v1/chat/completions", &parent).await;
            (Instant::now(), response.json::<Value>().await.unwrap())
        },
    );
    assert!(
        parent_reply.0 < child_reply.0,
        "the delayed child reply came last"
    );
    assert_eq!(reply_text(child_reply.1), "child result");
    assert_eq!(reply_text(parent_reply.1), "parent wrap-up");
    assert_eq!(endpoint.count_for("child"), 1);
    assert_eq!(endpoint.count_for("root"), 1);
    let records = endpoint.requests();
    assert!(records.iter().all(|r| r.attribution == Attribution::Rule));
}

#[tokio::test]
async fn the_instance_header_wins_over_a_rule_label_and_unmatched_requests_stay_unattributed() {
    let endpoint = ModelEndpoint::start(vec![ModelRule {
        attribute_to: Some("child".to_string()),
        ..rule(input("CHILD_TASK"), message("x"))
    }])
    .await
    .unwrap();
    let client = reqwest::Client::new();
    client
        .post(format!("{}/v1/chat/completions", endpoint.url()))
        .header(INSTANCE_HEADER, "inst-7")
        .json(&chat_body(
            json!([{ "role": "user", "content": "CHILD_TASK" }]),
            false,
        ))
        .send()
        .await
        .unwrap();
    post(
        &endpoint,
        "/v1/chat/completions",
        &chat_body(json!([{ "role": "user", "content": "no marker" }]), false),
    )
    .await;
    assert_eq!(endpoint.count_for("inst-7"), 1);
    assert_eq!(endpoint.count_for("child"), 0);
    assert_eq!(endpoint.count_for(UNATTRIBUTED), 1);
}

#[tokio::test]
async fn title_generation_is_answered_and_counted_apart_from_agent_turns() {
    let endpoint = ModelEndpoint::start(vec![rule(input("GO"), spawn("worker", "T"))])
        .await
        .unwrap();
    let mark = endpoint.mark();
    // No tools: opencode's title request carries the user's first message, which
    // would otherwise match the spawn rule.
    let no_tools = json!({ "model": "fake", "stream": false,
        "messages": [{ "role": "user", "content": "GO" }] });
    let title: Value = post(&endpoint, "/v1/chat/completions", &no_tools)
        .await
        .json()
        .await
        .unwrap();
    assert!(title["choices"][0]["message"]["content"].is_string());
    assert!(title["choices"][0]["message"]["tool_calls"].is_null());

    let title_prompt = chat_body(
        json!([{ "role": "system", "content": "You are a title generator. You output ONLY a thread title." },
               { "role": "user", "content": "GO" }]),
        false,
    );
    post(&endpoint, "/v1/chat/completions", &title_prompt).await;
    let agent_turn = chat_body(json!([{ "role": "user", "content": "GO" }]), false);
    post(&endpoint, "/v1/chat/completions", &agent_turn).await;

    let evidence = endpoint.evidence_since(mark);
    assert_eq!(evidence.auxiliary_requests, 2);
    assert_eq!(evidence.model_requests.values().sum::<u64>(), 1);
    assert_eq!(endpoint.count_for(UNATTRIBUTED), 1);
    let records = endpoint.requests();
    assert!(records[0].auxiliary && records[0].rule.is_none());
    assert_eq!(records[2].rule, Some(0));

    let mut step = Evidence::default();
    evidence.add_to(&mut step);
    assert_eq!(step.auxiliary_requests, 2);
    assert_eq!(step.total_model_requests(), 1);
    assert_eq!(
        step.model_visible_tools.keys().collect::<Vec<_>>(),
        ["task"]
    );
}

#[tokio::test]
async fn scripted_failure_failing_mode_and_delay_are_honoured() {
    let endpoint = ModelEndpoint::start(vec![
        rule(input("break"), ModelReply::Fail { status: 503 }),
        ModelRule {
            delay_ms: 250,
            ..rule(input("slow"), message("finally"))
        },
    ])
    .await
    .unwrap();

    let failed = neutral_turn(&endpoint, "root", "break it", None).await;
    assert_eq!(failed.status(), 503);

    let started = Instant::now();
    let slow = neutral_turn(&endpoint, "root", "slow one", None).await;
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(
        slow.json::<Value>().await.unwrap()["reply"]["message"]["text"],
        "finally"
    );

    endpoint.set_failing(Some(500)).unwrap();
    assert_eq!(
        neutral_turn(&endpoint, "root", "anything", None)
            .await
            .status(),
        500
    );
    endpoint.set_failing(None).unwrap();
    assert_eq!(
        neutral_turn(&endpoint, "root", "anything", None)
            .await
            .status(),
        200
    );

    let statuses: Vec<u16> = endpoint.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [503, 200, 500, 200]);
    assert_eq!(
        endpoint.count_for("root"),
        4,
        "failed requests are requests too"
    );

    assert!(endpoint.set_failing(Some(200)).is_err());
    assert!(
        endpoint
            .set_rules(vec![rule(input("x"), ModelReply::Fail { status: 302 })])
            .is_err()
    );
}

#[tokio::test]
async fn set_rules_re_scripts_between_steps_and_marks_separate_steps() {
    let endpoint = ModelEndpoint::start(vec![rule(input("GO"), message("first"))])
        .await
        .unwrap();
    let first = endpoint.mark();
    assert_eq!(
        neutral_reply(&endpoint, "root", "GO").await,
        json!({ "message": { "text": "first" } })
    );
    endpoint
        .set_rules(vec![rule(input("GO"), message("second"))])
        .unwrap();
    let second = endpoint.mark();
    assert_eq!(
        neutral_reply(&endpoint, "child-1", "GO").await,
        json!({ "message": { "text": "second" } })
    );
    assert_eq!(endpoint.evidence_since(first).model_requests.len(), 2);
    let step = endpoint.evidence_since(second);
    assert_eq!(step.model_requests.get("child-1"), Some(&1));
    assert!(!step.model_requests.contains_key("root"));
}

#[tokio::test]
async fn unknown_routes_are_refused_with_the_routes_that_exist_and_recorded() {
    let endpoint = ModelEndpoint::start(vec![]).await.unwrap();
    let response = post(&endpoint, "/v1/completions", &json!({})).await;
    assert_eq!(response.status(), 404);
    let error: Value = response.json().await.unwrap();
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/v1/chat/completions")
    );
    assert_eq!(endpoint.requests()[0].format, WireFormat::Unknown);
}

#[test]
fn rules_read_naturally_in_scenario_json() {
    let rules: Vec<ModelRule> = serde_json::from_value(json!([
        { "when": { "input_contains": "GO" },
          "reply": { "spawn": { "role": "worker", "task": "CHILD_TASK" } } },
        { "when": { "tool_result_contains": "done" }, "delay_ms": 5, "attribute_to": "root",
          "reply": { "tool_call": { "tool": "fs.write" } } },
        { "when": {}, "reply": { "fail": { "status": 429 } } }
    ]))
    .unwrap();
    assert_eq!(rules[0].reply, spawn("worker", "CHILD_TASK"));
    assert_eq!(
        rules[1].reply,
        ModelReply::ToolCall {
            tool: "fs.write".to_string(),
            arguments: json!({})
        }
    );
    assert_eq!(rules[2].when, ModelMatch::default());
    let typo = serde_json::from_value::<ModelRule>(
        json!({ "when": { "input_contain": "GO" }, "reply": { "message": { "text": "x" } } }),
    );
    assert!(typo.unwrap_err().to_string().contains("input_contain"));
}

fn lifecycle(op: LifecycleOp, message: Option<&str>) -> ModelReply {
    ModelReply::Lifecycle(LifecycleCall {
        op,
        target: "i-2".to_string(),
        message: message.map(str::to_string),
    })
}

/// The scripted lifecycle calls: as they are in the neutral format, as
/// codex's multi_agent_v1 tools with codex's argument names in Responses,
/// and as opencode's `task` with `task_id` in Chat Completions where opencode
/// has that tool, else a plain message (nothing any host acts on).
#[tokio::test]
async fn lifecycle_replies_are_each_hosts_own_tools() {
    let ops = [
        ("SEND", lifecycle(LifecycleOp::SendInput, Some("FOLLOW_UP"))),
        ("RESUME_WITH", lifecycle(LifecycleOp::Resume, Some("AGAIN"))),
        ("RESUME", lifecycle(LifecycleOp::Resume, None)),
        ("CLOSE", lifecycle(LifecycleOp::Close, None)),
        ("WAIT", lifecycle(LifecycleOp::Wait, None)),
    ];
    let endpoint = ModelEndpoint::start(
        ops.iter()
            .map(|(marker, reply)| rule(input(marker), reply.clone()))
            .collect(),
    )
    .await
    .unwrap();

    assert_eq!(
        neutral_reply(&endpoint, "i-1", "SEND").await,
        json!({ "lifecycle": { "op": "send_input", "target": "i-2", "message": "FOLLOW_UP" } })
    );
    assert_eq!(
        neutral_reply(&endpoint, "i-1", "RESUME").await,
        json!({ "lifecycle": { "op": "resume", "target": "i-2" } })
    );

    let codex = [
        (
            "SEND",
            "send_input",
            json!({ "target": "i-2", "message": "FOLLOW_UP" }),
        ),
        ("RESUME_WITH", "resume_agent", json!({ "id": "i-2" })),
        ("RESUME", "resume_agent", json!({ "id": "i-2" })),
        ("CLOSE", "close_agent", json!({ "target": "i-2" })),
        (
            "WAIT",
            "wait_agent",
            json!({ "targets": ["i-2"], "timeout_ms": 1000 }),
        ),
    ];
    for (marker, name, arguments) in codex {
        let body = json!({
            "model": "fake", "stream": false,
            "input": [{ "type": "message", "role": "user", "content": marker }],
            "tools": [{ "type": "function", "name": "shell", "parameters": {} }],
        });
        let response: Value = post(&endpoint, "/v1/responses", &body)
            .await
            .json()
            .await
            .unwrap();
        let item = &response["output"][0];
        assert_eq!(item["type"], "function_call", "{marker}: {item}");
        assert_eq!(item["namespace"], "multi_agent_v1", "{marker}");
        assert_eq!(item["name"], name, "{marker}");
        let sent: Value = serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(sent, arguments, "{marker}");
    }

    let opencode = [
        ("SEND", Some("FOLLOW_UP")),
        ("RESUME_WITH", Some("AGAIN")),
        ("RESUME", None),
        ("CLOSE", None),
        ("WAIT", None),
    ];
    for (marker, prompt) in opencode {
        let body = chat_body(json!([{ "role": "user", "content": marker }]), false);
        let completion: Value = post(&endpoint, "/v1/chat/completions", &body)
            .await
            .json()
            .await
            .unwrap();
        let message = &completion["choices"][0]["message"];
        match prompt {
            Some(prompt) => {
                let call = &message["tool_calls"][0]["function"];
                assert_eq!(call["name"], "task", "{marker}");
                let sent: Value =
                    serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
                assert_eq!(sent["task_id"], "i-2", "{marker}");
                assert_eq!(sent["prompt"], prompt, "{marker}");
                assert_eq!(sent["subagent_type"], "general", "{marker}");
            }
            None => {
                assert_eq!(message["tool_calls"], Value::Null, "{marker}: {message}");
                assert_eq!(
                    message["content"],
                    delegation_observers::model_endpoint::NO_LIFECYCLE_TOOL_TEXT,
                    "{marker}"
                );
            }
        }
    }
}

/// A Chat Completions request offering these function tools (as opencode sends them).
fn chat_body_offering(tools: &[&str]) -> Value {
    let tools: Vec<Value> = tools
        .iter()
        .map(|name| {
            json!({ "type": "function", "function": {
                "name": name, "description": "a tool",
                "parameters": { "type": "object", "properties": {} } } })
        })
        .collect();
    json!({
        "model": "fake", "stream": false,
        "messages": [{ "role": "user", "content": "READ_IT" }],
        "tools": tools,
    })
}

/// The function name of the one tool call a Chat Completions answer makes.
async fn chat_called_name(endpoint: &ModelEndpoint, offered: &[&str]) -> Value {
    let response = post(
        endpoint,
        "/v1/chat/completions",
        &chat_body_offering(offered),
    )
    .await;
    assert_eq!(response.status(), 200);
    let completion: Value = response.json().await.unwrap();
    completion["choices"][0]["message"]["tool_calls"][0]["function"]["name"].clone()
}

fn read_notes_script() -> Vec<ModelRule> {
    vec![rule(
        input("READ_IT"),
        ModelReply::ToolCall {
            tool: "notes.read".to_string(),
            arguments: json!({}),
        },
    )]
}

#[test]
fn opencode_names_an_mcp_tool_server_underscore_tool_with_each_part_sanitised() {
    use delegation_observers::model_endpoint::opencode_mcp_tool_name;
    assert_eq!(
        opencode_mcp_tool_name("harness", "notes.read"),
        "harness_notes_read"
    );
    // `_` and `-` survive in both parts; a space, a dot and a slash do not.
    assert_eq!(
        opencode_mcp_tool_name("my server-1", "vendor-box/get_it"),
        "my_server-1_vendor-box_get_it"
    );
    // opencode's regular expression replaces UTF-16 code units: `é` is one,
    // an emoji two.
    assert_eq!(opencode_mcp_tool_name("s", "é"), "s__");
    assert_eq!(opencode_mcp_tool_name("s", "a\u{1F600}b"), "s_a__b");
}

#[tokio::test]
async fn a_chat_tool_call_goes_out_under_the_hosts_mcp_name_when_only_that_is_offered() {
    let endpoint = ModelEndpoint::start(read_notes_script()).await.unwrap();
    // Control for the negatives below: the scripted name is renamed when,
    // and only when, the request offers opencode's name for it.
    assert_eq!(
        chat_called_name(&endpoint, &["task", "read", "harness_notes_read"]).await,
        "harness_notes_read"
    );
    // The record keeps the scripted reply, the offered names and their digests.
    let record = endpoint.requests().pop().unwrap();
    assert_eq!(
        record.reply,
        Some(ModelReply::ToolCall {
            tool: "notes.read".to_string(),
            arguments: json!({})
        })
    );
    assert_eq!(
        record.tools.keys().collect::<Vec<_>>(),
        ["harness_notes_read", "read", "task"]
    );
    assert!(record.tools["harness_notes_read"].starts_with("sha256:"));
    assert_eq!(record.attribution, Attribution::Unattributed);
}

#[tokio::test]
async fn a_chat_tool_call_keeps_the_scripted_name_when_it_is_offered_or_nothing_matches() {
    let endpoint = ModelEndpoint::start(read_notes_script()).await.unwrap();
    // The scripted name itself is offered: it wins over the MCP form.
    assert_eq!(
        chat_called_name(&endpoint, &["notes.read", "harness_notes_read"]).await,
        "notes.read"
    );
    // Only another server's form, or a name merely ending like it: no rename.
    assert_eq!(
        chat_called_name(&endpoint, &["other_notes_read", "harness_x_notes_read"]).await,
        "notes.read"
    );
}

#[tokio::test]
async fn a_chat_tool_call_is_not_renamed_when_two_servers_names_for_it_are_offered() {
    use delegation_observers::ModelEndpointConfig;
    let config = ModelEndpointConfig {
        mcp_server_names: vec!["alpha".to_string(), "beta".to_string()],
        ..ModelEndpointConfig::default()
    };
    let endpoint = ModelEndpoint::start_with(read_notes_script(), config)
        .await
        .unwrap();
    // Control: with one server's name offered, that one is called.
    assert_eq!(
        chat_called_name(&endpoint, &["beta_notes_read"]).await,
        "beta_notes_read"
    );
    // Both servers serve it: the endpoint does not pick one.
    assert_eq!(
        chat_called_name(&endpoint, &["alpha_notes_read", "beta_notes_read"]).await,
        "notes.read"
    );
}

/// codex offers an MCP server's tools as one `namespace` entry holding them;
/// each is recorded as a tool of its own under `<namespace>__<name>` (the
/// name the harness's tool is known by when read back), beside the plain
/// function tools, and never as one tool named after the namespace.
#[tokio::test]
async fn a_responses_namespace_entry_is_recorded_as_each_tool_it_holds() {
    let endpoint = ModelEndpoint::start(vec![]).await.unwrap();
    let body = json!({
        "model": "fake", "stream": false,
        "input": [{ "type": "message", "role": "user", "content": "GO" }],
        "tools": [
            { "type": "function", "name": "exec_command", "parameters": {} },
            { "type": "namespace", "name": "mcp__harness", "description": "harness tools",
              "tools": [
                  { "type": "function", "name": "menu_read", "parameters": {"type": "object"} },
                  { "type": "function", "name": "notes_write", "parameters": {"type": "object"} },
              ] },
        ],
    });
    post(&endpoint, "/v1/responses", &body).await;
    let tools: Vec<String> = endpoint.requests()[0].tools.keys().cloned().collect();
    assert_eq!(
        tools,
        vec![
            "exec_command",
            "mcp__harness__menu_read",
            "mcp__harness__notes_write"
        ]
    );
}
