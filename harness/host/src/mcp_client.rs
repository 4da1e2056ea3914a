//! The reference host's MCP client: rmcp over streamable HTTP, plus the raw `tools/list` it received.
//!
//! A host must digest a tool definition as it received it, unknown fields
//! included (MODEL.md section 4). rmcp parses `tools/list` into its typed
//! `Tool`, which drops every field it does not model (an extra top-level
//! field, or `annotations.x-delegation-class`). So the HTTP client under
//! rmcp is wrapped in a tap that keeps the raw JSON of each `tools/list`
//! answer; `list_tools` returns those raw objects and never the typed ones.
//! Listing also bypasses rmcp's response cache: a host checking for drift
//! at dispatch (SD2) must see the live definitions, not a remembered list.
//! A tool server of the harness running in this same process is reached
//! in memory (`in_process`), through the same service and the same tap.

mod in_process;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use delegation_model::digest::parse_strict;
use futures_util::StreamExt as _;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ClientJsonRpcMessage, ClientRequest,
    Implementation, ListToolsRequest, PaginatedRequestParams, ServerJsonRpcMessage,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use rmcp::{ClientHandler, RoleClient, ServiceExt as _};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::Notify;

/// How long `close` waits for the session to end before giving up on it.
const CLOSE_GRACE: Duration = Duration::from_secs(3);

/// Why talking to an MCP server failed; each names the server.
#[derive(Debug, thiserror::Error)]
pub enum McpClientError {
    #[error("MCP server `{server}` at {url}: could not connect and initialise: {detail}")]
    Connect {
        server: String,
        url: String,
        detail: String,
    },
    #[error("MCP server `{server}`: `{method}` failed: {detail}")]
    Request {
        server: String,
        method: &'static str,
        detail: String,
    },
    #[error("MCP server `{server}`: the `tools/list` answer cannot be digested exactly: {detail}")]
    RawListing { server: String, detail: String },
    #[error("MCP server `{server}`: tool `{tool}` arguments must be a JSON object, got {got}")]
    ArgumentsNotObject {
        server: String,
        tool: String,
        got: String,
    },
    #[error("MCP server `{server}`: tool `{tool}` returned an error result: {text}")]
    ToolError {
        server: String,
        tool: String,
        text: String,
    },
}

/// One listed tool: what it means and the text it arrived as.
#[derive(Clone, Debug, PartialEq)]
pub struct ListedTool {
    pub value: Value,
    pub text: String,
}

/// A connected session with one MCP server.
pub struct McpClient {
    server: String,
    service: RunningService<RoleClient, Listener>,
    tap: Arc<Tap>,
    /// One listing at a time, so the single raw answer the tap holds
    /// afterwards is this listing's.
    listing: Arc<tokio::sync::Mutex<()>>,
    list_changed: Arc<ListChanged>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("server", &self.server)
            .finish()
    }
}

impl McpClient {
    /// Connects and completes the MCP handshake. `server_name` only labels errors.
    /// A tool server of the harness in this same process is reached in memory.
    pub async fn connect(server_name: &str, url: &str) -> Result<McpClient, McpClientError> {
        match delegation_observers::in_process::lookup(url) {
            Some(service) => {
                McpClient::connect_with(server_name, url, in_process::InProcessHttp { service })
                    .await
            }
            None => McpClient::connect_over_http(server_name, url).await,
        }
    }

    /// [`McpClient::connect`] over HTTP whatever the server, as a host in another process reaches it.
    pub async fn connect_over_http(
        server_name: &str,
        url: &str,
    ) -> Result<McpClient, McpClientError> {
        McpClient::connect_with(server_name, url, reqwest::Client::new()).await
    }

    async fn connect_with<C: StreamableHttpClient + Sync>(
        server_name: &str,
        url: &str,
        inner: C,
    ) -> Result<McpClient, McpClientError> {
        let tap = Arc::new(Tap::default());
        let http = TappedHttp {
            inner,
            tap: tap.clone(),
        };
        let transport = StreamableHttpClientTransport::with_client(
            http,
            StreamableHttpClientTransportConfig::with_uri(url.to_string()),
        );
        let list_changed = Arc::new(ListChanged::default());
        let listing = Arc::new(tokio::sync::Mutex::new(()));
        let listener = Listener {
            list_changed: list_changed.clone(),
            listing: listing.clone(),
        };
        let service = listener
            .serve(transport)
            .await
            .map_err(|e| McpClientError::Connect {
                server: server_name.to_string(),
                url: url.to_string(),
                detail: e.to_string(),
            })?;
        Ok(McpClient {
            server: server_name.to_string(),
            service,
            tap,
            listing,
            list_changed,
        })
    }

