//! The invariant checkers: the only place each invariant of MODEL.md section 3 is defined as a check.
//!
//! Every checker reads only what a harness can observe: the history of
//! actions and answers, the evidence of the harness's own observers (model
//! endpoint, tool server, authorizer) and the host's observed state. A
//! checker never trusts the host's word where an observer counted: "zero
//! model requests" is read from [`Evidence`], not from a record.
//!
//! Each checker's doc comment says exactly which observable part of its
//! invariant it checks; [`InvariantId::meaning`] states the invariant itself.
//! Conventions shared by the checkers:
//! - "succeeded" means the host answered with `outcome: ok`; a protocol error
//!   is not a success (the runner fails that step on its own).
//! - The arguments digest of a call is [`digest_value`] of its arguments.
//! - The sealed ceiling of an instance is the first authority seen for it: the
//!   `effective` of the result that created it, or its first observed ceiling.

use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::authority::{ActionClass, Authority, AuthorityRequest, Axis, Sandbox};
use crate::digest::digest_value;
use crate::eligibility::{Eligibility, eligibility};
use crate::path::NormalPath;
use crate::state::STRICT_REVIEW_REQUIRED;
use crate::vocabulary::{DenyReason, InvariantId};
use crate::wire::*;

/// One broken invariant: which, at which step, what was wrong, and what showed it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Violation {
    pub id: InvariantId,
    /// The `step` of the history entry where the violation became visible.
    pub step: usize,
    pub message: String,
    /// The observed facts the verdict rests on, for the report.
    pub evidence: Value,
}

/// Checks one invariant over a whole history.
pub fn check(id: InvariantId, history: &[HistoryEntry]) -> Vec<Violation> {
    checker(id)(&Run::new(history))
}

/// Checks every invariant of the catalogue.
pub fn check_all(history: &[HistoryEntry]) -> Vec<Violation> {
    check_ids(InvariantId::ALL, history)
}

/// Checks the named invariants, in the order given.
///
/// The checkers share one [`Run`]: what they need to know about earlier
/// entries is learnt from the history once, not once per checker.
pub fn check_ids(ids: &[InvariantId], history: &[HistoryEntry]) -> Vec<Violation> {
    let run = Run::new(history);
    ids.iter().flat_map(|id| checker(*id)(&run)).collect()
}

type Checker = fn(&Run) -> Vec<Violation>;

/// The table from id to checker; exhaustive, so a new id cannot go unchecked.
fn checker(id: InvariantId) -> Checker {
    use InvariantId::*;
    match id {
        ZC1 => zc1,
        ZC2 => zc2,
        ZC3 => zc3,
        TR1 => tr1,
        TR2 => tr2,
        TR3 => tr3,
        TR4 => tr4,
        SD1 => sd1,
        SD2 => sd2,
        SD3 => sd3,
        SD4 => sd4,
        SD5 => sd5,
        PG1 => pg1,
        PG2 => pg2,
        PG3 => pg3,
        PG4 => pg4,
        PG5 => pg5,
        PG6 => pg6,
        CE1 => ce1,
        CE2 => ce2,
        CE3 => ce3,
        CE4 => ce4,
        CE5 => ce5,
        CE6 => ce6,
        RC1 => rc1,
        RC2 => rc2,
        RC3 => rc3,
        RC4 => rc4,
        EA1 => ea1,
        EA2 => |run| ea_forbidden_child(InvariantId::EA2, run),
        EA3 => ea3,
        EA4 => |run| ea_forbidden_child(InvariantId::EA4, run),
        EA5 => ea5,
        LW1 => lw1,
        LW2 => lw2,
        TC1 => tc1,
        TC2 => tc2,
        TC3 => tc3,
        TC4 => tc4,
        TC5 => tc5,
        RS1 => rs1,
        RS2 => rs2,
        RS3 => rs3,
        AR1 => ar1,
        AR2 => ar2,
    }
}

/// What a checker's verdict rests on: the values it reads from the host's
/// answers and observations, and whether the harness's own observers (model
/// endpoint, tool server, authorizer, the restart itself) take part. Every
/// checker also reads the `outcome` of actions, so it is not listed.
///
/// The runner's provenance rule reads this: a check whose verdict could rest
/// on nothing but values an adapter declared inferred decides nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValuesRead {
    pub host: &'static [ReportedValue],
    pub observers: bool,
}

/// The table from id to what its checker reads; exhaustive like [`checker`],
/// and kept beside it so the two change together.
pub fn values_read(id: InvariantId) -> ValuesRead {
    use InvariantId::*;
    use ReportedValue::*;
    let (host, observers): (&'static [ReportedValue], bool) = match id {
        ZC1 => (&[Instances, Parent, Spawn], false),
        ZC2 => (&[Spawn], true),
        ZC3 => (&[Reason, Spawn, ToolCall], false),
        TR1 => (&[State, Turn], true),
        TR2 => (&[Effective, Ceiling], false),
        TR3 => (&[State, Instances], false),
        TR4 => (&[State], true),
        SD1 => (&[Ceiling, Effective, Receipts, Records], false),
        SD2 | SD3 | SD4 => (&[ToolCall, Ceiling], true),
        SD5 => (&[Ceiling, Instances], false),
        PG1 => (&[Approvals], true),
        PG2 => (&[Approvals, ToolCall], false),
        PG3 => (&[Approvals, Ceiling], false),
        PG4 => (&[Approvals, ToolCall, Ceiling], false),
        PG5 => (&[Approvals], false),
        PG6 => (&[Grants, State, Ceiling, ToolCall], false),
        CE1 | CE2 => (&[Ceiling, Parent, Effective], false),
        CE3 => (&[Ceiling, Requested, Records, Effective], false),
        CE4 => (&[Ceiling, Instances], false),
        CE5 => (&[ToolCall, Reason], true),
        CE6 => (&[Records], false),
        RC1 | RC4 => (&[Receipts], false),
        RC2 | RC3 => (&[], false),
        EA1 | EA2 | EA4 => (&[], true),
        EA3 => (&[Ceiling], true),
        EA5 => (&[Approvals, Records], false),
        LW1 => (&[State, Woke], true),
        LW2 => (&[State, Reason], false),
        TC1 | TC2 | TC4 | TC5 => (&[], true),
        TC3 => (&[Capabilities], true),
        RS1 => (
            &[Instances, Ceiling, State, Receipts, Approvals, Grants],
            true,
        ),
        RS2 => (&[Approvals, State, Effective, Ceiling], false),
        RS3 => (&[Approvals], false),
        AR1 => (&[Approvals, Risk, Records], false),
        AR2 => (&[Risk], false),
    };
    ValuesRead { host, observers }
}

// ---------------------------------------------------------------------------
// Reading a history
// ---------------------------------------------------------------------------

fn violation(id: InvariantId, step: usize, message: String, evidence: Value) -> Violation {
    Violation {
        id,
        step,
        message,
        evidence,
    }
}

fn action_of(entry: &HistoryEntry) -> Option<(&Action, Option<&ActionResult>)> {
    match &entry.kind {
        StepKind::Action { action, result } => Some((action, result.as_ref().ok())),
        _ => None,
    }
}

fn ok_result(entry: &HistoryEntry) -> Option<(&Action, &ActionResult)> {
    match action_of(entry)? {
        (action, Some(result)) if result.is_ok() => Some((action, result)),
        _ => None,
    }
}

fn succeeded(entry: &HistoryEntry) -> bool {
    ok_result(entry).is_some()
}

/// The host's state after a step: the entry's observation, or the one an
/// `state/observe` answer carried.
fn observed_of(entry: &HistoryEntry) -> Option<&Observed> {
    entry.observed.as_deref().or_else(|| {
        action_of(entry)
            .and_then(|(_, r)| r)
            .and_then(|r| r.observed.as_ref())
    })
}

fn world_change(entry: &HistoryEntry) -> Option<&WorldChange> {
    match &entry.kind {
        StepKind::World { change, .. } => change.as_ref(),
        _ => None,
    }
}

fn handler_calls_for(evidence: &Evidence, tool: &str) -> usize {
    evidence
        .handler_calls
        .iter()
        .filter(|c| c.tool == tool)
        .count()
}

fn model_requests_for(evidence: &Evidence, instance: &str) -> u64 {
    evidence.model_requests.get(instance).copied().unwrap_or(0)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CreationKind {
    Start,
    Delegate,
    Consume,
    /// A delegation the model asked for inside a turn.
    Spawn,
    Fork,
}

/// An attempt to create an instance, and what became of it.
struct Creation<'h> {
    kind: CreationKind,
    /// The delegating parent, or the forked instance.
    from: Option<&'h str>,
    result: &'h ActionResult,
}

impl<'h> Creation<'h> {
    fn is_delegation(&self) -> bool {
        matches!(
            self.kind,
            CreationKind::Delegate | CreationKind::Consume | CreationKind::Spawn
        )
    }
    fn created(&self) -> Option<&'h str> {
        if self.result.is_ok() {
            self.result.instance.as_deref()
        } else {
            None
        }
    }
    fn denied(&self) -> bool {
        !self.result.is_ok()
    }
}

/// The creation a step attempted, if any: a step attempts at most one.
fn creation_attempt(entry: &HistoryEntry) -> Option<Creation<'_>> {
    let Some((action, Some(result))) = action_of(entry) else {
        return None;
    };
    let (kind, from, result) = match action {
        Action::Start(_) => (CreationKind::Start, None, result),
        Action::Delegate { parent, .. } => (CreationKind::Delegate, Some(parent.as_str()), result),
        Action::ConsumeReceipt { parent, .. } => {
            (CreationKind::Consume, Some(parent.as_str()), result)
        }
        Action::Fork { instance } => (CreationKind::Fork, Some(instance.as_str()), result),
        Action::Turn { instance, .. } => match &result.turn {
            Some(TurnReport::Spawn { spawn }) => {
                (CreationKind::Spawn, Some(instance.as_str()), &**spawn)
            }
            _ => return None,
        },
        _ => return None,
    };
    Some(Creation { kind, from, result })
}

/// One tool call in a step, direct or inside a turn.
struct ToolCallSeen<'h> {
    instance: &'h str,
    tool: &'h str,
    arguments: Option<&'h Value>,
    report: Option<&'h ToolCallReport>,
    /// The handler ran, by the host's account.
    executed: bool,
}

/// The tool call a step made, if any: a step makes at most one.
fn tool_call_in(entry: &HistoryEntry) -> Option<ToolCallSeen<'_>> {
    let (action, result) = action_of(entry)?;
    let report = result.and_then(|r| r.tool_call.as_ref());
    let executed = |r: Option<&ActionResult>| {
        r.is_some_and(|r| r.is_ok())
            && report.is_none_or(|t| t.outcome == ToolCallOutcome::Executed)
    };
    match action {
        Action::ToolCall {
            instance,
            tool,
            arguments,
        } => Some(ToolCallSeen {
            instance,
            tool,
            arguments: Some(arguments),
            report,
            executed: executed(result),
        }),
        Action::Turn { instance, .. } => match (result.and_then(|r| r.turn.as_ref()), report) {
            (Some(TurnReport::ToolCall { tool }), _) => Some(ToolCallSeen {
                instance,
                tool,
                arguments: None,
                report,
                executed: report.is_some_and(|t| t.outcome == ToolCallOutcome::Executed),
            }),
            _ => None,
        },
        _ => None,
    }
}

/// What the history says about one instance, each fact with the index of
/// the entry it was learnt from, so that it can be asked "as known before entry i".
#[derive(Default)]
struct InstanceFacts<'h> {
    /// Index and step of the first entry that showed the instance.
    first_seen: Option<(usize, usize)>,
    /// Every lifecycle state learnt, in order; the latest before an entry counts.
    states: Vec<(usize, LifecycleState)>,
    /// The first terminal state the instance was seen in.
    terminal: Option<(usize, LifecycleState)>,
    /// The sealed ceiling: the first authority seen for it.
    ceiling: Option<(usize, &'h Authority)>,
    parents: Vec<(usize, &'h str)>,
    risks: Vec<(usize, &'h str)>,
}

impl InstanceFacts<'_> {
    fn see(&mut self, index: usize, step: usize) {
        self.first_seen.get_or_insert((index, step));
    }

    fn set_state(&mut self, index: usize, state: LifecycleState) {
        self.states.push((index, state));
        if state.is_terminal() {
            self.terminal.get_or_insert((index, state));
        }
    }
}

/// The latest value learnt before entry `index`.
fn latest_before<T: Copy>(timeline: &[(usize, T)], index: usize) -> Option<T> {
    let known = timeline.partition_point(|(at, _)| *at < index);
    known.checked_sub(1).map(|last| timeline[last].1)
}

fn learnt_before<T: Copy>(fact: Option<(usize, T)>, index: usize) -> Option<T> {
    fact.filter(|(at, _)| *at < index).map(|(_, value)| value)
}

/// Run-wide settings as they stood before an entry.
#[derive(Clone, Copy, Default)]
struct Settings<'h> {
    now: Millis,
    config: Option<&'h Configuration>,
    auto_approve: bool,
    last_observed: Option<&'h Observed>,
}

/// Everything the checkers need to know about earlier entries, learnt in one
/// walk over the history and shared by all of them: every checker that
/// needs "what was known before this step" asks it here instead of
/// re-learning the history itself.
struct Learned<'h> {
    instances: BTreeMap<&'h str, InstanceFacts<'h>>,
    /// `settings[i]`: in force before entry `i`.
    settings: Vec<Settings<'h>>,
}

