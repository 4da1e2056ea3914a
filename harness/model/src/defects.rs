//! Deliberate single defects ("mutants") of the reference host, so the harness can prove its scenarios catch real bugs.
//!
//! A scenario catalogue that passes on the correct host proves little by
//! itself: a check that never fails is no check. Each [`Defect`] re-creates
//! one bug that real hosts shipped or nearly shipped (see `seeds/` and
//! MODEL.md), breaks exactly one invariant, and is switched on only through
//! [`HostState::set_defect`]; the model's own `World`, `HostState::default`
//! and `HostState::restore` never set one. `delegation-harness selftest`
//! runs the catalogue against every defect and expects each to be killed by
//! a scenario that names the defect's invariant.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::authority::{ApprovalPolicy, Authority};
use crate::digest::{ToolDefinition, digest_value};
use crate::state::{Admission, HostState, Journal};
use crate::vocabulary::InvariantId;
use crate::wire::{ApprovalState, DecidedBy, Decision, LifecycleState, SpawnRequest};

macro_rules! defects {
    ($( $variant:ident, $name:literal, $id:ident, $description:literal; )*) => {
        /// One realistic defect; the hook that applies it names it in a comment.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum Defect { $( $variant, )* }

        impl Defect {
            pub const ALL: &'static [Defect] = &[ $( Defect::$variant, )* ];

            /// The kebab-case name used by `--defect` and in the kill matrix.
            pub fn name(self) -> &'static str {
                match self { $( Defect::$variant => $name, )* }
            }

            /// The invariant this defect breaks: a scenario naming it must fail.
            pub fn invariant(self) -> InvariantId {
                match self { $( Defect::$variant => InvariantId::$id, )* }
            }

            /// The real-world bug this defect models, in one line.
            pub fn description(self) -> &'static str {
                match self { $( Defect::$variant => $description, )* }
            }
        }
    };
}

