//! The tool server seen from the wire: plain HTTP JSON-RPC, no MCP SDK between the test and the bytes.
//!
//! The SDK client would itself drop unknown fields, so exactness of
//! `tools/list` is checked here on the raw answer; the rmcp-based client of
//! the reference host is tested in `harness/host/tests/mcp_client.rs`.

use std::future::Future;
use std::time::Duration;

use delegation_model::{HandlerCall, ToolDefinition};
use delegation_observers::tool_server::{DefinitionText, ToolServer, ToolServerError, ToolSpec};
use serde_json::{Value, json};

const GUARD: Duration = Duration::from_secs(20);
const PROTOCOL: &str = "2025-11-25";

async fn guarded<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(GUARD, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {GUARD:?}"))
}

/// A minimal streamable-HTTP MCP session spoken by hand.
struct Wire {
    http: reqwest::Client,
    url: String,
    session: String,
    next_id: u64,
}

/// The JSON-RPC message answering `id` in an SSE (or plain JSON) body.
fn answer_in(body: &str, id: u64) -> Value {
    let candidates: Vec<Value> = if body.trim_start().starts_with('{') {
        vec![serde_json::from_str(body).expect("JSON body")]
    } else {
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(|d| serde_json::from_str(d).expect("SSE data is JSON"))
            .collect()
    };
    candidates
        .into_iter()
        .find(|m: &Value| m["id"] == id)
        .unwrap_or_else(|| panic!("no answer to request {id} in body:\n{body}"))
}

impl Wire {
    async fn open(url: &str) -> Wire {
        let http = reqwest::Client::new();
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "wire-test", "version": "0"}}});
        let response = http
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .json(&init)
            .send()
            .await
            .expect("initialize is answered");
        assert!(response.status().is_success(), "{}", response.status());
        let session = response
            .headers()
            .get("mcp-session-id")
            .expect("a stateful session id")
            .to_str()
            .unwrap()
            .to_string();
        let answer = answer_in(&response.text().await.unwrap(), 0);
        assert_eq!(
            answer["result"]["capabilities"]["tools"]["listChanged"], true,
            "the server must announce list_changed support"
        );
        let wire = Wire {
            http,
            url: url.to_string(),
            session,
            next_id: 1,
        };
        let status = wire
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await
            .status();
        assert!(status.is_success(), "initialized: {status}");
        wire
    }

    async fn post(&self, body: &Value) -> reqwest::Response {
        self.http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.session)
            .header("mcp-protocol-version", PROTOCOL)
            .json(body)
            .send()
            .await
            .expect("the server answers")
    }

    /// Sends a request; returns the raw body and the answer parsed from it.
    async fn request(&mut self, method: &str, params: Value) -> (String, Value) {
        let id = self.next_id;
        self.next_id += 1;
        let body = self
            .post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await
            .text()
            .await
            .expect("a complete body");
        let answer = answer_in(&body, id);
        (body, answer)
    }
}

fn poisonable() -> Value {
    json!({
        "name": "summarise",
        "title": "Summarise",
        "description": "Summarises text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        "outputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": true, "x-delegation-class": "read", "x-unknown-hint": [1, {"deep": null}]},
        "_meta": {"vendor/key": "v"},
        "x-top-level": {"number": 0.5, "big": 9007199254740991_u64, "unicode": "é\u{1F600}"}
    })
}

fn plain() -> Value {
    json!({"name": "ping", "description": "Answers pong.", "inputSchema": {"type": "object"}})
}

async fn start() -> ToolServer {
    ToolServer::start(vec![
        ToolSpec {
            definition: poisonable().into(),
            result: "a summary".into(),
        },
        ToolSpec {
            definition: plain().into(),
            result: "pong".into(),
        },
    ])
    .await
    .expect("tool server starts")
}

#[tokio::test]
async fn tools_list_on_the_wire_is_every_definition_verbatim() {
    let server = start().await;
    let mut wire = guarded("open", Wire::open(&server.url())).await;
    let (_, answer) = guarded("list", wire.request("tools/list", json!({}))).await;
    // Everything survives: top-level and annotation extras, `_meta`,
    // `title`, `outputSchema`, numbers and non-ASCII text.
    assert_eq!(answer["result"]["tools"], json!([poisonable(), plain()]));
    assert!(
        answer["result"].get("_meta").is_none(),
        "the internal carrier of the raw definitions must not leak: {answer}"
    );
    assert_eq!(server.definitions(), vec![poisonable(), plain()]);
    server.shutdown().await;
}