impl<'h> Learned<'h> {
    fn new(history: &'h [HistoryEntry]) -> Learned<'h> {
        let mut learned = Learned {
            instances: BTreeMap::new(),
            settings: Vec::with_capacity(history.len() + 1),
        };
        let mut settings = Settings::default();
        for (index, entry) in history.iter().enumerate() {
            learned.settings.push(settings);
            learned.learn(index, entry, &mut settings);
        }
        learned.settings.push(settings);
        learned
    }

    fn instance(&mut self, id: &'h str) -> &mut InstanceFacts<'h> {
        self.instances.entry(id).or_default()
    }

    fn set_state(&mut self, index: usize, instance: &'h str, state: LifecycleState) {
        self.instance(instance).set_state(index, state);
    }

    fn learn(&mut self, index: usize, entry: &'h HistoryEntry, settings: &mut Settings<'h>) {
        if let Some((action, Some(result))) = action_of(entry) {
            if result.is_ok() {
                match action {
                    Action::Configure(c) => {
                        settings.config = Some(c);
                        settings.auto_approve = c.auto_approve;
                    }
                    Action::SetAutoApprove { enabled } => settings.auto_approve = *enabled,
                    Action::SetClock { now } => settings.now = *now,
                    Action::Close { instance } => {
                        self.set_state(index, instance, LifecycleState::Closed)
                    }
                    Action::Cancel { instance } => {
                        self.set_state(index, instance, LifecycleState::Cancelled)
                    }
                    Action::Fail { instance } => {
                        self.set_state(index, instance, LifecycleState::Failed)
                    }
                    _ => {}
                }
            }
            if let Action::Turn { instance, .. } = action {
                match &result.turn {
                    Some(TurnReport::Message { .. }) if result.is_ok() => {
                        self.set_state(index, instance, LifecycleState::Completed)
                    }
                    Some(TurnReport::ModelFailed { .. }) => {
                        self.set_state(index, instance, LifecycleState::Failed)
                    }
                    _ => {}
                }
            }
        }
        if let Some(creation) = creation_attempt(entry) {
            if let Some(id) = creation.created() {
                let facts = self.instance(id);
                facts.see(index, entry.step);
                if let Some(effective) = &creation.result.effective {
                    facts.ceiling.get_or_insert((index, effective));
                }
                if let (Some(from), true) = (creation.from, creation.is_delegation()) {
                    facts.parents.push((index, from));
                }
            }
        }
        if let Some(observed) = observed_of(entry) {
            for instance in &observed.instances {
                let facts = self.instance(&instance.id);
                facts.see(index, entry.step);
                facts.set_state(index, instance.state);
                facts.ceiling.get_or_insert((index, &instance.ceiling));
                if let Some(parent) = &instance.parent {
                    facts.parents.push((index, parent));
                }
                if let Some(risk) = &instance.risk {
                    facts.risks.push((index, risk));
                }
            }
            settings.last_observed = Some(observed);
        }
    }
}

/// What is known before a step, from every earlier entry: a view of
/// [`Learned`] at one entry.
struct Facts<'a, 'h> {
    now: Millis,
    config: Option<&'h Configuration>,
    auto_approve: bool,
    last_observed: Option<&'h Observed>,
    learned: &'a Learned<'h>,
    /// The entry the facts are known before.
    index: usize,
}

impl<'a, 'h> Facts<'a, 'h> {
    fn of(&self, instance: &str) -> Option<&'a InstanceFacts<'h>> {
        self.learned.instances.get(instance)
    }

    /// The step at which the instance was first seen.
    fn first_seen(&self, instance: &str) -> Option<usize> {
        learnt_before(self.of(instance)?.first_seen, self.index)
    }

    fn knows(&self, instance: &str) -> bool {
        self.first_seen(instance).is_some()
    }

    /// Latest known lifecycle state.
    fn state(&self, instance: &str) -> Option<LifecycleState> {
        latest_before(&self.of(instance)?.states, self.index)
    }

    /// The first terminal state the instance was seen in.
    fn terminal(&self, instance: &str) -> Option<LifecycleState> {
        learnt_before(self.of(instance)?.terminal, self.index)
    }

    /// The sealed ceiling: the first authority seen for the instance.
    fn ceiling(&self, instance: &str) -> Option<&'h Authority> {
        learnt_before(self.of(instance)?.ceiling, self.index)
    }

    /// Every sealed ceiling known.
    fn ceilings(&self) -> impl Iterator<Item = &'h Authority> + '_ {
        self.learned
            .instances
            .values()
            .filter_map(|facts| learnt_before(facts.ceiling, self.index))
    }

    fn parent(&self, instance: &str) -> Option<&'h str> {
        latest_before(&self.of(instance)?.parents, self.index)
    }

    fn risk(&self, instance: &str) -> Option<&'h str> {
        latest_before(&self.of(instance)?.risks, self.index)
    }

    fn strict_mode(&self) -> bool {
        self.config.is_some_and(|c| c.strict_mode)
    }

    fn authorizer_required(&self) -> bool {
        self.config.is_some_and(|c| c.authorizer_required)
    }
}

/// A history with what is learnt from it, shared by every checker of one check.
struct Run<'h> {
    history: &'h [HistoryEntry],
    learned: OnceCell<Learned<'h>>,
}