defects! {
    ChildBeforePolicyCheck, "child-before-policy-check", ZC1,
        "the child is created and starts working before the policy check; a refusal then closes it, but it existed (seed 000)";
    ModelRequestBeforeAdmission, "model-request-before-admission", ZC2,
        "the child's first model turn is sent while admission is still running, so a refused child still costs a model request";
    FollowupAfterClose, "followup-after-close", TR1,
        "a follow-up turn addressed to a closed instance is forwarded to the model instead of being refused";
    TerminalNotPersisted, "terminal-not-persisted", TR3,
        "close is kept in memory only: after a restart the closed instance is running again";
    ToolsBoundByName, "tools-bound-by-name", SD2,
        "the drift check compares tool names only, so an edited definition (a poisoned description) is dispatched";
    SilentListChanged, "silent-list-changed", SD3,
        "notifications/tools/list_changed is ignored and sealed tools keep running against the new list";
    SwallowStoreError, "swallow-store-error", PG1,
        "a failed write of the automatic decision is swallowed by the event bus and the allow is dispatched anyway (seed 002)";
    AutoSkipsReadOnly, "auto-skips-read-only", PG3,
        "the automatic approval path skips the read-only check that the manual path applies (seed 002, second review)";
    AnswerTwice, "answer-twice", PG2,
        "a second answer to an already answered approval request dispatches the call again";
    ResumeRederivesCeiling, "resume-rederives-ceiling", TR2,
        "a resume derives the child's authority again from its parent's ceiling instead of restoring the sealed one";
    ReceiptNotTombstoned, "receipt-not-tombstoned", RC1,
        "consuming a receipt does not tombstone it, so the same receipt admits a second child";
    AuthorizerTimeoutAllows, "authorizer-timeout-allows", EA2,
        "an authorizer that times out or is unreachable counts as allow: the host fails open";
    SecretInAudit, "secret-in-audit", TC4,
        "the capability secret is logged verbatim in the issuing answer's detail";
    PendingRestoredAsAllowed, "pending-restored-as-allowed", RS2,
        "after a restart a pending approval request is restored as allowed by policy";
    AutoIgnoresRisk, "auto-ignores-risk", AR1,
        "the automatic path answers whatever the reviewer's risk score says, so elevated risk gets no full review (seed 004)";
    ForkDropsRisk, "fork-drops-risk", AR2,
        "a forked thread starts without its source's latest risk score";
    DenialWithoutReason, "denial-without-reason", ZC3,
        "a refused delegation replies with no machine-readable reason (`reason: None`), only free text";
    ReceiptBindsNames, "receipt-binds-names", SD1,
        "consuming a receipt skips the digest check of its sealed tools: a served name counts as the sealed tool";
    NeverRaisesApproval, "never-raises-approval", PG4,
        "under `never` an escalation raises an approval request instead of being denied first";
    AutoOffDiscardsDecisions, "auto-off-discards-decisions", PG5,
        "turning automatic approval off puts its committed decisions back to pending";
    GrantMatchesToolOnly, "grant-matches-tool-only", PG6,
        "an exact-call grant matches any call of the same tool, whatever its arguments";
    GrantsSurviveCompletion, "grants-survive-completion", PG6,
        "exact-call grants are not dropped when their instance completes, is cancelled or fails";
    RoleDefaultIgnored, "role-default-ignored", CE3,
        "the role default is ignored: the request (capped by the parent) wins over a narrower role";
    StrictModeIgnored, "strict-mode-ignored", CE4,
        "strict mode is not applied: an unsandboxed child of a full-access parent is admitted";
    BoundedReachesAnyTool, "bounded-reaches-any-tool", CE5,
        "bounded credentials reach any allowlisted tool, not only the delegation and lifecycle ones";
    RecordOmitsRequested, "record-omits-requested", CE6,
        "the admission record keeps the effective authority but not the requested one, so fallback passes for routing";
    ReceiptExpiryOffByOne, "receipt-expiry-off-by-one", RC2,
        "a receipt counts as expired only when `now > expires_at`, so it still admits at its expiry instant";
    ReceiptParentNotChecked, "receipt-parent-not-checked", RC3,
        "consume checks the request commitment but not the parent, so another parent can use the receipt";
    ReceiptSealNotChecked, "receipt-seal-not-checked", RC4,
        "consume looks the receipt up by id and never compares the presented fields or seal";
    AuthorizerSkippedOnReceipt, "authorizer-skipped-on-receipt", EA1,
        "the authorizer is consulted on direct delegation but not on the receipt-consume path";
    WideningConstraintDropped, "widening-constraint-dropped", EA3,
        "a widening or unsupported authorizer constraint is silently dropped and the child admitted";
    AuthorizationReplayAccepted, "authorization-replay-accepted", EA4,
        "a replayed authorization receipt id is accepted again";
    ExternalAllowAsPerson, "external-allow-as-person", EA5,
        "an external authorizer's allow is recorded as a person's approval";
    WaitDeadlineEarly, "wait-deadline-early", LW1,
        "a wait on a running instance reports its deadline before the harness's clock reached it";
    EventReplayAccepted, "event-replay-accepted", LW2,
        "event ids are not deduplicated: a replayed event is applied again";
    CapabilityBindingUnchecked, "capability-binding-unchecked", TC1,
        "a capability call is not checked against the task and agent the capability is bound to";
    CapabilityRevocationIgnored, "capability-revocation-ignored", TC2,
        "a revoked capability keeps working";
    CapabilityExpiryOffByOne, "capability-expiry-off-by-one", TC3,
        "a capability counts as expired only when `now > expires_at`, so it still works at its expiry instant";
    CapabilityRetryReruns, "capability-retry-reruns", TC5,
        "a retry with the same call_id runs the handler again instead of returning the kept outcome";
    AutoApproveNotPersisted, "auto-approve-not-persisted", RS1,
        "the automatic-approval switch is kept in memory only: after a restart it is back at its initial value";
    DescriptionNotDigested, "description-not-digested", SD4,
        "the tool digest leaves the description out, so a description-only edit (tool poisoning) is not drift";
    UnsealableToolDropped, "unsealable-tool-dropped", SD5,
        "a spawn naming a tool the parent cannot seal exactly is admitted with that tool silently dropped";
    NetworkAxisIgnored, "network-axis-ignored", CE1,
        "delegation compares writable roots but not the network flag, so a child of a no-network parent gets network";
    DispatchBeforeRecord, "dispatch-before-record", RS3,
        "the automatic allow is dispatched before its decision is written, so a crash in between leaves a dispatched allow with no record";
    ForkTakesParentCeiling, "fork-takes-parent-ceiling", CE2,
        "a fork is given its source's parent's ceiling instead of the source's sealed one";
    QueuedFollowupAfterClose, "queued-followup-after-close", TR4,
        "a follow-up to a closed instance is refused but kept in a queue, and the queue is flushed to the model on the next turn";
    LifecycleResumeReopens, "lifecycle-resume-reopens", TR1,
        "the model's own resume tool (codex's resume_agent) reopens a closed child, so the input its model sends next reaches the model";
    ModelWaitRunsTurn, "model-wait-runs-turn", LW1,
        "the model's own wait tool (codex's wait_agent) nudges an idle child with an empty input to collect its status, so the wait costs a model request for the child";
    ChildApprovalWidened, "child-approval-widened", CE1,
        "a child is admitted with an approval policy that asks a person for nothing, so what its parent must ask for runs unasked in the child (opencode 1.18.33 copies only a parent's deny rules into a child)";
}