/// Key order, number forms, escapes and non-ASCII as a scenario file writes them.
const WRITTEN: &str = r#"{
  "name": "t\u00e9",
  "inputSchema": {"type": "object", "maxLength": 1e1, "minimum": 10.0},
  "description": "caf\u00e9 or café, \"quoted\"",
  "annotations": {"x-delegation-class": "read"}
}"#;

#[tokio::test]
async fn tools_list_carries_each_definition_byte_for_byte_as_written() {
    let written = DefinitionText::parse(WRITTEN).expect("valid definition");
    let server = ToolServer::start(vec![ToolSpec {
        definition: written.clone(),
        result: String::new(),
    }])
    .await
    .expect("tool server starts");
    let mut wire = guarded("open", Wire::open(&server.url())).await;
    let (body, answer) = guarded("list", wire.request("tools/list", json!({}))).await;
    let expected = r#"{"name":"t\u00e9","inputSchema":{"type":"object","maxLength":1e1,"minimum":10.0},"description":"caf\u00e9 or café, \"quoted\"","annotations":{"x-delegation-class":"read"}}"#;
    assert_eq!(written.text(), expected, "only the layout is gone");
    assert!(
        body.contains(&format!(r#""tools":[{expected}]"#)),
        "the definition is not on the wire as written:\n{body}"
    );
    assert_eq!(answer["result"]["tools"][0], *written.value());
    assert_eq!(server.served_texts(), vec![expected.to_string()]);
    // Control: a change to the same meaning written canonically is served as that.
    let canonical: Value = serde_json::from_str(expected).unwrap();
    server
        .change_definition("t\u{e9}", canonical.clone())
        .expect("same name");
    let (body, _) = guarded("list", wire.request("tools/list", json!({}))).await;
    assert!(
        !body.contains(expected),
        "the old text is still served:\n{body}"
    );
    assert!(body.contains(&canonical.to_string()), "{body}");
    assert_eq!(
        ToolDefinition::from_value(canonical).unwrap().digest,
        ToolDefinition::from_value(written.value().clone())
            .unwrap()
            .digest,
        "both forms are one definition under RFC 8785"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_silent_change_is_served_at_once_and_its_digest_differs() {
    let server = start().await;
    let mut wire = guarded("open", Wire::open(&server.url())).await;
    let before = ToolDefinition::from_value(poisonable()).unwrap().digest;
    let mut changed = poisonable();
    changed["annotations"]["x-unknown-hint"] = json!([2]);
    server
        .change_definition("summarise", changed.clone())
        .unwrap();
    let (_, answer) = guarded("list", wire.request("tools/list", json!({}))).await;
    let served = answer["result"]["tools"][0].clone();
    assert_eq!(served, changed);
    assert_ne!(
        ToolDefinition::from_value(served).unwrap().digest,
        before,
        "an edit to an unknown annotation field is drift too"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn calls_are_counted_in_order_with_the_arguments_as_sent() {
    let server = start().await;
    let mut wire = guarded("open", Wire::open(&server.url())).await;
    let (_, first) = guarded(
        "call",
        wire.request(
            "tools/call",
            json!({"name": "summarise", "arguments": {"text": "long", "n": [1, 2]}}),
        ),
    )
    .await;
    assert_eq!(
        first["result"]["content"],
        json!([{"type": "text", "text": "a summary"}])
    );
    let mark = server.mark();
    let (_, second) = guarded("call", wire.request("tools/call", json!({"name": "ping"}))).await;
    assert_eq!(second["result"]["content"][0]["text"], "pong");

    assert_eq!(
        server.handler_calls(),
        vec![
            HandlerCall {
                tool: "summarise".into(),
                arguments: json!({"text": "long", "n": [1, 2]}),
            },
            // No `arguments` on the wire is recorded as null, not as `{}`.
            HandlerCall {
                tool: "ping".into(),
                arguments: Value::Null,
            },
        ]
    );
    assert_eq!(server.handler_calls_since(mark).len(), 1);
    assert_eq!(server.handler_calls_since(mark)[0].tool, "ping");
    assert_eq!(
        server.handler_calls_since(99),
        vec![],
        "a mark past the end is empty"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn calling_an_unknown_or_removed_tool_is_an_error_with_no_handler_call() {
    let server = start().await;
    let mut wire = guarded("open", Wire::open(&server.url())).await;
    server.remove("ping").unwrap();
    for name in ["ping", "never-existed", "Ping"] {
        let (_, answer) = guarded(
            "call",
            wire.request("tools/call", json!({"name": name, "arguments": {}})),
        )
        .await;
        assert_eq!(answer["error"]["code"], -32602, "{name}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(name),
            "{name}: the error names the tool: {message}"
        );
    }
    assert_eq!(server.handler_calls(), vec![]);
    let (_, listing) = guarded("list", wire.request("tools/list", json!({}))).await;
    assert_eq!(listing["result"]["tools"], json!([poisonable()]));
    server.shutdown().await;
}

#[tokio::test]
async fn notify_counts_only_initialised_sessions() {
    let server = start().await;
    assert_eq!(server.notify_list_changed().await, 0, "no session yet");
    let _first = guarded("open", Wire::open(&server.url())).await;
    let _second = guarded("open", Wire::open(&server.url())).await;
    assert_eq!(guarded("notify", server.notify_list_changed()).await, 2);
    server.shutdown().await;
}

#[tokio::test]
async fn definitions_and_operations_that_make_no_sense_are_refused_with_a_reason() {
    let duplicate = ToolServer::start(vec![
        ToolSpec {
            definition: plain().into(),
            result: String::new(),
        },
        ToolSpec {
            definition: plain().into(),
            result: String::new(),
        },
    ])
    .await
    .expect_err("two tools with one name");
    assert!(matches!(duplicate, ToolServerError::DuplicateName { ref name } if name == "ping"));

    let nameless = ToolServer::start(vec![ToolSpec {
        definition: json!({"description": "no name"}).into(),
        result: String::new(),
    }])
    .await
    .expect_err("a definition needs a name");
    assert!(
        matches!(nameless, ToolServerError::InvalidDefinition { ref position, .. } if position == "#0"),
        "{nameless}"
    );

    let unsafe_integer = ToolServer::start(vec![ToolSpec {
        definition: json!({"name": "n", "inputSchema": {"maximum": 9007199254740993_u64}}).into(),
        result: String::new(),
    }])
    .await
    .expect_err("an integer JCS would round cannot be sealed exactly");
    assert!(
        unsafe_integer.to_string().contains("9007199254740993"),
        "{unsafe_integer}"
    );

    let server = start().await;
    let renamed = server
        .change_definition("ping", json!({"name": "pong", "inputSchema": {}}))
        .expect_err("a change keeps the name");
    assert!(
        matches!(renamed, ToolServerError::NameChanged { .. }),
        "{renamed}"
    );
    let unknown = server.remove("nope").expect_err("no such tool");
    assert!(
        unknown.to_string().contains("`summarise`, `ping`"),
        "the error lists what is served: {unknown}"
    );
    let again = server
        .add(ToolSpec {
            definition: plain().into(),
            result: String::new(),
        })
        .expect_err("add cannot shadow a served name");
    assert!(matches!(again, ToolServerError::DuplicateName { .. }));
    assert_eq!(
        server.definitions(),
        vec![poisonable(), plain()],
        "refusals change nothing"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn shutdown_with_a_session_open_is_prompt_and_stops_listening() {
    let server = start().await;
    let url = server.url();
    let _session = guarded("open", Wire::open(&url)).await;
    guarded("shutdown", server.shutdown()).await;
    let after = reqwest::Client::new()
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await;
    assert!(after.is_err(), "the listener is closed after shutdown");
}

#[test]
fn a_scenario_tool_spec_defaults_its_result_and_refuses_unknown_keys() {
    let spec: ToolSpec = serde_json::from_value(json!({"definition": plain()})).unwrap();
    assert_eq!(spec.result, "");
    assert_eq!(spec.definition, plain());
    let typo = serde_json::from_value::<ToolSpec>(json!({"definition": plain(), "reslt": "x"}));
    assert!(
        typo.is_err(),
        "a misspelt key in a scenario file must not pass silently"
    );
    let schema = serde_json::to_value(schemars::schema_for!(ToolSpec)).unwrap();
    assert_eq!(schema["required"], json!(["definition"]));
}
