//! The model endpoint's Gemini format (Gemini CLI) over real HTTP: SSE and JSON answers, the spawn as `invoke_agent`, the router's JSON request as auxiliary, attribution of a subagent by what Gemini CLI sends, MCP tools by Gemini CLI's name, and tool digests.

use delegation_model::{
    AuthorityRequest, LifecycleCall, LifecycleOp, SpawnRequest, ToolDefinition,
};
use delegation_observers::model_endpoint::gemini::spawn_call_id;
use delegation_observers::model_endpoint::{
    Attribution, INSTANCE_HEADER, NO_LIFECYCLE_TOOL_TEXT, UNATTRIBUTED, gemini_mcp_tool_name,
};
use delegation_observers::{ModelEndpoint, ModelMatch, ModelReply, ModelRule, WireFormat};
use serde_json::{Value, json};

const STREAM: &str = "gemini-2.5-pro:streamGenerateContent?alt=sse";
const GENERATE: &str = "gemini-2.5-pro:generateContent";

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

fn result(text: &str) -> ModelMatch {
    ModelMatch {
        tool_result_contains: Some(text.to_string()),
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

fn declaration(name: &str) -> Value {
    if name == "complete_task" {
        // As Gemini CLI 0.61.0 declares it for its built-in generalist.
        return json!({ "name": name, "description": "Call this tool to submit your final answer and complete the task.",
            "parametersJsonSchema": { "type": "object", "required": ["result"], "properties": {
                "result": { "type": "object", "required": ["response"],
                            "properties": { "response": { "type": "string" } } } } } });
    }
    json!({ "name": name, "description": format!("the {name} tool"),
            "parametersJsonSchema": { "type": "object", "properties": {} } })
}

/// A main agent's tools (it may delegate) and a subagent's (it ends with `complete_task`).
const MAIN_TOOLS: &[&str] = &["read_file", "invoke_agent"];
const SUBAGENT_TOOLS: &[&str] = &["read_file", "complete_task"];

/// A conversation shaped like Gemini CLI's: the session context, then the user's text.
fn body(user_text: &str, tools: &[&str]) -> Value {
    json!({
        "contents": [
            { "role": "user", "parts": [{ "text": "<session_context>\nThis is the Gemini CLI. GO and CHILD_TASK are not the user's\n</session_context>" }] },
            { "role": "user", "parts": [{ "text": user_text }] },
        ],
        "systemInstruction": { "parts": [{ "text": "You are a non-interactive CLI agent." }] },
        "tools": [{ "functionDeclarations": tools.iter().map(|name| declaration(name)).collect::<Vec<_>>() }],
        "generationConfig": { "temperature": 1 },
    })
}

/// A subagent's conversation: it opens with its task.
fn subagent_body(task: &str) -> Value {
    json!({
        "contents": [{ "role": "user", "parts": [{ "text": task }] }],
        "tools": [{ "functionDeclarations": SUBAGENT_TOOLS.iter().map(|name| declaration(name)).collect::<Vec<_>>() }],
    })
}

async fn post(
    endpoint: &ModelEndpoint,
    route: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(format!("{}/v1beta/models/{route}", endpoint.url()))
        .json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("the endpoint answers")
}

/// The one part of a JSON answer.
async fn json_part(response: reqwest::Response) -> Value {
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["candidates"][0]["finishReason"], "STOP");
    answer["candidates"][0]["content"]["parts"][0].clone()
}

/// The responses an SSE answer carries, one per `data:` frame.
fn sse_responses(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter(|frame| !frame.trim().is_empty())
        .map(|frame| serde_json::from_str(frame.strip_prefix("data: ").unwrap()).unwrap())
        .collect()
}

#[tokio::test]
async fn a_streamed_spawn_is_an_invoke_agent_call_with_the_call_id_the_subagent_is_counted_for() {
    let endpoint = ModelEndpoint::start(vec![rule(input("GO"), spawn("worker", "CHILD_TASK"))])
        .await
        .unwrap();
    let response = post(
        &endpoint,
        STREAM,
        &[(INSTANCE_HEADER, "root-1")],
        &body("plan, then GO", MAIN_TOOLS),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let responses = sse_responses(&response.text().await.unwrap());
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0]["modelVersion"], "gemini-2.5-pro");
    let call = &responses[0]["candidates"][0]["content"]["parts"][0]["functionCall"];
    assert_eq!(call["name"], "invoke_agent");
    assert_eq!(
        call["args"],
        json!({ "agent_name": "worker", "prompt": "CHILD_TASK" })
    );
    assert_eq!(call["id"], spawn_call_id(0));
    let record = &endpoint.requests()[0];
    assert_eq!(record.format, WireFormat::Gemini);
    assert_eq!(record.instance, "root-1");
    assert_eq!(
        record.input.as_deref(),
        Some("plan, then GO"),
        "the session context is not the user's input"
    );
}