impl fmt::Display for Defect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Defect {
    type Err = String;
    fn from_str(s: &str) -> Result<Defect, String> {
        Defect::ALL
            .iter()
            .copied()
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Defect::ALL.iter().map(|d| d.name()).collect();
                format!(
                    "`{s}` is not a defect; expected one of: {}",
                    names.join(", ")
                )
            })
    }
}

/// The parts of defects too long for a one-line hook in `state.rs`; each is
/// a no-op unless its defect is switched on.
impl HostState {
    /// Switches a defect on (or off with `None`). Called by the host after
    /// [`HostState::restore`], which is where `pending-restored-as-allowed`
    /// does its damage.
    pub fn set_defect(&mut self, defect: Option<Defect>) {
        self.defect = defect;
        if defect == Some(Defect::PendingRestoredAsAllowed) {
            for a in self.approvals.values_mut() {
                if a.approval.state == ApprovalState::Pending {
                    a.approval.state = ApprovalState::Decided;
                    a.approval.decision = Some(Decision::Allow);
                    a.approval.decided_by = Some(DecidedBy::Policy);
                }
            }
        }
    }

    pub fn has_defect(&self, defect: Defect) -> bool {
        self.defect == Some(defect)
    }

    /// `description-not-digested`: the digest a buggy host keeps for a tool,
    /// over the definition without its description; the real digest otherwise.
    pub fn defect_tool_digest(&self, def: &ToolDefinition) -> String {
        if !self.has_defect(Defect::DescriptionNotDigested) {
            return def.digest.clone();
        }
        let mut raw = def.raw.clone();
        if let Some(o) = raw.as_object_mut() {
            o.remove("description");
        }
        digest_value(&raw).unwrap_or_else(|e| format!("invalid:{e}"))
    }

    /// `auto-off-discards-decisions`: the automatic path's decisions go back to pending.
    pub fn defect_discard_policy_decisions(&mut self) {
        if !self.has_defect(Defect::AutoOffDiscardsDecisions) {
            return;
        }
        for a in self.approvals.values_mut() {
            if a.approval.decided_by == Some(DecidedBy::Policy) {
                a.approval.state = ApprovalState::Pending;
                a.approval.decision = None;
                a.approval.decided_by = None;
            }
        }
    }

