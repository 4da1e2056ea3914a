//! Turns an operation sequence into a scenario file whose expectations are the model's predictions.
//!
//! The model's [`Driver`] resolves each [`Op`] against its own world and
//! applies it; this module reads what the world did (the resolved action,
//! its result, the evidence its simulated observers saw, the state after)
//! and writes the same action as a scenario step, with model ids replaced
//! by aliases in creation order. The host under test never influences the
//! translation: the reference generates and predicts, the runner applies
//! the scenario to the host and checks it (proptest-state-machine's split).
//!
//! An operation the scenario format cannot express faithfully, or that a
//! known checker bug would misjudge, ends the translation there (each such
//! place says which and why): the prefix before it is still a complete,
//! correct test, so the case is shortened rather than thrown away.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::scenario::{
    AnswerQuestionStep, AnswerStep, ApprovalsExpect, AskStep, AuthorizerStep, AutoStep,
    CapabilityCallStep, CapabilityRef, ClockStep, ConcurrentSteps, ConsumeReceiptStep,
    DefinitionText, DelegateStep, DeliverEventStep, DeltaExpect, Empty, Expect, FaultStep,
    ForkStep, InstanceRef, IssueCapabilityStep, PrepareReceiptStep, ReceiptRef, RequestCount,
    RevokeGrantStep, Scenario, ScenarioKind, ScoreRiskStep, Setup, SpawnExpect, StartStep, Step,
    StepAction, Tamper, TamperOp, ToolCallExpect, ToolCallStep, ToolServerStep, ToolSpec, TurnStep,
    UNKNOWN_ALIAS, WaitStep,
};
use delegation_model::fuzzing::{
    Driver, NEVER_ISSUED_RECEIPT, Op, WRONG_SECRET, authorizer_behaviour, configuration_for,
};
use delegation_model::world::{SimChange, SimReply};
use delegation_model::{
    Action, ActionResult, ApprovalState, AuthorizerBehaviour, Configuration, Decision,
    HistoryEntry, InvariantId, Observed, StepKind, Tier, TurnReport, WorldChange,
};
use delegation_observers::ModelRule;
use serde_json::json;

use super::reach::{Decided, wire_name};

mod race;

/// The id the driver addresses when nothing of the kind was issued yet:
/// the scenario's `@unknown`, a fresh id the host never issued.
const DRIVER_MISSING_INSTANCE: &str = "inst-missing";
const DRIVER_MISSING_APPROVAL: &str = "appr-missing";

/// A sequence as a scenario, and where each step came from.
#[derive(Clone, Debug)]
pub struct Translation {
    pub scenario: Scenario,
    /// For each scenario step, the index of the operation that produced it.
    pub origin: Vec<usize>,
    /// Operations translated: all of them, unless one could not be expressed.
    pub translated_ops: usize,
    /// Why translation stopped early, if it did.
    pub stopped: Option<String>,
    /// The decisions the model predicted for the translated steps, for reach figures.
    pub decisions: Vec<Decided>,
}

/// The model's setup for a sequence: its simulated observers as real ones.
fn setup(driver: &Driver, configuration: Configuration, authorizer: bool, canaries: bool) -> Setup {
    let mut tools: Vec<ToolSpec> = driver
        .world
        .tools
        .values()
        .map(|d| ToolSpec {
            definition: d.raw.clone().into(),
            result: String::new(),
        })
        .collect();
    tools.sort_by(|a, b| {
        a.definition["name"]
            .as_str()
            .cmp(&b.definition["name"].as_str())
    });
    let model = driver
        .world
        .replies
        .iter()
        .filter_map(|(marker, reply)| {
            let reply = match reply {
                SimReply::Message(text) => json!({"message": {"text": text}}),
                SimReply::ToolCall { tool, arguments } => {
                    json!({"tool_call": {"tool": tool, "arguments": arguments}})
                }
                SimReply::Spawn(request) => json!({ "spawn": request }),
                // Scripted by `ModelLifecycle` operations as they are
                // applied, naming a target by model id: added as rules with
                // the target's alias when their turns are translated.
                SimReply::Lifecycle(_) => return None,
                // The world fails the instance on any endpoint failure; 500 is one.
                SimReply::Fail => json!({"fail": {"status": 500}}),
            };
            Some(
                serde_json::from_value(json!({"when": {"input_contains": marker}, "reply": reply}))
                    .expect("a simulated reply is a model rule"),
            )
        })
        .collect();
    Setup {
        configuration,
        tools,
        model,
        // The world's authorizer answers "unavailable" until a script says otherwise.
        authorizer: authorizer.then_some(AuthorizerBehaviour::Unavailable),
        clock: None,
        // Capabilities are issued with the harness's canary secrets, which
        // the runner then looks for in every output (TC4).
        canaries,
    }
}