    /// Lists tools, following `nextCursor`; returns each definition as the
    /// raw JSON object the server sent, every field kept.
    pub async fn list_tools(&self) -> Result<Vec<Value>, McpClientError> {
        Ok(self
            .list_tools_as_sent()
            .await?
            .into_iter()
            .map(|t| t.value)
            .collect())
    }

    /// [`McpClient::list_tools`], each definition with the text it arrived as.
    pub async fn list_tools_as_sent(&self) -> Result<Vec<ListedTool>, McpClientError> {
        let _one_at_a_time = self.listing.lock().await;
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            {
                // An earlier listing that failed mid-way may still be
                // answered late; forgetting its id keeps that answer out.
                let mut tap = self.tap.lock();
                tap.pending.clear();
                tap.captured.clear();
            }
            let params = cursor
                .take()
                .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            self.service
                .peer()
                .send_request(ClientRequest::ListToolsRequest(ListToolsRequest {
                    method: Default::default(),
                    params,
                    extensions: Default::default(),
                }))
                .await
                .map_err(|e| self.request_error("tools/list", e))?;
            let captured: Vec<Result<(Value, Vec<String>), String>> =
                self.tap.lock().captured.drain().map(|(_, v)| v).collect();
            let (result, texts) = match captured.as_slice() {
                [Ok(result)] => result.clone(),
                [Err(detail)] => return Err(self.raw_error(detail.clone())),
                [] => {
                    return Err(self.raw_error(
                        "no raw answer was seen on the wire (was it sent as plain JSON instead of SSE?)"
                            .to_string(),
                    ));
                }
                _ => {
                    return Err(
                        self.raw_error("more than one answer arrived for one listing".to_string())
                    );
                }
            };
            let page = result
                .get("tools")
                .and_then(Value::as_array)
                .ok_or_else(|| {
                    self.raw_error(format!("`result.tools` is not an array in {result}"))
                })?;
            if texts.len() != page.len() {
                return Err(self.raw_error(format!(
                    "{} definitions but {} texts in one answer",
                    page.len(),
                    texts.len()
                )));
            }
            tools.extend(page.iter().zip(texts).map(|(value, text)| ListedTool {
                value: value.clone(),
                text,
            }));
            match result.get("nextCursor") {
                Some(Value::String(next)) => cursor = Some(next.clone()),
                None | Some(Value::Null) => return Ok(tools),
                Some(other) => {
                    return Err(self.raw_error(format!("`nextCursor` is not a string: {other}")));
                }
            }
        }
    }

    /// Calls a tool; returns its text content, concatenated.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<String, McpClientError> {
        let arguments = match arguments {
            Value::Object(map) => map,
            Value::Null => serde_json::Map::new(),
            other => {
                return Err(McpClientError::ArgumentsNotObject {
                    server: self.server.clone(),
                    tool: name.to_string(),
                    got: other.to_string(),
                });
            }
        };
        let result = self
            .service
            .peer()
            .call_tool(CallToolRequestParams::new(name.to_string()).with_arguments(arguments))
            .await
            .map_err(|e| self.request_error("tools/call", e))?;
        let text: String = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
            .collect::<Vec<_>>()
            .join("");
        if result.is_error == Some(true) {
            return Err(McpClientError::ToolError {
                server: self.server.clone(),
                tool: name.to_string(),
                text,
            });
        }
        Ok(text)
    }

    /// True once a `notifications/tools/list_changed` arrived since the last
    /// call; the call clears it.
    pub fn take_list_changed(&self) -> bool {
        self.list_changed.flag.swap(false, Ordering::SeqCst)
    }

    /// Waits up to `within` for a `notifications/tools/list_changed` not yet
    /// taken; does not clear it. For tests and for a host that blocks on it.
    pub async fn wait_list_changed(&self, within: Duration) -> bool {
        let arrived = self.list_changed.arrived.notified();
        if self.list_changed.flag.load(Ordering::SeqCst) {
            return true;
        }
        let _ = tokio::time::timeout(within, arrived).await;
        self.list_changed.flag.load(Ordering::SeqCst)
    }

    /// Ends the session (DELETE) and the transport. Bounded by a short grace period.
    pub async fn close(self) {
        let server = self.server;
        let mut service = self.service;
        match service.close_with_timeout(CLOSE_GRACE).await {
            Ok(Some(_)) => {}
            Ok(None) => tracing::debug!("MCP server `{server}`: session did not close in time"),
            Err(e) => tracing::debug!("MCP server `{server}`: closing the session: {e}"),
        }
    }

    fn request_error(&self, method: &'static str, e: rmcp::ServiceError) -> McpClientError {
        McpClientError::Request {
            server: self.server.clone(),
            method,
            detail: e.to_string(),
        }
    }

    fn raw_error(&self, detail: String) -> McpClientError {
        McpClientError::RawListing {
            server: self.server.clone(),
            detail,
        }
    }
}

