//! The model endpoint with GitHub Copilot CLI's requests over real HTTP: attribution by what Copilot sends (session folder, `x-interaction-type`, the subagent's prompt), its `task` and MCP tool names, and other Chat Completions clients left as they were.

use delegation_model::{AuthorityRequest, SpawnRequest};
use delegation_observers::model_endpoint::{
    Attribution, INITIATOR_HEADER, INTERACTION_TYPE_HEADER, UNATTRIBUTED,
};
use delegation_observers::{ModelEndpoint, ModelMatch, ModelReply, ModelRule};
use serde_json::{Value, json};

const SESSION: &str = "74454d3b-a0c9-4232-88a2-6ff63f451c27";
const OTHER_SESSION: &str = "0b0e1506-da66-482f-8331-ff1daaff195e";

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

/// A Copilot system prompt: the session folder is where Copilot names its session.
fn system(session: Option<&str>) -> Value {
    let folder = session.map_or_else(String::new, |s| {
        format!("\n<session_context>\nSession folder: /h/.copilot/session-state/{s}\n\nContents:\n")
    });
    json!({ "role": "system", "content": format!("You are the GitHub Copilot CLI.{folder}") })
}

fn user(text: &str) -> Value {
    json!({ "role": "user", "content": format!("<current_datetime>2026-12-02T06:57:33.586+00:00</current_datetime>\n\n{text}") })
}

fn body(messages: Vec<Value>, tools: &[&str]) -> Value {
    let tools: Vec<Value> = tools
        .iter()
        .map(|name| json!({ "type": "function", "function": { "name": name, "description": name, "parameters": { "type": "object" } } }))
        .collect();
    json!({ "model": "reference-model", "stream": false, "messages": messages, "tools": tools })
}

/// POSTs as Copilot does (`x-initiator` always; `x-interaction-type` when given) and answers the completion's message.
async fn copilot_post(endpoint: &ModelEndpoint, interaction: Option<&str>, body: &Value) -> Value {
    let mut request = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", endpoint.url()))
        .header(INITIATOR_HEADER, "agent");
    if let Some(interaction) = interaction {
        request = request.header(INTERACTION_TYPE_HEADER, interaction);
    }
    let response = request
        .json(body)
        .send()
        .await
        .expect("the endpoint answers");
    assert_eq!(response.status(), 200);
    response.json::<Value>().await.unwrap()["choices"][0]["message"].clone()
}

fn call_of(message: &Value) -> (String, String, Value) {
    let call = &message["tool_calls"][0];
    (
        call["id"].as_str().unwrap().to_string(),
        call["function"]["name"].as_str().unwrap().to_string(),
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap(),
    )
}

