//! The JSON Schema of every line on the wire, generated from the Rust types so it cannot drift from them.
//!
//! The committed copy is `harness/protocol/schema/protocol.schema.json`; a
//! test fails when it is stale (`UPDATE_SCHEMA=1` rewrites it).

// The types below exist only to be described, never built or moved.
#![allow(dead_code, clippy::large_enum_variant)]

use delegation_model::{Action, ActionResult};
use schemars::JsonSchema;

use crate::envelope::{ErrorObject, JsonRpcVersion, LogParams};
use crate::handshake::{InitializeParams, InitializeResult};

/// Path of the committed schema, relative to the protocol crate.
pub const SCHEMA_PATH: &str = "schema/protocol.schema.json";

/// One line on an adapter's stdin or stdout.
#[derive(JsonSchema)]
#[serde(untagged)]
#[schemars(
    title = "delegation-harness host protocol v1",
    description = "One JSON-RPC 2.0 message per line on the adapter's stdin (requests) and stdout (responses, notifications). See harness/protocol/PROTOCOL.md."
)]
enum Message {
    Request(RequestLine),
    Response(ResponseLine),
    Notification(NotificationLine),
}

/// A request from the harness. `id` is fresh for every request of one process.
#[derive(JsonSchema)]
struct RequestLine {
    jsonrpc: JsonRpcVersion,
    id: u64,
    #[serde(flatten)]
    call: Call,
}

/// `initialize`, or any action.
#[derive(JsonSchema)]
#[serde(untagged)]
enum Call {
    Initialize(InitializeCall),
    Action(Action),
}

#[derive(JsonSchema)]
#[serde(tag = "method", content = "params")]
enum InitializeCall {
    #[serde(rename = "initialize")]
    Initialize(InitializeParams),
}

/// A host's answer: exactly one of `result` and `error`.
#[derive(JsonSchema)]
#[serde(untagged)]
enum ResponseLine {
    Success {
        jsonrpc: JsonRpcVersion,
        /// The id of the request answered.
        id: u64,
        result: ResultBody,
    },
    Failure {
        jsonrpc: JsonRpcVersion,
        /// The id of the request refused; null only when it could not be read.
        id: Option<u64>,
        error: ErrorObject,
    },
}

/// `InitializeResult` for `initialize`, `ActionResult` for every action.
#[derive(JsonSchema)]
#[serde(untagged)]
enum ResultBody {
    Initialize(InitializeResult),
    Action(ActionResult),
}

/// A line for the report; the harness records it and never answers.
#[derive(JsonSchema)]
#[serde(tag = "method", content = "params")]
enum NotificationBody {
    #[serde(rename = "log")]
    Log(LogParams),
}

#[derive(JsonSchema)]
struct NotificationLine {
    jsonrpc: JsonRpcVersion,
    #[serde(flatten)]
    body: NotificationBody,
}

/// The whole protocol's schema: every message; `Action`, `ActionResult`,
/// `Observed` and the other shared types are in `$defs`.
pub fn protocol_schema() -> schemars::Schema {
    let mut schema = schemars::schema_for!(Message);
    schema.insert(
        "x-protocol-version".into(),
        crate::handshake::PROTOCOL_VERSION.into(),
    );
    schema
}

/// The schema as committed: pretty JSON with a trailing newline.
pub fn protocol_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&protocol_schema())
        .expect("a schema is plain JSON and always serialises");
    text.push('\n');
    text
}