    /// `child-before-policy-check`: the admission the host commits before it
    /// checks anything, with the parent's whole ceiling as the child's authority.
    pub fn defect_unchecked_admission(
        &self,
        parent: &str,
        request: &SpawnRequest,
    ) -> Option<Admission> {
        if !self.has_defect(Defect::ChildBeforePolicyCheck) {
            return None;
        }
        let p = self.instances.get(parent)?;
        Some(Admission {
            parent: parent.to_string(),
            request: request.clone(),
            effective: p.ceiling.clone(),
            commitment: HostState::commitment(request),
            receipt: None,
        })
    }

    /// `lifecycle-resume-reopens`: a resume by the parent's model sets a
    /// terminal target running again, committed like any state change.
    /// Whether it did; `false` (nothing done) for a live target or without the defect.
    pub fn defect_reopen_terminal(&mut self, journal: &mut dyn Journal, id: &str) -> bool {
        if !self.has_defect(Defect::LifecycleResumeReopens) {
            return false;
        }
        let Some(inst) = self.instances.get(id).filter(|i| i.state.is_terminal()) else {
            return false;
        };
        let mut reopened = inst.clone();
        reopened.state = LifecycleState::Running;
        if self.commit_instance(journal, &reopened).is_err() {
            return false;
        }
        self.instances.insert(id.to_string(), reopened);
        true
    }

    /// `child-approval-widened`: the child's effective approval policy asks
    /// for nothing (no class asked, none denied), whatever the parent's is.
    pub fn defect_widen_child_approval(&self, mut effective: Authority) -> Authority {
        if self.has_defect(Defect::ChildApprovalWidened) {
            effective.approval_policy = ApprovalPolicy::Granular {
                ask: Default::default(),
                deny: Default::default(),
            };
        }
        effective
    }

    /// `resume-rederives-ceiling`: replaces a child's sealed ceiling with its
    /// parent's current one before the resume is committed.
    pub fn defect_rederive_ceiling(&mut self, id: &str) {
        if !self.has_defect(Defect::ResumeRederivesCeiling) {
            return;
        }
        let parent_ceiling = self
            .instances
            .get(id)
            .and_then(|i| i.parent.as_ref())
            .and_then(|p| self.instances.get(p))
            .map(|p| p.ceiling.clone());
        if let (Some(ceiling), Some(inst)) = (parent_ceiling, self.instances.get_mut(id)) {
            inst.ceiling = ceiling;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_defect_has_a_name_an_invariant_and_a_description_and_names_round_trip() {
        let mut names = BTreeSet::new();
        for &d in Defect::ALL {
            let name = d.name();
            assert!(
                !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c == '-' || c.is_ascii_digit()),
                "{d:?}: `{name}` is not kebab-case"
            );
            assert!(names.insert(name), "{name} is used twice");
            assert!(
                InvariantId::ALL.contains(&d.invariant()),
                "{name}: unknown invariant"
            );
            assert!(
                d.description().len() > 20,
                "{name}: the description must say what bug it models"
            );
            assert_eq!(name.parse::<Defect>(), Ok(d));
            assert_eq!(d.to_string(), name);
            assert_eq!(
                serde_json::to_value(d).unwrap(),
                serde_json::json!(name),
                "serde and name() agree"
            );
        }
        let err = "no-such-defect".parse::<Defect>().unwrap_err();
        assert!(
            err.contains("child-before-policy-check"),
            "the error lists valid names: {err}"
        );
    }

    #[test]
    fn every_headline_family_has_a_defect() {
        let families: BTreeSet<&str> = Defect::ALL.iter().map(|d| d.invariant().family()).collect();
        for id in [
            InvariantId::ZC1,
            InvariantId::TR1,
            InvariantId::SD2,
            InvariantId::PG1,
        ] {
            assert!(
                families.contains(id.family()),
                "no defect breaks the {} family",
                id.family()
            );
        }
    }

    #[test]
    fn a_default_or_restored_state_has_no_defect() {
        assert_eq!(HostState::default().defect, None);
        assert_eq!(HostState::restore(&[]).unwrap().defect, None);
    }
}