/// What the translation has bound so far, and the runner's view of the clock.
struct Translator {
    driver: Driver,
    /// Model id to alias: instances `i0..`, receipts `r0..`, approvals `a0..`.
    aliases: HashMap<String, String>,
    instances: Vec<String>,
    receipts: usize,
    approvals: usize,
    capabilities: usize,
    unused: usize,
    /// The clock the runner believes in (`clock` steps), which it re-sends after a restart.
    runner_clock: Option<u64>,
    /// The model's host crashed: host actions answer nothing until a restart.
    crashed: bool,
    /// Tools the harness's server serves now: a change to a removed tool is an add there.
    served: BTreeSet<String>,
    authorizer: bool,
    /// The setup's configuration, which the runner re-sends after every restart.
    configuration: Configuration,
    steps: Vec<Step>,
    origin: Vec<usize>,
    decisions: Vec<Decided>,
    /// Model rules for the lifecycle replies of translated turns, added to the setup's.
    lifecycle_rules: Vec<ModelRule>,
}

/// Translates `ops` into the scenario `id` (`area/NNN-name`).
pub fn translate(ops: &[Op], id: &str, title: &str) -> Translation {
    let canaries = ops
        .iter()
        .any(|o| matches!(o, Op::Issue { .. } | Op::CapabilityUse { .. }));
    let configuration = configuration_for(ops);
    let authorizer = configuration.authorizer_required;
    // The real authorizer's allow is bound to the request; so is the
    // driver's (`bound_allows`, on by default).
    let driver = Driver::with_configuration(configuration.clone());
    let mut setup = setup(&driver, configuration.clone(), authorizer, canaries);
    let served = driver.world.tools.keys().cloned().collect();
    let mut t = Translator {
        driver,
        aliases: HashMap::new(),
        instances: Vec::new(),
        receipts: 0,
        approvals: 0,
        capabilities: 0,
        unused: 0,
        runner_clock: None,
        crashed: false,
        served,
        authorizer,
        configuration,
        steps: Vec::new(),
        origin: Vec::new(),
        decisions: Vec::new(),
        lifecycle_rules: Vec::new(),
    };
    let mut stopped = None;
    let mut translated_ops = ops.len();
    for (k, op) in ops.iter().enumerate() {
        if let Err(why) = t.op(k, op) {
            stopped = Some(format!("operation {k} ({op:?}): {why}"));
            translated_ops = k;
            break;
        }
    }
    if t.steps.is_empty() {
        // A scenario has at least one step; an observation checks the empty start.
        t.steps.push(Step {
            action: StepAction::Observe(Empty {}),
            expect: Some(Expect {
                instances: Some(crate::scenario::CountExpect { count: 0 }),
                ..Expect::default()
            }),
            note: None,
        });
        t.origin.push(0);
    }
    let mut needs = needs(&t.steps);
    for rule in &t.lifecycle_rules {
        needs.insert(lifecycle_need(rule).to_string());
    }
    setup.model.extend(t.lifecycle_rules);
    Translation {
        scenario: Scenario {
            id: id.to_string(),
            title: title.to_string(),
            checks: InvariantId::ALL.to_vec(),
            tier: Tier::Must,
            needs: needs.into_iter().collect(),
            unless: Vec::new(),
            kind: ScenarioKind::Plain,
            control: None,
            twin_of: None,
            setup,
            steps: t.steps,
        },
        origin: t.origin,
        translated_ops,
        stopped,
        decisions: t.decisions,
    }
}

/// The capability a scripted lifecycle reply needs, by the scenario
/// validation's rule: the lifecycle tools when it gives the target input,
/// the close tools otherwise.
fn lifecycle_need(rule: &ModelRule) -> &'static str {
    use delegation_protocol::capability as c;
    match &rule.reply {
        delegation_observers::ModelReply::Lifecycle(call)
            if call.message.is_some()
                && matches!(
                    call.op,
                    delegation_model::LifecycleOp::SendInput
                        | delegation_model::LifecycleOp::Resume
                ) =>
        {
            c::MODEL_LIFECYCLE_TOOLS
        }
        _ => c::MODEL_CLOSE_TOOLS,
    }
}

