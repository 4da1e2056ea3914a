//! The reference host: the model's state machine with a real SQLite store and real calls to the observers.
//!
//! Every decision is the model's ([`delegation_model::state::HostState`]);
//! this module does the I/O around it: one HTTP POST per model turn to the
//! model endpoint (neutral format), tool definitions listed and tools called
//! on the MCP servers through a real MCP client, the authorizer over HTTP,
//! and every durable change committed to SQLite before it takes effect.

pub mod store;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use delegation_model::digest::sha256_hex;
use delegation_model::sequence::{
    self, AuthorizerCall, Core, Effect, Effects, ModelReply, ModelTurn, Stop,
};
use delegation_model::side_channels::{
    AUTHORIZE_PATH, INSTANCE_HEADER, NEUTRAL_TURN_PATH, NeutralTurnRequest,
};
use delegation_model::state::{AuthorizerAnswer, Denial, HostState, LiveTools};
use delegation_model::{
    Action, ActionResult, DenyReason, FaultPoint, LifecycleCall, LifecycleState, SpawnRequest,
    ToolDefinition,
};
use delegation_protocol::{
    Environment, HostInfo, InitializeParams, InitializeResult, PROTOCOL_VERSION, capability,
};
use serde_json::{Value, json};

use crate::mcp_client::McpClient;
use crate::mutants::{self, Defect};
use crate::{Host, HostError, HostLauncher};
use store::SqliteJournal;

/// How long the reference host waits for the authorizer before it counts as
/// timed out (fail closed), unless it is told otherwise
/// ([`ReferenceLauncher::authorizer_timeout`], the stdio binary's
/// `DELEGATION_REFERENCE_AUTHORIZER_TIMEOUT_MS`).
pub const AUTHORIZER_TIMEOUT: Duration = Duration::from_millis(1_500);
/// The authorizer timeout of the embedded host a conformance run starts:
/// short, because a scripted timeout is waited out in real time, and still
/// two orders of magnitude above an in-process authorizer's answer.
pub const EMBEDDED_AUTHORIZER_TIMEOUT: Duration = Duration::from_millis(250);
/// How long it waits for one model turn.
pub const MODEL_TIMEOUT: Duration = Duration::from_secs(10);

/// The capabilities the reference host implements: all of them but remote
/// targets, worktrees and other providers.
pub const REFERENCE_CAPABILITIES: &[&str] = &[
    capability::RECEIPTS,
    capability::NESTED_DELEGATION,
    capability::MCP,
    capability::EXTERNAL_AUTHORIZER,
    capability::AUTO_APPROVAL,
    capability::EXACT_CALL_GRANTS,
    capability::TASK_CAPABILITIES,
    capability::RESTART,
    capability::WAIT,
    capability::FAULT_INJECTION,
    capability::CLOCK,
    capability::DIRECT_TOOL_CALLS,
    capability::FORK,
    capability::EVENTS,
    capability::FULL_ACCESS_CHILDREN,
    capability::REVIEWER,
    capability::SPAWN_AUTHORITY,
    capability::MODEL_LIFECYCLE_TOOLS,
    capability::MODEL_CLOSE_TOOLS,
    capability::CONCURRENT_REQUESTS,
    capability::CLARIFICATION_QUESTIONS,
];

/// The state a started reference host carries between calls.
struct Running {
    state: HostState,
    journal: SqliteJournal,
    environment: Environment,
    mcp: Vec<McpClient>,
    /// A `list_changed` received whose invalidation is not committed yet:
    /// kept across a failed write, so the next action tries again.
    list_changed: bool,
    /// The deliberate bug the host carries, for the decisions made around the model's.
    defect: Option<Defect>,
    /// Defect queued-followup-after-close: refused follow-ups (instance, input); always empty otherwise.
    queued: Vec<(String, String)>,
}

/// What performs actions: cheap to clone, so that requests in flight at once
/// each get one and run as tasks of their own. Every action takes the state's
/// lock for the whole of its sequence, from its first check to its last
/// commit: two consumes of one receipt cannot both pass the "still issued"
/// check, and a follow-up cannot pass the liveness check before a close and
/// send its model request after it. Requests are taken concurrently; their
/// effects are one at a time, in some order.
#[derive(Clone)]
struct Worker {
    running: Arc<tokio::sync::Mutex<Option<Running>>>,
    /// Set when the crash fault fired: the host is dead until restarted.
    crashed: Arc<AtomicBool>,
    http: reqwest::Client,
    /// How long an authorizer call may take before it counts as timed out.
    authorizer_timeout: Duration,
}