#[derive(Default)]
struct ListChanged {
    flag: AtomicBool,
    arrived: Notify,
}

/// The rmcp client handler: only the list_changed notification matters here.
struct Listener {
    list_changed: Arc<ListChanged>,
    /// The client's listing lock: a re-list never overlaps a listing whose raw answer is being read.
    listing: Arc<tokio::sync::Mutex<()>>,
}

impl ClientHandler for Listener {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new(
                "delegation-harness-reference-host",
                env!("CARGO_PKG_VERSION"),
            ),
        )
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        self.list_changed.flag.store(true, Ordering::SeqCst);
        self.list_changed.arrived.notify_waiters();
        // Re-list, as MCP clients do on this notification: the server seeing
        // it is how a harness knows the flag is set before its next request.
        // The answer is not used (the next action lists and digests again,
        // and its listing clears whatever the tap kept from this one).
        let _one_at_a_time = self.listing.lock().await;
        let _ = context.peer.list_tools(None).await;
    }
}

/// Raw `tools/list` answers, keyed by JSON-RPC request id.
#[derive(Default)]
struct TapState {
    /// Ids of `tools/list` requests sent and not yet answered.
    pending: HashSet<String>,
    /// The answer's `result` as sent with the text of each of its
    /// `tools`, or why it cannot be digested exactly.
    captured: HashMap<String, Result<(Value, Vec<String>), String>>,
}

#[derive(Default)]
struct Tap {
    state: Mutex<TapState>,
}

impl Tap {
    fn lock(&self) -> MutexGuard<'_, TapState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn note_request(&self, message: &ClientJsonRpcMessage) {
        if let ClientJsonRpcMessage::Request(request) = message
            && matches!(request.request, ClientRequest::ListToolsRequest(_))
        {
            self.lock().pending.insert(request.id.to_string());
        }
    }

    fn see_frame(&self, data: &str) {
        if self.lock().pending.is_empty() {
            return;
        }
        let Some(id) = frame_id_key(data) else {
            return;
        };
        let mut state = self.lock();
        if !state.pending.remove(&id) {
            return;
        }
        // Strict: a duplicate key or an unsafe integer would make two
        // parties digest different definitions from the same bytes.
        let captured = match parse_strict(data) {
            Ok(mut strict) => match strict.get_mut("result").map(Value::take) {
                Some(result) => Ok((result, tool_texts(data))),
                None => Err(format!("the answer has no `result`: {data}")),
            },
            Err(e) => Err(e.to_string()),
        };
        state.captured.insert(id, captured);
    }

    fn see_json_answer(&self, message: &ServerJsonRpcMessage) {
        // rmcp already parsed this body into typed values and the unknown
        // fields are gone: refuse rather than digest a trimmed definition.
        let Ok(value) = serde_json::to_value(message) else {
            return;
        };
        let Some(id) = value.get("id").and_then(id_key) else {
            return;
        };
        let mut state = self.lock();
        if state.pending.remove(&id) {
            state.captured.insert(
                id,
                Err("the server answered with a plain JSON body, which rmcp parses before it can be recorded".to_string()),
            );
        }
    }
}

