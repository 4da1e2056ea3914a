//! The MCP tool server the harness owns: serves tool definitions and counts every handler call.
//!
//! A real MCP server (rmcp, streamable HTTP, stateful sessions) on
//! 127.0.0.1. It serves each definition exactly as the scenario wrote it,
//! unknown fields included (see `raw_listing`), so what a host digests is
//! what the harness meant. "Zero handler calls" (SD2) is counted here, never
//! taken from the host. Definitions can change behind an unchanged name,
//! silently or announced with `notifications/tools/list_changed` (SD3, SD4).

mod definition_text;
mod raw_listing;

pub use definition_text::DefinitionText;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use delegation_model::{DefinitionError, HandlerCall, ToolDefinition};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeRequestParams, InitializeResult, ListToolsResult, MetaObject, PaginatedRequestParams,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long `shutdown` lets open sessions drain before it stops waiting.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// One tool as a scenario file writes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// The MCP tool object served in `tools/list` byte for byte as written
    /// (see [`DefinitionText`]): `name`, `description`, `inputSchema`,
    /// optional `title`, `outputSchema`, `annotations`, and any extra field.
    pub definition: DefinitionText,
    /// The text content every call of this tool returns. Default: empty.
    #[serde(default)]
    pub result: String,
}

/// Why the tool server refused a definition or an operation.
#[derive(Debug, thiserror::Error)]
pub enum ToolServerError {
    #[error("tool definition {position} is invalid: {source}")]
    InvalidDefinition {
        /// `#index` in the starting list, or the tool's name.
        position: String,
        #[source]
        source: DefinitionError,
    },
    #[error(
        "two tools are named `{name}`; names are unique on one server (compared byte for byte)"
    )]
    DuplicateName { name: String },
    #[error("no tool named `{name}` on this server; it serves: [{served}]")]
    UnknownTool { name: String, served: String },
    #[error(
        "change_definition(`{name}`): the new definition is named `{found}`; a change keeps the name (remove, then add, to rename)"
    )]
    NameChanged { name: String, found: String },
    #[error("could not bind the tool server to 127.0.0.1 on an ephemeral port: {0}")]
    Bind(#[source] std::io::Error),
}

struct Entry {
    name: String,
    definition: DefinitionText,
    result: String,
}

#[derive(Default)]
struct State {
    tools: Vec<Entry>,
    calls: Vec<HandlerCall>,
    /// One per initialised session: rmcp has no broadcast, so announcing a
    /// change means notifying each session's peer.
    peers: Vec<(u64, Peer<RoleServer>)>,
    next_peer: u64,
    /// `tools/list` requests received so far, to see a host re-list after an announcement.
    listings: u64,
    /// Sessions answered `initialize` whose `initialized` has not arrived:
    /// the client already believes it is connected, but an announcement
    /// would not reach it yet.
    initializing: u64,
}

