//! The reference host's one sequence: what it does, in which order, for each action, with its I/O left to an interpreter.
//!
//! Sans-IO: [`perform`] decides everything through [`HostState`] and names
//! each thing it needs from outside through [`Effects`] (a `list_changed`
//! taken in, the live tool list, a model turn, a handler call, the
//! authorizer); the store is the [`Journal`] the caller lends. Two
//! interpreters answer those needs: the simulated world
//! ([`crate::world::World`], synchronously, with no runtime) and the
//! reference host (`delegation_host::reference`, over HTTP, MCP and SQLite).
//! The order lives here once, so the oracle and the host it judges cannot
//! drift apart.
//!
//! The sequence is an `async fn` so that the reference host can await real
//! I/O at each need; the world's effects are always ready, and [`run_ready`]
//! runs such a sequence to its end without an executor.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use serde_json::Value;

use crate::digest::ToolDefinition;
use crate::side_channels::AuthorizationRequest;
use crate::state::{
    AuthorizerAnswer, Denial, HostState, Journal, LifecyclePlan, LiveTools, PlanEnd, ToolPlan,
};
use crate::wire::*;

/// A boxed, sendable future: what an effect and a recursive step of the sequence return.
pub type Effect<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the sequence decides on and writes to: the state and its store.
pub struct Core<'a> {
    pub state: &'a mut HostState,
    pub journal: &'a mut (dyn Journal + Send),
}

/// Why a sequence stopped short of an answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Stop {
    /// The crash fault fired: the host is dead until restarted, and commits nothing more.
    Crashed,
    /// The interpreter could not do what the sequence needed (an MCP server
    /// that did not list, a `list_changed` whose invalidation failed mid-action).
    Failed(String),
}

/// What the model endpoint answered to one turn, as the sequence needs it.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelReply {
    Message(String),
    ToolCall {
        tool: String,
        arguments: Value,
    },
    Spawn(SpawnRequest),
    /// A lifecycle tool call on a child, by the child's id.
    Lifecycle(LifecycleCall),
    /// The endpoint failed (no answer, an HTTP error): the instance fails.
    Failed(String),
    /// The endpoint answered something the host cannot act on: the turn
    /// reports it, and the instance completes its turn as usual.
    Unusable(String),
}

/// One model turn the sequence asks for.
pub struct ModelTurn<'a> {
    pub instance: &'a str,
    pub role: &'a str,
    pub input: &'a str,
    /// The definitions the instance's model may see (SD2, SD3).
    pub tools: Vec<&'a ToolDefinition>,
}

/// One authorizer consultation the sequence asks for (EA).
pub struct AuthorizerCall<'a> {
    /// The request body, as the authorizer protocol defines it.
    pub request: &'a AuthorizationRequest,
    /// The admission's request commitment, which an allowing receipt binds.
    pub commitment: &'a str,
    /// The spawn request admitted, for an interpreter that answers as a
    /// scripted authorizer does (a widening constraint widens it).
    pub spawn: &'a SpawnRequest,
    pub now: Millis,
}

/// The I/O of a host around the sequence. A hook with a default is where a
/// deliberately broken interpreter (`selftest`'s mutants) does more than the
/// sequence asks; the defaults do nothing.
pub trait Effects: Send {
    /// Takes in a `tools/list_changed` received since the last call: commits
    /// the invalidation (SD3); a failed write keeps it pending for the next call.
    fn take_list_changed(&mut self, core: &mut Core<'_>) -> Result<(), Denial>;

    /// The tool definitions the tool servers serve now.
    fn live_tools(&mut self) -> Effect<'_, Result<Arc<LiveTools>, String>>;

    /// One model request and its reply.
    fn model_turn<'a>(&'a mut self, turn: ModelTurn<'a>) -> Effect<'a, ModelReply>;

    /// Calls a tool's handler: its text, or the error that stopped it.
    fn call_handler<'a>(
        &'a mut self,
        tool: &'a str,
        arguments: &'a Value,
    ) -> Effect<'a, Result<String, String>>;