/// The capabilities the steps use, so a host without one reports `unsupported`.
fn needs(steps: &[Step]) -> BTreeSet<String> {
    use delegation_protocol::capability as c;
    let mut needs = BTreeSet::new();
    for s in steps {
        let need: &[&str] = match &s.action {
            StepAction::Concurrently(ConcurrentSteps(inner)) => {
                needs.extend(self::needs(inner));
                &[c::CONCURRENT_REQUESTS]
            }
            StepAction::PrepareReceipt(_) | StepAction::ConsumeReceipt(_) => &[c::RECEIPTS],
            StepAction::ToolCall(_) => &[c::DIRECT_TOOL_CALLS, c::MCP],
            StepAction::Fork(_) => &[c::FORK],
            StepAction::Wait(_) => &[c::WAIT],
            StepAction::DeliverEvent(_) => &[c::EVENTS],
            StepAction::Auto(_) => &[c::AUTO_APPROVAL],
            StepAction::Fault(_) => &[c::FAULT_INJECTION],
            StepAction::Clock(_) => &[c::CLOCK],
            StepAction::Restart(_) => &[c::RESTART],
            StepAction::ToolServer(_) => &[c::MCP],
            StepAction::Authorizer(_) => &[c::EXTERNAL_AUTHORIZER],
            StepAction::Answer(a) if a.decision == Decision::AllowExact => &[c::EXACT_CALL_GRANTS],
            StepAction::RevokeGrant(_) => &[c::EXACT_CALL_GRANTS],
            StepAction::RevokeReceipt(_) => &[c::RECEIPTS],
            StepAction::IssueCapability(_)
            | StepAction::CapabilityCall(_)
            | StepAction::RevokeCapability(_) => &[c::TASK_CAPABILITIES, c::MCP],
            StepAction::ScoreRisk(_) => &[c::REVIEWER],
            StepAction::Ask(_) | StepAction::AnswerQuestion(_) => &[c::CLARIFICATION_QUESTIONS],
            StepAction::Start(start) if !start.request.tools.is_empty() => &[c::MCP],
            // The same rule as the scenario validation's.
            StepAction::Turn(_) if s.spawn_refused_for_its_request() => &[c::SPAWN_AUTHORITY],
            _ => &[],
        };
        needs.extend(need.iter().map(|n| n.to_string()));
    }
    needs
}

type Untranslatable = String;

impl Translator {
    fn push(&mut self, k: usize, action: StepAction, expect: Option<Expect>) {
        self.steps.push(Step {
            action,
            expect,
            note: None,
        });
        self.origin.push(k);
        if !self.crashed {
            // The runner observes the host after every step, and an
            // observation takes in a `list_changed` the host received (or
            // retries one whose write failed): the model observes at the
            // same points so both commit it, or use up a store fault, alike.
            self.driver.world.apply(&Action::Observe);
        }
    }

    fn op(&mut self, k: usize, op: &Op) -> Result<(), Untranslatable> {
        let world_op = matches!(
            op,
            Op::ChangeTool { .. } | Op::RemoveTool { .. } | Op::Authorizer { .. }
        );
        if world_op && self.crashed {
            // A gap of the scenario format, not a disagreement: the runner
            // observes the host after every step, world steps included, and a
            // dead host cannot be observed until a `restart` step.
            return Err("an observer change while the host is down".into());
        }
        // An announced change is the change, observed after each of its
        // steps, and then the announcement: applied in that order to the
        // model too, so no observation takes the announcement in early.
        let (op, announce) = match op {
            Op::ChangeTool { tool, announce } => (
                Op::ChangeTool {
                    tool: *tool,
                    announce: false,
                },
                *announce,
            ),
            Op::RemoveTool { tool, announce } => (
                Op::RemoveTool {
                    tool: *tool,
                    announce: false,
                },
                *announce,
            ),
            other => (other.clone(), false),
        };
        // A composite operation part by part, each part's steps observed
        // (by `push`) before the next part is applied, as the runner does.
        let mut stage = 0;
        loop {
            let before = self.driver.world.state.observe();
            let from = self.driver.world.history.len();
            let more = self.driver.apply_stage(&op, stage);
            let entries: Vec<HistoryEntry> = self.driver.world.history[from..].to_vec();
            if self.driver.take_raced() {
                self.race(k, &entries, &before)?;
            } else {
                self.translate_entries(k, &op, entries, before)?;
            }
            if let Some(mode) = self.driver.take_deferred_replay() {
                self.push(k, StepAction::Authorizer(AuthorizerStep { mode }), None);
            }
            if !more {
                break;
            }
            stage += 1;
        }
        if announce {
            self.driver.world.change(SimChange::AnnounceListChanged);
            self.push(
                k,
                StepAction::ToolServer(ToolServerStep::NotifyListChanged(Empty {})),
                None,
            );
        }
        Ok(())
    }

    fn translate_entries(
        &mut self,
        k: usize,
        op: &Op,
        entries: Vec<HistoryEntry>,
        before: Observed,
    ) -> Result<(), Untranslatable> {
        match op {
            // The driver leaves out a restart that would drop an uncommitted
            // tool-list change (`Driver::apply`): no history entry, no step.
            Op::Restart if entries.is_empty() => Ok(()),
            Op::Restart => self.restart(k),
            Op::ChangeTool { .. } | Op::RemoveTool { .. } => {
                for e in &entries {
                    if let StepKind::World {
                        change: Some(change),
                        ..
                    } = &e.kind
                    {
                        self.tool_change(k, change)?;
                    }
                }
                Ok(())
            }
            Op::Authorizer { mode } => {
                // The model's authorizer answers as the harness's does in
                // this mode, bound to the request it answers.
                let mode = self
                    .driver
                    .authorizer_behaviour()
                    .cloned()
                    .unwrap_or_else(|| authorizer_behaviour(*mode));
                self.push(k, StepAction::Authorizer(AuthorizerStep { mode }), None);
                Ok(())
            }
            // Carried by the setup's configuration, not a step.
            Op::Strict => Ok(()),
            _ => {
                let mut before = before;
                for e in &entries {
                    match &e.kind {
                        StepKind::Action { action, result } => {
                            self.action(k, op, action, result, e, &before)?;
                            before = e.observed.as_deref().cloned().unwrap_or_default();
                        }
                        // A composite operation's silent tool change.
                        StepKind::World {
                            change: Some(change),
                            ..
                        } => {
                            if self.crashed {
                                return Err("an observer change while the host is down".into());
                            }
                            self.tool_change(k, change)?;
                            before = e.observed.as_deref().cloned().unwrap_or_default();
                        }
                        _ => {}
                    }
                }
                Ok(())
            }
        }
    }