impl State {
    fn position(&self, name: &str) -> Result<usize, ToolServerError> {
        self.tools
            .iter()
            .position(|e| e.name == name)
            .ok_or_else(|| ToolServerError::UnknownTool {
                name: name.to_string(),
                served: self
                    .tools
                    .iter()
                    .map(|e| format!("`{}`", e.name))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Woken on every `tools/list` and every `initialized`.
    activity: tokio::sync::Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind, still
        // worth reporting: recover it rather than poison every later count.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Cancels the server when the last handle goes away without `shutdown`,
/// so a failing test cannot leave a listener behind.
struct Lifetime {
    cancel: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
    /// The URL it is reachable at in memory too (see [`crate::in_process`]), and that registration's serial.
    url: String,
    serial: u64,
}

impl Drop for Lifetime {
    fn drop(&mut self) {
        self.cancel.cancel();
        crate::in_process::unregister(&self.url, self.serial);
    }
}

/// A running tool server. Clones are cheap handles to the same server.
#[derive(Clone)]
pub struct ToolServer {
    shared: Arc<Shared>,
    lifetime: Arc<Lifetime>,
    url: String,
    faults: crate::Faults,
}

impl std::fmt::Debug for ToolServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolServer")
            .field("url", &self.url)
            .finish()
    }
}

fn validate(position: String, definition: &Value) -> Result<String, ToolServerError> {
    ToolDefinition::from_value(definition.clone())
        .map(|d| d.name)
        .map_err(|source| ToolServerError::InvalidDefinition { position, source })
}

impl ToolServer {
    /// Starts serving `tools` at `http://127.0.0.1:<ephemeral>/mcp`.
    pub async fn start(tools: Vec<ToolSpec>) -> Result<ToolServer, ToolServerError> {
        let mut state = State::default();
        for (index, spec) in tools.into_iter().enumerate() {
            let name = validate(format!("#{index}"), &spec.definition)?;
            if state.tools.iter().any(|e| e.name == name) {
                return Err(ToolServerError::DuplicateName { name });
            }
            state.tools.push(Entry {
                name,
                definition: spec.definition,
                result: spec.result,
            });
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            activity: tokio::sync::Notify::new(),
        });

        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(ToolServerError::Bind)?;
        let addr = listener.local_addr().map_err(ToolServerError::Bind)?;
        let cancel = CancellationToken::new();

        let handler = Handler {
            shared: shared.clone(),
        };
        // Stateful sessions (the default) are what make `on_initialized` fire
        // and give each session a stream for list_changed.
        let config = StreamableHttpServerConfig::default().with_cancellation_token(cancel.clone());
        let mcp = StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let faults = crate::Faults::default();
        let guard = faults.clone();
        let router = axum::Router::new()
            .route_service("/mcp", mcp)
            .layer(axum::middleware::map_response(
                raw_listing::restore_raw_tools,
            ))
            // Outermost: a failure anywhere on the request's way through the
            // server is recorded as the tool server's, not the host's.
            .layer(axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| {
                    let guard = guard.clone();
                    async move {
                        let what = format!("{} {}", request.method(), request.uri().path());
                        guard
                            .guard_async("tool server", &what, next.run(request))
                            .await
                            .unwrap_or_else(|| {
                                axum::response::IntoResponse::into_response((
                                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                                    "the harness's tool server failed (its own fault, not the host's)",
                                ))
                            })
                    }
                },
            ));
        let url = format!("http://{addr}/mcp");
        let serial = crate::in_process::register(&url, router.clone(), cancel.clone());
        let shutdown = cancel.clone();
        let stopped = faults.clone();
        let task = tokio::spawn(async move {
            // Without TCP_NODELAY every small MCP response waits out the peer's
            // delayed ACK (about 40 ms on loopback), once per listing and call.
            let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
                if let Err(e) = tcp.set_nodelay(true) {
                    tracing::warn!("tool server: cannot set TCP_NODELAY: {e}");
                }
            });
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(shutdown.cancelled_owned())
                .await;
            if let Err(e) = served {
                tracing::warn!("tool server on {addr} stopped: {e}");
                stopped.record(format!("the tool server on {addr} stopped serving: {e}"));
            }
        });

        Ok(ToolServer {
            shared,
            lifetime: Arc::new(Lifetime {
                cancel,
                task: Mutex::new(Some(task)),
                url: url.clone(),
                serial,
            }),
            url,
            faults,
        })
    }

    /// This server's own failures (see [`crate::faults`]).
    pub fn faults(&self) -> crate::Faults {
        self.faults.clone()
    }

    /// The MCP endpoint, e.g. `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// The definitions served right now, in listing order.
    pub fn definitions(&self) -> Vec<Value> {
        self.shared
            .lock()
            .tools
            .iter()
            .map(|e| e.definition.value().clone())
            .collect()
    }

    /// The text of each definition served right now, in listing order:
    /// the bytes a host receives for it.
    pub fn served_texts(&self) -> Vec<String> {
        self.shared
            .lock()
            .tools
            .iter()
            .map(|e| e.definition.text().to_string())
            .collect()
    }

    /// Replaces a definition behind its unchanged name, keeping its place in
    /// the listing and its scripted result. Silent: call
    /// [`ToolServer::notify_list_changed`] to announce it.
    pub fn change_definition(
        &self,
        name: &str,
        definition: impl Into<DefinitionText>,
    ) -> Result<(), ToolServerError> {
        let definition = definition.into();
        let found = validate(format!("for `{name}`"), &definition)?;
        if found != name {
            return Err(ToolServerError::NameChanged {
                name: name.to_string(),
                found,
            });
        }
        let mut state = self.shared.lock();
        let index = state.position(name)?;
        state.tools[index].definition = definition;
        Ok(())
    }

    /// Stops serving a tool; later calls to it fail without a handler call. Silent.
    pub fn remove(&self, name: &str) -> Result<(), ToolServerError> {
        let mut state = self.shared.lock();
        let index = state.position(name)?;
        state.tools.remove(index);
        Ok(())
    }

    /// Serves one more tool, listed last. Silent.
    pub fn add(&self, spec: ToolSpec) -> Result<(), ToolServerError> {
        let name = validate(
            format!("for `{}`", spec.definition["name"]),
            &spec.definition,
        )?;
        let mut state = self.shared.lock();
        if state.tools.iter().any(|e| e.name == name) {
            return Err(ToolServerError::DuplicateName { name });
        }
        state.tools.push(Entry {
            name,
            definition: spec.definition,
            result: spec.result,
        });
        Ok(())
    }

    /// Sends `notifications/tools/list_changed` to every open session;
    /// returns how many were sent. Closed sessions are forgotten.
    pub async fn notify_list_changed(&self) -> usize {
        let peers: Vec<(u64, Peer<RoleServer>)> = self.shared.lock().peers.clone();
        let mut dead = Vec::new();
        let mut sent = 0;
        for (id, peer) in peers {
            if peer.is_transport_closed() {
                dead.push(id);
                continue;
            }
            // One failed session must not keep the others from hearing it.
            match peer.notify_tool_list_changed().await {
                Ok(()) => sent += 1,
                Err(e) => {
                    tracing::debug!("tool server: list_changed to session {id} failed: {e}");
                    dead.push(id);
                }
            }
        }
        if !dead.is_empty() {
            self.shared
                .lock()
                .peers
                .retain(|(id, _)| !dead.contains(id));
        }
        sent
    }

    /// [`ToolServer::notify_list_changed`], then waits up to `within` until
    /// as many `tools/list` requests as sessions notified have arrived: the
    /// re-listing an MCP client does on `list_changed`, which shows the host
    /// has taken the notification in. Delivery is otherwise asynchronous, so
    /// without this the host's next action races the notification. A host
    /// that does not re-list costs `within` and is not told apart. Returns
    /// the sessions notified and whether they all re-listed in time.
    pub async fn notify_list_changed_and_settle(&self, within: Duration) -> (usize, bool) {
        let deadline = tokio::time::Instant::now() + within;
        // A host that just connected must be able to hear it.
        let ready = self.wait_until(deadline, |s| s.initializing == 0).await;
        let before = self.shared.lock().listings;
        let sent = self.notify_list_changed().await;
        let relisted = self
            .wait_until(deadline, |s| s.listings >= before + sent as u64)
            .await;
        (sent, ready && relisted)
    }

    async fn wait_until(
        &self,
        deadline: tokio::time::Instant,
        done: impl Fn(&State) -> bool,
    ) -> bool {
        loop {
            let activity = self.shared.activity.notified();
            if done(&self.shared.lock()) {
                return true;
            }
            if tokio::time::timeout_at(deadline, activity).await.is_err() {
                return false;
            }
        }
    }

    /// Every handler call so far, in the order the handlers ran.
    pub fn handler_calls(&self) -> Vec<HandlerCall> {
        self.shared.lock().calls.clone()
    }

    /// A position in the call log, for [`ToolServer::handler_calls_since`].
    pub fn mark(&self) -> usize {
        self.shared.lock().calls.len()
    }

    /// The handler calls made after `mark` was taken.
    pub fn handler_calls_since(&self, mark: usize) -> Vec<HandlerCall> {
        self.shared
            .lock()
            .calls
            .get(mark..)
            .map(<[HandlerCall]>::to_vec)
            .unwrap_or_default()
    }

    /// Closes every session and the listener. Bounded: after a short grace
    /// period a connection that is still open is dropped.
    pub async fn shutdown(self) {
        self.lifetime.cancel.cancel();
        crate::in_process::unregister(&self.lifetime.url, self.lifetime.serial);
        let task = self
            .lifetime
            .task
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(mut task) = task
            && tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
                .await
                .is_err()
        {
            tracing::debug!(
                "tool server: connections still open after the grace period; dropping them"
            );
            task.abort();
        }
    }
}

