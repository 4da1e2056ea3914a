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
//!
//! The checkers take in each entry once ([`Checking`]): what a verdict needs
//! from earlier entries is remembered, either in the facts every checker
//! shares or in the checker's own state, never re-read from the history.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::authority::{ActionClass, Authority, AuthorityRequest, Axis, Sandbox, admit};
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
mod observation_text;
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
    check_ids(&[id], history)
}

/// Checks every invariant of the catalogue.
pub fn check_all(history: &[HistoryEntry]) -> Vec<Violation> {
    check_ids(InvariantId::ALL, history)
}

/// Checks the named invariants over a whole history: the violations of the
/// first id, then those of the second, and so on.
pub fn check_ids(ids: &[InvariantId], history: &[HistoryEntry]) -> Vec<Violation> {
    let mut checking = Checking::new(ids);
    let mut violations = checking.take_new(history);
    // Stable: within one invariant the violations stay in the order they became visible.
    violations.sort_by_key(|v| ids.iter().position(|id| *id == v.id));
    violations
}

/// The checkers of a run, taking in each entry of its history once: what
/// they must remember of earlier entries they keep, so that checking a run
/// costs time linear in its length however often it is asked.
///
/// The history is append-only: [`Checking::take_new`] reads the entries
/// added since it was last called, and an entry must not change once taken.
pub struct Checking {
    checkers: Vec<Box<dyn Checker>>,
    learned: Learned,
    taken: usize,
}

impl Checking {
    /// Checkers for the named invariants, before any entry.
    pub fn new(ids: &[InvariantId]) -> Checking {
        Checking {
            checkers: ids.iter().map(|id| checker(*id)).collect(),
            learned: Learned::default(),
            taken: 0,
        }
    }

    /// Takes in the entries of `history` not taken yet and returns the
    /// violations they made visible, each once (one an earlier step caused
    /// names that step).
    pub fn take_new(&mut self, history: &[HistoryEntry]) -> Vec<Violation> {
        assert!(
            self.taken <= history.len(),
            "the history shrank from {} to {} entries; it is append-only",
            self.taken,
            history.len()
        );
        let mut out = Vec::new();
        for index in self.taken..history.len() {
            let entry = &history[index];
            let facts = self.learned.facts(&history[..index]);
            for checker in &mut self.checkers {
                checker.take(&facts, entry, &mut out);
            }
            self.learned.learn(index, entry);
        }
        self.taken = history.len();
        out
    }

    /// How many entries have been taken in.
    pub fn taken(&self) -> usize {
        self.taken
    }
}

/// One invariant's checker: takes in each entry once, with the facts known
/// before it, and remembers what later entries are judged against.
trait Checker: Send {
    fn take(&mut self, facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>);
}

/// A checker that needs nothing but the facts and the entry.
impl<F: FnMut(&Facts, &HistoryEntry, &mut Vec<Violation>) + Send> Checker for F {
    fn take(&mut self, facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        self(facts, entry, out)
    }
}