    fn tool_change(&mut self, k: usize, change: &WorldChange) -> Result<(), Untranslatable> {
        match change {
            WorldChange::ToolRedefined { tool, .. } => {
                let Some(def) = self.driver.world.tools.get(tool) else {
                    return Ok(());
                };
                // As the server serves it: the bytes a `RewriteTool` chose,
                // or the value as serde_json writes it.
                let definition: DefinitionText = match self.driver.written_definition(tool) {
                    Some(text) => DefinitionText::parse(text)
                        .map_err(|e| format!("the written form of `{tool}` does not parse: {e}"))?,
                    None => def.raw.clone().into(),
                };
                if self.served.insert(tool.clone()) {
                    // Served again: added, then redefined in place, because the
                    // runner records only a redefinition as a change of the
                    // tool (an addition is invisible to the SD checkers, which
                    // would still see the removal as the tool's latest change).
                    self.push(
                        k,
                        StepAction::ToolServer(ToolServerStep::Add(ToolSpec {
                            definition: definition.clone(),
                            result: String::new(),
                        })),
                        None,
                    );
                }
                self.push(
                    k,
                    StepAction::ToolServer(ToolServerStep::Change {
                        name: tool.clone(),
                        definition,
                    }),
                    None,
                );
            }
            // Removing what the server no longer serves changes nothing there.
            WorldChange::ToolRemoved { tool } if self.served.remove(tool) => {
                self.push(
                    k,
                    StepAction::ToolServer(ToolServerStep::Remove(tool.clone())),
                    None,
                );
            }
            _ => {}
        }
        Ok(())
    }

    /// The restart, with what the runner does after every restart mirrored
    /// in the model: it re-sends the setup's configuration (automatic
    /// approval off again) and its own clock, each a write with effects of
    /// its own (a clock set expires receipts).
    fn restart(&mut self, k: usize) -> Result<(), Untranslatable> {
        self.crashed = false;
        self.driver
            .world
            .apply(&Action::Configure(self.configuration.clone()));
        if let Some(now) = self.runner_clock {
            self.driver.world.apply(&Action::SetClock { now });
        }
        let after = self.driver.world.state.observe();
        let expect = self.state_expect(&after, self.all_instances(), true);
        self.push(k, StepAction::Restart(Empty {}), Some(expect));
        Ok(())
    }

    fn all_instances(&self) -> Vec<String> {
        self.instances.clone()
    }

    fn fresh(&mut self, prefix: &str) -> String {
        let n = match prefix {
            "i" => self.instances.len(),
            "r" => self.receipts,
            "a" => self.approvals,
            "c" => self.capabilities,
            _ => {
                self.unused += 1;
                self.unused - 1
            }
        };
        format!("{prefix}{n}")
    }

    fn bind_instance(&mut self, id: &str) -> String {
        let alias = self.fresh("i");
        self.aliases.insert(id.to_string(), alias.clone());
        self.instances.push(id.to_string());
        alias
    }

    fn instance(&self, id: &str) -> Result<String, Untranslatable> {
        if id == DRIVER_MISSING_INSTANCE {
            return Ok(UNKNOWN_ALIAS.to_string());
        }
        self.aliases
            .get(id)
            .cloned()
            .ok_or_else(|| format!("instance `{id}` has no alias (it was never reported created)"))
    }

    /// The alias of the capability the driver knows by `id`.
    fn capability(&self, id: &str) -> Result<String, Untranslatable> {
        self.aliases
            .get(id)
            .cloned()
            .ok_or_else(|| format!("capability `{id}` has no alias"))
    }

    /// A capability call, `call`, through the capability aliased
    /// `capability` (a wrong secret in its place when `wrong_secret`); its
    /// agent is touched by it.
    fn capability_call_step(
        &self,
        capability: String,
        wrong_secret: bool,
        call: &Action,
        touched: &mut Vec<String>,
    ) -> Result<StepAction, Untranslatable> {
        let Action::CapabilityCall {
            task,
            agent,
            tool,
            arguments,
            call_id,
            ..
        } = call
        else {
            return Err(format!("`{}` is not a capability call", call.method()));
        };
        let agent = self.instance(agent)?;
        touched.push(agent.clone());
        Ok(StepAction::CapabilityCall(CapabilityCallStep {
            capability,
            wrong_secret,
            task: task.clone(),
            agent,
            tool: tool.clone(),
            arguments: arguments.clone(),
            call_id: call_id.clone(),
        }))
    }