/// The in-process reference host.
pub struct ReferenceHost {
    store_dir: PathBuf,
    worker: Worker,
    /// A deliberate bug for `selftest`; `None` is the correct host.
    defect: Option<Defect>,
}

impl ReferenceHost {
    pub fn new(store_dir: &Path) -> ReferenceHost {
        ReferenceHost::with_defect(store_dir, None)
    }

    /// A reference host with one deliberate bug (see [`crate::mutants`]),
    /// kept across restarts; only `selftest` and the hidden `--defect` flag use it.
    pub fn with_defect(store_dir: &Path, defect: Option<Defect>) -> ReferenceHost {
        ReferenceHost {
            store_dir: store_dir.to_path_buf(),
            worker: Worker {
                running: Arc::new(tokio::sync::Mutex::new(None)),
                crashed: Arc::new(AtomicBool::new(false)),
                http: reqwest::Client::new(),
                authorizer_timeout: AUTHORIZER_TIMEOUT,
            },
            defect,
        }
    }

    /// The same host with another wall-clock bound on each authorizer call.
    pub fn with_authorizer_timeout(mut self, timeout: Duration) -> ReferenceHost {
        self.worker.authorizer_timeout = timeout;
        self
    }

    /// Whether the crash fault fired; the stdio binary exits when it has.
    pub fn crashed(&self) -> bool {
        self.worker.crashed.load(Ordering::SeqCst)
    }

    /// A handle performing actions on this host from another task, for a
    /// transport that takes requests in flight at once (the stdio binary).
    pub fn performer(&self) -> Performer {
        Performer {
            worker: self.worker.clone(),
        }
    }
}

/// Performs actions on a started reference host from any task; see [`ReferenceHost::performer`].
#[derive(Clone)]
pub struct Performer {
    worker: Worker,
}

impl Performer {
    pub async fn call(&self, action: &Action) -> Result<ActionResult, HostError> {
        self.worker.perform(action).await
    }

    /// Whether the crash fault fired.
    pub fn crashed(&self) -> bool {
        self.worker.crashed.load(Ordering::SeqCst)
    }
}

fn internal(method: &str, detail: impl std::fmt::Display) -> HostError {
    HostError::Rpc {
        method: method.into(),
        code: delegation_protocol_internal_error(),
        message: detail.to_string(),
    }
}

/// JSON-RPC's internal error; the protocol crate documents the codes.
fn delegation_protocol_internal_error() -> i64 {
    -32603
}

/// A seal key nobody outside this store can predict: receipts the harness alters must fail their seal.
fn fresh_seal_key(dir: &Path) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    sha256_hex(format!("{}\n{nanos}\n{}", dir.display(), std::process::id()).as_bytes())
}

/// The reference host's answers to what the model's sequence needs: real
/// MCP listings and calls, HTTP to the model endpoint and the authorizer.
struct ReferenceIo<'r> {
    mcp: &'r [McpClient],
    /// A `list_changed` received whose invalidation is not committed yet.
    list_changed: &'r mut bool,
    environment: &'r Environment,
    http: &'r reqwest::Client,
    /// The deliberate bug the host carries, for what it does around the sequence.
    defect: Option<Defect>,
    /// Defect queued-followup-after-close: refused follow-ups (instance, input); always empty otherwise.
    queued: &'r mut Vec<(String, String)>,
    authorizer_timeout: Duration,
}

impl ReferenceIo<'_> {
    fn model_url(&self) -> String {
        format!(
            "{}{NEUTRAL_TURN_PATH}",
            self.environment.model_endpoint.trim_end_matches('/')
        )
    }

    /// A model request whose answer nobody reads: what a defect sends besides the sequence's own.
    async fn stray_model_request(&self, instance: &str, role: &str, input: &str) {
        let body = NeutralTurnRequest {
            instance: instance.to_string(),
            role: role.to_string(),
            input: input.to_string(),
            tools: vec![],
            tool_result: None,
        };
        let sent = self
            .http
            .post(self.model_url())
            .header(INSTANCE_HEADER, instance)
            .json(&body)
            .timeout(MODEL_TIMEOUT)
            .send()
            .await;
        if let Err(e) = sent {
            delegation_host_api::note_if_resource_exhaustion(&e);
        }
    }
}

