//! The JSON-RPC 2.0 envelope: requests the harness sends, and the responses and notifications a host sends back.

use delegation_model::Action;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// The only `jsonrpc` value the protocol accepts. Serialises as `"2.0"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum JsonRpcVersion {
    #[default]
    #[serde(rename = "2.0")]
    V2,
}

/// The method of the handshake; every other method is an [`Action`].
pub const INITIALIZE: &str = "initialize";

/// The one notification method a host may send: a line for the report.
pub const LOG: &str = "log";

/// A request line. The harness chooses `id`: a non-negative integer, fresh for
/// every request of one host process, so an answer can be matched without
/// trusting anything else in it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    pub jsonrpc: JsonRpcVersion,
    pub id: u64,
    pub method: String,
    /// Absent for methods without params (`state/observe`).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub params: Value,
}

impl Request {
    /// Reads the request as an [`Action`]; `initialize` is not one (see
    /// [`crate::InitializeParams`]). Adapter-side helper, used by Rust hosts.
    pub fn to_action(&self) -> Result<Action, serde_json::Error> {
        let mut body = serde_json::Map::new();
        body.insert("method".into(), Value::String(self.method.clone()));
        if !self.params.is_null() {
            body.insert("params".into(), self.params.clone());
        }
        serde_json::from_value(Value::Object(body))
    }
}

/// The `error` member of a failed response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorObject {
    /// One of [`crate::error_code`]; any other integer is reported as a plain host error.
    pub code: i64,
    /// For people; never parsed.
    pub message: String,
    /// Anything the host wants in the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// A response line as the harness reads it.
///
/// The result stays raw JSON text until the caller types it (an
/// `ActionResult`, an `InitializeResult`): parsing it once, straight into
/// the type it must have, is most of what a round trip costs the harness.
#[derive(Clone, Debug)]
pub struct Response {
    /// `None` only for an error the host could not attribute to a request
    /// (JSON-RPC's `"id": null` after a parse error).
    pub id: Option<u64>,
    pub outcome: Result<Box<RawValue>, ErrorObject>,
}

impl PartialEq for Response {
    fn eq(&self, other: &Response) -> bool {
        self.id == other.id
            && match (&self.outcome, &other.outcome) {
                (Ok(a), Ok(b)) => a.get() == b.get(),
                (Err(a), Err(b)) => a == b,
                _ => false,
            }
    }
}

impl Response {
    /// Adapter-side helper: the line answering `id` with `result`.
    pub fn success(id: u64, result: &impl Serialize) -> Response {
        Response {
            id: Some(id),
            outcome: Ok(
                serde_json::value::to_raw_value(result).expect("protocol types always serialise")
            ),
        }
    }

    /// Adapter-side helper: the line refusing `id` with an error.
    pub fn failure(id: Option<u64>, code: i64, message: impl Into<String>) -> Response {
        Response {
            id,
            outcome: Err(ErrorObject {
                code,
                message: message.into(),
                data: None,
            }),
        }
    }

    /// The result read as `T`; `None` for an error response.
    pub fn result_as<T: serde::de::DeserializeOwned>(
        &self,
    ) -> Option<Result<T, serde_json::Error>> {
        self.outcome
            .as_ref()
            .ok()
            .map(|raw| serde_json::from_str(raw.get()))
    }
}

impl Serialize for Response {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("jsonrpc", &JsonRpcVersion::V2)?;
        map.serialize_entry("id", &self.id)?;
        match &self.outcome {
            Ok(result) => map.serialize_entry("result", result)?,
            Err(error) => map.serialize_entry("error", error)?,
        }
        map.end()
    }
}

/// Severity of a `log` notification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

/// Params of the `log` notification.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogParams {
    pub level: LogLevel,
    pub message: String,
}

/// A notification other than `log`: recorded for the report, otherwise ignored,
/// as JSON-RPC lets a receiver ignore notifications it does not know.
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    pub method: String,
    pub params: Value,
}

/// Anything a host may write on its stdout.
#[derive(Clone, Debug, PartialEq)]
pub enum HostMessage {
    Response(Response),
    Log(LogParams),
    Notification(Notification),
}

/// Serialises one request line (newline included) from an action: the hot
/// path of every step. An `Action` serialises as an object
/// `{"method": .., "params": ..}`, so the envelope's members are written in
/// front of its first member rather than merged through a map.
pub fn encode_action(id: u64, action: &Action) -> Vec<u8> {
    let mut line = Vec::with_capacity(128);
    line.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    line.extend_from_slice(id.to_string().as_bytes());
    line.push(b',');
    let body = serde_json::to_vec(action).expect("protocol types always serialise");
    debug_assert!(body.starts_with(b"{\"method\""));
    line.extend_from_slice(&body[1..]);
    line.push(b'\n');
    line
}

/// Serialises one request line (newline included) for any method, such as `initialize`.
pub fn encode_request(id: u64, method: &str, params: &impl Serialize) -> Vec<u8> {
    #[derive(Serialize)]
    struct Line<'a, P: Serialize> {
        jsonrpc: JsonRpcVersion,
        id: u64,
        method: &'a str,
        params: &'a P,
    }
    finish_line(serde_json::to_vec(&Line {
        jsonrpc: JsonRpcVersion::V2,
        id,
        method,
        params,
    }))
}

/// Serialises any message (a [`Response`], a `log` notification) as one line.
pub fn encode_line(message: &impl Serialize) -> Vec<u8> {
    finish_line(serde_json::to_vec(message))
}

/// A `log` notification line, for adapters written in Rust.
pub fn encode_log(level: LogLevel, message: impl Into<String>) -> Vec<u8> {
    encode_line(&serde_json::json!({
        "jsonrpc": JsonRpcVersion::V2,
        "method": LOG,
        "params": LogParams { level, message: message.into() },
    }))
}

fn finish_line(bytes: serde_json::Result<Vec<u8>>) -> Vec<u8> {
    // Every protocol type has string keys and no non-finite floats, so
    // serialisation cannot fail; compact JSON escapes newlines inside strings,
    // so the only newline is the terminator appended here.
    let mut bytes = bytes.expect("protocol types always serialise");
    bytes.push(b'\n');
    bytes
}