/// The table from id to checker; exhaustive, so a new id cannot go unchecked.
fn checker(id: InvariantId) -> Box<dyn Checker> {
    use InvariantId::*;
    match id {
        ZC1 => Box::new(Zc1::default()),
        ZC2 => Box::new(zc2),
        ZC3 => Box::new(zc3),
        TR1 => Box::new(tr1),
        TR2 => Box::new(tr2),
        TR3 => Box::new(tr3),
        TR4 => Box::new(Tr4::default()),
        SD1 => Box::new(Sd1::default()),
        SD2 => Box::new(sd2),
        SD3 => Box::new(sd3),
        SD4 => Box::new(sd4),
        SD5 => Box::new(sd5),
        PG1 => Box::new(Pg1::default()),
        PG2 => Box::new(Pg2::default()),
        PG3 => Box::new(Pg3::default()),
        PG4 => Box::new(Pg4::default()),
        PG5 => Box::new(Pg5::default()),
        PG6 => Box::new(Pg6::default()),
        CE1 => Box::new(Ce1::default()),
        CE2 => Box::new(Ce2::default()),
        CE3 => Box::new(Ce3::default()),
        CE4 => Box::new(Ce4::default()),
        CE5 => Box::new(ce5),
        CE6 => Box::new(Ce6::default()),
        RC1 => Box::new(Rc1::default()),
        RC2 => Box::new(rc2),
        RC3 => Box::new(rc3),
        RC4 => Box::new(Rc4::default()),
        EA1 => Box::new(ea1),
        EA2 => Box::new(
            |facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>| {
                ea_forbidden_child(InvariantId::EA2, facts, entry, out)
            },
        ),
        EA3 => Box::new(ea3),
        EA4 => Box::new(
            |facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>| {
                ea_forbidden_child(InvariantId::EA4, facts, entry, out)
            },
        ),
        EA5 => Box::new(Ea5::default()),
        LW1 => Box::new(lw1),
        LW2 => Box::new(Lw2::default()),
        TC1 => Box::new(tc1),
        TC2 => Box::new(tc2),
        TC3 => Box::new(tc3),
        TC4 => Box::new(Tc4::default()),
        TC5 => Box::new(Tc5::default()),
        RS1 => Box::new(Rs1::default()),
        RS2 => Box::new(Rs2::default()),
        RS3 => Box::new(Rs3::default()),
        AR1 => Box::new(Ar1::default()),
        AR2 => Box::new(Ar2::default()),
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
        PG4 => (&[Approvals, ToolCall, Ceiling, Reason, Questions], false),
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

/// What the history says about one instance, as known so far.
#[derive(Default)]
struct InstanceFacts {
    /// The step of the first entry that showed the instance.
    first_seen: Option<usize>,
    /// The latest lifecycle state learnt.
    state: Option<LifecycleState>,
    /// The first terminal state the instance was seen in.
    terminal: Option<LifecycleState>,
    /// The sealed ceiling: the first authority seen for it.
    ceiling: Option<Authority>,
    parent: Option<String>,
    risk: Option<String>,
}

impl InstanceFacts {
    fn see(&mut self, step: usize) {
        self.first_seen.get_or_insert(step);
    }

    fn set_state(&mut self, state: LifecycleState) {
        self.state = Some(state);
        if state.is_terminal() {
            self.terminal.get_or_insert(state);
        }
    }

    fn seal(&mut self, ceiling: &Authority) {
        if self.ceiling.is_none() {
            self.ceiling = Some(ceiling.clone());
        }
    }
}

/// Replaces `slot` with `value` unless it already holds it: observations
/// repeat the same parent and risk at every step, and comparing costs no allocation.
fn set_text(slot: &mut Option<String>, value: &str) {
    if slot.as_deref() != Some(value) {
        *slot = Some(value.to_string());
    }
}

/// A task capability the host issued, as the harness asked for it.
#[derive(Clone)]
struct Capability {
    id: String,
    task: String,
    agent: String,
    tools: Vec<String>,
    expires_at: Millis,
    issued_at_step: usize,
    /// The host generated the secret and may show it once, in the issuing answer.
    host_generated: bool,
}

/// The capability an entry issued, under the secret that names it.
fn capability_issued(entry: &HistoryEntry) -> Option<(&str, Capability)> {
    let (
        Action::IssueCapability {
            task,
            agent,
            tools,
            expires_at,
            secret,
        },
        result,
    ) = ok_result(entry)?
    else {
        return None;
    };
    let token = result.capability.as_ref()?;
    let chosen = secret.as_deref().or(token.secret.as_deref())?;
    Some((
        chosen,
        Capability {
            id: token.id.clone(),
            task: task.clone(),
            agent: agent.clone(),
            tools: tools.clone(),
            expires_at: *expires_at,
            issued_at_step: entry.step,
            host_generated: secret.is_none(),
        },
    ))
}

/// A receipt the host issued, with what it was prepared for.
struct Issued {
    receipt: Receipt,
    parent: String,
    request: SpawnRequest,
    step: usize,
    authorizer_calls: u64,
    /// The authorizer's scripted behaviour when the receipt was prepared.
    script: Option<AuthorizerBehaviour>,
}

/// A tool change announced by the harness, for the drift checkers.
struct Drift {
    step: usize,
    change: WorldChange,
}

/// Everything the checkers need to know about earlier entries, learnt once
/// per entry and shared by all of them: every checker that needs "what was
/// known before this step" asks it here instead of remembering it itself.
#[derive(Default)]
struct Learned {
    instances: BTreeMap<String, InstanceFacts>,
    now: Millis,
    config: Option<Configuration>,
    auto_approve: bool,
    /// The index of the latest entry with an observation.
    last_observed: Option<usize>,
    /// The authorizer's scripted behaviour in force.
    authorizer_script: Option<AuthorizerBehaviour>,
    /// Receipts issued, by id; the first issue of an id counts.
    receipts: BTreeMap<String, Issued>,
    /// Capabilities issued, by secret; the latest issue of a secret counts.
    capabilities: BTreeMap<String, Capability>,
    /// Successful revocations of capabilities, by id: the step of the first.
    revoked_capabilities: BTreeMap<String, usize>,
    drifts: Vec<Drift>,
}

impl Learned {
    fn instance(&mut self, id: &str) -> &mut InstanceFacts {
        if !self.instances.contains_key(id) {
            self.instances
                .insert(id.to_string(), InstanceFacts::default());
        }
        self.instances.get_mut(id).expect("inserted above")
    }

    /// The facts known before the entry that follows `before`.
    fn facts<'a>(&'a self, before: &'a [HistoryEntry]) -> Facts<'a> {
        Facts {
            now: self.now,
            config: self.config.as_ref(),
            auto_approve: self.auto_approve,
            last_observed: self.last_observed.and_then(|i| observed_of(&before[i])),
            last_observed_at: self.last_observed,
            before,
            learned: self,
        }
    }

    fn learn(&mut self, index: usize, entry: &HistoryEntry) {
        if let Some((action, Some(result))) = action_of(entry) {
            if result.is_ok() {
                match action {
                    Action::Configure(c) => {
                        self.config = Some(c.clone());
                        self.auto_approve = c.auto_approve;
                    }
                    Action::SetAutoApprove { enabled } => self.auto_approve = *enabled,
                    Action::SetClock { now } => self.now = *now,
                    Action::Close { instance } => {
                        self.instance(instance).set_state(LifecycleState::Closed)
                    }
                    Action::Cancel { instance } => {
                        self.instance(instance).set_state(LifecycleState::Cancelled)
                    }
                    Action::Fail { instance } => {
                        self.instance(instance).set_state(LifecycleState::Failed)
                    }
                    Action::PrepareReceipt {
                        parent, request, ..
                    } => {
                        if let Some(receipt) = &result.receipt
                            && !self.receipts.contains_key(&receipt.id)
                        {
                            let issued = Issued {
                                receipt: receipt.clone(),
                                parent: parent.clone(),
                                request: request.clone(),
                                step: entry.step,
                                authorizer_calls: entry.evidence.authorizer_calls,
                                script: self.authorizer_script.clone(),
                            };
                            self.receipts.insert(receipt.id.clone(), issued);
                        }
                    }
                    Action::RevokeCapability { capability } => {
                        if !self.revoked_capabilities.contains_key(capability) {
                            self.revoked_capabilities
                                .insert(capability.clone(), entry.step);
                        }
                    }
                    _ => {}
                }
            }
            if let Action::Turn { instance, .. } = action {
                match &result.turn {
                    Some(TurnReport::Message { .. }) if result.is_ok() => {
                        self.instance(instance).set_state(LifecycleState::Completed)
                    }
                    Some(TurnReport::ModelFailed { .. }) => {
                        self.instance(instance).set_state(LifecycleState::Failed)
                    }
                    _ => {}
                }
            }
        }
        if let Some((secret, capability)) = capability_issued(entry) {
            self.capabilities.insert(secret.to_string(), capability);
        }
        if let Some(change) = world_change(entry) {
            if let WorldChange::AuthorizerScripted { behaviour } = change {
                self.authorizer_script = Some(behaviour.clone());
            }
            self.drifts.push(Drift {
                step: entry.step,
                change: change.clone(),
            });
        }
        if let Some(creation) = creation_attempt(entry) {
            if let Some(id) = creation.created() {
                let facts = self.instance(id);
                facts.see(entry.step);
                if let Some(effective) = &creation.result.effective {
                    facts.seal(effective);
                }
                if let (Some(from), true) = (creation.from, creation.is_delegation()) {
                    set_text(&mut facts.parent, from);
                }
            }
        }
        if let Some(observed) = observed_of(entry) {
            for instance in &observed.instances {
                let facts = self.instance(&instance.id);
                facts.see(entry.step);
                facts.set_state(instance.state);
                facts.seal(&instance.ceiling);
                if let Some(parent) = &instance.parent {
                    set_text(&mut facts.parent, parent);
                }
                if let Some(risk) = &instance.risk {
                    set_text(&mut facts.risk, risk);
                }
            }
            self.last_observed = Some(index);
        }
    }
}

/// What is known before an entry, from every earlier one: a view of [`Learned`].
struct Facts<'a> {
    now: Millis,
    config: Option<&'a Configuration>,
    auto_approve: bool,
    last_observed: Option<&'a Observed>,
    /// The index of the entry `last_observed` is from.
    last_observed_at: Option<usize>,
    /// The entries before the one judged.
    before: &'a [HistoryEntry],
    learned: &'a Learned,
}

impl<'a> Facts<'a> {
    /// The observation of an earlier entry, by index.
    fn observed_at(&self, index: usize) -> Option<&'a Observed> {
        self.before.get(index).and_then(observed_of)
    }

    fn of(&self, instance: &str) -> Option<&'a InstanceFacts> {
        self.learned.instances.get(instance)
    }

    /// The step at which the instance was first seen.
    fn first_seen(&self, instance: &str) -> Option<usize> {
        self.of(instance)?.first_seen
    }

    fn knows(&self, instance: &str) -> bool {
        self.first_seen(instance).is_some()
    }

    /// Latest known lifecycle state.
    fn state(&self, instance: &str) -> Option<LifecycleState> {
        self.of(instance)?.state
    }

    /// The first terminal state the instance was seen in.
    fn terminal(&self, instance: &str) -> Option<LifecycleState> {
        self.of(instance)?.terminal
    }

    /// The sealed ceiling: the first authority seen for the instance.
    fn ceiling(&self, instance: &str) -> Option<&'a Authority> {
        self.of(instance)?.ceiling.as_ref()
    }

    /// Every sealed ceiling known.
    fn ceilings(&self) -> impl Iterator<Item = &'a Authority> + 'a {
        self.learned
            .instances
            .values()
            .filter_map(|facts| facts.ceiling.as_ref())
    }

    fn parent(&self, instance: &str) -> Option<&'a str> {
        self.of(instance)?.parent.as_deref()
    }

    fn risk(&self, instance: &str) -> Option<&'a str> {
        self.of(instance)?.risk.as_deref()
    }

    fn strict_mode(&self) -> bool {
        self.config.is_some_and(|c| c.strict_mode)
    }

    fn authorizer_required(&self) -> bool {
        self.config.is_some_and(|c| c.authorizer_required)
    }

    /// The authorizer's scripted behaviour in force.
    fn authorizer_script(&self) -> Option<&'a AuthorizerBehaviour> {
        self.learned.authorizer_script.as_ref()
    }

    /// The receipt issued under `id`.
    fn issued(&self, id: &str) -> Option<&'a Issued> {
        self.learned.receipts.get(id)
    }

    /// The receipt issued under `id` in an earlier step.
    fn receipt(&self, id: &str, step: usize) -> Option<&'a Issued> {
        self.issued(id).filter(|i| i.step < step)
    }

    /// The capability issued under `secret` in an earlier step.
    fn capability(&self, secret: &str, step: usize) -> Option<&'a Capability> {
        self.learned
            .capabilities
            .get(secret)
            .filter(|c| c.issued_at_step < step)
    }

    /// The tool changes the harness announced before `step`, in order.
    fn drifts_before(&self, step: usize) -> impl DoubleEndedIterator<Item = &'a Drift> + 'a {
        self.learned.drifts.iter().filter(move |d| d.step < step)
    }
}

/// The class of each tool, as the host's approval requests named it so far
/// (the entry being judged included: a call's own approval request names it).
#[derive(Default)]
struct ToolClasses(BTreeMap<String, ActionClass>);

impl ToolClasses {
    fn learn(&mut self, entry: &HistoryEntry) {
        for approval in observed_of(entry).iter().flat_map(|o| &o.approvals) {
            if self.0.get(&approval.tool) != Some(&approval.class) {
                self.0.insert(approval.tool.clone(), approval.class);
            }
        }
    }

    fn get(&self, tool: &str) -> Option<&ActionClass> {
        self.0.get(tool)
    }
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
