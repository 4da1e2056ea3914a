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

mod ar;
mod ce;
mod ea;
mod lw;
mod pg;
mod rc;
mod rs;
mod sd;
mod tc;
mod tr;
mod zc;

use ar::*;
use ce::*;
use ea::*;
use lw::*;
use pg::*;
use rc::*;
use rs::*;
use sd::*;
use tc::*;
use tr::*;
use zc::*;

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
/// Whether a refusal gives `expected` as its reason, or the harness's own
/// injected store fault: a host that cannot persist refuses any action
/// before deciding it, which is safe and not the defect a reason check is after.
fn refused_as(reason: Option<DenyReason>, expected: DenyReason) -> bool {
    reason == Some(expected) || reason == Some(DenyReason::StoreWriteFailed)
}

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
    // The request as written, normalised here as MODEL.md section 4 says;
    // a root that does not normalise asks for nothing comparable.
    if let Some(sandbox) = request.sandbox.as_ref().and_then(|s| s.normalise().ok())
        && !authority.sandbox.leq(&sandbox)
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
