//! The reference host: the model's state machine with a real SQLite store and real calls to the observers.
//!
//! Every decision is the model's ([`delegation_model::state::HostState`]);
//! this module does the I/O around it: one HTTP POST per model turn to the
//! model endpoint (neutral format), tool definitions listed and tools called
//! on the MCP servers through a real MCP client, the authorizer over HTTP,
//! and every durable change committed to SQLite before it takes effect.

pub mod store;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use delegation_model::digest::sha256_hex;
use delegation_model::state::{
    Admission, AuthorizerAnswer, HostState, LifecyclePlan, LiveTools, PlanEnd, ToolPlan,
};
use delegation_model::{
    Action, ActionResult, DenyReason, LifecycleCall, LifecycleState, SpawnRequest, ToolCallOutcome,
    ToolDefinition, TurnReport,
};
use delegation_protocol::{
    Environment, HostInfo, InitializeParams, InitializeResult, PROTOCOL_VERSION, capability,
};
use serde_json::{Value, json};

use crate::mcp_client::McpClient;
use crate::mutants::{self, Defect};
use crate::{Host, HostError, HostLauncher};
use store::SqliteJournal;

/// How long the reference host waits for the authorizer before it counts as timed out (fail closed).
pub const AUTHORIZER_TIMEOUT: Duration = Duration::from_millis(1_500);
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
}