/// The model endpoint's neutral reply, as the sequence needs it.
fn model_reply(reply: &Value) -> ModelReply {
    let reply = &reply["reply"];
    if let Some(m) = reply.get("message") {
        ModelReply::Message(m["text"].as_str().unwrap_or_default().to_string())
    } else if let Some(call) = reply.get("tool_call") {
        ModelReply::ToolCall {
            tool: call["tool"].as_str().unwrap_or_default().to_string(),
            arguments: call.get("arguments").cloned().unwrap_or(json!({})),
        }
    } else if let Some(spawn) = reply.get("spawn") {
        match serde_json::from_value::<SpawnRequest>(spawn.clone()) {
            Ok(request) => ModelReply::Spawn(request),
            Err(e) => ModelReply::Unusable(format!("model asked for an invalid spawn: {e}")),
        }
    } else if let Some(call) = reply.get("lifecycle") {
        match serde_json::from_value::<LifecycleCall>(call.clone()) {
            Ok(call) => ModelReply::Lifecycle(call),
            Err(e) => {
                ModelReply::Unusable(format!("model asked for an invalid lifecycle call: {e}"))
            }
        }
    } else {
        ModelReply::Unusable(format!("model reply not understood: {reply}"))
    }
}

impl Effects for ReferenceIo<'_> {
    /// Commits the invalidation of a `list_changed` received (SD3). A failed
    /// write must not lose it: it stays pending and the caller refuses its action.
    fn take_list_changed(&mut self, core: &mut Core<'_>) -> Result<(), Denial> {
        for client in self.mcp {
            *self.list_changed |= client.take_list_changed();
        }
        if *self.list_changed {
            core.state.tool_list_changed(core.journal)?;
            *self.list_changed = false;
        }
        Ok(())
    }

    /// Lists every MCP server's tools now.
    fn live_tools(&mut self) -> Effect<'_, Result<Arc<LiveTools>, String>> {
        Box::pin(async move {
            let mut live = LiveTools::new();
            for client in self.mcp {
                let tools = client
                    .list_tools_as_sent()
                    .await
                    .map_err(|e| format!("listing MCP tools: {e}"))?;
                for listed in tools {
                    if let Ok(def) = ToolDefinition::from_value(listed.value) {
                        live.insert(def.name.clone(), def.with_received(listed.text));
                    }
                }
            }
            Ok(Arc::new(live))
        })
    }

    fn model_turn<'a>(&'a mut self, turn: ModelTurn<'a>) -> Effect<'a, ModelReply> {
        Box::pin(async move {
            let body = NeutralTurnRequest {
                instance: turn.instance.to_string(),
                role: turn.role.to_string(),
                input: turn.input.to_string(),
                tools: turn.tools.iter().map(|d| d.raw.clone()).collect(),
                tool_result: None,
            };
            for (queued, text) in std::mem::take(self.queued) {
                // Defect queued-followup-after-close: the queue goes to the model with the next turn.
                self.stray_model_request(&queued, "", &text).await;
            }
            let sent = self
                .http
                .post(self.model_url())
                .header(INSTANCE_HEADER, turn.instance)
                .json(&body)
                .timeout(MODEL_TIMEOUT)
                .send()
                .await;
            let reply = match sent {
                Ok(resp) if resp.status().is_success() => {
                    resp.json::<Value>().await.map_err(|e| e.to_string())
                }
                Ok(resp) => Err(format!("model endpoint answered HTTP {}", resp.status())),
                Err(e) => {
                    // The harness's own process ran short, not the host.
                    delegation_host_api::note_if_resource_exhaustion(&e);
                    Err(e.to_string())
                }
            };
            match reply {
                Ok(reply) => model_reply(&reply),
                Err(detail) => ModelReply::Failed(detail),
            }
        })
    }

    fn call_handler<'a>(
        &'a mut self,
        tool: &'a str,
        arguments: &'a Value,
    ) -> Effect<'a, Result<String, String>> {
        Box::pin(async move {
            match self.mcp.first() {
                Some(client) => client
                    .call_tool(tool, arguments.clone())
                    .await
                    .map_err(|e| e.to_string()),
                None => Err(format!("no MCP server serves `{tool}`")),
            }
        })
    }

    fn authorize<'a>(&'a mut self, call: AuthorizerCall<'a>) -> Effect<'a, AuthorizerAnswer> {
        Box::pin(async move {
            let Some(url) = &self.environment.authorizer else {
                return AuthorizerAnswer::Unavailable(
                    "an authorizer is required but none was configured".into(),
                );
            };
            // The host's one client: building a client per call cost
            // every authorizer call a connection pool, a connector and a
            // new TCP connection.
            let sent = self
                .http
                .post(format!("{}{AUTHORIZE_PATH}", url.trim_end_matches('/')))
                .json(call.request)
                .send();
            let timeout = self.authorizer_timeout;
            match tokio::time::timeout(timeout, sent).await {
                Err(_) => AuthorizerAnswer::TimedOut,
                Ok(Err(e)) => {
                    delegation_host_api::note_if_resource_exhaustion(&e);
                    AuthorizerAnswer::Unavailable(e.to_string())
                }
                Ok(Ok(resp)) if !resp.status().is_success() => {
                    AuthorizerAnswer::Unavailable(format!("HTTP {}", resp.status()))
                }
                Ok(Ok(resp)) => match tokio::time::timeout(timeout, resp.text()).await {
                    Ok(Ok(text)) => AuthorizerAnswer::Body(text),
                    Ok(Err(e)) => AuthorizerAnswer::Unavailable(e.to_string()),
                    Err(_) => AuthorizerAnswer::TimedOut,
                },
            }
        })
    }

    /// Defects child-before-policy-check and model-request-before-admission:
    /// what a buggy host already did for a child that is then refused. No-op otherwise.
    fn delegation_refused<'a, 'c>(
        &'a mut self,
        core: &'a mut Core<'c>,
        parent: &'a str,
        request: &'a SpawnRequest,
    ) -> Effect<'a, Result<(), Stop>> {
        Box::pin(async move {
            match self.defect {
                Some(Defect::ChildBeforePolicyCheck) => {
                    let Some(admission) = mutants::unchecked_admission(core.state, parent, request)
                    else {
                        return Ok(());
                    };
                    if let Ok((child, _)) = core.state.commit_child(core.journal, admission, None) {
                        sequence::turn(core, self, &child, &request.task).await?;
                        core.state.end(core.journal, &child, LifecycleState::Closed);
                    }
                }
                Some(Defect::ModelRequestBeforeAdmission) => {
                    // The id the child would have had; never an instance of this host.
                    let child = format!("pending-child-{}", core.state.next_id + 1);
                    self.stray_model_request(&child, &request.role, &request.task)
                        .await;
                }
                _ => {}
            }
            Ok(())
        })
    }

    /// Defect queued-followup-after-close: the refused follow-up is kept for later.
    fn turn_refused(&mut self, instance: &str, input: &str, denial: &Denial) {
        if denial.reason == DenyReason::InstanceTerminal
            && self.defect == Some(Defect::QueuedFollowupAfterClose)
        {
            self.queued.push((instance.to_string(), input.to_string()));
        }
    }
}