    fn action(
        &mut self,
        k: usize,
        op: &Op,
        action: &Action,
        result: &Result<ActionResult, String>,
        entry: &HistoryEntry,
        before: &Observed,
    ) -> Result<(), Untranslatable> {
        if self.crashed {
            // The model answered nothing; neither will the host, and the runner forbids asking.
            return Ok(());
        }
        let after = entry.observed.as_deref().cloned().unwrap_or_default();
        let ok = result.as_ref().ok();
        let created =
            |r: Option<&ActionResult>| r.filter(|r| r.is_ok()).and_then(|r| r.instance.clone());
        let mut touched: Vec<String> = Vec::new();
        let step = match action {
            Action::Start(request) => {
                let alias = match created(ok) {
                    Some(id) => self.bind_instance(&id),
                    None => self.fresh("unused-start-"),
                };
                touched.push(alias.clone());
                StepAction::Start(StartStep {
                    alias,
                    request: request.clone(),
                })
            }
            Action::Delegate { parent, request } => {
                let parent = self.instance(parent)?;
                let alias = created(ok).map(|id| self.bind_instance(&id));
                touched.extend(alias.clone());
                StepAction::Delegate(DelegateStep {
                    parent,
                    alias,
                    request: request.clone(),
                })
            }
            Action::PrepareReceipt {
                parent,
                call_id,
                request,
                ttl_ms,
            } => {
                let parent = self.instance(parent)?;
                let alias = match ok.filter(|r| r.is_ok()).and_then(|r| r.receipt.as_ref()) {
                    Some(receipt) => {
                        let alias = self.fresh("r");
                        self.receipts += 1;
                        self.aliases.insert(receipt.id.clone(), alias.clone());
                        alias
                    }
                    None => self.fresh("unused-receipt-"),
                };
                StepAction::PrepareReceipt(PrepareReceiptStep {
                    parent,
                    call_id: call_id.clone(),
                    alias,
                    request: request.clone(),
                    ttl_ms: *ttl_ms,
                })
            }
            Action::ConsumeReceipt {
                receipt,
                parent,
                request,
            } => {
                // Only `Consume` tampers; `ReceiptUse` consumes as prepared.
                let tamper = matches!(op, Op::Consume { tamper: true, .. });
                let rid = receipt["id"].as_str().unwrap_or_default();
                let receipt_alias = if rid == NEVER_ISSUED_RECEIPT {
                    UNKNOWN_ALIAS.to_string()
                } else {
                    self.aliases
                        .get(rid)
                        .cloned()
                        .ok_or_else(|| format!("receipt `{rid}` has no alias"))?
                };
                let parent = self.instance(parent)?;
                let alias = created(ok).map(|id| self.bind_instance(&id));
                touched.extend(alias.clone());
                StepAction::ConsumeReceipt(ConsumeReceiptStep {
                    receipt: receipt_alias,
                    parent,
                    request: request.clone(),
                    // The driver's tampering: a far expiry on an otherwise valid receipt.
                    tamper: tamper.then(|| Tamper {
                        op: TamperOp::Replace,
                        pointer: "/expires_at".into(),
                        value: Some(receipt["expires_at"].clone()),
                    }),
                    alias,
                })
            }
            Action::Turn { instance, input } => {
                let instance = self.instance(instance)?;
                touched.push(instance.clone());
                if let Some(target) = self.lifecycle_rule(input)? {
                    touched.push(target);
                }
                let child = match ok.and_then(|r| r.turn.as_ref()) {
                    Some(TurnReport::Spawn { spawn }) => created(Some(spawn)),
                    _ => None,
                };
                let alias = child.map(|id| self.bind_instance(&id));
                touched.extend(alias.clone());
                StepAction::Turn(TurnStep {
                    instance,
                    input: input.clone(),
                    alias,
                    approval_as: self.bind_approval(ok),
                })
            }
            Action::ToolCall {
                instance,
                tool,
                arguments,
            } => {
                let instance = self.instance(instance)?;
                touched.push(instance.clone());
                StepAction::ToolCall(ToolCallStep {
                    instance,
                    tool: tool.clone(),
                    arguments: arguments.clone(),
                    approval_as: self.bind_approval(ok),
                })
            }
            Action::Close { instance }
            | Action::Cancel { instance }
            | Action::Fail { instance }
            | Action::Resume { instance } => {
                let r = InstanceRef {
                    instance: self.instance(instance)?,
                };
                touched.push(r.instance.clone());
                match action {
                    Action::Close { .. } => StepAction::Close(r),
                    Action::Cancel { .. } => StepAction::Cancel(r),
                    Action::Fail { .. } => StepAction::Fail(r),
                    _ => StepAction::Resume(r),
                }
            }
            Action::Fork { instance } => {
                let instance = self.instance(instance)?;
                touched.push(instance.clone());
                let alias = match created(ok) {
                    Some(id) => self.bind_instance(&id),
                    None => self.fresh("unused-fork-"),
                };
                touched.push(alias.clone());
                StepAction::Fork(ForkStep { instance, alias })
            }
            Action::Answer { request, decision } => {
                let request = if request == DRIVER_MISSING_APPROVAL {
                    UNKNOWN_ALIAS.to_string()
                } else {
                    self.aliases
                        .get(request)
                        .cloned()
                        .ok_or_else(|| format!("approval `{request}` has no alias"))?
                };
                StepAction::Answer(AnswerStep {
                    request,
                    decision: *decision,
                })
            }
            Action::SetAutoApprove { enabled } => StepAction::Auto(AutoStep { enabled: *enabled }),
            Action::SetClock { now } => {
                self.runner_clock = Some(*now);
                StepAction::Clock(ClockStep::Set(*now))
            }
            Action::ArmFault { point, times } => StepAction::Fault(FaultStep {
                point: *point,
                times: *times,
            }),
            Action::DeliverEvent {
                event,
                instance,
                kind,
            } => {
                let instance = self.instance(instance)?;
                touched.push(instance.clone());
                StepAction::DeliverEvent(DeliverEventStep {
                    event: event.clone(),
                    instance,
                    kind: kind.clone(),
                })
            }
            Action::Wait { instance, deadline } => {
                let instance = self.instance(instance)?;
                touched.push(instance.clone());
                // The runner adds `within_ms` to its own clock: the same absolute deadline.
                let within_ms = deadline
                    .checked_sub(self.runner_clock.unwrap_or(0))
                    .ok_or("a wait deadline before the runner's clock")?;
                StepAction::Wait(WaitStep {
                    instance,
                    within_ms,
                })
            }
            Action::ScoreRisk { instance, risk } => {
                let instance = self.instance(instance)?;
                touched.push(instance.clone());
                StepAction::ScoreRisk(ScoreRiskStep {
                    instance,
                    risk: risk.clone(),
                })
            }
            Action::IssueCapability {
                task,
                agent,
                tools,
                expires_at,
                ..
            } => {
                let agent = self.instance(agent)?;
                let alias = match ok.filter(|r| r.is_ok()).and_then(|r| r.capability.as_ref()) {
                    Some(token) => {
                        let alias = self.fresh("c");
                        self.capabilities += 1;
                        self.aliases.insert(token.id.clone(), alias.clone());
                        alias
                    }
                    None => self.fresh("unused-capability-"),
                };
                StepAction::IssueCapability(IssueCapabilityStep {
                    alias,
                    task: task.clone(),
                    agent,
                    tools: tools.clone(),
                    expires_at: *expires_at,
                })
            }
            Action::CapabilityCall { secret, .. } => {
                // The driver presents the capability it picked (or a wrong
                // secret in its place): the same pick, as an alias.
                let id = self
                    .driver
                    .presented_capability()
                    .ok_or("a capability call with no capability issued")?;
                let capability = self.capability(&id)?;
                self.capability_call_step(capability, secret == WRONG_SECRET, action, &mut touched)?
            }
            Action::RevokeCapability { capability } => {
                StepAction::RevokeCapability(CapabilityRef {
                    capability: self.capability(capability)?,
                })
            }
            // The driver revokes a grant only when it is the only one: the
            // host's latest.
            Action::RevokeGrant { .. } => StepAction::RevokeGrant(RevokeGrantStep {
                grant: "latest".into(),
            }),
            Action::Ask { instance, question } => {
                let instance = self.instance(instance)?;
                touched.push(instance.clone());
                let asked = ok.filter(|r| r.is_ok()).and_then(|r| r.question.clone());
                let alias = asked.map(|id| {
                    let alias = self.fresh("q");
                    self.aliases.insert(id, alias.clone());
                    alias
                });
                StepAction::Ask(AskStep {
                    instance,
                    question: question.clone(),
                    alias,
                })
            }
            Action::AnswerQuestion { question, answer } => {
                StepAction::AnswerQuestion(AnswerQuestionStep {
                    question: self
                        .aliases
                        .get(question)
                        .cloned()
                        .ok_or_else(|| format!("question `{question}` has no alias"))?,
                    answer: answer.clone(),
                })
            }
            Action::RevokeReceipt { receipt } => StepAction::RevokeReceipt(ReceiptRef {
                receipt: self
                    .aliases
                    .get(receipt)
                    .cloned()
                    .ok_or_else(|| format!("receipt `{receipt}` has no alias"))?,
            }),
            other => {
                return Err(format!(
                    "`{}` is not produced by the driver",
                    other.method()
                ));
            }
        };
        touched.retain(|a| !a.starts_with("unused"));
        if let Ok(r) = result {
            self.decided(action.method(), r);
        }
        let expect = match result {
            Ok(r) => self.expect(r, entry, before, &after, touched),
            Err(_) => {
                // The crash fault: the host dies during this action. Only what
                // the observers saw can be expected here; the state it left
                // is checked by the `restart` that must follow.
                self.crashed = true;
                let mut expect = self.expect(&ActionResult::ok(), entry, before, &after, vec![]);
                let delta = expect.delta.take().map(|d| DeltaExpect {
                    instances: None,
                    approvals_dispatched: None,
                    approvals_pending: None,
                    ..d
                });
                Expect {
                    host_exits: true,
                    delta,
                    ..Expect::default()
                }
            }
        };
        self.push(k, step, Some(expect));
        Ok(())
    }