#[tokio::test]
async fn generate_content_answers_one_json_response_and_stream_without_sse_a_json_array() {
    let endpoint = ModelEndpoint::start(vec![rule(input("HELLO"), message("hi there"))])
        .await
        .unwrap();
    let part = json_part(post(&endpoint, GENERATE, &[], &body("HELLO", MAIN_TOOLS)).await).await;
    assert_eq!(part, json!({ "text": "hi there" }));
    let array: Value = post(
        &endpoint,
        "gemini-2.5-pro:streamGenerateContent",
        &[],
        &body("HELLO", MAIN_TOOLS),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(
        array[0]["candidates"][0]["content"]["parts"][0]["text"],
        "hi there"
    );
    let unknown = reqwest::Client::new()
        .post(format!(
            "{}/v1beta/models/gemini-2.5-pro:countTokens",
            endpoint.url()
        ))
        .json(&body("HELLO", MAIN_TOOLS))
        .send()
        .await
        .unwrap();
    assert_eq!(
        unknown.status(),
        404,
        "only the two generate methods are model turns"
    );
}

#[tokio::test]
async fn a_follow_up_is_matched_by_its_function_response() {
    let endpoint = ModelEndpoint::start(vec![
        rule(input("GO"), spawn("worker", "CHILD_TASK")),
        rule(result("child done"), message("parent saw it")),
    ])
    .await
    .unwrap();
    let mut follow_up = body("plan, then GO", MAIN_TOOLS);
    follow_up["contents"].as_array_mut().unwrap().extend([
        json!({ "role": "model", "parts": [{ "functionCall": { "id": "invoke_agent__harness_spawn_0", "name": "invoke_agent", "args": {} } }] }),
        json!({ "role": "user", "parts": [{ "functionResponse": { "id": "invoke_agent__harness_spawn_0", "name": "invoke_agent",
               "response": { "output": "Subagent 'worker' finished.\nResult:\n{\"response\": \"child done\"}" } } }] }),
    ]);
    let part = json_part(post(&endpoint, GENERATE, &[], &follow_up).await).await;
    assert_eq!(part, json!({ "text": "parent saw it" }));
    let record = &endpoint.requests()[0];
    assert!(
        record
            .tool_result
            .as_deref()
            .unwrap()
            .contains("child done")
    );
    assert_eq!(record.rule, Some(1));
}

#[tokio::test]
async fn a_subagent_is_counted_for_the_spawn_call_that_carried_its_task_never_for_the_header() {
    let endpoint = ModelEndpoint::start(vec![
        rule(input("GO"), spawn("worker", "CHILD_TASK")),
        rule(input("TWICE"), spawn("worker", "SAME_TASK")),
    ])
    .await
    .unwrap();
    let root = [(INSTANCE_HEADER, "root-1")];
    post(&endpoint, STREAM, &root, &body("GO", MAIN_TOOLS)).await;
    // Gemini CLI's subagent runs in its parent's process: the same header.
    post(&endpoint, STREAM, &root, &subagent_body("CHILD_TASK")).await;
    // Its later requests still open with its task.
    let mut later = subagent_body("CHILD_TASK");
    later["contents"].as_array_mut().unwrap().push(json!(
        { "role": "user", "parts": [{ "functionResponse": { "name": "read_file", "response": { "output": "file text" } } }] }
    ));
    post(&endpoint, STREAM, &root, &later).await;
    // A subagent whose task no spawn carried: unattributed, not the header's.
    post(&endpoint, STREAM, &root, &subagent_body("UNKNOWN_TASK")).await;
    // Two spawn calls with one task: which one is unknown, so neither.
    post(&endpoint, STREAM, &root, &body("TWICE", MAIN_TOOLS)).await;
    post(&endpoint, STREAM, &root, &body("TWICE", MAIN_TOOLS)).await;
    post(&endpoint, STREAM, &root, &subagent_body("SAME_TASK")).await;
    // Control: the same conversation offered `invoke_agent` is a main agent's.
    post(&endpoint, STREAM, &root, &body("CHILD_TASK", MAIN_TOOLS)).await;

    let records = endpoint.requests();
    let seen: Vec<(&str, Attribution)> = records
        .iter()
        .map(|r| (r.instance.as_str(), r.attribution))
        .collect();
    let child = spawn_call_id(0);
    assert_eq!(
        seen,
        [
            ("root-1", Attribution::Request),
            (child.as_str(), Attribution::Request),
            (child.as_str(), Attribution::Request),
            (UNATTRIBUTED, Attribution::Unattributed),
            ("root-1", Attribution::Request),
            ("root-1", Attribution::Request),
            (UNATTRIBUTED, Attribution::Unattributed),
            ("root-1", Attribution::Request),
        ]
    );
    assert_eq!(endpoint.count_for(&child), 2);
    assert_eq!(endpoint.count_for("root-1"), 4);
}

#[tokio::test]
async fn a_json_schema_request_is_auxiliary_and_answered_with_a_value_of_its_schema() {
    let endpoint = ModelEndpoint::start(vec![rule(
        ModelMatch::default(),
        ModelReply::Fail { status: 503 },
    )])
    .await
    .unwrap();
    // The complexity router's request, as Gemini CLI 0.61.0 sends it.
    let router = json!({
        "contents": [{ "role": "user", "parts": [{ "text": "plan, then GO" }] }],
        "systemInstruction": { "parts": [{ "text": "You are a specialized Task Routing AI." }] },
        "generationConfig": {
            "responseMimeType": "application/json",
            "responseJsonSchema": {
                "type": "OBJECT",
                "properties": {
                    "complexity_reasoning": { "type": "STRING" },
                    "complexity_score": { "type": "INTEGER", "description": "1-100" },
                    "model_choice": { "type": "STRING", "enum": ["flash", "pro"] },
                },
                "required": ["complexity_reasoning", "complexity_score", "model_choice"],
            },
        },
    });
    let response = post(
        &endpoint,
        "gemini-3.5-flash-lite:generateContent",
        &[(INSTANCE_HEADER, "root-1")],
        &router,
    )
    .await;
    assert_eq!(response.status(), 200, "never matched against the script");
    let text = json_part(response).await["text"]
        .as_str()
        .unwrap()
        .to_string();
    let value: Value = serde_json::from_str(&text).expect("the answer is JSON");
    assert!(value["complexity_reasoning"].is_string());
    assert!(value["complexity_score"].is_i64());
    assert_eq!(value["model_choice"], "flash");
    // A turn with tools is the script's (here: a failure).
    let turn = post(
        &endpoint,
        STREAM,
        &[(INSTANCE_HEADER, "root-1")],
        &body("plan, then GO", MAIN_TOOLS),
    )
    .await;
    assert_eq!(turn.status(), 503);
    let records = endpoint.requests();
    assert!(records[0].auxiliary && !records[1].auxiliary);
    assert_eq!(endpoint.auxiliary_count(), 1);
    assert_eq!(
        endpoint.count_for("root-1"),
        1,
        "the router call is not a turn"
    );
}

#[tokio::test]
async fn mcp_tool_calls_go_out_under_gemini_clis_name_whenever_it_is_offered() {
    let call = |tool: &str| ModelReply::ToolCall {
        tool: tool.to_string(),
        arguments: json!({ "path": "a" }),
    };
    let endpoint = ModelEndpoint::start(vec![
        rule(input("READ"), call("notes.read")),
        rule(input("PLAIN"), call("read_file")),
        rule(input("MISSING"), call("notes.write")),
    ])
    .await
    .unwrap();
    let name_for = |text: &'static str, tools: &'static [&'static str]| {
        let endpoint = endpoint.clone();
        async move {
            json_part(post(&endpoint, GENERATE, &[], &body(text, tools)).await).await
                ["functionCall"]["name"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    assert_eq!(
        name_for("READ", &["mcp_harness_notes.read", "invoke_agent"]).await,
        "mcp_harness_notes.read"
    );
    assert_eq!(
        name_for("READ", &["notes.read", "mcp_harness_notes.read"]).await,
        "mcp_harness_notes.read"
    );
    assert_eq!(
        name_for("PLAIN", &["read_file", "mcp_harness_read_file"]).await,
        "mcp_harness_read_file",
        "the harness's tool, not the Gemini CLI built-in of the same name"
    );
    assert_eq!(
        name_for("PLAIN", MAIN_TOOLS).await,
        "read_file",
        "control: no MCP tool of that name, so the built-in"
    );
    assert_eq!(
        name_for("MISSING", &["mcp_harness_notes.read"]).await,
        "notes.write",
        "a tool not offered stays as scripted, for the host to refuse"
    );
    assert_eq!(
        gemini_mcp_tool_name("harness", "notes.read"),
        "mcp_harness_notes.read"
    );
    assert_eq!(
        gemini_mcp_tool_name("my server", "a/b"),
        "mcp_my_server_a_b"
    );
    assert_eq!(gemini_mcp_tool_name("mcp_x", "t"), "mcp_x_t");
    assert_eq!(gemini_mcp_tool_name("s", "\u{1F600}"), "mcp_s___");
    let long = gemini_mcp_tool_name("harness", &"t".repeat(80));
    assert_eq!(long.len(), 63);
    assert_eq!(&long[30..33], "...");
}

#[tokio::test]
async fn each_declaration_is_digested_as_declared_and_lifecycle_replies_are_text() {
    let endpoint = ModelEndpoint::start(vec![rule(
        input("CONTINUE"),
        ModelReply::Lifecycle(LifecycleCall {
            op: LifecycleOp::SendInput,
            target: "child".to_string(),
            message: Some("more".to_string()),
        }),
    )])
    .await
    .unwrap();
    let part = json_part(post(&endpoint, GENERATE, &[], &body("CONTINUE", MAIN_TOOLS)).await).await;
    assert_eq!(part, json!({ "text": NO_LIFECYCLE_TOOL_TEXT }));
    let record = &endpoint.requests()[0];
    let expected = ToolDefinition::from_value(declaration("read_file"))
        .unwrap()
        .digest;
    assert_eq!(record.tools["read_file"], expected);
    assert_eq!(
        record.tools.keys().collect::<Vec<_>>(),
        ["invoke_agent", "read_file"]
    );
}

#[tokio::test]
async fn a_body_without_contents_is_refused_with_what_is_missing() {
    let endpoint = ModelEndpoint::start(vec![]).await.unwrap();
    let response = post(&endpoint, GENERATE, &[], &json!({ "prompt": "x" })).await;
    assert_eq!(response.status(), 400);
    let answer: Value = response.json().await.unwrap();
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`contents`")
    );
}

#[tokio::test]
async fn a_subagents_final_message_is_its_complete_task_call_in_the_declared_shape() {
    let endpoint = ModelEndpoint::start(vec![rule(input("CHILD_TASK"), message("child done"))])
        .await
        .unwrap();
    let part = json_part(post(&endpoint, GENERATE, &[], &subagent_body("CHILD_TASK")).await).await;
    assert_eq!(part["functionCall"]["name"], "complete_task");
    assert_eq!(
        part["functionCall"]["args"],
        json!({ "result": { "response": "child done" } })
    );
    // A custom agent's `complete_task` takes its result as a string.
    let mut custom = subagent_body("CHILD_TASK");
    custom["tools"][0]["functionDeclarations"][1]["parametersJsonSchema"]["properties"]["result"] =
        json!({ "type": "string" });
    let part = json_part(post(&endpoint, GENERATE, &[], &custom).await).await;
    assert_eq!(
        part["functionCall"]["args"],
        json!({ "result": "child done" })
    );
    // Control: the same text to a main agent is text.
    let part =
        json_part(post(&endpoint, GENERATE, &[], &body("CHILD_TASK", MAIN_TOOLS)).await).await;
    assert_eq!(part, json!({ "text": "child done" }));
}