/// The in-process reference host.
pub struct ReferenceHost {
    store_dir: PathBuf,
    http: reqwest::Client,
    running: Option<Running>,
    /// Set when the crash fault fired: the host is dead until restarted.
    crashed: bool,
    /// A deliberate bug for `selftest`; `None` is the correct host.
    defect: Option<Defect>,
    /// Defect queued-followup-after-close: refused follow-ups (instance, input); always empty otherwise.
    queued: Vec<(String, String)>,
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
            http: reqwest::Client::new(),
            running: None,
            crashed: false,
            defect,
            queued: Vec::new(),
        }
    }

    /// Whether the crash fault fired; the stdio binary exits when it has.
    pub fn crashed(&self) -> bool {
        self.crashed
    }

    fn running(&mut self, method: &str) -> Result<&mut Running, HostError> {
        if self.crashed {
            return Err(HostError::Exited {
                method: method.into(),
                status: "crashed (fault crash.after_decision_commit)".into(),
                stderr_tail: String::new(),
            });
        }
        self.running.as_mut().ok_or_else(|| HostError::Protocol {
            method: method.into(),
            detail: "`initialize` must come first".into(),
        })
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

impl Running {
    /// Commits the invalidation of a `list_changed` received (SD3). A failed
    /// write must not lose it: it stays pending and the caller refuses its action.
    fn take_list_changed(&mut self) -> Result<(), delegation_model::state::Denial> {
        for client in &self.mcp {
            self.list_changed |= client.take_list_changed();
        }
        if self.list_changed {
            self.state.tool_list_changed(&mut self.journal)?;
            self.list_changed = false;
        }
        Ok(())
    }

    /// Lists every MCP server's tools now, and notes a `list_changed` first (SD3).
    async fn live_tools(&mut self, method: &str) -> Result<LiveTools, HostError> {
        self.take_list_changed()
            .map_err(|d| internal(method, d.detail))?;
        let mut live = LiveTools::new();
        for client in &self.mcp {
            let tools = client
                .list_tools()
                .await
                .map_err(|e| internal(method, format!("listing MCP tools: {e}")))?;
            for raw in tools {
                if let Ok(def) = ToolDefinition::from_value(raw) {
                    live.insert(def.name.clone(), def);
                }
            }
        }
        Ok(live)
    }

    async fn call_handler(&mut self, tool: &str, arguments: &Value) -> Result<String, String> {
        for client in &self.mcp {
            match client.call_tool(tool, arguments.clone()).await {
                Ok(text) => return Ok(text),
                Err(e) => return Err(e.to_string()),
            }
        }
        Err(format!("no MCP server serves `{tool}`"))
    }

    /// Runs a decided plan: the handler is called only for `Execute`.
    async fn run_plan(&mut self, tool: &str, plan: ToolPlan, crashed: &mut bool) -> ActionResult {
        let end = match plan {
            ToolPlan::Execute {
                tool: t,
                arguments,
                approval,
            } => PlanEnd::Ran {
                approval,
                result: self.call_handler(&t, &arguments).await,
            },
            ToolPlan::Pending { approval } => PlanEnd::Pending(approval),
            ToolPlan::Denied(d) => PlanEnd::Denied(d),
            ToolPlan::Crash => {
                *crashed = true;
                PlanEnd::Crashed
            }
        };
        end.reply(tool)
    }

    async fn authorize(
        &mut self,
        admission: Admission,
    ) -> Result<(Admission, Option<String>), delegation_model::state::Denial> {
        if !self.state.config.authorizer_required {
            return Ok((admission, None));
        }
        // Defect authorizer-skipped-on-receipt: the consume path never asks the authorizer.
        if admission.receipt.is_some() && self.defect == Some(Defect::AuthorizerSkippedOnReceipt) {
            return Ok((admission, None));
        }
        let answer = if self
            .state
            .take_fault(delegation_model::FaultPoint::AuthorizerCall)
        {
            AuthorizerAnswer::Unavailable("authorizer call failed (fault armed)".into())
        } else if let Some(url) = self.environment.authorizer.clone() {
            let body = self.state.authorizer_request(&admission);
            let call = reqwest::Client::new()
                .post(format!("{}/authorize", url.trim_end_matches('/')))
                .json(&body)
                .send();
            match tokio::time::timeout(AUTHORIZER_TIMEOUT, call).await {
                Err(_) => AuthorizerAnswer::TimedOut,
                Ok(Err(e)) => AuthorizerAnswer::Unavailable(e.to_string()),
                Ok(Ok(resp)) if !resp.status().is_success() => {
                    AuthorizerAnswer::Unavailable(format!("HTTP {}", resp.status()))
                }
                Ok(Ok(resp)) => match tokio::time::timeout(AUTHORIZER_TIMEOUT, resp.text()).await {
                    Ok(Ok(text)) => AuthorizerAnswer::Body(text),
                    Ok(Err(e)) => AuthorizerAnswer::Unavailable(e.to_string()),
                    Err(_) => AuthorizerAnswer::TimedOut,
                },
            }
        } else {
            AuthorizerAnswer::Unavailable(
                "an authorizer is required but none was configured".into(),
            )
        };
        let (admission, rid) = self.state.apply_authorizer(admission, &answer)?;
        Ok((admission, Some(rid)))
    }
}

impl ReferenceHost {
    /// Admission, authorizer, commit, then the child's first turn: in that order, so
    /// that nothing is created and no model request is made for a refused child (ZC).
    fn delegate<'a>(
        &'a mut self,
        parent: &'a str,
        request: &'a SpawnRequest,
        receipt: Option<&'a Value>,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<ActionResult, HostError>> + Send + 'a>,
    > {
        Box::pin(async move {
            let method = if receipt.is_some() {
                "receipt/consume"
            } else {
                "instance/delegate"
            };
            let transition = if receipt.is_some() {
                "consume"
            } else {
                "delegate"
            };
            let run = self.running(method)?;
            let live = run.live_tools(method).await?;
            let admitted = match receipt {
                Some(r) => run
                    .state
                    .admit_receipt(&mut run.journal, r, parent, request, &live),
                None => run.state.admit_delegation(parent, request, &live),
            };
            let admission = match admitted {
                Ok(a) => a,
                Err(d) => {
                    let denied =
                        run.state
                            .deny_delegation(&mut run.journal, transition, parent, request, d);
                    self.defect_refused_child(parent, request).await?;
                    return Ok(denied);
                }
            };
            let (admission, authorization) = match run.authorize(admission).await {
                Ok(a) => a,
                Err(d) => {
                    let denied =
                        run.state
                            .deny_delegation(&mut run.journal, transition, parent, request, d);
                    self.defect_refused_child(parent, request).await?;
                    return Ok(denied);
                }
            };
            let (child, effective) =
                match run
                    .state
                    .commit_child(&mut run.journal, admission, authorization)
                {
                    Ok(c) => c,
                    Err(d) => {
                        return Ok(run.state.deny_delegation(
                            &mut run.journal,
                            transition,
                            parent,
                            request,
                            d,
                        ));
                    }
                };
            let mut result = ActionResult::ok();
            result.instance = Some(child.clone());
            result.effective = Some(effective);
            // The child starts working on its task: its first model request.
            let first = self.turn(&child, &request.task).await?;
            result.turn = first.turn;
            Ok(result)
        })
    }

    /// Defects child-before-policy-check and model-request-before-admission:
    /// what a buggy host already did for a child that is then refused. No-op otherwise.
    async fn defect_refused_child(
        &mut self,
        parent: &str,
        request: &SpawnRequest,
    ) -> Result<(), HostError> {
        let method = "instance/delegate";
        match self.defect {
            Some(Defect::ChildBeforePolicyCheck) => {
                let run = self.running(method)?;
                let Some(admission) = mutants::unchecked_admission(&run.state, parent, request)
                else {
                    return Ok(());
                };
                if let Ok((child, _)) = run.state.commit_child(&mut run.journal, admission, None) {
                    self.turn(&child, &request.task).await?;
                    let run = self.running(method)?;
                    run.state
                        .end(&mut run.journal, &child, LifecycleState::Closed);
                }
            }
            Some(Defect::ModelRequestBeforeAdmission) => {
                let http = self.http.clone();
                let run = self.running(method)?;
                // The id the child would have had; never an instance of this host.
                let child = format!("pending-child-{}", run.state.next_id + 1);
                let url = format!(
                    "{}/neutral/turn",
                    run.environment.model_endpoint.trim_end_matches('/')
                );
                let body = json!({"instance": child, "role": request.role, "input": request.task, "tools": []});
                let _ = http
                    .post(url)
                    .header("x-delegation-instance", &child)
                    .json(&body)
                    .timeout(MODEL_TIMEOUT)
                    .send()
                    .await;
            }
            _ => {}
        }
        Ok(())
    }

    /// A lifecycle tool call of a parent's model, as the model plans it; a
    /// turn it asks for is the target's own (its model request).
    fn lifecycle<'a>(
        &'a mut self,
        call: &'a LifecycleCall,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<ActionResult, HostError>> + Send + 'a>,
    > {
        Box::pin(async move {
            let run = self.running("instance/turn")?;
            match run.state.plan_lifecycle(&mut run.journal, call) {
                LifecyclePlan::Done(outcome) => Ok(outcome),
                LifecyclePlan::Turn { input } => self.turn(&call.target, &input).await,
            }
        })
    }

    async fn turn(&mut self, instance: &str, input: &str) -> Result<ActionResult, HostError> {
        let method = "instance/turn";
        let http = self.http.clone();
        let flush = std::mem::take(&mut self.queued);
        let run = self.running(method)?;
        let live = run.live_tools(method).await?;
        if let Err(d) = run.state.begin_turn(&mut run.journal, instance) {
            // Defect queued-followup-after-close: the refused follow-up is kept for later.
            let queue = d.reason == DenyReason::InstanceTerminal
                && run.defect == Some(Defect::QueuedFollowupAfterClose);
            self.queued = flush;
            if queue {
                self.queued.push((instance.to_string(), input.to_string()));
            }
            return Ok(d.into());
        }
        let inst = &run.state.instances[instance];
        let body = json!({
            "instance": instance,
            "role": inst.role,
            "input": input,
            "tools": run.state.model_visible_tools(instance, &live),
        });
        let url = format!(
            "{}/neutral/turn",
            run.environment.model_endpoint.trim_end_matches('/')
        );
        for (queued, text) in flush {
            // Defect queued-followup-after-close: the queue goes to the model with the next turn.
            let body = json!({"instance": queued, "role": "", "input": text, "tools": []});
            let _ = http
                .post(url.as_str())
                .header("x-delegation-instance", &queued)
                .json(&body)
                .timeout(MODEL_TIMEOUT)
                .send()
                .await;
        }
        let sent = http
            .post(url)
            .header("x-delegation-instance", instance)
            .json(&body)
            .timeout(MODEL_TIMEOUT)
            .send()
            .await;
        let reply = match sent {
            Ok(resp) if resp.status().is_success() => {
                resp.json::<Value>().await.map_err(|e| e.to_string())
            }
            Ok(resp) => Err(format!("model endpoint answered HTTP {}", resp.status())),
            Err(e) => Err(e.to_string()),
        };
        let reply = match reply {
            Ok(v) => v,
            Err(detail) => return Ok(run.state.model_failed(&mut run.journal, instance, detail)),
        };
        let reply = &reply["reply"];
        let mut result = if let Some(m) = reply.get("message") {
            let mut r = ActionResult::ok();
            r.turn = Some(TurnReport::Message {
                text: m["text"].as_str().unwrap_or_default().to_string(),
            });
            r
        } else if let Some(call) = reply.get("tool_call") {
            let tool = call["tool"].as_str().unwrap_or_default().to_string();
            let arguments = call.get("arguments").cloned().unwrap_or(json!({}));
            let plan =
                run.state
                    .plan_tool_call(&mut run.journal, instance, &tool, &arguments, &live);
            let mut crashed = false;
            let mut r = run.run_plan(&tool, plan, &mut crashed).await;
            self.crashed |= crashed;
            r.outcome = delegation_model::Outcome::Ok;
            r.reason = None;
            r.turn = Some(TurnReport::ToolCall { tool });
            r
        } else if let Some(spawn) = reply.get("spawn") {
            match serde_json::from_value::<SpawnRequest>(spawn.clone()) {
                Ok(request) => {
                    let spawned = self.delegate(instance, &request, None).await?;
                    let mut r = ActionResult::ok();
                    r.turn = Some(TurnReport::Spawn {
                        spawn: Box::new(spawned),
                    });
                    r
                }
                Err(e) => {
                    let mut r = ActionResult::ok();
                    r.turn = Some(TurnReport::ModelFailed {
                        detail: format!("model asked for an invalid spawn: {e}"),
                    });
                    r
                }
            }
        } else if let Some(call) = reply.get("lifecycle") {
            match serde_json::from_value::<LifecycleCall>(call.clone()) {
                Ok(call) => {
                    let outcome = self.lifecycle(&call).await?;
                    let mut r = ActionResult::ok();
                    r.turn = Some(LifecyclePlan::report(&call, outcome));
                    r
                }
                Err(e) => {
                    let mut r = ActionResult::ok();
                    r.turn = Some(TurnReport::ModelFailed {
                        detail: format!("model asked for an invalid lifecycle call: {e}"),
                    });
                    r
                }
            }
        } else {
            let mut r = ActionResult::ok();
            r.turn = Some(TurnReport::ModelFailed {
                detail: format!("model reply not understood: {reply}"),
            });
            r
        };
        if self.crashed {
            return Err(HostError::Exited {
                method: method.into(),
                status: "crashed (fault crash.after_decision_commit)".into(),
                stderr_tail: String::new(),
            });
        }
        let run = self.running(method)?;
        if let Err(d) = run.state.finish_turn(&mut run.journal, instance) {
            result.detail = Some(d.detail);
        }
        result.instance = Some(instance.into());
        Ok(result)
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
        let journal = SqliteJournal::open(&dir).map_err(|e| HostError::Launch(e.to_string()))?;
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
        self.running = Some(Running {
            state,
            journal,
            environment: params.environment,
            mcp,
            list_changed: false,
            defect: self.defect,
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
        let method = action.method();
        let lists_tools = action.lists_tools();
        if lists_tools && let Err(d) = self.running(method)?.take_list_changed() {
            // The invalidation could not be committed: the action is refused
            // (`store_write_failed`) before anything else, as the model does.
            return Ok(d.into());
        }
        match action {
            Action::Delegate { parent, request } => {
                return self.delegate(parent, request, None).await;
            }
            Action::ConsumeReceipt {
                receipt,
                parent,
                request,
            } => return self.delegate(parent, request, Some(receipt)).await,
            Action::Turn { instance, input } => return self.turn(instance, input).await,
            _ => {}
        }
        let run = self.running(method)?;
        let j = &mut run.journal;
        let result = match action {
            Action::Configure(c) => run.state.configure(j, c.clone()),
            Action::Start(req) => {
                let live = run.live_tools(method).await?;
                run.state.start(&mut run.journal, req, &live)
            }
            Action::PrepareReceipt {
                parent,
                call_id,
                request,
                ttl_ms,
            } => {
                let live = run.live_tools(method).await?;
                run.state.prepare_receipt(
                    &mut run.journal,
                    parent,
                    call_id,
                    request,
                    *ttl_ms,
                    &live,
                )
            }
            Action::RevokeReceipt { receipt } => run.state.revoke_receipt(j, receipt),
            Action::ToolCall {
                instance,
                tool,
                arguments,
            } => {
                let live = run.live_tools(method).await?;
                let crash = delegation_model::FaultPoint::CrashAfterDecisionCommit;
                let armed = run.state.faults.contains_key(&crash);
                let plan =
                    run.state
                        .plan_tool_call(&mut run.journal, instance, tool, arguments, &live);
                let mut crashed = false;
                let r = run.run_plan(tool, plan, &mut crashed).await;
                // Defect dispatch-before-record: the host dies after the handler ran, before the record.
                crashed |= armed
                    && !run.state.faults.contains_key(&crash)
                    && run.defect == Some(Defect::DispatchBeforeRecord);
                self.crashed |= crashed;
                r
            }
            Action::Close { instance } => run.state.end(j, instance, LifecycleState::Closed),
            Action::Cancel { instance } => run.state.end(j, instance, LifecycleState::Cancelled),
            Action::Fail { instance } => run.state.end(j, instance, LifecycleState::Failed),
            Action::Resume { instance } => run.state.resume(j, instance),
            Action::Fork { instance } => run.state.fork(j, instance),
            Action::Wait { instance, deadline } => run.state.wait(instance, *deadline),
            Action::DeliverEvent {
                event,
                instance,
                kind,
            } => run.state.deliver_event(j, event, instance, kind),
            Action::Answer { request, decision } => {
                let live = run.live_tools(method).await?;
                let plan = run
                    .state
                    .answer(&mut run.journal, request, *decision, &live);
                let tool = run
                    .state
                    .approvals
                    .get(request)
                    .map(|a| a.approval.tool.clone())
                    .unwrap_or_default();
                let mut crashed = false;
                let r = run.run_plan(&tool, plan, &mut crashed).await;
                self.crashed |= crashed;
                r
            }
            Action::SetAutoApprove { enabled } => run.state.set_auto_approve(j, *enabled),
            Action::RevokeGrant { grant } => run.state.revoke_grant(grant),
            Action::IssueCapability {
                task,
                agent,
                tools,
                expires_at,
                secret,
            } => run
                .state
                .issue_capability(j, task, agent, tools, *expires_at, secret.as_deref()),
            Action::CapabilityCall {
                secret,
                task,
                agent,
                tool,
                arguments,
                call_id,
            } => {
                let live = run.live_tools(method).await?;
                let (plan, key) = run.state.plan_capability_call(
                    secret,
                    task,
                    agent,
                    tool,
                    arguments,
                    call_id.as_deref(),
                    &live,
                );
                let mut crashed = false;
                let mut r = run.run_plan(tool, plan, &mut crashed).await;
                if let (Some(key), Some(report)) = (key, &r.tool_call)
                    && report.outcome == ToolCallOutcome::Executed
                {
                    let outcome = report.result.clone().unwrap_or_default();
                    // The outcome is kept before the event goes out, so a failed delivery loses nothing (TC5).
                    if let Err(d) = run
                        .state
                        .capability_finished(&mut run.journal, &key, &outcome)
                    {
                        r.detail = Some(format!("outcome not recorded: {}", d.detail));
                    } else if run
                        .state
                        .take_fault(delegation_model::FaultPoint::EventDeliver)
                    {
                        r.detail = Some("event delivery failed; the outcome is kept".into());
                    }
                }
                r
            }
            Action::RevokeCapability { capability } => run.state.revoke_capability(j, capability),
            Action::SetClock { now } => run.state.set_clock(j, *now),
            Action::ArmFault { point, times } => run.state.arm_fault(*point, *times),
            Action::ClearFault { point } => run.state.clear_fault(*point),
            Action::ScoreRisk { instance, risk } => run.state.score_risk(j, instance, risk),
            Action::Observe => {
                // Observing also takes in a pending list_changed, so the view
                // is current; a failed write leaves it pending for the next
                // action and is no reason to refuse a read.
                let _ = run.take_list_changed();
                let mut r = ActionResult::ok();
                r.observed = Some(run.state.observe());
                r
            }
            Action::Delegate { .. } | Action::ConsumeReceipt { .. } | Action::Turn { .. } => {
                unreachable!("handled above")
            }
        };
        if self.crashed {
            return Err(HostError::Exited {
                method: method.into(),
                status: "crashed (fault crash.after_decision_commit)".into(),
                stderr_tail: String::new(),
            });
        }
        Ok(result)
    }

    async fn shutdown(&mut self) -> Result<(), HostError> {
        if let Some(run) = self.running.take() {
            for client in run.mcp {
                client.close().await;
            }
        }
        Ok(())
    }
}

/// Starts in-process reference hosts; `ReferenceLauncher::default()` is the correct host.
#[derive(Clone, Debug, Default)]
pub struct ReferenceLauncher {
    /// A deliberate bug every launched host carries (`selftest`'s mutants).
    pub defect: Option<Defect>,
}

#[async_trait]
impl HostLauncher for ReferenceLauncher {
    async fn launch(&self, store_dir: &Path) -> Result<Box<dyn Host>, HostError> {
        Ok(Box::new(ReferenceHost::with_defect(store_dir, self.defect)))
    }

    fn describe(&self) -> String {
        match self.defect {
            None => "delegation-reference-host (in-process)".into(),
            Some(d) => format!("delegation-reference-host (in-process, defect {d})"),
        }
    }
}