    fn decided(&mut self, method: &str, r: &ActionResult) {
        self.decisions.push(Decided {
            what: method.to_string(),
            outcome: wire_name(r.outcome),
            reason: r.reason,
        });
        if let Some(TurnReport::Spawn { spawn }) = &r.turn {
            self.decisions.push(Decided {
                what: format!("{method} spawn"),
                outcome: wire_name(spawn.outcome),
                reason: spawn.reason,
            });
        }
        if let Some(TurnReport::Lifecycle { op, lifecycle, .. }) = &r.turn {
            self.decisions.push(Decided {
                what: format!(
                    "{method} {}",
                    serde_json::to_value(op)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default()
                ),
                outcome: wire_name(lifecycle.outcome),
                reason: lifecycle.reason,
            });
        }
        if let Some(call) = &r.tool_call {
            self.decisions.push(Decided {
                what: format!("{method} tool call"),
                outcome: wire_name(call.outcome),
                reason: call.reason,
            });
        }
    }

    /// The model's lifecycle reply to a turn on `input`, if the driver
    /// scripted one (`ModelLifecycle`): kept as a setup rule naming its
    /// target by alias, and the target's alias returned (`None` for an id
    /// nobody issued). A rule is kept only once its turn is translated, so
    /// every alias it names is bound.
    fn lifecycle_rule(&mut self, input: &str) -> Result<Option<String>, Untranslatable> {
        let Some((marker, SimReply::Lifecycle(call))) = self
            .driver
            .world
            .replies
            .iter()
            .find(|(marker, _)| input.contains(marker.as_str()))
            .cloned()
        else {
            return Ok(None);
        };
        let target = self.instance(&call.target)?;
        let mut call = call.clone();
        call.target = target.clone();
        self.lifecycle_rules.push(
            serde_json::from_value(
                json!({"when": {"input_contains": marker}, "reply": {"lifecycle": call}}),
            )
            .map_err(|e| format!("a lifecycle reply is not a model rule: {e}"))?,
        );
        Ok((target != UNKNOWN_ALIAS).then_some(target))
    }