fn exited(method: &str) -> HostError {
    HostError::Exited {
        method: method.into(),
        status: "crashed (fault crash.after_decision_commit)".into(),
        stderr_tail: String::new(),
    }
}

/// Told once an action holds the state's lock or waits in its queue, so
/// that the next request of a batch queues behind it.
type Arrived = Option<tokio::sync::oneshot::Sender<()>>;

impl Worker {
    /// One action, start to end, under the state's lock (see [`Worker`]).
    async fn perform(&self, action: &Action) -> Result<ActionResult, HostError> {
        self.perform_arriving(action, None).await
    }

    /// [`Worker::perform`], telling `arrived` once the action is in the
    /// lock's queue.
    async fn perform_arriving(
        &self,
        action: &Action,
        mut arrived: Arrived,
    ) -> Result<ActionResult, HostError> {
        let method = action.method();
        let racing = self.stale_check(action, &mut arrived).await;
        let mut guard = self.lock_in_turn(arrived).await;
        if self.crashed.load(Ordering::SeqCst) {
            return Err(exited(method));
        }
        let Some(run) = guard.as_mut() else {
            return Err(HostError::Protocol {
                method: method.into(),
                detail: "`initialize` must come first".into(),
            });
        };
        let undo = match &racing {
            Some(stale) => {
                mutants::act_on_stale_check(
                    &mut run.state,
                    stale,
                    &self.http,
                    &run.environment.model_endpoint,
                )
                .await
            }
            None => mutants::StaleUndo::Nothing,
        };
        let crash = FaultPoint::CrashAfterDecisionCommit;
        let crash_armed = run.state.faults.contains_key(&crash);
        let mut io = ReferenceIo {
            mcp: &run.mcp,
            list_changed: &mut run.list_changed,
            environment: &run.environment,
            http: &self.http,
            defect: run.defect,
            queued: &mut run.queued,
            authorizer_timeout: self.authorizer_timeout,
        };
        let mut core = Core {
            state: &mut run.state,
            journal: &mut run.journal,
        };
        let performed = sequence::perform(&mut core, &mut io, action).await;
        mutants::undo_stale_act(&mut run.state, undo);
        let mut result = match performed {
            Ok(result) => result,
            Err(Stop::Crashed) => {
                self.crashed.store(true, Ordering::SeqCst);
                return Err(exited(method));
            }
            Err(Stop::Failed(detail)) => return Err(internal(method, detail)),
        };
        // Defect dispatch-before-record: the host dies after the handler ran, before the record.
        if matches!(action, Action::ToolCall { .. })
            && run.defect == Some(Defect::DispatchBeforeRecord)
            && crash_armed
            && !run.state.faults.contains_key(&crash)
        {
            self.crashed.store(true, Ordering::SeqCst);
            return Err(exited(method));
        }
        if matches!(action, Action::Observe) {
            result.observed = Some(run.state.observe());
        }
        Ok(result)
    }