/// The text of each element of `result.tools` in one answer, as sent.
fn tool_texts(data: &str) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Answer<'a> {
        #[serde(borrow)]
        result: Listing<'a>,
    }
    #[derive(serde::Deserialize)]
    struct Listing<'a> {
        #[serde(borrow, default)]
        tools: Vec<&'a RawValue>,
    }
    serde_json::from_str::<Answer>(data)
        .map(|a| a.result.tools.iter().map(|t| t.get().to_string()).collect())
        .unwrap_or_default()
}

/// The same key `RequestId`'s `Display` gives, from a raw `id` value.
/// The key of a frame's `id`, read without building the rest of the
/// message: a frame whose id is pending is parsed in full afterwards anyway.
/// Anything unusual (not an object, a repeated `id`) is read as a whole
/// value, as before.
fn frame_id_key(data: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Identified {
        id: Option<Value>,
    }
    if data.trim_start().starts_with('{') {
        if let Ok(Identified { id }) = serde_json::from_str::<Identified>(data) {
            return id.as_ref().and_then(id_key);
        }
    }
    serde_json::from_str::<Value>(data)
        .ok()?
        .get("id")
        .and_then(id_key)
}

fn id_key(id: &Value) -> Option<String> {
    match id {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// The HTTP client under rmcp, with every SSE frame shown to the tap on its way in.
#[derive(Clone)]
struct TappedHttp<C> {
    inner: C,
    tap: Arc<Tap>,
}

impl<C> TappedHttp<C> {
    fn tap_stream(&self, stream: BoxedSseResponse) -> BoxedSseResponse {
        let tap = self.tap.clone();
        stream
            .inspect(move |frame| {
                if let Ok(sse) = frame
                    && let Some(data) = sse.data.as_deref()
                    && !data.is_empty()
                {
                    tap.see_frame(data);
                }
            })
            .boxed()
    }

    fn tap_response(&self, response: StreamableHttpPostResponse) -> StreamableHttpPostResponse {
        match response {
            StreamableHttpPostResponse::Sse(stream, session) => {
                StreamableHttpPostResponse::Sse(self.tap_stream(stream), session)
            }
            StreamableHttpPostResponse::Json(message, session) => {
                self.tap.see_json_answer(&message);
                StreamableHttpPostResponse::Json(message, session)
            }
            other => other,
        }
    }
}

type HttpResult<T, E> = Result<T, StreamableHttpError<E>>;

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for TappedHttp<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse, C::Error> {
        self.tap.note_request(&message);
        let response = self
            .inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await?;
        Ok(self.tap_response(response))
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<StreamableHttpPostResponse, C::Error> {
        self.tap.note_request(&message);
        let response = self
            .inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(self.tap_response(response))
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> HttpResult<StreamableHttpPostResponse, C::Error> {
        self.tap.note_request(&message);
        let response = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await?;
        Ok(self.tap_response(response))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<(), C::Error> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<BoxedSseResponse, C::Error> {
        // A resumed response stream can carry a `tools/list` answer too.
        let stream = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await?;
        Ok(self.tap_stream(stream))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<BoxedSseResponse, C::Error> {
        let stream = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(self.tap_stream(stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn a_frame_id_is_read_as_the_whole_message_would_read_it() {
        let frames = [
            r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"a"}]}}"#,
            r#"{"jsonrpc":"2.0","id":"s-1","result":{}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"x"}}"#,
            // A repeated id: the whole value keeps the last one.
            r#"{"id":1,"jsonrpc":"2.0","id":2,"result":{}}"#,
            r#"[{"jsonrpc":"2.0","id":3,"result":{}}]"#,
            r#"[4]"#,
            "not json",
        ];
        for frame in frames {
            let whole = serde_json::from_str::<Value>(frame)
                .ok()
                .and_then(|m| m.get("id").and_then(id_key));
            assert_eq!(frame_id_key(frame), whole, "{frame}");
        }
        assert_eq!(frame_id_key(frames[0]).as_deref(), Some("7"));
        assert_eq!(frame_id_key(frames[1]).as_deref(), Some("s-1"));
        assert_eq!(frame_id_key(frames[4]).as_deref(), Some("2"));
    }
}