    /// Binds the approval request a call raised, the way the runner binds `approval_as`.
    fn bind_approval(&mut self, result: Option<&ActionResult>) -> Option<String> {
        let id = result?.tool_call.as_ref()?.approval.clone()?;
        if self.aliases.contains_key(&id) {
            // Bound already: an answer reports the request it answered.
            return None;
        }
        let alias = self.fresh("a");
        self.approvals += 1;
        self.aliases.insert(id, alias.clone());
        Some(alias)
    }

    /// The model's predictions for one answered action.
    fn expect(
        &self,
        r: &ActionResult,
        entry: &HistoryEntry,
        before: &Observed,
        after: &Observed,
        touched: Vec<String>,
    ) -> Expect {
        let evidence = &entry.evidence;
        let mut model_requests_for = BTreeMap::new();
        for (id, n) in &evidence.model_requests {
            if let Some(alias) = self.aliases.get(id) {
                model_requests_for.insert(alias.clone(), RequestCount::Exactly(*n));
            }
        }
        let with_approvals = !before.approvals.is_empty() || !after.approvals.is_empty();
        let count = |o: &Observed, s: ApprovalState| {
            o.approvals.iter().filter(|a| a.state == s).count() as i64
        };
        let delta = DeltaExpect {
            instances: Some(after.instances.len() as i64 - before.instances.len() as i64),
            model_requests: Some(RequestCount::Exactly(evidence.total_model_requests())),
            model_requests_new_instances: None,
            model_requests_for,
            handler_calls: Some(evidence.handler_calls.len() as u64),
            authorizer_calls: self.authorizer.then_some(evidence.authorizer_calls),
            approvals_dispatched: with_approvals.then(|| {
                count(after, ApprovalState::Dispatched) - count(before, ApprovalState::Dispatched)
            }),
            approvals_pending: with_approvals.then(|| {
                count(after, ApprovalState::Pending) - count(before, ApprovalState::Pending)
            }),
        };
        let mut expect = self.state_expect(after, touched_ids(&self.aliases, &touched), false);
        expect.outcome = Some(r.outcome);
        expect.reason = r.reason;
        expect.delta = Some(delta);
        if let Some(TurnReport::Spawn { spawn }) = &r.turn {
            expect.spawn = Some(SpawnExpect {
                outcome: spawn.outcome,
                reason: spawn.reason,
            });
        }
        expect.tool_call = r.tool_call.as_ref().map(|t| ToolCallExpect {
            outcome: t.outcome,
            reason: t.reason,
        });
        expect.woke = r.woke;
        expect.effective = r
            .effective
            .as_ref()
            .map(|e| serde_json::to_value(e).expect("an authority serialises"));
        expect
    }