    /// The race defects (receipt-consume-check-then-act,
    /// followup-races-close, capability-call-check-then-act): the
    /// check done under the lock, which is then released for a while before
    /// the action acts on what it read. `None` for the correct host.
    async fn stale_check(
        &self,
        action: &Action,
        arrived: &mut Arrived,
    ) -> Option<mutants::StaleCheck> {
        let checked = {
            let guard = self.lock_in_turn(arrived.take()).await;
            let run = guard.as_ref()?;
            mutants::check_before_acting(&run.state, run.defect, action)?
        };
        tokio::time::sleep(mutants::STALE_CHECK_WINDOW).await;
        Some(checked)
    }

    /// The state's lock, telling `arrived` as soon as this action holds it
    /// or waits in its queue. The lock is fair, so requests that each wait
    /// for the one before to arrive get it in the order they came, whatever
    /// the order their tasks happen to run in (a task told to start can
    /// still be preempted before it reaches the lock).
    async fn lock_in_turn(&self, arrived: Arrived) -> tokio::sync::MutexGuard<'_, Option<Running>> {
        let mut lock = std::pin::pin!(self.running.lock());
        // One poll queues a waiter that cannot take the lock at once.
        let first = std::future::poll_fn(|cx| {
            std::task::Poll::Ready(std::future::Future::poll(lock.as_mut(), cx))
        })
        .await;
        if let Some(arrived) = arrived {
            let _ = arrived.send(());
        }
        match first {
            std::task::Poll::Ready(guard) => guard,
            std::task::Poll::Pending => lock.await,
        }
    }
}

