//! The model endpoint with Qwen Code's Chat Completions requests: a spawn is Qwen Code's `agent` call, MCP tools go out under Qwen Code's names, and a subagent's requests are attributed by their body, not by the parent's headers they carry.

use delegation_model::{AuthorityRequest, LifecycleCall, LifecycleOp, SpawnRequest};
use delegation_observers::model_endpoint::{
    Attribution, INSTANCE_HEADER, NO_LIFECYCLE_TOOL_TEXT, qwen_mcp_tool_name, qwen_subagent_id,
};
use delegation_observers::{ModelEndpoint, ModelMatch, ModelReply, ModelRule};
use serde_json::{Value, json};

const QWEN_AGENT: &str = "QwenCode/0.24.4 (linux; x64)";
const ROOT_SESSION: &str = "5f0c3b9e-0000-4000-8000-000000000001";

fn rule(input: &str, reply: ModelReply) -> ModelRule {
    ModelRule {
        when: ModelMatch {
            input_contains: Some(input.to_string()),
            ..ModelMatch::default()
        },
        reply,
        delay_ms: 0,
        attribute_to: None,
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

fn tools(names: &[&str]) -> Value {
    names
        .iter()
        .map(|name| {
            json!({ "type": "function", "function": {
                "name": name, "description": "a tool",
                "parameters": { "type": "object", "properties": {} } } })
        })
        .collect()
}

/// A body shaped as Qwen Code sends it: a system prompt, then a first user
/// message whose text parts are a reminder and the prompt.
fn qwen_body(system: &str, prompt: &str, offered: &[&str]) -> Value {
    json!({
        "model": "reference-model", "stream": false,
        "messages": [
            { "role": "system", "content": system },
            { "role": "user", "content": [
                { "type": "text", "text": "<system-reminder>skills</system-reminder>" },
                { "type": "text", "text": prompt } ] },
        ],
        "tools": tools(offered),
    })
}

async fn send(endpoint: &ModelEndpoint, user_agent: &str, body: &Value) -> Value {
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", endpoint.url()))
        .header("user-agent", user_agent)
        // What the adapter has Qwen Code send: its own session id on every request of the process.
        .header(INSTANCE_HEADER, ROOT_SESSION)
        .json(body)
        .send()
        .await
        .expect("the endpoint answers");
    assert_eq!(response.status(), 200);
    response.json().await.expect("a JSON completion")
}

fn first_call(completion: &Value) -> (String, Value) {
    let call = &completion["choices"][0]["message"]["tool_calls"][0];
    let name = call["function"]["name"]
        .as_str()
        .expect("a tool call")
        .to_string();
    let arguments = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    (name, arguments)
}

#[tokio::test]
async fn a_qwen_spawn_is_its_agent_call_and_the_subagent_is_attributed_by_its_first_message() {
    let endpoint = ModelEndpoint::start(vec![
        rule(
            "child task",
            ModelReply::Message {
                text: "child done".into(),
            },
        ),
        rule("DELEGATE-NOW", spawn("worker", "child task: summarise")),
    ])
    .await
    .unwrap();
    let main = "You are Qwen Code, a non-interactive CLI agent";
    let parent = send(
        &endpoint,
        QWEN_AGENT,
        &qwen_body(main, "plan, then DELEGATE-NOW", &["agent", "read_file"]),
    )
    .await;
    let (name, arguments) = first_call(&parent);
    assert_eq!(name, "agent");
    assert_eq!(
        arguments,
        json!({ "description": "delegate to worker", "prompt": "child task: summarise",
                "subagent_type": "worker", "run_in_background": false })
    );
    assert_eq!(
        parent["choices"][0]["message"]["tool_calls"][0]["id"],
        "call_harness_0"
    );

    // The subagent's request comes with the parent's headers; its first user message is its task.
    let child = send(
        &endpoint,
        QWEN_AGENT,
        &qwen_body(
            "You are the worker subagent.",
            "child task: summarise",
            &["read_file"],
        ),
    )
    .await;
    assert_eq!(child["choices"][0]["message"]["content"], "child done");

    let records = endpoint.requests();
    assert_eq!(
        records[0].instance, ROOT_SESSION,
        "the parent's request is the session's"
    );
    assert_eq!(records[1].instance, qwen_subagent_id("worker", 0));
    assert_eq!(records[1].instance, "worker-call_harness_0");
    assert_eq!(records[1].attribution, Attribution::Request);
}

#[tokio::test]
async fn only_qwen_requests_are_attributed_by_body_and_only_to_a_task_the_endpoint_sent() {
    let endpoint = ModelEndpoint::start(vec![rule("DELEGATE-NOW", spawn("worker", "child task"))])
        .await
        .unwrap();
    // opencode's spawn stays its `task` call, and its child keeps the header it sends.
    let opencode = send(
        &endpoint,
        "ai-sdk/openai-compatible",
        &qwen_body("x", "DELEGATE-NOW", &["task"]),
    )
    .await;
    assert_eq!(first_call(&opencode).0, "task");
    send(
        &endpoint,
        "ai-sdk/openai-compatible",
        &qwen_body("x", "child task", &["read_file"]),
    )
    .await;
    // A Qwen request whose first message is no task the endpoint sent is its session's.
    send(
        &endpoint,
        QWEN_AGENT,
        &qwen_body("x", "child task, reworded", &["read_file"]),
    )
    .await;
    // The first message must be the task as a whole, not contain it.
    send(
        &endpoint,
        QWEN_AGENT,
        &qwen_body("x", "child task and more", &["read_file"]),
    )
    .await;
    let records = endpoint.requests();
    assert!(
        records.iter().all(|r| r.instance == ROOT_SESSION),
        "{records:#?}"
    );

    // Control: the same Qwen request after a Qwen spawn of that task is the subagent's.
    send(
        &endpoint,
        QWEN_AGENT,
        &qwen_body("x", "DELEGATE-NOW", &["agent"]),
    )
    .await;
    send(
        &endpoint,
        QWEN_AGENT,
        &qwen_body("x", "child task", &["read_file"]),
    )
    .await;
    let records = endpoint.requests();
    assert_eq!(records[5].instance, "worker-call_harness_4");
}

#[tokio::test]
async fn a_qwen_spawn_without_the_agent_tool_still_calls_agent_so_qwen_refuses_it() {
    let endpoint = ModelEndpoint::start(vec![rule("DELEGATE-NOW", spawn("worker", "child task"))])
        .await
        .unwrap();
    let completion = send(
        &endpoint,
        QWEN_AGENT,
        &qwen_body("x", "DELEGATE-NOW", &["read_file"]),
    )
    .await;
    assert_eq!(first_call(&completion).0, "agent");
}

#[tokio::test]
async fn a_qwen_mcp_call_goes_out_under_its_mcp_name_and_lifecycle_calls_have_no_tool() {
    // Qwen Code's own names, as it sent them (`mcp__harness__notes_read_1k3gxzc` seen from 0.24.4).
    assert_eq!(
        qwen_mcp_tool_name("harness", "notes.read"),
        "mcp__harness__notes_read_1k3gxzc"
    );
    assert_eq!(
        qwen_mcp_tool_name("harness", "notes_read"),
        "mcp__harness__notes_read"
    );
    // Cut to 63 characters with the hash kept (Qwen Code's algorithm run in Node gives the same).
    assert_eq!(
        qwen_mcp_tool_name("harness", &"x".repeat(80)),
        format!("mcp__harness__{}_1wuf6e5", "x".repeat(41))
    );
    let endpoint = ModelEndpoint::start(vec![
        rule(
            "READ_IT",
            ModelReply::ToolCall {
                tool: "notes.read".into(),
                arguments: json!({}),
            },
        ),
        rule(
            "SEND_IT",
            ModelReply::Lifecycle(LifecycleCall {
                op: LifecycleOp::SendInput,
                target: "worker-call_harness_0".into(),
                message: Some("more".into()),
            }),
        ),
    ])
    .await
    .unwrap();
    let offered = ["read_file", "mcp__harness__notes_read_1k3gxzc"];
    let completion = send(&endpoint, QWEN_AGENT, &qwen_body("x", "READ_IT", &offered)).await;
    assert_eq!(
        first_call(&completion).0,
        "mcp__harness__notes_read_1k3gxzc"
    );
    // A harness tool named like a Qwen Code built-in: its MCP name wins, so the
    // call reaches the harness's server and not Qwen Code's own `read_file`.
    let collide = ModelEndpoint::start(vec![rule(
        "READ_FILE",
        ModelReply::ToolCall {
            tool: "read_file".into(),
            arguments: json!({}),
        },
    )])
    .await
    .unwrap();
    let completion = send(
        &collide,
        QWEN_AGENT,
        &qwen_body("x", "READ_FILE", &["read_file", "mcp__harness__read_file"]),
    )
    .await;
    assert_eq!(first_call(&completion).0, "mcp__harness__read_file");
    // Control: only the built-in offered (the harness's tool not served), the call stays as scripted.
    let completion = send(
        &collide,
        QWEN_AGENT,
        &qwen_body("x", "READ_FILE", &["read_file"]),
    )
    .await;
    assert_eq!(first_call(&completion).0, "read_file");
    // Not offered under Qwen's name: the call stays as scripted, for Qwen Code to refuse.
    let completion = send(
        &endpoint,
        QWEN_AGENT,
        &qwen_body("x", "READ_IT", &["read_file"]),
    )
    .await;
    assert_eq!(first_call(&completion).0, "notes.read");
    let completion = send(
        &endpoint,
        QWEN_AGENT,
        &qwen_body("x", "SEND_IT", &["agent", "send_message"]),
    )
    .await;
    assert_eq!(
        completion["choices"][0]["message"]["content"],
        NO_LIFECYCLE_TOOL_TEXT
    );
}