    /// Lifecycle states of `ids` after the step, and on request the approval
    /// and receipt counts: what a restart must have kept.
    fn state_expect(&self, after: &Observed, ids: Vec<String>, everything: bool) -> Expect {
        let mut expect = Expect::default();
        for id in ids {
            if let (Some(alias), Some(inst)) = (self.aliases.get(&id), after.instance(&id)) {
                expect.state.insert(alias.clone(), inst.state);
            }
        }
        if everything {
            expect.instances = Some(crate::scenario::CountExpect {
                count: after.instances.len() as u64,
            });
            for r in &after.receipts {
                if let Some(alias) = self.aliases.get(&r.id) {
                    expect.receipts.insert(alias.clone(), r.state);
                }
            }
        }
        if everything || !after.approvals.is_empty() {
            let count = |f: &dyn Fn(&delegation_model::ObservedApproval) -> bool| {
                Some(after.approvals.iter().filter(|a| f(a)).count() as u64)
            };
            expect.approvals = Some(ApprovalsExpect {
                pending: count(&|a| a.state == ApprovalState::Pending),
                allowed: count(&|a| {
                    matches!(a.decision, Some(Decision::Allow | Decision::AllowExact))
                }),
                denied: count(&|a| a.decision == Some(Decision::Deny)),
                ..ApprovalsExpect::default()
            });
        }
        expect
    }
}

/// Model ids of the aliases a step touched.
fn touched_ids(aliases: &HashMap<String, String>, touched: &[String]) -> Vec<String> {
    aliases
        .iter()
        .filter(|(_, a)| touched.contains(a))
        .map(|(id, _)| id.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_served_again_after_its_removal_is_added_back_then_redefined() {
        let ops = [
            Op::Start {
                sandbox: 0,
                policy: 1,
                tools: 4,
            },
            Op::RemoveTool {
                tool: 2,
                announce: false,
            },
            Op::ChangeTool {
                tool: 2,
                announce: false,
            },
            Op::ToolCall {
                instance: 0,
                tool: 2,
                arguments: 0,
            },
        ];
        let t = translate(&ops, "fuzz/001-x", "x");
        let keys: Vec<&str> = t.scenario.steps.iter().map(|s| s.action.key()).collect();
        assert_eq!(
            keys,
            [
                "start",
                "tool_server",
                "tool_server",
                "tool_server",
                "tool_call"
            ]
        );
        assert!(matches!(
            t.scenario.steps[2].action,
            StepAction::ToolServer(ToolServerStep::Add(_))
        ));
        assert_eq!(t.origin, [0, 1, 2, 2, 3]);
        assert_eq!(t.translated_ops, 4);
        assert_eq!(t.stopped, None);
    }

    #[test]
    fn expectations_are_the_models_predictions() {
        let ops = [
            Op::Start {
                sandbox: 1,
                policy: 2,
                tools: 1,
            },
            Op::Delegate {
                parent: 0,
                sandbox: Some(3),
                tools: None,
                role: 0,
            },
            Op::End {
                instance: 0,
                how: 0,
            },
            Op::Turn {
                instance: 0,
                marker: 0,
            },
        ];
        let t = translate(&ops, "fuzz/001-x", "x");
        let steps = &t.scenario.steps;
        assert_eq!(steps.len(), 4);
        let delegate = steps[1].expect.as_ref().unwrap();
        assert_eq!(
            delegate.reason,
            Some(delegation_model::DenyReason::CeilingExceeded)
        );
        assert_eq!(delegate.delta.as_ref().unwrap().instances, Some(0));
        let turn = steps[3].expect.as_ref().unwrap();
        assert_eq!(turn.outcome, Some(delegation_model::Outcome::Denied));
        assert_eq!(
            turn.delta.as_ref().unwrap().model_requests,
            Some(RequestCount::Exactly(0))
        );
        assert_eq!(t.scenario.checks, InvariantId::ALL.to_vec());
        // It loads back as the runner loads a catalogue file.
        let text = serde_json::to_string(&t.scenario).unwrap();
        let back = Scenario::parse(&text, std::path::Path::new("x.json")).unwrap();
        back.validate(std::path::Path::new("x.json")).unwrap();
        assert_eq!(back, t.scenario);
    }
}