#[async_trait]
impl Host for ReferenceHost {
    async fn initialize(
        &mut self,
        params: InitializeParams,
    ) -> Result<InitializeResult, HostError> {
        let method = "initialize";
        if params.protocol_version.split('.').next() != PROTOCOL_VERSION.split('.').next() {
            return Err(HostError::Protocol {
                method: method.into(),
                detail: format!(
                    "protocol version {} is not supported; this host speaks {PROTOCOL_VERSION}",
                    params.protocol_version
                ),
            });
        }
        let dir = PathBuf::from(&params.environment.store_dir);
        if dir != self.store_dir && !self.store_dir.as_os_str().is_empty() {
            self.store_dir = dir.clone();
        }
        std::fs::create_dir_all(&dir)
            .map_err(|e| HostError::Launch(format!("store dir {}: {e}", dir.display())))?;
        let mut journal =
            SqliteJournal::open(&dir).map_err(|e| HostError::Launch(e.to_string()))?;
        if self.defect == Some(Defect::ReceiptConsumeCheckThenAct) {
            journal.write_tombstones_unconditionally();
        }
        let rows = journal
            .load()
            .map_err(|e| HostError::Launch(e.to_string()))?;
        let mut state = HostState::restore(&rows).map_err(HostError::Launch)?;
        mutants::install(&mut state, self.defect);
        if state.seal_key.is_empty() {
            state.seal_key = fresh_seal_key(&dir);
        }
        let mut mcp = Vec::new();
        for server in &params.environment.mcp_servers {
            let client = McpClient::connect(&server.name, &server.url)
                .await
                .map_err(|e| {
                    HostError::Launch(format!(
                        "MCP server `{}` at {}: {e}",
                        server.name, server.url
                    ))
                })?;
            mcp.push(client);
        }
        *self.worker.running.lock().await = Some(Running {
            state,
            journal,
            environment: params.environment,
            mcp,
            list_changed: false,
            defect: self.defect,
            queued: Vec::new(),
        });
        Ok(InitializeResult {
            host: HostInfo {
                name: "delegation-reference-host".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            protocol_version: PROTOCOL_VERSION.into(),
            capabilities: REFERENCE_CAPABILITIES
                .iter()
                .map(|c| c.to_string())
                .collect(),
        })
    }

    async fn call(&mut self, action: &Action) -> Result<ActionResult, HostError> {
        self.worker.perform(action).await
    }

    /// Each action a task of its own, all at once; see [`Worker`] for why
    /// that is still correct.
    async fn call_concurrently(
        &mut self,
        actions: &[Action],
    ) -> Vec<Result<ActionResult, HostError>> {
        self.call_concurrently_noting(actions, &|_| {}).await
    }

    async fn call_concurrently_noting(
        &mut self,
        actions: &[Action],
        noted: &(dyn Fn(usize) + Send + Sync),
    ) -> Vec<Result<ActionResult, HostError>> {
        let mut tasks = tokio::task::JoinSet::new();
        for (index, action) in actions.iter().enumerate() {
            let worker = self.worker.clone();
            let action = action.clone();
            let (arrived, has_arrived) = tokio::sync::oneshot::channel();
            tasks.spawn(
                async move { (index, worker.perform_arriving(&action, Some(arrived)).await) },
            );
            // The next request arrives once this one holds the state's lock
            // or waits in its queue, as lines on a pipe are taken one after
            // the other: the lock is fair, so they get it in the order they
            // came (a runtime is free to start the last task spawned first,
            // and a thread to be preempted between starting and locking).
            let _ = has_arrived.await;
        }
        let mut answers: Vec<Option<Result<ActionResult, HostError>>> =
            actions.iter().map(|_| None).collect();
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok((index, answer)) => {
                    answers[index] = Some(answer);
                    noted(index);
                }
                Err(e) => {
                    // A panicking action is this host's fault; the others keep their answers.
                    for slot in answers.iter_mut().filter(|a| a.is_none()) {
                        *slot = Some(Err(internal("(concurrent actions)", &e)));
                    }
                }
            }
        }
        answers
            .into_iter()
            .map(|a| a.unwrap_or_else(|| Err(internal("(concurrent actions)", "no answer"))))
            .collect()
    }

    async fn shutdown(&mut self) -> Result<(), HostError> {
        if let Some(run) = self.worker.running.lock().await.take() {
            for client in run.mcp {
                client.close().await;
            }
        }
        Ok(())
    }
}

/// Starts in-process reference hosts; `ReferenceLauncher::default()` is the correct host.
#[derive(Clone, Debug)]
pub struct ReferenceLauncher {
    /// A deliberate bug every launched host carries (`selftest`'s mutants).
    pub defect: Option<Defect>,
    /// Each launched host's wall-clock bound on an authorizer call.
    pub authorizer_timeout: Duration,
}

impl Default for ReferenceLauncher {
    fn default() -> Self {
        ReferenceLauncher::with_defect(None)
    }
}

impl ReferenceLauncher {
    /// Hosts carrying `defect` (`None`: the correct host), with the default authorizer timeout.
    pub fn with_defect(defect: Option<Defect>) -> ReferenceLauncher {
        ReferenceLauncher {
            defect,
            authorizer_timeout: AUTHORIZER_TIMEOUT,
        }
    }
}

#[async_trait]
impl HostLauncher for ReferenceLauncher {
    async fn launch(&self, store_dir: &Path) -> Result<Box<dyn Host>, HostError> {
        Ok(Box::new(
            ReferenceHost::with_defect(store_dir, self.defect)
                .with_authorizer_timeout(self.authorizer_timeout),
        ))
    }

    fn describe(&self) -> String {
        match self.defect {
            None => "delegation-reference-host (in-process)".into(),
            Some(d) => format!("delegation-reference-host (in-process, defect {d})"),
        }
    }
}