    /// Asks the external authorizer about an admitted child.
    fn authorize<'a>(&'a mut self, call: AuthorizerCall<'a>) -> Effect<'a, AuthorizerAnswer>;

    /// A delegation was refused before its commit (admission or authorizer).
    fn delegation_refused<'a, 'c>(
        &'a mut self,
        _core: &'a mut Core<'c>,
        _parent: &'a str,
        _request: &'a SpawnRequest,
    ) -> Effect<'a, Result<(), Stop>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// A turn was refused before its model request.
    fn turn_refused(&mut self, _instance: &str, _input: &str, _denial: &Denial) {}
}

/// Performs one action as the reference host does: the one match on actions.
///
/// An observation answers only `ok`: the interpreter reports the state it observes its own way.
pub async fn perform(
    core: &mut Core<'_>,
    effects: &mut dyn Effects,
    action: &Action,
) -> Result<ActionResult, Stop> {
    // A pending list_changed is taken in by the actions that list the tools,
    // before anything else (a failed write refuses them, `store_write_failed`),
    // and by an observation, which answers even when the write fails (it stays pending).
    if action.lists_tools() {
        if let Err(d) = effects.take_list_changed(core) {
            return Ok(d.into());
        }
    } else if matches!(action, Action::Observe) {
        let _ = effects.take_list_changed(core);
    }
    Ok(match action {
        Action::Configure(c) => core.state.configure(core.journal, c.clone()),
        Action::Start(req) => {
            let live = live_tools(core, effects).await?;
            core.state.start(core.journal, req, &live)
        }
        Action::Delegate { parent, request } => {
            return delegate(core, effects, parent, request, None).await;
        }
        Action::PrepareReceipt {
            parent,
            call_id,
            request,
            ttl_ms,
        } => {
            let live = live_tools(core, effects).await?;
            core.state
                .prepare_receipt(core.journal, parent, call_id, request, *ttl_ms, &live)
        }
        Action::ConsumeReceipt {
            receipt,
            parent,
            request,
        } => return delegate(core, effects, parent, request, Some(receipt)).await,
        Action::RevokeReceipt { receipt } => core.state.revoke_receipt(core.journal, receipt),
        Action::Turn { instance, input } => return turn(core, effects, instance, input).await,
        Action::ToolCall {
            instance,
            tool,
            arguments,
        } => {
            let live = live_tools(core, effects).await?;
            let plan = core
                .state
                .plan_tool_call(core.journal, instance, tool, arguments, &live);
            run_plan(effects, tool, plan).await?
        }
        Action::Close { instance } => {
            core.state
                .end(core.journal, instance, LifecycleState::Closed)
        }
        Action::Cancel { instance } => {
            core.state
                .end(core.journal, instance, LifecycleState::Cancelled)
        }
        Action::Fail { instance } => core
            .state
            .end(core.journal, instance, LifecycleState::Failed),
        Action::Resume { instance } => core.state.resume(core.journal, instance),
        Action::Fork { instance } => core.state.fork(core.journal, instance),
        Action::Wait { instance, deadline } => core.state.wait(instance, *deadline),
        Action::DeliverEvent {
            event,
            instance,
            kind,
        } => core
            .state
            .deliver_event(core.journal, event, instance, kind),
        Action::Answer { request, decision } => {
            let live = live_tools(core, effects).await?;
            let tool = core
                .state
                .approvals
                .get(request)
                .map(|a| a.approval.tool.clone())
                .unwrap_or_default();
            let plan = core.state.answer(core.journal, request, *decision, &live);
            run_plan(effects, &tool, plan).await?
        }
        Action::Ask { instance, question } => core.state.ask(core.journal, instance, question),
        Action::AnswerQuestion { question, answer } => {
            core.state.answer_question(core.journal, question, answer)
        }
        Action::SetAutoApprove { enabled } => core.state.set_auto_approve(core.journal, *enabled),
        Action::RevokeGrant { grant } => core.state.revoke_grant(grant),
        Action::IssueCapability {
            task,
            agent,
            tools,
            expires_at,
            secret,
        } => core.state.issue_capability(
            core.journal,
            task,
            agent,
            tools,
            *expires_at,
            secret.as_deref(),
        ),
        Action::CapabilityCall {
            secret,
            task,
            agent,
            tool,
            arguments,
            call_id,
        } => {
            let live = live_tools(core, effects).await?;
            let (plan, key) = core.state.plan_capability_call(
                secret,
                task,
                agent,
                tool,
                arguments,
                call_id.as_deref(),
                &live,
            );
            let mut r = run_plan(effects, tool, plan).await?;
            if let (Some(key), Some(report)) = (key, &r.tool_call)
                && report.outcome == ToolCallOutcome::Executed
            {
                let outcome = report.result.clone().unwrap_or_default();
                // The outcome is kept before the event goes out, so a failed delivery loses nothing (TC5).
                if let Err(d) = core.state.capability_finished(core.journal, &key, &outcome) {
                    r.detail = Some(format!("outcome not recorded: {}", d.detail));
                } else if core.state.take_fault(FaultPoint::EventDeliver) {
                    r.detail = Some("event delivery failed; the outcome is kept".into());
                }
            }
            r
        }
        Action::RevokeCapability { capability } => {
            core.state.revoke_capability(core.journal, capability)
        }
        Action::SetClock { now } => core.state.set_clock(core.journal, *now),
        Action::ArmFault { point, times } => core.state.arm_fault(*point, *times),
        Action::ClearFault { point } => core.state.clear_fault(*point),
        Action::ScoreRisk { instance, risk } => core.state.score_risk(core.journal, instance, risk),
        Action::Observe => ActionResult::ok(),
    })
}