impl<'h> Run<'h> {
    fn new(history: &'h [HistoryEntry]) -> Run<'h> {
        Run {
            history,
            learned: OnceCell::new(),
        }
    }

    /// The facts known before entry `index`.
    fn facts_before(&self, index: usize) -> Facts<'_, 'h> {
        let learned = self.learned.get_or_init(|| Learned::new(self.history));
        let settings = learned.settings[index];
        Facts {
            now: settings.now,
            config: settings.config,
            auto_approve: settings.auto_approve,
            last_observed: settings.last_observed,
            learned,
            index,
        }
    }

    /// Walks the history with the facts known before each entry.
    fn walk(&self, mut visit: impl FnMut(&Facts<'_, 'h>, &'h HistoryEntry)) {
        for (index, entry) in self.history.iter().enumerate() {
            visit(&self.facts_before(index), entry);
        }
    }
}

/// The class of each tool, as the host's approval requests named it anywhere in the run.
fn tool_classes(history: &[HistoryEntry]) -> BTreeMap<&str, ActionClass> {
    history
        .iter()
        .filter_map(observed_of)
        .flat_map(|o| &o.approvals)
        .map(|a| (a.tool.as_str(), a.class))
        .collect()
}

fn is_decided(approval: &ObservedApproval) -> bool {
    approval.decision.is_some()
}

fn is_allow(decision: Option<Decision>) -> bool {
    matches!(decision, Some(Decision::Allow | Decision::AllowExact))
}

/// The receipt id of a presented receipt (`id` key), whatever else was tampered with.
fn presented_receipt_id(receipt: &Value) -> Option<&str> {
    receipt.get("id").and_then(Value::as_str)
}

/// The first observation after `index`, up to and including the next restart's successor.
fn next_observation(history: &[HistoryEntry], index: usize) -> Option<(usize, &Observed)> {
    history[index + 1..]
        .iter()
        .find_map(|e| observed_of(e).map(|o| (e.step, o)))
}

/// Axes on which `authority` is above what `request` asked for (absent axes are not compared).
fn axes_above_request(authority: &Authority, request: &AuthorityRequest) -> Vec<Axis> {
    let mut axes = Vec::new();
    if let Some(sandbox) = &request.sandbox
        && !authority.sandbox.leq(sandbox)
    {
        axes.push(Axis::Sandbox);
    }
    if let Some(policy) = &request.approval_policy
        && !authority.approval_policy.leq(policy)
    {
        axes.push(Axis::ApprovalPolicy);
    }
    if let Some(tools) = &request.tools
        && !authority.tools.keys().all(|t| tools.contains(t))
    {
        axes.push(Axis::Tools);
    }
    if let Some(cwd) = request
        .cwd
        .as_deref()
        .and_then(|c| NormalPath::parse(c).ok())
        && !authority.cwd.is_within(&cwd)
    {
        axes.push(Axis::Cwd);
    }
    if let Some(provider) = &request.provider
        && authority.provider != *provider
    {
        axes.push(Axis::Provider);
    }
    if let Some(depth) = request.delegation_depth
        && authority.delegation_depth > depth
    {
        axes.push(Axis::Delegation);
    }
    axes
}

/// Checks that a call which had to be refused was: not executed, and no handler call for its tool.
fn refused_without_handler(
    id: InvariantId,
    entry: &HistoryEntry,
    call: &ToolCallSeen,
    why: &str,
    out: &mut Vec<Violation>,
) {
    let handled = handler_calls_for(&entry.evidence, call.tool);
    if call.executed || handled > 0 {
        out.push(violation(
            id,
            entry.step,
            format!(
                "tool `{}` on instance `{}` ran although {why}; expected a refusal with zero handler calls",
                call.tool, call.instance
            ),
            json!({"tool": call.tool, "instance": call.instance, "executed": call.executed,
                   "handler_calls": handled, "report": call.report}),
        ));
    }
}

// ---------------------------------------------------------------------------
// ZC: zero child on deny
// ---------------------------------------------------------------------------

/// ZC1. Once a delegation from a parent was denied (instance/delegate,
/// receipt/consume, or a spawn inside a turn), no observation (also after a
/// restart) may show an instance of that parent that no successful creation
/// ever returned.
fn zc1(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut denied_parents: BTreeMap<&str, usize> = BTreeMap::new();
    run.walk(|facts, entry| {
        let attempts = creation_attempt(entry);
        for attempt in attempts.iter().filter(|c| c.is_delegation() && c.denied()) {
            if let Some(parent) = attempt.from {
                denied_parents.entry(parent).or_insert(entry.step);
            }
        }
        let created: BTreeSet<&str> = attempts.iter().filter_map(Creation::created).collect();
        let Some(observed) = observed_of(entry) else {
            return;
        };
        for instance in &observed.instances {
            if facts.knows(&instance.id) || created.contains(instance.id.as_str()) {
                continue;
            }
            if let Some(denied_at) = instance
                .parent
                .as_deref()
                .and_then(|p| denied_parents.get(p))
            {
                out.push(violation(
                    InvariantId::ZC1,
                    entry.step,
                    format!(
                        "instance `{}` of parent `{}` appeared although its delegation was denied at step {denied_at} and no successful creation returned it",
                        instance.id,
                        instance.parent.as_deref().unwrap_or_default()
                    ),
                    json!({"instance": instance, "denied_at": denied_at}),
                ));
            }
        }
    });
    out
}

/// ZC2. In a step whose delegation was denied and that created nothing, the
/// model endpoint saw no request for any instance id unknown before the step.
fn zc2(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    run.walk(|facts, entry| {
        let attempts = creation_attempt(entry);
        let denied = attempts.iter().any(|c| c.is_delegation() && c.denied());
        if !denied || attempts.iter().any(|c| c.created().is_some()) {
            return;
        }
        for (instance, count) in &entry.evidence.model_requests {
            if *count > 0 && instance != "unattributed" && !facts.knows(instance) {
                out.push(violation(
                    InvariantId::ZC2,
                    entry.step,
                    format!(
                        "denied delegation, yet the model endpoint saw {count} request(s) for new instance `{instance}`; expected zero"
                    ),
                    json!({"model_requests": entry.evidence.model_requests}),
                ));
            }
        }
    });
    out
}

/// ZC3. Every denied answer (action, nested spawn, tool-call report) names a
/// reason, and no successful one carries a reason. The reason's membership in
/// the vocabulary is guaranteed by the type.
fn zc3(run: &Run) -> Vec<Violation> {
    let history = run.history;
    fn visit(step: usize, result: &ActionResult, path: &str, out: &mut Vec<Violation>) {
        match (result.outcome, result.reason) {
            (Outcome::Denied, None) => out.push(violation(
                InvariantId::ZC3,
                step,
                format!("{path} was denied without a reason; expected one of the deny-reason vocabulary"),
                json!({"result": result}),
            )),
            (Outcome::Ok, Some(reason)) => out.push(violation(
                InvariantId::ZC3,
                step,
                format!("{path} succeeded but carries deny reason `{reason}`; a reason belongs to denials only"),
                json!({"result": result}),
            )),
            _ => {}
        }
        if let Some(report) = &result.tool_call {
            let denied = report.outcome == ToolCallOutcome::Denied;
            if denied != report.reason.is_some() {
                out.push(violation(
                    InvariantId::ZC3,
                    step,
                    format!(
                        "{path}: tool call `{}` has outcome {:?} with reason {:?}; a denied call needs a reason and only a denied one",
                        report.tool, report.outcome, report.reason
                    ),
                    json!({"tool_call": report}),
                ));
            }
        }
        if let Some(TurnReport::Spawn { spawn }) = &result.turn {
            visit(step, spawn, &format!("{path} (spawn)"), out);
        }
    }
    let mut out = Vec::new();
    for entry in history {
        if let Some((action, Some(result))) = action_of(entry) {
            visit(entry.step, result, action.method(), &mut out);
        }
    }
    out
}

// ---------------------------------------------------------------------------
// TR: terminal reuse rejection
// ---------------------------------------------------------------------------

/// The instance a follow-up, turn, tool call, spawn, resume or fork addresses.
fn reuse_target(action: &Action) -> Option<&str> {
    match action {
        Action::Turn { instance, .. }
        | Action::ToolCall { instance, .. }
        | Action::Resume { instance }
        | Action::Fork { instance } => Some(instance),
        Action::Delegate { parent, .. }
        | Action::PrepareReceipt { parent, .. }
        | Action::ConsumeReceipt { parent, .. } => Some(parent),
        _ => None,
    }
}

/// TR1. After an instance was seen closed, cancelled or failed (observed, or
/// a successful close/cancel/fail, or a failed model call), every later
/// turn, tool call, delegation, receipt, resume or fork addressed to it is
/// not successful, and no later step shows a model request for it, whoever
/// addressed it (the harness, or another instance's model).
fn tr1(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    run.walk(|facts, entry| {
        let Some((action, _)) = action_of(entry) else {
            return;
        };
        let direct = reuse_target(action);
        // Addressed by someone else: a parent's model reaching the instance
        // through its own lifecycle tools (resume, send_input), counted at
        // the harness's endpoint whatever the host reports about it.
        for (instance, &requests) in &entry.evidence.model_requests {
            let Some(state) = facts.terminal(instance) else {
                continue;
            };
            if requests > 0 && direct != Some(instance.as_str()) {
                out.push(violation(
                    InvariantId::TR1,
                    entry.step,
                    format!(
                        "`{}` caused {requests} model request(s) for {state:?} instance `{instance}`; expected zero",
                        action.method()
                    ),
                    json!({"model_requests": entry.evidence.model_requests}),
                ));
            }
        }
        let Some(target) = direct else {
            return;
        };
        let Some(state) = facts.terminal(target) else {
            return;
        };
        if succeeded(entry) {
            out.push(violation(
                InvariantId::TR1,
                entry.step,
                format!(
                    "`{}` addressed to {state:?} instance `{target}` succeeded; expected instance_terminal",
                    action.method()
                ),
                json!({"action": action, "result": action_of(entry).and_then(|(_, r)| r)}),
            ));
        }
        let requests = model_requests_for(&entry.evidence, target);
        if requests > 0 {
            out.push(violation(
                InvariantId::TR1,
                entry.step,
                format!(
                    "`{}` addressed to {state:?} instance `{target}` caused {requests} model request(s); expected zero",
                    action.method()
                ),
                json!({"model_requests": entry.evidence.model_requests}),
            ));
        }
    });
    out
}

/// TR2. A successful resume answers with the instance's sealed ceiling, not a
/// ceiling derived anew (for example from the parent's current one).
fn tr2(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    run.walk(|facts, entry| {
        let Some((Action::Resume { instance }, result)) = ok_result(entry) else {
            return;
        };
        let (Some(effective), Some(sealed)) =
            (&result.effective, facts.ceiling(instance.as_str()))
        else {
            return;
        };
        if effective != sealed {
            out.push(violation(
                InvariantId::TR2,
                entry.step,
                format!(
                    "resume of `{instance}` answered an authority differing from its sealed ceiling on {:?}",
                    differing_axes(effective, sealed)
                ),
                json!({"sealed": sealed, "effective": effective}),
            ));
        }
    });
    out
}

fn differing_axes(a: &Authority, b: &Authority) -> Vec<Axis> {
    let mut axes = a.axes_exceeding(b);
    for axis in b.axes_exceeding(a) {
        if !axes.contains(&axis) {
            axes.push(axis);
        }
    }
    axes
}

/// TR3. An instance once seen terminal is observed in that same state ever
/// after (across restarts), and an id returned for a new instance was never
/// seen before.
fn tr3(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    run.walk(|facts, entry| {
        if let Some(creation) = creation_attempt(entry) {
            if let Some(id) = creation.created()
                && let Some(first) = facts.first_seen(id)
            {
                out.push(violation(
                    InvariantId::TR3,
                    entry.step,
                    format!("new instance id `{id}` was already used at step {first}; ids are never reused"),
                    json!({"instance": id, "first_seen": first}),
                ));
            }
        }
        if let Some(observed) = observed_of(entry) {
            for instance in &observed.instances {
                if let Some(terminal) = facts.terminal(instance.id.as_str())
                    && instance.state != terminal
                {
                    out.push(violation(
                        InvariantId::TR3,
                        entry.step,
                        format!(
                            "instance `{}` was {terminal:?} and is now observed {:?}; terminal states are final",
                            instance.id, instance.state
                        ),
                        json!({"instance": instance.id, "was": terminal, "now": instance.state}),
                    ));
                }
            }
        }
    });
    out
}

/// TR4. After the step in which a close of an instance succeeded (or it was
/// observed closed), no later step's evidence has a model request for it.
fn tr4(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let mut closed_at: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in history {
        for (instance, at) in &closed_at {
            let requests = model_requests_for(&entry.evidence, instance);
            if requests > 0 {
                out.push(violation(
                    InvariantId::TR4,
                    entry.step,
                    format!(
                        "{requests} model request(s) for `{instance}` after its close was committed at step {at}; expected none"
                    ),
                    json!({"instance": instance, "closed_at": at, "model_requests": entry.evidence.model_requests}),
                ));
            }
        }
        if let Some((Action::Close { instance }, _)) = ok_result(entry) {
            closed_at.entry(instance).or_insert(entry.step);
        }
        if let Some(observed) = observed_of(entry) {
            for instance in &observed.instances {
                if instance.state == LifecycleState::Closed {
                    closed_at.entry(&instance.id).or_insert(entry.step);
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// SD: schema drift fails closed
// ---------------------------------------------------------------------------

fn is_digest(text: &str) -> bool {
    // A fold rather than a short-circuiting `all`: it compiles to vector
    // compares, and SD1 checks every digest of every observation.
    text.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex.bytes().fold(true, |hex_so_far, b| {
                hex_so_far & matches!(b, b'0'..=b'9' | b'a'..=b'f')
            })
    })
}

/// Where an authority was seen; written out only for a violation.
enum AuthoritySource<'h> {
    Effective,
    Receipt(&'h str),
    Ceiling(&'h str),
    Record(u64),
}

impl std::fmt::Display for AuthoritySource<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthoritySource::Effective => write!(f, "effective"),
            AuthoritySource::Receipt(id) => write!(f, "receipt `{id}`"),
            AuthoritySource::Ceiling(id) => write!(f, "ceiling of `{id}`"),
            AuthoritySource::Record(seq) => write!(f, "record {seq}"),
        }
    }
}

/// Every authority a step shows, with where it was seen.
fn authorities_in(entry: &HistoryEntry) -> impl Iterator<Item = (AuthoritySource<'_>, &Authority)> {
    let result = action_of(entry).and_then(|(_, r)| r);
    let spawned = result.and_then(|r| match &r.turn {
        Some(TurnReport::Spawn { spawn }) => Some(&**spawn),
        _ => None,
    });
    let answered = result.into_iter().chain(spawned).flat_map(|r| {
        let effective = r.effective.iter().map(|a| (AuthoritySource::Effective, a));
        let receipt = r
            .receipt
            .iter()
            .map(|receipt| (AuthoritySource::Receipt(&receipt.id), &receipt.authority));
        effective.chain(receipt)
    });
    let observed = observed_of(entry).into_iter().flat_map(|observed| {
        let ceilings = observed
            .instances
            .iter()
            .map(|i| (AuthoritySource::Ceiling(&i.id), &i.ceiling));
        let records = observed.records.iter().filter_map(|r| {
            r.effective
                .as_ref()
                .map(|effective| (AuthoritySource::Record(r.seq), effective))
        });
        ceilings.chain(records)
    });
    answered.chain(observed)
}

/// SD1. Every sealed tool in a ceiling, effective authority, receipt or
/// record is bound to a SHA-256 digest (`sha256:` and 64 hex digits), and a
/// child admitted from a receipt seals exactly the digests the receipt sealed.
fn sd1(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let mut issued: BTreeMap<&str, &Receipt> = BTreeMap::new();
    for entry in history {
        for (where_, authority) in authorities_in(entry) {
            for (tool, digest) in &authority.tools {
                if !is_digest(digest) {
                    out.push(violation(
                        InvariantId::SD1,
                        entry.step,
                        format!("{where_} binds tool `{tool}` to `{digest}`, not to a `sha256:<64 hex>` digest"),
                        json!({"tool": tool, "bound_to": digest}),
                    ));
                }
            }
        }
        match ok_result(entry) {
            Some((Action::PrepareReceipt { .. }, result)) => {
                if let Some(receipt) = &result.receipt {
                    issued.insert(&receipt.id, receipt);
                }
            }
            Some((Action::ConsumeReceipt { receipt, .. }, result)) => {
                let sealed = presented_receipt_id(receipt).and_then(|id| issued.get(id));
                if let (Some(sealed), Some(effective)) = (sealed, &result.effective) {
                    for (tool, digest) in &effective.tools {
                        if sealed.authority.tools.get(tool) != Some(digest) {
                            out.push(violation(
                                InvariantId::SD1,
                                entry.step,
                                format!(
                                    "child admitted from receipt `{}` seals tool `{tool}` as `{digest}`, but the receipt sealed {:?}",
                                    sealed.id,
                                    sealed.authority.tools.get(tool)
                                ),
                                json!({"receipt_tools": sealed.authority.tools, "effective_tools": effective.tools}),
                            ));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Tool changes announced by the harness, for the drift checkers.
struct Drift<'h> {
    step: usize,
    change: &'h WorldChange,
}

fn drifts(history: &[HistoryEntry]) -> Vec<Drift<'_>> {
    history
        .iter()
        .filter_map(|e| {
            world_change(e).map(|change| Drift {
                step: e.step,
                change,
            })
        })
        .collect()
}

/// Whether `instance` sealed `tool` before a redefinition to `new_digest`:
/// by its sealed digest when known, else by having existed before the change.
fn sealed_before(
    facts: &Facts,
    instance: &str,
    tool: &str,
    drift_step: usize,
    new_digest: &str,
) -> bool {
    match facts.ceiling(instance).and_then(|c| c.tools.get(tool)) {
        Some(digest) => digest != new_digest,
        None => facts.first_seen(instance).is_some_and(|s| s < drift_step),
    }
}

/// SD2. After the tool server redefined a tool, a call of it by an instance
/// that sealed the old definition is refused with zero handler calls; and
/// the model is never shown a digest of a tool that no known ceiling seals
/// (when some ceiling seals that tool).
fn sd2(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let changes = drifts(history);
    run.walk(|facts, entry| {
        if let Some(call) = tool_call_in(entry) {
            for drift in changes.iter().filter(|d| d.step < entry.step) {
                if let WorldChange::ToolRedefined { tool, digest, .. } = drift.change
                    && tool == call.tool
                    && sealed_before(facts, call.instance, tool, drift.step, digest)
                {
                    let why = format!(
                        "its definition changed at step {} (new digest {digest})",
                        drift.step
                    );
                    refused_without_handler(InvariantId::SD2, entry, &call, &why, &mut out);
                }
            }
        }
        for (tool, shown) in &entry.evidence.model_visible_tools {
            let sealed: BTreeSet<&str> = facts
                .ceilings()
                .filter_map(|c| c.tools.get(tool).map(String::as_str))
                .collect();
            for digest in shown {
                if !sealed.is_empty() && !sealed.contains(digest.as_str()) {
                    out.push(violation(
                        InvariantId::SD2,
                        entry.step,
                        format!("the model was shown tool `{tool}` with digest `{digest}`, which no ceiling seals; expected one of {sealed:?}"),
                        json!({"tool": tool, "shown": digest, "sealed": sealed}),
                    ));
                }
            }
        }
    });
    out
}

/// SD3. After `notifications/tools/list_changed`, a tool call by an
/// instance that existed before the notification is refused with zero
/// handler calls, and that instance's sealed tools never change (no silent
/// refresh).
fn sd3(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let changed_at: Vec<usize> = drifts(history)
        .iter()
        .filter(|d| matches!(d.change, WorldChange::ToolListChanged))
        .map(|d| d.step)
        .collect();
    run.walk(|facts, entry| {
        let Some(first_change) = changed_at.iter().find(|s| **s < entry.step) else {
            return;
        };
        if let Some(call) = tool_call_in(entry) {
            if facts
                .first_seen(call.instance)
                .is_some_and(|s| s < *first_change)
            {
                let why = format!(
                    "the tool list changed at step {first_change} and no new receipt sealed it again"
                );
                refused_without_handler(InvariantId::SD3, entry, &call, &why, &mut out);
            }
        }
        if let Some(observed) = observed_of(entry) {
            for instance in &observed.instances {
                let sealed = facts
                    .ceiling(instance.id.as_str())
                    .or_else(|| {
                        creation_attempt(entry)
                            .into_iter()
                            .filter(|c| c.created() == Some(instance.id.as_str()))
                            .find_map(|c| c.result.effective.as_ref())
                    });
                if let Some(sealed) = sealed
                    && sealed.tools != instance.ceiling.tools
                {
                    out.push(violation(
                        InvariantId::SD3,
                        entry.step,
                        format!("sealed tools of `{}` changed after the tool list changed; a refresh needs a new receipt", instance.id),
                        json!({"sealed": sealed.tools, "now": instance.ceiling.tools}),
                    ));
                }
            }
        }
    });
    out
}

/// SD4. After a tool was removed, no call of it runs; after a
/// description-only redefinition, a call by an instance that sealed the old
/// definition is refused. Both with zero handler calls.
fn sd4(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let changes = drifts(history);
    run.walk(|facts, entry| {
        if let Some(call) = tool_call_in(entry) {
            // Only the tool's latest change counts: a removal followed by the
            // tool being served again is not drift for an instance sealed after it.
            let latest = changes.iter().filter(|d| d.step < entry.step).rev().find(|d| {
                matches!(d.change, WorldChange::ToolRemoved { tool } | WorldChange::ToolRedefined { tool, .. } if tool == call.tool)
            });
            if let Some(drift) = latest {
                match drift.change {
                    WorldChange::ToolRemoved { tool } if tool == call.tool => {
                        let why = format!("the tool was removed at step {}", drift.step);
                        refused_without_handler(InvariantId::SD4, entry, &call, &why, &mut out);
                    }
                    WorldChange::ToolRedefined {
                        tool,
                        digest,
                        description_only: true,
                    } if tool == call.tool
                        && sealed_before(facts, call.instance, tool, drift.step, digest) =>
                    {
                        let why = format!("its description changed at step {}", drift.step);
                        refused_without_handler(InvariantId::SD4, entry, &call, &why, &mut out);
                    }
                    _ => {}
                }
            }
        }
    });
    out
}

/// SD5. A delegate or consume naming a tool the parent's sealed ceiling does
/// not hold (or one removed or redefined since the parent sealed it) is not
/// successful; and a created child seals every tool with exactly its
/// parent's digest.
fn sd5(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let changes = drifts(history);
    run.walk(|facts, entry| {
        let Some((action, Some(result))) = action_of(entry) else {
            return;
        };
        let (parent, request) = match action {
            Action::Delegate { parent, request }
            | Action::ConsumeReceipt {
                parent, request, ..
            } => (parent.as_str(), request),
            _ => return,
        };
        let Some(parent_ceiling) = facts.ceiling(parent) else {
            return;
        };
        for tool in request.authority.tools.iter().flatten() {
            let unsealable = match parent_ceiling.tools.get(tool) {
                None => Some("the parent's ceiling does not seal it".to_string()),
                // Only the tool's latest change counts: a removal followed by a
                // redefinition the parent then sealed leaves it sealable.
                Some(digest) => changes
                    .iter()
                    .filter(|d| d.step < entry.step)
                    .rev()
                    .find_map(|d| match d.change {
                        WorldChange::ToolRemoved { tool: t } if t == tool => {
                            Some(Some(format!("it was removed at step {}", d.step)))
                        }
                        WorldChange::ToolRedefined {
                            tool: t,
                            digest: new,
                            ..
                        } if t == tool => (new != digest)
                            .then(|| format!("its definition changed at step {}", d.step))
                            .into(),
                        _ => None,
                    })
                    .flatten(),
            };
            if let (Some(why), true) = (unsealable, result.is_ok()) {
                out.push(violation(
                    InvariantId::SD5,
                    entry.step,
                    format!("delegation from `{parent}` naming tool `{tool}` succeeded although {why}; expected projection_missing or tool_drift"),
                    json!({"tool": tool, "parent_tools": parent_ceiling.tools}),
                ));
            }
        }
        if let (true, Some(effective)) = (result.is_ok(), &result.effective) {
            for (tool, digest) in &effective.tools {
                if parent_ceiling.tools.get(tool) != Some(digest) {
                    out.push(violation(
                        InvariantId::SD5,
                        entry.step,
                        format!("child of `{parent}` seals tool `{tool}` as `{digest}`, not as the parent's {:?}", parent_ceiling.tools.get(tool)),
                        json!({"tool": tool, "child": digest, "parent": parent_ceiling.tools.get(tool)}),
                    ));
                }
            }
        }
    });
    out
}

// ---------------------------------------------------------------------------
// PG: persistence-gated approval
// ---------------------------------------------------------------------------

fn is_approval_write_fault(point: FaultPoint) -> bool {
    matches!(
        point,
        FaultPoint::StoreWriteApprovalRequest | FaultPoint::StoreWriteDecision
    )
}

/// Whether a call needed an approval: it raised one, or its class (as the
/// host's approval requests named it) is approvable under the instance's ceiling.
fn needed_approval(
    facts: &Facts,
    classes: &BTreeMap<&str, ActionClass>,
    call: &ToolCallSeen,
) -> bool {
    if call.report.is_some_and(|r| r.approval.is_some()) {
        return true;
    }
    match (facts.ceiling(call.instance), classes.get(call.tool)) {
        (Some(ceiling), Some(class)) => {
            eligibility(&ceiling.approval_policy, &ceiling.sandbox, *class)
                == Eligibility::Approvable
        }
        _ => false,
    }
}

/// PG1. While automatic approval is on and a store write of an approval
/// request or decision is armed to fail, a call that needed approval does
/// not run and the tool server sees no handler call for it (each such call
/// uses up one armed failure when a count was given); and no observation
/// ever shows a dispatched approval without a committed decision.
fn pg1(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let classes = tool_classes(history);
    // None: not armed; Some(None): until cleared; Some(Some(n)): n more failures.
    let mut armed: Option<Option<u32>> = None;
    run.walk(|facts, entry| {
        if let Some(call) = tool_call_in(entry) {
            let fault_live = !matches!(armed, None | Some(Some(0)));
            if fault_live && needed_approval(facts, &classes, &call) {
                if facts.auto_approve {
                    refused_without_handler(
                        InvariantId::PG1,
                        entry,
                        &call,
                        "automatic approval could not be committed (store write armed to fail)",
                        &mut out,
                    );
                }
                // A request for a person is written too, so it uses up a firing as well.
                if let Some(Some(n)) = &mut armed {
                    *n -= 1;
                }
            }
        }
        // Armed faults are run-scoped: a restarted host starts with none.
        if matches!(entry.kind, StepKind::Restart) {
            armed = None;
        }
        match ok_result(entry) {
            Some((Action::ArmFault { point, times }, _)) if is_approval_write_fault(*point) => {
                armed = Some(*times)
            }
            Some((Action::ClearFault { point }, _)) if is_approval_write_fault(*point) => {
                armed = None
            }
            _ => {}
        }
        for approval in observed_of(entry).iter().flat_map(|o| &o.approvals) {
            if approval.state == ApprovalState::Dispatched
                && (approval.decision.is_none() || approval.decided_by.is_none())
            {
                out.push(violation(
                    InvariantId::PG1,
                    entry.step,
                    format!(
                        "approval `{}` is dispatched without a committed decision",
                        approval.id
                    ),
                    json!({"approval": approval}),
                ));
            }
        }
    });
    out
}

/// PG2. An approval is answered successfully at most once (a second answer,
/// or an answer to one already decided, is refused); its observed decision
/// never changes or vanishes; and at most one executed call cites it.
fn pg2(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let mut answered: BTreeMap<&str, usize> = BTreeMap::new();
    let mut decisions: BTreeMap<&str, (Decision, usize)> = BTreeMap::new();
    let mut executions: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in history {
        if let Some((Action::Answer { request, .. }, _)) = ok_result(entry) {
            let earlier = answered
                .get(request.as_str())
                .map(|s| format!("it was answered at step {s}"))
                .or_else(|| {
                    decisions
                        .get(request.as_str())
                        .map(|(d, s)| format!("it was decided {d:?} by step {s}"))
                });
            if let Some(earlier) = earlier {
                out.push(violation(
                    InvariantId::PG2,
                    entry.step,
                    format!("approval `{request}` was answered again although {earlier}; expected a refusal"),
                    json!({"approval": request}),
                ));
            }
            answered.entry(request).or_insert(entry.step);
        }
        if let Some(call) = tool_call_in(entry) {
            if let (true, Some(approval)) = (
                call.executed,
                call.report.and_then(|r| r.approval.as_deref()),
            ) {
                let count = executions.entry(approval).or_default();
                *count += 1;
                if *count > 1 {
                    out.push(violation(
                        InvariantId::PG2,
                        entry.step,
                        format!("approval `{approval}` let tool `{}` run {count} times; an answer dispatches once", call.tool),
                        json!({"approval": approval, "executions": count}),
                    ));
                }
            }
        }
        for approval in observed_of(entry).iter().flat_map(|o| &o.approvals) {
            match (decisions.get(approval.id.as_str()), approval.decision) {
                (Some((before, at)), now) if now != Some(*before) => out.push(violation(
                    InvariantId::PG2,
                    entry.step,
                    format!("approval `{}` was decided {before:?} at step {at} and is now {now:?}; a decision is final", approval.id),
                    json!({"approval": approval, "was": before}),
                )),
                (None, Some(decision)) => {
                    decisions.insert(&approval.id, (decision, entry.step));
                }
                _ => {}
            }
        }
    }
    out
}

/// PG3. Every allowed approval is for a call the one eligibility rule
/// ([`eligibility`] over the instance's ceiling and the approval's class)
/// says is approvable: an allow of a class it denies is a widening by
/// whoever decided, and a policy allow of a class that runs unasked shows an
/// approval path the manual one does not have.
fn pg3(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut reported = BTreeSet::new();
    run.walk(|facts, entry| {
        let Some(observed) = observed_of(entry) else {
            return;
        };
        for approval in &observed.approvals {
            if !is_allow(approval.decision) || reported.contains(approval.id.as_str()) {
                continue;
            }
            let ceiling = observed
                .instance(&approval.instance)
                .map(|i| &i.ceiling)
                .or_else(|| facts.ceiling(approval.instance.as_str()));
            let Some(ceiling) = ceiling else { continue };
            let verdict = eligibility(&ceiling.approval_policy, &ceiling.sandbox, approval.class);
            let wrong = match verdict {
                Eligibility::Denied(reason) => {
                    Some(format!("the eligibility rule denies it ({reason})"))
                }
                Eligibility::Runs if approval.decided_by == Some(DecidedBy::Policy) => Some(
                    "the eligibility rule says it runs unasked, so no approval was needed".into(),
                ),
                _ => None,
            };
            if let Some(wrong) = wrong {
                reported.insert(approval.id.as_str());
                out.push(violation(
                    InvariantId::PG3,
                    entry.step,
                    format!(
                        "approval `{}` ({:?} call of `{}` on `{}`) was allowed by {:?}, but {wrong}",
                        approval.id, approval.class, approval.tool, approval.instance, approval.decided_by
                    ),
                    json!({"approval": approval, "policy": ceiling.approval_policy, "sandbox": ceiling.sandbox, "eligibility": verdict}),
                ));
            }
        }
    });
    out
}

/// PG4. An instance whose ceiling has a bounded approval policy never has an
/// approval request in any observation, and none of its calls ends pending
/// approval. (That clarification questions still pass is not observable here.)
fn pg4(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut reported = BTreeSet::new();
    run.walk(|facts, entry| {
        let bounded = |instance: &str| {
            facts
                .ceiling(instance)
                .is_some_and(|c| c.approval_policy.is_bounded())
        };
        if let Some(call) = tool_call_in(entry) {
            if bounded(call.instance)
                && call
                    .report
                    .is_some_and(|r| r.outcome == ToolCallOutcome::PendingApproval)
            {
                out.push(violation(
                    InvariantId::PG4,
                    entry.step,
                    format!("call of `{}` on bounded instance `{}` is waiting for approval; expected an immediate refusal", call.tool, call.instance),
                    json!({"report": call.report}),
                ));
            }
        }
        let Some(observed) = observed_of(entry) else {
            return;
        };
        for approval in &observed.approvals {
            let bounded_now = observed
                .instance(&approval.instance)
                .map(|i| i.ceiling.approval_policy.is_bounded())
                .unwrap_or_else(|| bounded(&approval.instance));
            if bounded_now && reported.insert(approval.id.as_str()) {
                out.push(violation(
                    InvariantId::PG4,
                    entry.step,
                    format!("approval request `{}` exists for `{}`, whose ceiling is bounded; none may be shown", approval.id, approval.instance),
                    json!({"approval": approval}),
                ));
            }
        }
    });
    out
}

/// PG5. After automatic approval is switched off: every approval decided
/// before stays listed with its decision; an approval raised while it is off
/// (cited by a call in a step while off, or first listed after an
/// observation taken while off that lacked it) is never decided by policy.
fn pg5(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let mut decisions: BTreeMap<&str, Decision> = BTreeMap::new();
    let mut kept_from_before_off: BTreeMap<&str, Decision> = BTreeMap::new();
    let mut off_since: Option<usize> = None;
    let mut listed_while_off: Option<BTreeSet<&str>> = None;
    let mut raised_while_off: BTreeSet<&str> = BTreeSet::new();
    for entry in history {
        if off_since.is_some() {
            if let Some(call) = tool_call_in(entry) {
                if let Some(approval) = call.report.and_then(|r| r.approval.as_deref()) {
                    raised_while_off.insert(approval);
                }
            }
        }
        if let Some(observed) = observed_of(entry) {
            let listed: BTreeSet<&str> = observed.approvals.iter().map(|a| a.id.as_str()).collect();
            if let Some(off) = off_since {
                for (id, decision) in &kept_from_before_off {
                    let now = observed
                        .approvals
                        .iter()
                        .find(|a| a.id == *id)
                        .and_then(|a| a.decision);
                    if now != Some(*decision) {
                        out.push(violation(
                            InvariantId::PG5,
                            entry.step,
                            format!("approval `{id}` was decided {decision:?} before automatic approval was turned off at step {off}, and is now {now:?}; the decision must stay"),
                            json!({"approval": id, "was": decision, "now": now}),
                        ));
                    }
                }
                if let Some(before) = &listed_while_off {
                    raised_while_off.extend(listed.difference(before).copied());
                }
                for approval in &observed.approvals {
                    if raised_while_off.contains(approval.id.as_str())
                        && approval.decided_by == Some(DecidedBy::Policy)
                    {
                        out.push(violation(
                            InvariantId::PG5,
                            entry.step,
                            format!("approval `{}` was raised after automatic approval was turned off at step {off}, yet was decided by policy; it must wait for a person", approval.id),
                            json!({"approval": approval}),
                        ));
                    }
                }
                listed_while_off = Some(listed);
            }
            for approval in &observed.approvals {
                if let Some(decision) = approval.decision {
                    decisions.entry(&approval.id).or_insert(decision);
                }
            }
        }
        match ok_result(entry) {
            Some((Action::SetAutoApprove { enabled: false }, _)) if off_since.is_none() => {
                off_since = Some(entry.step);
                kept_from_before_off = decisions.clone();
                listed_while_off =
                    observed_of(entry).map(|o| o.approvals.iter().map(|a| a.id.as_str()).collect());
            }
            Some((Action::SetAutoApprove { enabled: true }, _)) => {
                off_since = None;
                listed_while_off = None;
                raised_while_off.clear();
            }
            _ => {}
        }
    }
    out
}

/// PG6. No observation lists a grant of an instance it shows completed or
/// terminal, a grant listed before a restart, or a grant after its
/// successful revoke; a grant is bound to the instance's sealed digest of
/// its tool; and a direct call that needed approval and ran without one
/// while grants existed for that tool ran on a grant with exactly its
/// arguments digest.
fn pg6(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let classes = tool_classes(history);
    let mut gone: BTreeMap<&str, String> = BTreeMap::new();
    let mut reported = BTreeSet::new();
    run.walk(|facts, entry| {
        if let Some(call) = tool_call_in(entry)
            && let (Some(arguments), true) = (call.arguments, call.executed)
            && !call.report.is_some_and(|r| r.approval.is_some())
            && needed_approval(facts, &classes, &call)
        {
            let grants: Vec<&ObservedGrant> = facts
                .last_observed
                .iter()
                .flat_map(|o| &o.grants)
                .filter(|g| g.instance == call.instance && g.tool == call.tool)
                .collect();
            if !grants.is_empty()
                && let Ok(digest) = digest_value(arguments)
                && !grants.iter().any(|g| g.arguments_digest == digest)
            {
                out.push(violation(
                    InvariantId::PG6,
                    entry.step,
                    format!("call of `{}` on `{}` ran without approval with arguments digest {digest}, which no grant matches", call.tool, call.instance),
                    json!({"arguments": arguments, "arguments_digest": digest, "grants": grants}),
                ));
            }
        }
        if let Some(observed) = observed_of(entry) {
            for grant in &observed.grants {
                let ended = observed
                    .instance(&grant.instance)
                    .map(|i| i.state)
                    .filter(|s| *s == LifecycleState::Completed || s.is_terminal())
                    .map(|s| format!("its instance is {s:?}"));
                let sealed = facts
                    .ceiling(grant.instance.as_str())
                    .and_then(|c| c.tools.get(&grant.tool));
                let wrong_digest = sealed.filter(|d| **d != grant.tool_digest).map(|d| {
                    format!(
                        "it binds tool digest `{}` but the instance sealed `{d}`",
                        grant.tool_digest
                    )
                });
                if let Some(why) = ended
                    .or_else(|| gone.get(grant.id.as_str()).cloned())
                    .or(wrong_digest)
                    && reported.insert(grant.id.as_str())
                {
                    out.push(violation(
                        InvariantId::PG6,
                        entry.step,
                        format!("grant `{}` is still listed although {why}", grant.id),
                        json!({"grant": grant}),
                    ));
                }
            }
        }
        if let StepKind::Restart = entry.kind {
            for grant in facts.last_observed.iter().flat_map(|o| &o.grants) {
                gone.insert(
                    &grant.id,
                    format!("the host restarted at step {}", entry.step),
                );
            }
        }
        if let Some((Action::RevokeGrant { grant }, _)) = ok_result(entry) {
            gone.insert(grant, format!("it was revoked at step {}", entry.step));
        }
    });
    out
}

// ---------------------------------------------------------------------------
// CE: ceilings
// ---------------------------------------------------------------------------

/// [`Authority::axes_exceeding`] for ceilings that are observed again at
/// every step, remembering per pair of instances the last pair of values
/// found within bounds: the comparison builds the approval policies' class
/// sets on every call, and re-comparing unchanged values was the largest
/// cost of CE1 and CE2. A changed value on either side is compared afresh.
#[derive(Default)]
struct WithinBounds<'h> {
    last_within: BTreeMap<(&'h str, &'h str), (&'h Authority, &'h Authority)>,
}

impl<'h> WithinBounds<'h> {
    fn axes_exceeding(
        &mut self,
        (subject, authority): (&'h str, &'h Authority),
        (bound_by, bound): (&'h str, &'h Authority),
    ) -> Vec<Axis> {
        if self
            .last_within
            .get(&(subject, bound_by))
            .is_some_and(|(a, b)| *a == authority && *b == bound)
        {
            return Vec::new();
        }
        let axes = authority.axes_exceeding(bound);
        if axes.is_empty() {
            self.last_within
                .insert((subject, bound_by), (authority, bound));
        }
        axes
    }
}

/// CE1. Every child (observed with its parent, or created by a successful
/// delegation) has a ceiling at most its parent's, on every axis.
fn ce1(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut reported = BTreeSet::new();
    let mut within = WithinBounds::default();
    run.walk(|facts, entry| {
        let mut pairs: Vec<(&str, &Authority, &str, &Authority)> = Vec::new();
        for creation in creation_attempt(entry).iter().filter(|c| c.is_delegation()) {
            if let (Some(child), Some(parent), Some(effective)) = (
                creation.created(),
                creation.from,
                &creation.result.effective,
            ) && let Some(parent_ceiling) = facts.ceiling(parent)
            {
                pairs.push((child, effective, parent, parent_ceiling));
            }
        }
        if let Some(observed) = observed_of(entry) {
            for child in &observed.instances {
                let Some(parent) = child.parent.as_deref() else {
                    continue;
                };
                let parent_ceiling = observed
                    .instance(parent)
                    .map(|p| &p.ceiling)
                    .or_else(|| facts.ceiling(parent));
                if let Some(parent_ceiling) = parent_ceiling {
                    pairs.push((&child.id, &child.ceiling, parent, parent_ceiling));
                }
            }
        }
        for (child, ceiling, parent, parent_ceiling) in pairs {
            let axes = within.axes_exceeding((child, ceiling), (parent, parent_ceiling));
            if !axes.is_empty() && reported.insert(child) {
                out.push(violation(
                    InvariantId::CE1,
                    entry.step,
                    format!("child `{child}` exceeds its parent `{parent}`'s ceiling on {axes:?}"),
                    json!({"child": ceiling, "parent": parent_ceiling, "axes": axes}),
                ));
            }
        }
    });
    out
}

/// CE2. An instance's ceiling never changes between observations (restarts
/// included); every instance is below every ancestor, not only its parent;
/// and a resumed or forked instance answers an authority at most the sealed one.
fn ce2(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut reported = BTreeSet::new();
    let mut within = WithinBounds::default();
    run.walk(|facts, entry| {
        if let Some((Action::Resume { instance } | Action::Fork { instance }, result)) =
            ok_result(entry)
            && let (Some(effective), Some(sealed)) =
                (&result.effective, facts.ceiling(instance.as_str()))
            && !effective.leq(sealed)
        {
            out.push(violation(
                InvariantId::CE2,
                entry.step,
                format!("resume or fork of `{instance}` answered an authority above its sealed ceiling on {:?}", effective.axes_exceeding(sealed)),
                json!({"sealed": sealed, "effective": effective}),
            ));
        }
        let Some(observed) = observed_of(entry) else {
            return;
        };
        for instance in &observed.instances {
            let sealed = facts
                .ceiling(instance.id.as_str())
                .or_else(|| {
                    creation_attempt(entry)
                        .into_iter()
                        .filter(|c| c.created() == Some(instance.id.as_str()))
                        .find_map(|c| c.result.effective.as_ref())
                });
            if let Some(sealed) = sealed
                && instance.ceiling != *sealed
                && reported.insert((instance.id.as_str(), "changed"))
            {
                out.push(violation(
                    InvariantId::CE2,
                    entry.step,
                    format!(
                        "ceiling of `{}` changed on {:?} since it was sealed",
                        instance.id,
                        differing_axes(&instance.ceiling, sealed)
                    ),
                    json!({"sealed": sealed, "now": instance.ceiling}),
                ));
            }
            // The direct parent is CE1's; walk from the grandparent up, guarding against cycles.
            // A list, not a set: most instances have no grandparent, and an
            // empty list costs no allocation.
            let mut seen = Vec::new();
            let parent_of = |id: &str| {
                observed
                    .instance(id)
                    .and_then(|i| i.parent.as_deref())
                    .or_else(|| facts.parent(id))
            };
            let mut ancestor = instance.parent.as_deref().and_then(parent_of);
            while let Some(id) = ancestor {
                if id == instance.id || seen.contains(&id) {
                    break;
                }
                seen.push(id);
                let ceiling = observed
                    .instance(id)
                    .map(|i| &i.ceiling)
                    .or_else(|| facts.ceiling(id));
                if let Some(ceiling) = ceiling {
                    let axes = within
                        .axes_exceeding((&instance.id, &instance.ceiling), (id, ceiling));
                    if !axes.is_empty() && reported.insert((instance.id.as_str(), "ancestor")) {
                        out.push(violation(
                            InvariantId::CE2,
                            entry.step,
                            format!("`{}` exceeds the ceiling of its ancestor `{id}` on {axes:?}", instance.id),
                            json!({"instance": instance.ceiling, "ancestor": ceiling, "axes": axes}),
                        ));
                    }
                }
                ancestor = parent_of(id);
            }
        }
    });
    out
}

/// CE3. A child's ceiling (and a record's effective authority) stays within
/// every axis its delegation requested and within its role's default from
/// the configuration: a narrower role default or request wins.
fn ce3(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut reported = BTreeSet::new();
    run.walk(|facts, entry| {
        let Some(observed) = observed_of(entry) else {
            return;
        };
        let roles = facts.config.map(|c| &c.roles);
        let mut checks: Vec<(String, &Authority, &AuthorityRequest, &str)> = Vec::new();
        for instance in observed.instances.iter().filter(|i| i.parent.is_some()) {
            if let Some(requested) = &instance.requested {
                checks.push((instance.id.clone(), &instance.ceiling, requested, "request"));
            }
            if let Some(default) = roles.and_then(|r| r.get(&instance.role)) {
                checks.push((
                    instance.id.clone(),
                    &instance.ceiling,
                    default,
                    "role default",
                ));
            }
        }
        for record in &observed.records {
            if let (Some(requested), Some(effective), true) =
                (&record.requested, &record.effective, record.allowed)
            {
                checks.push((
                    format!("record {}", record.seq),
                    effective,
                    requested,
                    "request",
                ));
            }
        }
        for (subject, authority, bound, what) in checks {
            let axes = axes_above_request(authority, bound);
            if !axes.is_empty() && reported.insert((subject.clone(), what)) {
                out.push(violation(
                    InvariantId::CE3,
                    entry.step,
                    format!("{subject} holds more than its {what} allows on {axes:?}"),
                    json!({"authority": authority, what: bound, "axes": axes}),
                ));
            }
        }
    });
    out
}

/// CE4. In strict mode no delegation creates, and no observation shows, a
/// child with a full-access sandbox.
fn ce4(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut reported = BTreeSet::new();
    run.walk(|facts, entry| {
        if !facts.strict_mode() {
            return;
        }
        let mut children: Vec<(&str, &Sandbox)> = creation_attempt(entry)
            .iter()
            .filter(|c| c.is_delegation())
            .filter_map(|c| Some((c.created()?, &c.result.effective.as_ref()?.sandbox)))
            .collect();
        if let Some(observed) = observed_of(entry) {
            children.extend(
                observed
                    .instances
                    .iter()
                    .filter(|i| i.parent.is_some())
                    .map(|i| (i.id.as_str(), &i.ceiling.sandbox)),
            );
        }
        for (child, sandbox) in children {
            if sandbox.is_full_access() && reported.insert(child) {
                out.push(violation(
                    InvariantId::CE4,
                    entry.step,
                    format!("child `{child}` runs with full access in strict mode; expected the request refused"),
                    json!({"instance": child, "sandbox": sandbox}),
                ));
            }
        }
    });
    out
}

/// An issued task capability, as the harness asked for it.
struct Capability<'h> {
    id: &'h str,
    task: &'h str,
    agent: &'h str,
    tools: &'h [String],
    expires_at: Millis,
    issued_at_step: usize,
    /// The host generated the secret and may show it once, in the issuing answer.
    host_generated: bool,
}

fn capabilities(history: &[HistoryEntry]) -> BTreeMap<&str, Capability<'_>> {
    let mut by_secret = BTreeMap::new();
    for entry in history {
        if let Some((
            Action::IssueCapability {
                task,
                agent,
                tools,
                expires_at,
                secret,
            },
            result,
        )) = ok_result(entry)
            && let Some(token) = &result.capability
            && let Some(chosen) = secret.as_deref().or(token.secret.as_deref())
        {
            by_secret.insert(
                chosen,
                Capability {
                    id: &token.id,
                    task,
                    agent,
                    tools,
                    expires_at: *expires_at,
                    issued_at_step: entry.step,
                    host_generated: secret.is_none(),
                },
            );
        }
    }
    by_secret
}

/// One capability call, with what it presented.
struct CapabilityCallSeen<'h> {
    secret: &'h str,
    task: &'h str,
    agent: &'h str,
    tool: &'h str,
    result: Option<&'h ActionResult>,
}

fn capability_call(entry: &HistoryEntry) -> Option<CapabilityCallSeen<'_>> {
    match action_of(entry)? {
        (
            Action::CapabilityCall {
                secret,
                task,
                agent,
                tool,
                ..
            },
            result,
        ) => Some(CapabilityCallSeen {
            secret,
            task,
            agent,
            tool,
            result,
        }),
        _ => None,
    }
}

fn refuse_capability_call(
    id: InvariantId,
    entry: &HistoryEntry,
    call: &CapabilityCallSeen,
    why: &str,
    out: &mut Vec<Violation>,
) {
    let handled = handler_calls_for(&entry.evidence, call.tool);
    if succeeded(entry) || handled > 0 {
        out.push(violation(
            id,
            entry.step,
            format!("capability call of `{}` went through although {why}; expected capability_denied with zero handler calls", call.tool),
            json!({"tool": call.tool, "task": call.task, "agent": call.agent, "handler_calls": handled, "result": call.result}),
        ));
    }
}

/// CE5. A capability call reaches at most the one tool it names and only if
/// that tool is on the allowlist of a capability the host issued: any other
/// handler call in its step is a violation, and a refusal of a tool outside
/// the allowlist or of an unknown credential says `capability_denied`.
fn ce5(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let issued = capabilities(history);
    for entry in history {
        let Some(call) = capability_call(entry) else {
            continue;
        };
        let allowlisted = issued
            .get(call.secret)
            .filter(|c| c.issued_at_step < entry.step)
            .is_some_and(|c| c.tools.iter().any(|t| t == call.tool));
        for handler in &entry.evidence.handler_calls {
            if handler.tool != call.tool || !allowlisted {
                out.push(violation(
                    InvariantId::CE5,
                    entry.step,
                    format!("capability call naming `{}` made the tool server run `{}`; a bounded credential reaches only its allowlisted tool", call.tool, handler.tool),
                    json!({"named": call.tool, "ran": handler, "allowlisted": allowlisted}),
                ));
            }
        }
        if let Some(result) = call.result
            && !allowlisted
            && !result.is_ok()
            && result.reason != Some(DenyReason::CapabilityDenied)
        {
            out.push(violation(
                InvariantId::CE5,
                entry.step,
                format!("capability call of `{}` outside the allowlist was refused with {:?}; expected capability_denied", call.tool, result.reason),
                json!({"result": result}),
            ));
        }
    }
    out
}

/// CE6. Every allowed delegation record (transition `delegate`, `consume` or
/// `spawn`, with a child) records both the requested and the effective authority.
fn ce6(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let mut reported = BTreeSet::new();
    for entry in history {
        for record in observed_of(entry).iter().flat_map(|o| &o.records) {
            let delegation = matches!(record.transition.as_str(), "delegate" | "consume" | "spawn");
            if delegation
                && record.allowed
                && (record.requested.is_none() || record.effective.is_none())
                && reported.insert(record.seq)
            {
                out.push(violation(
                    InvariantId::CE6,
                    entry.step,
                    format!(
                        "allowed `{}` record {} lacks its {}; both requested and effective must be recorded",
                        record.transition,
                        record.seq,
                        if record.requested.is_none() { "requested authority" } else { "effective authority" }
                    ),
                    json!({"record": record}),
                ));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// RC: receipts
// ---------------------------------------------------------------------------

/// A receipt the host issued, with what it was prepared for.
struct Issued<'h> {
    receipt: &'h Receipt,
    parent: &'h str,
    request: &'h SpawnRequest,
    step: usize,
    authorizer_calls: u64,
}

fn issued_receipts(history: &[HistoryEntry]) -> BTreeMap<&str, Issued<'_>> {
    let mut issued = BTreeMap::new();
    for entry in history {
        if let Some((
            Action::PrepareReceipt {
                parent, request, ..
            },
            result,
        )) = ok_result(entry)
            && let Some(receipt) = &result.receipt
        {
            issued.entry(receipt.id.as_str()).or_insert(Issued {
                receipt,
                parent,
                request,
                step: entry.step,
                authorizer_calls: entry.evidence.authorizer_calls,
            });
        }
    }
    issued
}

/// One consume, with what it presented.
struct Consume<'h> {
    receipt: &'h Value,
    parent: &'h str,
    request: &'h SpawnRequest,
}

fn consume(entry: &HistoryEntry) -> Option<Consume<'_>> {
    match action_of(entry)? {
        (
            Action::ConsumeReceipt {
                receipt,
                parent,
                request,
            },
            _,
        ) => Some(Consume {
            receipt,
            parent,
            request,
        }),
        _ => None,
    }
}

fn must_refuse_consume(
    id: InvariantId,
    entry: &HistoryEntry,
    receipt: Option<&str>,
    why: String,
    out: &mut Vec<Violation>,
) {
    if succeeded(entry) {
        out.push(violation(
            id,
            entry.step,
            format!("consume of receipt {receipt:?} succeeded although {why}"),
            json!({"receipt": receipt, "action": action_of(entry).map(|(a, _)| a)}),
        ));
    }
}

/// RC1. A receipt id admits at most one instance: at most one successful consume per id.
fn rc1(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let mut won: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in history {
        let Some(c) = consume(entry) else { continue };
        let Some(id) = presented_receipt_id(c.receipt) else {
            continue;
        };
        if let Some(first) = won.get(id) {
            must_refuse_consume(
                InvariantId::RC1,
                entry,
                Some(id),
                format!(
                    "it already admitted an instance at step {first}; expected receipt_consumed"
                ),
                &mut out,
            );
        } else if succeeded(entry) {
            won.insert(id, entry.step);
        }
    }
    out
}

/// RC2. A consume at a clock at or past the receipt's `expires_at` (the
/// issued one, or the presented one for a receipt the run did not issue) is
/// not successful.
fn rc2(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let issued = issued_receipts(history);
    run.walk(|facts, entry| {
        let Some(c) = consume(entry) else { return };
        let id = presented_receipt_id(c.receipt);
        let expires_at = id
            .and_then(|id| issued.get(id))
            .map(|i| i.receipt.expires_at)
            .or_else(|| c.receipt.get("expires_at").and_then(Value::as_u64));
        if let Some(expires_at) = expires_at
            && facts.now >= expires_at
        {
            must_refuse_consume(
                InvariantId::RC2,
                entry,
                id,
                format!(
                    "the clock ({}) is at or past its expiry ({expires_at}); expected receipt_expired",
                    facts.now
                ),
                &mut out,
            );
        }
    });
    out
}

/// RC3. A consume presented by another parent than the receipt was prepared
/// for, or with another spawn request, is not successful.
fn rc3(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let issued = issued_receipts(history);
    for entry in history {
        let Some(c) = consume(entry) else { continue };
        let Some(id) = presented_receipt_id(c.receipt) else {
            continue;
        };
        let Some(issue) = issued.get(id).filter(|i| i.step < entry.step) else {
            continue;
        };
        if c.parent != issue.parent {
            must_refuse_consume(
                InvariantId::RC3,
                entry,
                Some(id),
                format!(
                    "it was presented by `{}` but bound to parent `{}`; expected binding_mismatch",
                    c.parent, issue.parent
                ),
                &mut out,
            );
        } else if c.request != issue.request {
            must_refuse_consume(InvariantId::RC3, entry, Some(id), "the presented spawn request differs from the one it was prepared for; expected binding_mismatch".into(), &mut out);
        }
    }
    out
}

/// RC4. A consume presenting a receipt that differs in any field from the one
/// the host issued (or one it never issued) is not successful; and a receipt
/// once observed consumed stays listed as consumed, across restarts.
fn rc4(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let issued = issued_receipts(history);
    let mut tombstones: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in history {
        if let Some(c) = consume(entry) {
            let id = presented_receipt_id(c.receipt);
            match id
                .and_then(|id| issued.get(id))
                .filter(|i| i.step < entry.step)
            {
                None => must_refuse_consume(
                    InvariantId::RC4,
                    entry,
                    id,
                    "the host never issued a receipt with this id; expected receipt_missing".into(),
                    &mut out,
                ),
                Some(issue) => {
                    let original = serde_json::to_value(issue.receipt).unwrap_or(Value::Null);
                    if *c.receipt != original {
                        let fields: Vec<&String> = original
                            .as_object()
                            .into_iter()
                            .flatten()
                            .filter(|(k, v)| c.receipt.get(k.as_str()) != Some(v))
                            .map(|(k, _)| k)
                            .collect();
                        must_refuse_consume(
                            InvariantId::RC4,
                            entry,
                            id,
                            format!(
                                "it was tampered with (fields {fields:?} differ from the issued receipt); expected binding_mismatch"
                            ),
                            &mut out,
                        );
                    }
                }
            }
        }
        if let Some(observed) = observed_of(entry) {
            for (id, since) in &tombstones {
                let now = observed
                    .receipts
                    .iter()
                    .find(|r| r.id == *id)
                    .map(|r| r.state);
                if now != Some(ReceiptState::Consumed) {
                    out.push(violation(
                        InvariantId::RC4,
                        entry.step,
                        format!("receipt `{id}` was consumed (seen at step {since}) and is now {now:?}; tombstones are permanent"),
                        json!({"receipt": id, "now": now}),
                    ));
                }
            }
            for receipt in &observed.receipts {
                if receipt.state == ReceiptState::Consumed {
                    tombstones.entry(&receipt.id).or_insert(entry.step);
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// EA: external authorizer
// ---------------------------------------------------------------------------

/// Whether an action can lead to a child creation, and so may consult the authorizer.
fn may_consult_authorizer(entry: &HistoryEntry) -> bool {
    match action_of(entry) {
        Some((
            Action::Delegate { .. } | Action::PrepareReceipt { .. } | Action::ConsumeReceipt { .. },
            _,
        )) => true,
        Some((Action::Turn { .. }, result)) => !matches!(
            result.and_then(|r| r.turn.as_ref()),
            Some(TurnReport::Message { .. } | TurnReport::ToolCall { .. })
        ),
        _ => false,
    }
}

/// EA1. When the authorizer is required, every successful delegation had the
/// authorizer called in its own step (or, for a consume, when its receipt
/// was prepared); and the authorizer is never called in a step that cannot
/// create a child (so never after the child exists).
fn ea1(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let issued = issued_receipts(history);
    run.walk(|facts, entry| {
        let calls = entry.evidence.authorizer_calls;
        if calls > 0 && !may_consult_authorizer(entry) {
            out.push(violation(
                InvariantId::EA1,
                entry.step,
                format!("the authorizer was called {calls} time(s) in a step that creates no child; it is consulted only before a creation"),
                json!({"authorizer_calls": calls, "kind": entry.kind}),
            ));
        }
        if !facts.authorizer_required() {
            return;
        }
        for creation in creation_attempt(entry).iter().filter(|c| c.is_delegation()) {
            let Some(child) = creation.created() else {
                continue;
            };
            let at_prepare = match (creation.kind, consume(entry)) {
                (CreationKind::Consume, Some(c)) => presented_receipt_id(c.receipt)
                    .and_then(|id| issued.get(id))
                    .map_or(0, |i| i.authorizer_calls),
                _ => 0,
            };
            if calls == 0 && at_prepare == 0 {
                out.push(violation(
                    InvariantId::EA1,
                    entry.step,
                    format!(
                        "child `{child}` was created without the required authorizer being called"
                    ),
                    json!({"child": child, "authorizer_calls": calls}),
                ));
            }
        }
    });
    out
}

/// The authorizer's scripted behaviour in force at each step.
fn authorizer_scripts(history: &[HistoryEntry]) -> Vec<Option<&AuthorizerBehaviour>> {
    let mut current = None;
    history
        .iter()
        .map(|entry| {
            if let Some(WorldChange::AuthorizerScripted { behaviour }) = world_change(entry) {
                current = Some(behaviour);
            }
            current
        })
        .collect()
}

/// The behaviour that decided a creation: at its receipt's preparation when
/// the authorizer was consulted then, else at the step itself.
fn deciding_behaviour<'h>(
    history: &'h [HistoryEntry],
    scripts: &[Option<&'h AuthorizerBehaviour>],
    issued: &BTreeMap<&str, Issued<'h>>,
    index: usize,
) -> Option<&'h AuthorizerBehaviour> {
    let entry = &history[index];
    if let Some(c) = consume(entry)
        && let Some(issue) = presented_receipt_id(c.receipt).and_then(|id| issued.get(id))
        && issue.authorizer_calls > 0
        && let Some(prepared_at) = history.iter().position(|e| e.step == issue.step)
    {
        return scripts[prepared_at];
    }
    scripts[index]
}

/// EA2 and EA4. While the authorizer is required and scripted to answer in a
/// way this invariant forbids a child for (deny, timeout, unavailable,
/// malformed, unsupported version for EA2; replayed, expired or mismatched
/// authorization receipt, or a late allow for EA4), no delegation succeeds.
fn ea_forbidden_child(id: InvariantId, run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let scripts = authorizer_scripts(history);
    let issued = issued_receipts(history);
    for (index, entry) in history.iter().enumerate() {
        if run.facts_before(index).authorizer_required()
            && let Some(behaviour) = deciding_behaviour(history, &scripts, &issued, index)
            && behaviour.forbids_child() == Some(id)
        {
            for creation in creation_attempt(entry).iter().filter(|c| c.is_delegation()) {
                if let Some(child) = creation.created() {
                    out.push(violation(
                        id,
                        entry.step,
                        format!("child `{child}` was created although the authorizer answered {behaviour:?}; expected no child"),
                        json!({"child": child, "authorizer": behaviour}),
                    ));
                }
            }
        }
    }
    out
}

/// EA3. A widening or unsupported constraint from the authorizer admits no
/// child (as EA2/EA4 for `allow_widening`); a child admitted under narrowing
/// constraints stays within them on every constrained axis.
fn ea3(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = ea_forbidden_child(InvariantId::EA3, run);
    let scripts = authorizer_scripts(history);
    let issued = issued_receipts(history);
    for (index, entry) in history.iter().enumerate() {
        if run.facts_before(index).authorizer_required()
            && let Some(AuthorizerBehaviour::AllowNarrowed { constraint }) =
                deciding_behaviour(history, &scripts, &issued, index)
        {
            for creation in creation_attempt(entry).iter().filter(|c| c.is_delegation()) {
                if let (Some(child), Some(effective)) =
                    (creation.created(), &creation.result.effective)
                {
                    let axes = axes_above_request(effective, constraint);
                    if !axes.is_empty() {
                        out.push(violation(
                            InvariantId::EA3,
                            entry.step,
                            format!("child `{child}` exceeds the authorizer's narrowing constraints on {axes:?}"),
                            json!({"effective": effective, "constraint": constraint, "axes": axes}),
                        ));
                    }
                }
            }
        }
    }
    out
}

/// EA5. No approval is listed as decided by a person unless a person (the
/// harness) answered it, and no decision record of a child whose creation
/// consulted the authorizer says a person decided.
fn ea5(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let mut answered: BTreeSet<&str> = BTreeSet::new();
    let mut externally_allowed: BTreeSet<&str> = BTreeSet::new();
    let mut reported = BTreeSet::new();
    for entry in history {
        if let Some((Action::Answer { request, .. }, _)) = action_of(entry) {
            answered.insert(request);
        }
        if entry.evidence.authorizer_calls > 0 {
            externally_allowed.extend(creation_attempt(entry).iter().filter_map(Creation::created));
        }
        let Some(observed) = observed_of(entry) else {
            continue;
        };
        for approval in &observed.approvals {
            if approval.decided_by == Some(DecidedBy::Person)
                && !answered.contains(approval.id.as_str())
                && reported.insert(approval.id.clone())
            {
                out.push(violation(
                    InvariantId::EA5,
                    entry.step,
                    format!("approval `{}` is recorded as decided by a person, but no person answered it", approval.id),
                    json!({"approval": approval}),
                ));
            }
        }
        for record in &observed.records {
            // Only a creation can be credited: the child's own later
            // approvals, answered by a person, are records about it too.
            if record.decided_by == Some(DecidedBy::Person)
                && record.created_instances_delta > 0
                && let Some(child) = record
                    .child
                    .as_deref()
                    .filter(|c| externally_allowed.contains(c))
                && reported.insert(format!("record {}", record.seq))
            {
                out.push(violation(
                    InvariantId::EA5,
                    entry.step,
                    format!("record {} credits a person with the creation of `{child}`, which the external authorizer allowed", record.seq),
                    json!({"record": record}),
                ));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// LW: lifecycle and wait
// ---------------------------------------------------------------------------

fn is_settled(state: LifecycleState) -> bool {
    state == LifecycleState::Completed || state.is_terminal()
}

/// LW1. A wait step makes zero model requests (attributed or not); it wakes
/// on its deadline only when the clock has reached it and the instance was
/// not already completed or terminal; it wakes on an event only when the
/// instance is then completed or terminal.
fn lw1(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    run.walk(|facts, entry| {
        let Some((Action::Wait { instance, deadline }, result)) = action_of(entry) else {
            return;
        };
        let requests = entry.evidence.total_model_requests();
        if requests > 0 {
            out.push(violation(
                InvariantId::LW1,
                entry.step,
                format!("waiting on `{instance}` made {requests} model request(s); a wait blocks on host events only"),
                json!({"model_requests": entry.evidence.model_requests}),
            ));
        }
        let before = facts.state(instance.as_str());
        let after = observed_of(entry)
            .and_then(|o| o.instance(instance))
            .map(|i| i.state)
            .or(before);
        match result.and_then(|r| r.woke) {
            Some(WakeReason::Deadline) if facts.now < *deadline => out.push(violation(
                InvariantId::LW1,
                entry.step,
                format!("wait on `{instance}` woke on its deadline {deadline} while the clock read {}", facts.now),
                json!({"now": facts.now, "deadline": deadline}),
            )),
            Some(WakeReason::Deadline) if before.is_some_and(is_settled) => out.push(violation(
                InvariantId::LW1,
                entry.step,
                format!("wait on `{instance}` reported its deadline although the instance was already {before:?}; expected an event wake"),
                json!({"state": before}),
            )),
            Some(WakeReason::Event) if !after.is_some_and(is_settled) => out.push(violation(
                InvariantId::LW1,
                entry.step,
                format!("wait on `{instance}` woke on an event while the instance is {after:?}; expected completed or terminal"),
                json!({"state": after}),
            )),
            _ => {}
        }
    });
    out
}

/// LW2. Between consecutive observations (restarts included) every
/// instance's state change is an allowed transition; and a delivery of an
/// event id already delivered successfully is refused with `event_replayed`.
fn lw2(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let mut delivered: BTreeMap<&str, usize> = BTreeMap::new();
    let mut previous: Option<&Observed> = None;
    for entry in history {
        if let Some((Action::DeliverEvent { event, .. }, result)) = action_of(entry) {
            if let Some(first) = delivered.get(event.as_str()) {
                let answer = result.map(|r| (r.outcome, r.reason));
                if answer
                    .is_some_and(|(o, r)| o == Outcome::Ok || r != Some(DenyReason::EventReplayed))
                {
                    out.push(violation(
                        InvariantId::LW2,
                        entry.step,
                        format!("event `{event}` was delivered at step {first} and again now with answer {answer:?}; expected denied event_replayed"),
                        json!({"event": event, "result": result}),
                    ));
                }
            } else if succeeded(entry) {
                delivered.insert(event, entry.step);
            }
        }
        if let Some(observed) = observed_of(entry) {
            for instance in &observed.instances {
                if let Some(before) = previous.and_then(|p| p.instance(&instance.id))
                    && !before.state.may_become(instance.state)
                {
                    out.push(violation(
                        InvariantId::LW2,
                        entry.step,
                        format!("instance `{}` went from {:?} to {:?}, which is not an allowed transition", instance.id, before.state, instance.state),
                        json!({"instance": instance.id, "from": before.state, "to": instance.state}),
                    ));
                }
            }
            previous = Some(observed);
        }
    }
    out
}

// ---------------------------------------------------------------------------
// TC: task capabilities
// ---------------------------------------------------------------------------

/// Runs `judge` on every capability call with the capability its secret names.
fn each_capability_call<'h>(
    run: &Run<'h>,
    mut judge: impl FnMut(
        &Facts<'_, 'h>,
        &'h HistoryEntry,
        &CapabilityCallSeen<'h>,
        Option<&Capability<'h>>,
    ),
) {
    let issued = capabilities(run.history);
    run.walk(|facts, entry| {
        if let Some(call) = capability_call(entry) {
            let capability = issued
                .get(call.secret)
                .filter(|c| c.issued_at_step < entry.step);
            judge(facts, entry, &call, capability);
        }
    });
}

/// TC1. A capability call presenting a secret with another task or agent
/// than the capability was issued for is refused with zero handler calls.
fn tc1(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    each_capability_call(run, |_, entry, call, capability| {
        if let Some(c) = capability
            && (c.task != call.task || c.agent != call.agent)
        {
            let why = format!(
                "capability `{}` is bound to task `{}` and agent `{}`, not `{}`/`{}`",
                c.id, c.task, c.agent, call.task, call.agent
            );
            refuse_capability_call(InvariantId::TC1, entry, call, &why, &mut out);
        }
    });
    out
}

/// TC2. A capability call of a tool outside the allowlist, or after the
/// capability was successfully revoked, is refused with zero handler calls.
fn tc2(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let mut revoked: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in history {
        if let Some((Action::RevokeCapability { capability }, _)) = ok_result(entry) {
            revoked.entry(capability).or_insert(entry.step);
        }
    }
    each_capability_call(run, |_, entry, call, capability| {
        let Some(c) = capability else { return };
        if let Some(at) = revoked.get(c.id).filter(|at| **at < entry.step) {
            let why = format!("capability `{}` was revoked at step {at}", c.id);
            refuse_capability_call(InvariantId::TC2, entry, call, &why, &mut out);
        } else if !c.tools.iter().any(|t| t == call.tool) {
            let why = format!(
                "`{}` is not on capability `{}`'s allowlist {:?}",
                call.tool, c.id, c.tools
            );
            refuse_capability_call(InvariantId::TC2, entry, call, &why, &mut out);
        }
    });
    out
}

/// TC3. A capability call at a clock at or past the capability's expiry is
/// refused with zero handler calls, and the host never lists the capability
/// with an expiry other than the one issued.
fn tc3(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    each_capability_call(run, |facts, entry, call, capability| {
        if let Some(c) = capability
            && facts.now >= c.expires_at
        {
            let why = format!(
                "capability `{}` expired at {} and the clock reads {}",
                c.id, c.expires_at, facts.now
            );
            refuse_capability_call(InvariantId::TC3, entry, call, &why, &mut out);
        }
    });
    let issued = capabilities(history);
    let by_id: BTreeMap<&str, Millis> = issued.values().map(|c| (c.id, c.expires_at)).collect();
    for entry in history {
        for listed in observed_of(entry).iter().flat_map(|o| &o.capabilities) {
            if let Some(expires_at) = by_id.get(listed.id.as_str())
                && listed.expires_at != *expires_at
            {
                out.push(violation(
                    InvariantId::TC3,
                    entry.step,
                    format!("capability `{}` is listed expiring at {} but was issued to expire at {expires_at}", listed.id, listed.expires_at),
                    json!({"listed": listed, "issued_expires_at": expires_at}),
                ));
            }
        }
    }
    out
}

/// TC4. No capability secret appears in any answer, observation, handler
/// call's arguments or anything the host logged (stderr, `log`
/// notifications); the one exception is the token of the answer that
/// issued a host-generated secret. A harness-chosen secret (the canary) is
/// never echoed at all.
fn tc4(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let issued = capabilities(history);
    // With no secret handed out there is nothing to look for, and writing
    // out every answer and observation would cost more than every other checker.
    if issued.is_empty() {
        return out;
    }
    for entry in history {
        // Borrowed where the text is already there: a host's log can be long.
        let mut texts: Vec<(&str, std::borrow::Cow<'_, str>)> = Vec::new();
        if let Some((_, Some(result))) = action_of(entry) {
            let mut shown = result.clone();
            // A host-generated secret is handed over once, in its issuing answer's token.
            let issues_host_secret = issued
                .values()
                .any(|c| c.issued_at_step == entry.step && c.host_generated);
            if let (true, Some(token)) = (issues_host_secret, shown.capability.as_mut()) {
                token.secret = None;
            }
            texts.push((
                "answer",
                serde_json::to_string(&shown).unwrap_or_default().into(),
            ));
        }
        if let Some(observed) = &entry.observed {
            texts.push((
                "observation",
                serde_json::to_string(observed).unwrap_or_default().into(),
            ));
        }
        texts.push((
            "handler call arguments",
            serde_json::to_string(&entry.evidence.handler_calls)
                .unwrap_or_default()
                .into(),
        ));
        // PROTOCOL.md: the secret never appears in logs, and the harness searches.
        texts.push((
            "host's log (stderr or a `log` notification)",
            entry.evidence.host_log.as_str().into(),
        ));
        for (where_, text) in texts {
            for (secret, capability) in issued
                .iter()
                .filter(|(s, _)| !s.is_empty() && text.contains(**s))
            {
                out.push(violation(
                    InvariantId::TC4,
                    entry.step,
                    format!(
                        "the secret of capability `{}` (length {}) appears in the {where_}; it must never be echoed",
                        capability.id,
                        secret.len()
                    ),
                    json!({"where": where_, "capability": capability.id}),
                ));
            }
        }
    }
    out
}

/// Actions that may legitimately run a tool handler.
fn dispatches_tools(entry: &HistoryEntry) -> bool {
    matches!(
        action_of(entry),
        Some((
            Action::ToolCall { .. }
                | Action::Turn { .. }
                | Action::CapabilityCall { .. }
                | Action::Answer { .. },
            _
        ))
    )
}

/// TC5. Once a handler ran while event delivery was armed to fail, no later
/// step that dispatches no tool (a redelivery, a wait, a restart, an
/// observation) runs that tool's handler again; and a capability call
/// retried with the `call_id` of one whose handler already ran runs no
/// handler.
fn tc5(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let mut delivery_failing = false;
    let mut completed: BTreeMap<&str, usize> = BTreeMap::new();
    let mut ran_call_ids: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in history {
        if let Some((
            Action::CapabilityCall {
                call_id: Some(call_id),
                tool,
                ..
            },
            _,
        )) = action_of(entry)
        {
            let handled = handler_calls_for(&entry.evidence, tool);
            match ran_call_ids.get(call_id.as_str()) {
                Some(at) if handled > 0 => out.push(violation(
                    InvariantId::TC5,
                    entry.step,
                    format!("retry of capability call `{call_id}` ran the `{tool}` handler again although it completed at step {at}; expected the recorded outcome"),
                    json!({"call_id": call_id, "handler_calls": handled, "completed_at": at}),
                )),
                None if handled > 0 => {
                    ran_call_ids.insert(call_id, entry.step);
                }
                _ => {}
            }
        }
        if !dispatches_tools(entry) {
            for call in &entry.evidence.handler_calls {
                if let Some(at) = completed.get(call.tool.as_str()) {
                    out.push(violation(
                        InvariantId::TC5,
                        entry.step,
                        format!("handler of `{}` ran again although it completed at step {at} and only the event delivery failed", call.tool),
                        json!({"handler_call": call, "completed_at": at}),
                    ));
                }
            }
        } else if delivery_failing {
            for call in &entry.evidence.handler_calls {
                completed.entry(&call.tool).or_insert(entry.step);
            }
        }
        if matches!(entry.kind, StepKind::Restart) {
            delivery_failing = false;
        }
        match ok_result(entry) {
            Some((
                Action::ArmFault {
                    point: FaultPoint::EventDeliver,
                    ..
                },
                _,
            )) => delivery_failing = true,
            Some((
                Action::ClearFault {
                    point: FaultPoint::EventDeliver,
                },
                _,
            )) => delivery_failing = false,
            _ => {}
        }
    }
    out
}

// ---------------------------------------------------------------------------
// RS: restart
// ---------------------------------------------------------------------------

/// A restart, the last observation before it, and the first after it with its step.
type RestartView<'h> = (
    &'h HistoryEntry,
    Option<&'h Observed>,
    Option<(usize, &'h Observed)>,
);

/// Each restart with the last observation before it and the first after it.
fn restarts(history: &[HistoryEntry]) -> Vec<RestartView<'_>> {
    let mut found = Vec::new();
    let mut last: Option<&Observed> = None;
    for (index, entry) in history.iter().enumerate() {
        if let StepKind::Restart = entry.kind {
            // The restart step's own observation (when the runner made one) is the first after it.
            let after = observed_of(entry)
                .map(|o| (entry.step, o))
                .or_else(|| next_observation(history, index));
            found.push((entry, last, after));
        }
        if let Some(observed) = observed_of(entry) {
            last = Some(observed);
        }
    }
    found
}

/// RS1. Across a restart (last observation before, first after): every
/// instance is still listed with the same ceiling and, if terminal, the same
/// state; consumed receipts stay consumed; decided approvals keep their
/// decision; no grant survives; and the restart itself runs no handler.
fn rs1(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    for (restart, before, after) in restarts(history) {
        if !restart.evidence.handler_calls.is_empty() {
            out.push(violation(
                InvariantId::RS1,
                restart.step,
                format!(
                    "the restart ran {} handler call(s); nothing is re-dispatched on restart",
                    restart.evidence.handler_calls.len()
                ),
                json!({"handler_calls": restart.evidence.handler_calls}),
            ));
        }
        let (Some(before), Some((step, after))) = (before, after) else {
            continue;
        };
        let mut lost = |what: String, evidence: Value| {
            out.push(violation(
                InvariantId::RS1,
                step,
                format!("after the restart at step {}: {what}", restart.step),
                evidence,
            ));
        };
        for instance in &before.instances {
            match after.instance(&instance.id) {
                None => lost(
                    format!("instance `{}` is gone", instance.id),
                    json!({"before": instance}),
                ),
                Some(now) if now.ceiling != instance.ceiling => lost(
                    format!(
                        "ceiling of `{}` changed on {:?}",
                        instance.id,
                        differing_axes(&now.ceiling, &instance.ceiling)
                    ),
                    json!({"before": instance.ceiling, "after": now.ceiling}),
                ),
                Some(now) if instance.state.is_terminal() && now.state != instance.state => lost(
                    format!(
                        "`{}` was {:?} and is now {:?}",
                        instance.id, instance.state, now.state
                    ),
                    json!({"before": instance.state, "after": now.state}),
                ),
                _ => {}
            }
        }
        for receipt in before
            .receipts
            .iter()
            .filter(|r| r.state == ReceiptState::Consumed)
        {
            let now = after
                .receipts
                .iter()
                .find(|r| r.id == receipt.id)
                .map(|r| r.state);
            if now != Some(ReceiptState::Consumed) {
                lost(
                    format!("consumed receipt `{}` is now {now:?}", receipt.id),
                    json!({"receipt": receipt.id}),
                );
            }
        }
        for approval in before.approvals.iter().filter(|a| is_decided(a)) {
            let now = after
                .approvals
                .iter()
                .find(|a| a.id == approval.id)
                .and_then(|a| a.decision);
            if now != approval.decision {
                lost(
                    format!(
                        "approval `{}` was decided {:?} and is now {now:?}",
                        approval.id, approval.decision
                    ),
                    json!({"approval": approval}),
                );
            }
        }
        for grant in &after.grants {
            if before.grants.iter().any(|g| g.id == grant.id) {
                lost(
                    format!("run-scoped grant `{}` survived", grant.id),
                    json!({"grant": grant}),
                );
            }
        }
    }
    out
}

/// RS2. Across a restart: an approval pending before is pending after, with
/// no decision; an instance closed before is listed closed after; and a
/// successful resume of an instance that existed before the restart answers
/// its pre-restart ceiling.
fn rs2(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    for (restart, before, after) in restarts(history) {
        let Some(before) = before else { continue };
        let restart_index = history
            .iter()
            .position(|e| std::ptr::eq(e, restart))
            .unwrap_or(0);
        // Answers given after the last observation (a step that kills the
        // host observes nothing): the decision may have been committed just
        // before the crash, which RS3 asks for, so "pending" is not what the
        // store held at the restart.
        let answered_unobserved: BTreeSet<&str> = history[..restart_index]
            .iter()
            .rev()
            .take_while(|e| observed_of(e).is_none())
            .filter_map(|e| match action_of(e) {
                Some((Action::Answer { request, .. }, _)) => Some(request.as_str()),
                _ => None,
            })
            .collect();
        if let Some((step, after)) = after {
            for approval in before.approvals.iter().filter(|a| {
                a.state == ApprovalState::Pending && !answered_unobserved.contains(a.id.as_str())
            }) {
                let now = after.approvals.iter().find(|a| a.id == approval.id);
                if now.is_none_or(|a| a.state != ApprovalState::Pending || a.decision.is_some()) {
                    out.push(violation(
                        InvariantId::RS2,
                        step,
                        format!("approval `{}` was pending before the restart at step {} and is now {:?}", approval.id, restart.step, now.map(|a| (a.state, a.decision))),
                        json!({"before": approval, "after": now}),
                    ));
                }
            }
            for instance in before
                .instances
                .iter()
                .filter(|i| i.state == LifecycleState::Closed)
            {
                let now = after.instance(&instance.id).map(|i| i.state);
                if now != Some(LifecycleState::Closed) {
                    out.push(violation(
                        InvariantId::RS2,
                        step,
                        format!("instance `{}` was closed before the restart at step {} and is now listed as {now:?}", instance.id, restart.step),
                        json!({"instance": instance.id, "after": now}),
                    ));
                }
            }
        }
        for entry in history
            .iter()
            .skip(restart_index + 1)
            .take_while(|e| !matches!(e.kind, StepKind::Restart))
        {
            if let Some((Action::Resume { instance }, result)) = ok_result(entry)
                && let (Some(effective), Some(sealed)) = (
                    &result.effective,
                    before.instance(instance).map(|i| &i.ceiling),
                )
                && effective != sealed
            {
                out.push(violation(
                    InvariantId::RS2,
                    entry.step,
                    format!("resume of `{instance}` after the restart answered an authority differing from its sealed ceiling on {:?}", differing_axes(effective, sealed)),
                    json!({"sealed": sealed, "effective": effective}),
                ));
            }
        }
    }
    out
}

/// RS3. After a restart, no approval is dispatched that was not already
/// dispatched before it (a crash between commit and dispatch leaves it
/// decided, not silently sent), and none is dispatched without a decision.
fn rs3(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    for (restart, before, after) in restarts(history) {
        let Some((step, after)) = after else { continue };
        for approval in after
            .approvals
            .iter()
            .filter(|a| a.state == ApprovalState::Dispatched)
        {
            let was_dispatched = before
                .and_then(|b| b.approvals.iter().find(|a| a.id == approval.id))
                .is_some_and(|a| a.state == ApprovalState::Dispatched);
            let why = if approval.decision.is_none() || approval.decided_by.is_none() {
                Some("is dispatched without a recorded decision")
            } else if !was_dispatched {
                Some(
                    "was not dispatched before the restart and is dispatched after it without any step dispatching it",
                )
            } else {
                None
            };
            if let Some(why) = why {
                out.push(violation(
                    InvariantId::RS3,
                    step,
                    format!(
                        "approval `{}` {why} (restart at step {})",
                        approval.id, restart.step
                    ),
                    json!({"approval": approval}),
                ));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// AR: reviewer-routed approval
// ---------------------------------------------------------------------------

fn is_high_risk(risk: &str) -> bool {
    matches!(
        risk.to_ascii_lowercase().as_str(),
        "elevated" | "stale" | "high"
    )
}

/// AR1. While an instance's latest observed risk is elevated, stale or high,
/// no approval of it is first seen decided by policy: a full review decides.
/// The host says so once: an approval request raised under automatic
/// approval for such an instance is named by exactly one
/// `strict_review_required` record, and no request by more than one.
fn ar1(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut decided: BTreeSet<&str> = BTreeSet::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    run.walk(|facts, entry| {
        let Some(observed) = observed_of(entry) else {
            return;
        };
        let notices = |id: &str| {
            observed
                .records
                .iter()
                .filter(|r| {
                    r.transition == STRICT_REVIEW_REQUIRED && r.approval.as_deref() == Some(id)
                })
                .count()
        };
        for approval in &observed.approvals {
            let count = notices(&approval.id);
            if count > 1 {
                out.push(violation(
                    InvariantId::AR1,
                    entry.step,
                    format!("approval `{}` is announced as needing a full review {count} times; expected once", approval.id),
                    json!({"approval": approval.id, "notices": count}),
                ));
            }
            let first_sight = seen.insert(&approval.id);
            let risk = observed
                .instance(&approval.instance)
                .and_then(|i| i.risk.as_deref());
            if first_sight
                && facts.auto_approve
                && approval.decided_by.is_none()
                && risk.is_some_and(is_high_risk)
                && count == 0
            {
                out.push(violation(
                    InvariantId::AR1,
                    entry.step,
                    format!("approval `{}` of `{}` was left for a review under automatic approval without saying a full review is required", approval.id, approval.instance),
                    json!({"approval": approval, "risk": risk}),
                ));
            }
        }
        for approval in observed.approvals.iter().filter(|a| is_decided(a)) {
            if !decided.insert(&approval.id) {
                continue;
            }
            let risk = observed
                .instance(&approval.instance)
                .and_then(|i| i.risk.as_deref())
                .or_else(|| facts.risk(approval.instance.as_str()));
            if let Some(risk) = risk.filter(|r| is_high_risk(r))
                && approval.decided_by == Some(DecidedBy::Policy)
            {
                out.push(violation(
                    InvariantId::AR1,
                    entry.step,
                    format!("approval `{}` of `{}` was decided by policy while its risk is `{risk}`; expected a full review", approval.id, approval.instance),
                    json!({"approval": approval, "risk": risk}),
                ));
            }
        }
    });
    out
}

/// AR2. A forked instance is first observed with its source's latest risk,
/// and a resumed instance keeps the risk it had before the resume.
fn ar2(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut expected: BTreeMap<&str, (&str, usize)> = BTreeMap::new();
    run.walk(|facts, entry| {
        match ok_result(entry) {
            Some((Action::Fork { instance }, result)) => {
                if let (Some(risk), Some(child)) = (
                    facts.risk(instance.as_str()),
                    result.instance.as_deref(),
                ) {
                    expected.insert(child, (risk, entry.step));
                }
            }
            Some((Action::Resume { instance }, _)) => {
                if let Some(risk) = facts.risk(instance.as_str()) {
                    expected.insert(instance, (risk, entry.step));
                }
            }
            _ => {}
        }
        if let Some(observed) = observed_of(entry) {
            expected.retain(|id, (risk, at)| {
                let Some(instance) = observed.instance(id) else { return true };
                if instance.risk.as_deref() != Some(*risk) {
                    out.push(violation(
                        InvariantId::AR2,
                        entry.step,
                        format!("`{id}` (resumed or forked at step {at}) has risk {:?}; expected the inherited `{risk}`", instance.risk),
                        json!({"instance": id, "expected": risk, "observed": instance.risk}),
                    ));
                }
                false
            });
        }
    });
    out
}