/// One per MCP session (rmcp's factory clones it); all share the state.
#[derive(Clone)]
struct Handler {
    shared: Arc<Shared>,
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            "delegation-harness-tool-server",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        // Counted before the answer goes out, so before the client can act.
        self.shared.lock().initializing += 1;
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        {
            let mut state = self.shared.lock();
            let id = state.next_peer;
            state.next_peer += 1;
            state.initializing = state.initializing.saturating_sub(1);
            state.peers.retain(|(_, p)| !p.is_transport_closed());
            state.peers.push((id, context.peer));
        }
        self.shared.activity.notify_waiters();
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // The typed list stays empty: rmcp's `Tool` would trim the
        // definitions. Their texts travel in `_meta` and `raw_listing`
        // splices them into `tools` on the way out.
        let raw: Vec<Value> = {
            let mut state = self.shared.lock();
            state.listings += 1;
            state
                .tools
                .iter()
                .map(|e| Value::String(e.definition.text().to_string()))
                .collect()
        };
        self.shared.activity.notify_waiters();
        let mut meta = Map::new();
        meta.insert(raw_listing::RAW_TOOLS_KEY.to_string(), Value::Array(raw));
        let mut result = ListToolsResult::with_all_items(Vec::new());
        result.meta = Some(MetaObject(meta));
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut state = self.shared.lock();
        let index = state
            .position(&request.name)
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let text = state.tools[index].result.clone();
        // Absent arguments are recorded as null, not `{}`: the log says what was sent.
        let arguments = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        state.calls.push(HandlerCall {
            tool: request.name.to_string(),
            arguments,
        });
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}