/// The live tool list, a `list_changed` received meanwhile taken in first (SD3).
async fn live_tools(
    core: &mut Core<'_>,
    effects: &mut dyn Effects,
) -> Result<Arc<LiveTools>, Stop> {
    effects
        .take_list_changed(core)
        .map_err(|d| Stop::Failed(d.detail))?;
    effects.live_tools().await.map_err(Stop::Failed)
}

/// Runs a decided plan: the handler is called only for `Execute`.
async fn run_plan(
    effects: &mut dyn Effects,
    tool: &str,
    plan: ToolPlan,
) -> Result<ActionResult, Stop> {
    let end = match plan {
        ToolPlan::Execute {
            tool: t,
            arguments,
            approval,
        } => PlanEnd::Ran {
            approval,
            result: effects.call_handler(&t, &arguments).await,
        },
        ToolPlan::Pending { approval } => PlanEnd::Pending(approval),
        ToolPlan::Denied(d) => PlanEnd::Denied(d),
        ToolPlan::Crash => return Err(Stop::Crashed),
    };
    Ok(end.reply(tool))
}

/// Admission, authorizer, commit, then the child's first turn: in that order, so
/// that nothing is created and no model request is made for a refused child (ZC).
pub fn delegate<'a, 'c>(
    core: &'a mut Core<'c>,
    effects: &'a mut dyn Effects,
    parent: &'a str,
    request: &'a SpawnRequest,
    receipt: Option<&'a Value>,
) -> Effect<'a, Result<ActionResult, Stop>> {
    Box::pin(async move {
        let transition = if receipt.is_some() {
            "consume"
        } else {
            "delegate"
        };
        let live = live_tools(core, effects).await?;
        let admitted = match receipt {
            Some(r) => core
                .state
                .admit_receipt(core.journal, r, parent, request, &live),
            None => core.state.admit_delegation(parent, request, &live),
        };
        let authorized = match admitted {
            Ok(admission) => authorize(core, effects, admission).await,
            Err(d) => Err(d),
        };
        let (admission, authorization) = match authorized {
            Ok(a) => a,
            Err(d) => {
                let denied =
                    core.state
                        .deny_delegation(core.journal, transition, parent, request, d);
                effects.delegation_refused(core, parent, request).await?;
                return Ok(denied);
            }
        };
        let (child, effective) =
            match core
                .state
                .commit_child(core.journal, admission, authorization)
            {
                Ok(c) => c,
                Err(d) => {
                    return Ok(core.state.deny_delegation(
                        core.journal,
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
        let first = turn(core, effects, &child, &request.task).await?;
        result.turn = first.turn;
        Ok(result)
    })
}

/// The external authorizer's word on an admitted child, when one is required (EA).
async fn authorize(
    core: &mut Core<'_>,
    effects: &mut dyn Effects,
    admission: crate::state::Admission,
) -> Result<(crate::state::Admission, Option<String>), Denial> {
    let state = &mut *core.state;
    if !state.config.authorizer_required
        || (admission.receipt.is_some() && !state.decisions.asks_authorizer_on_receipt())
    {
        return Ok((admission, None));
    }
    let answer = if state.take_fault(FaultPoint::AuthorizerCall) {
        AuthorizerAnswer::Unavailable("authorizer call failed (fault armed)".into())
    } else {
        let request = state.authorizer_request(&admission);
        effects
            .authorize(AuthorizerCall {
                request: &request,
                commitment: &admission.commitment,
                spawn: &admission.request,
                now: state.now,
            })
            .await
    };
    let (admission, rid) = core.state.apply_authorizer(admission, &answer)?;
    Ok((admission, Some(rid)))
}

/// One turn of an instance: the model request, then what its reply asks for.
pub fn turn<'a, 'c>(
    core: &'a mut Core<'c>,
    effects: &'a mut dyn Effects,
    instance: &'a str,
    input: &'a str,
) -> Effect<'a, Result<ActionResult, Stop>> {
    Box::pin(async move {
        let live = live_tools(core, effects).await?;
        if let Err(d) = core.state.begin_turn(core.journal, instance) {
            effects.turn_refused(instance, input, &d);
            return Ok(d.into());
        }
        let role = core.state.instances[instance].role.clone();
        let reply = effects
            .model_turn(ModelTurn {
                instance,
                role: &role,
                input,
                tools: core.state.model_visible_definitions(instance, &live),
            })
            .await;
        let report = |turn| {
            let mut r = ActionResult::ok();
            r.turn = Some(turn);
            r
        };
        let mut result = match reply {
            ModelReply::Message(text) => report(TurnReport::Message { text }),
            ModelReply::Failed(detail) => {
                return Ok(core.state.model_failed(core.journal, instance, detail));
            }
            ModelReply::Unusable(detail) => report(TurnReport::ModelFailed { detail }),
            ModelReply::ToolCall { tool, arguments } => {
                let plan =
                    core.state
                        .plan_tool_call(core.journal, instance, &tool, &arguments, &live);
                let mut r = run_plan(effects, &tool, plan).await?;
                r.outcome = Outcome::Ok;
                r.reason = None;
                r.turn = Some(TurnReport::ToolCall { tool });
                r
            }
            ModelReply::Spawn(request) => {
                let spawned = delegate(core, effects, instance, &request, None).await?;
                report(TurnReport::Spawn {
                    spawn: Box::new(spawned),
                })
            }
            ModelReply::Lifecycle(call) => {
                let outcome = match core.state.plan_lifecycle(core.journal, &call) {
                    LifecyclePlan::Done(outcome) => outcome,
                    LifecyclePlan::Turn { input } => {
                        turn(core, effects, &call.target, &input).await?
                    }
                };
                report(LifecyclePlan::report(&call, outcome))
            }
        };
        if let Err(d) = core.state.finish_turn(core.journal, instance) {
            result.detail = Some(d.detail);
        }
        result.instance = Some(instance.into());
        Ok(result)
    })
}

/// Runs a sequence whose effects are always ready (the simulated world's) to its end, without an executor.
///
/// # Panics
/// If the sequence waits: an effect that is not ready has no place in a synchronous interpreter.
pub fn run_ready<T>(future: impl Future<Output = T>) -> T {
    let mut future = std::pin::pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(value) => value,
        Poll::Pending => panic!("a synchronous interpreter's effect was not ready"),
    }
}