#[tokio::test]
async fn a_copilot_spawn_is_a_sync_task_call_and_its_subagents_requests_are_credited_to_that_call()
{
    let endpoint = ModelEndpoint::start(vec![
        rule(
            "child task",
            ModelReply::Message {
                text: "child done".to_string(),
            },
        ),
        rule("DELEGATE", spawn("worker", "child task: summarise")),
    ])
    .await
    .unwrap();

    let parent = copilot_post(
        &endpoint,
        Some("conversation-user"),
        &body(
            vec![system(Some(SESSION)), user("DELEGATE now")],
            &["task", "bash"],
        ),
    )
    .await;
    let (call_id, name, arguments) = call_of(&parent);
    assert_eq!(name, "task");
    assert_eq!(arguments["prompt"], "child task: summarise");
    assert_eq!(arguments["agent_type"], "worker");
    assert_eq!(
        arguments["mode"], "sync",
        "in the foreground: the parent's turn waits for its child"
    );

    // The subagent's requests: Copilot's header, the same session folder, the prompt as first user message.
    let child_messages = vec![system(Some(SESSION)), user("child task: summarise")];
    copilot_post(
        &endpoint,
        Some("conversation-subagent"),
        &body(child_messages.clone(), &["bash"]),
    )
    .await;
    let mut follow_up = child_messages;
    follow_up.push(json!({ "role": "assistant", "content": null, "tool_calls": [] }));
    follow_up.push(json!({ "role": "tool", "tool_call_id": "x", "content": "ran" }));
    copilot_post(
        &endpoint,
        Some("conversation-subagent"),
        &body(follow_up, &["bash"]),
    )
    .await;
    // A custom agent's requests carry no session folder: the prompt alone decides.
    copilot_post(
        &endpoint,
        Some("conversation-subagent"),
        &body(vec![system(None), user("child task: summarise")], &["view"]),
    )
    .await;
    // The parent's follow-up carries no interaction type: still the session.
    copilot_post(
        &endpoint,
        None,
        &body(
            vec![
                system(Some(SESSION)),
                user("DELEGATE now"),
                json!({ "role": "tool", "tool_call_id": call_id, "content": "child done" }),
            ],
            &["task"],
        ),
    )
    .await;

    let records = endpoint.requests();
    let credited: Vec<(&str, Attribution)> = records
        .iter()
        .map(|r| (r.instance.as_str(), r.attribution))
        .collect();
    assert_eq!(
        credited,
        vec![
            (SESSION, Attribution::Request),
            (call_id.as_str(), Attribution::Request),
            (call_id.as_str(), Attribution::Request),
            (call_id.as_str(), Attribution::Request),
            (SESSION, Attribution::Request),
        ]
    );
    // The record keeps the scripted reply, not Copilot's rendering of it.
    assert!(matches!(records[0].reply, Some(ModelReply::Spawn(_))));
    assert_eq!(endpoint.count_for(&call_id), 3);
}

#[tokio::test]
async fn a_subagent_is_not_credited_across_sessions_or_for_a_prompt_no_call_gave() {
    let endpoint = ModelEndpoint::start(vec![rule("DELEGATE", spawn("worker", "child task"))])
        .await
        .unwrap();
    copilot_post(
        &endpoint,
        Some("conversation-user"),
        &body(vec![system(Some(SESSION)), user("DELEGATE")], &["task"]),
    )
    .await;
    // Another session's subagent with the same prompt, and one with a prompt nobody delegated.
    copilot_post(
        &endpoint,
        Some("conversation-subagent"),
        &body(
            vec![system(Some(OTHER_SESSION)), user("child task")],
            &["bash"],
        ),
    )
    .await;
    copilot_post(
        &endpoint,
        Some("conversation-subagent"),
        &body(
            vec![system(Some(SESSION)), user("something else")],
            &["bash"],
        ),
    )
    .await;
    let records = endpoint.requests();
    assert_eq!(records[1].instance, UNATTRIBUTED);
    assert_eq!(records[2].instance, UNATTRIBUTED);
}

#[tokio::test]
async fn a_scripted_mcp_call_goes_out_under_copilots_name_and_other_clients_are_unchanged() {
    let endpoint = ModelEndpoint::start(vec![
        rule(
            "READ",
            ModelReply::ToolCall {
                tool: "notes.read".to_string(),
                arguments: json!({}),
            },
        ),
        rule("DELEGATE", spawn("worker", "child task")),
    ])
    .await
    .unwrap();
    let read = copilot_post(
        &endpoint,
        Some("conversation-user"),
        &body(
            vec![system(Some(SESSION)), user("READ")],
            &["harness-notes-read", "task"],
        ),
    )
    .await;
    assert_eq!(call_of(&read).1, "harness-notes-read");

    // Without Copilot's headers the request is another client's (opencode): its own task shape, no attribution.
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", endpoint.url()))
        .json(&body(
            vec![system(Some(SESSION)), user("DELEGATE")],
            &["task"],
        ))
        .send()
        .await
        .unwrap();
    let message = response.json::<Value>().await.unwrap()["choices"][0]["message"].clone();
    let (_, name, arguments) = call_of(&message);
    assert_eq!(name, "task");
    assert_eq!(arguments["subagent_type"], "worker");
    assert!(arguments.get("agent_type").is_none());
    assert_eq!(endpoint.requests()[1].instance, UNATTRIBUTED);
}
