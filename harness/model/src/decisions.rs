//! The seam where a deliberately broken host may decide differently: every decision a known bug changes, with the correct rule as its default.
//!
//! The model holds no defect. [`HostState`] asks its [`Decisions`] at each
//! of these points and starts with [`Correct`] (a restart too), which
//! overrides nothing. `selftest`'s mutants (`delegation_host::mutants`)
//! implement the trait outside this crate, one overridden decision each,
//! so the oracle that judges every host never branches on the bugs it is
//! meant to catch.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::authority::{
    ActionClass, AdmissionError, ApprovalPolicy, Authority, AuthorityRequest, Sandbox, admit,
};
use crate::digest::ToolDefinition;
use crate::eligibility::{Eligibility, eligibility};
use crate::state::{ApprovalRecord, Denial, HostState, InstanceRecord, Journal};
use crate::wire::{ActionResult, DecisionRecord, Millis, ObservedCapability};

/// The decisions a host's bugs change. Each default is the rule MODEL.md
/// states; the invariant it serves is named beside it.
pub trait Decisions: Send + Sync + fmt::Debug {
    /// A live definition still matches the digest sealed for it (SD2, SD4).
    fn sealed_tool_matches(&self, sealed: &str, live: &ToolDefinition) -> bool {
        live.digest == sealed
    }

    /// The digest sealed for a live tool when a root starts (SD4).
    fn sealed_digest(&self, live: &ToolDefinition) -> String {
        live.digest.clone()
    }

    /// A `tools/list_changed` invalidates every live seal (SD3).
    fn takes_in_list_changed(&self) -> bool {
        true
    }

    /// A receipt is expired from its expiry instant on (RC2).
    fn receipt_expired(&self, now: Millis, expires_at: Millis) -> bool {
        now >= expires_at
    }

    /// A capability is expired from its expiry instant on (TC3).
    fn capability_expired(&self, now: Millis, expires_at: Millis) -> bool {
        now >= expires_at
    }

    /// A wait on a running instance wakes at its deadline once the clock reached it (LW1).
    fn wait_reached_deadline(&self, now: Millis, deadline: Millis) -> bool {
        now >= deadline
    }

    /// The role default that caps a delegation request (CE3).
    fn role_default<'a>(
        &self,
        configured: Option<&'a AuthorityRequest>,
    ) -> Option<&'a AuthorityRequest> {
        configured
    }

    /// Local admission against the parent's ceiling (CE1, SD5).
    fn admit(
        &self,
        ceiling: &Authority,
        role_default: Option<&AuthorityRequest>,
        request: &AuthorityRequest,
    ) -> Result<Authority, AdmissionError> {
        admit(ceiling, role_default, request)
    }

    /// Strict mode refuses a child without a sandbox (CE4).
    fn strict_mode_refuses(&self, strict_mode: bool, effective: &Authority) -> bool {
        strict_mode && effective.sandbox.is_full_access()
    }

    /// The admission record of a new child, as written (CE6, EA5).
    fn admission_record(&self, _record: &mut DecisionRecord) {}

    /// A consumed receipt is tombstoned with its child's commit (RC1).
    fn tombstones_consumed_receipts(&self) -> bool {
        true
    }

    /// The reply to a refused delegation (ZC3).
    fn delegation_refusal(&self, _reply: &mut ActionResult) {}

    /// An authorizer that gave no answer counts as a deny (EA2).
    fn unanswered_authorizer_allows(&self) -> bool {
        false
    }

    /// The authorizer is asked on the receipt-consume path too, not only on direct delegation (EA1).
    fn asks_authorizer_on_receipt(&self) -> bool {
        true
    }

    /// An authorization receipt admits once (EA4).
    fn refuses_replayed_authorization(&self) -> bool {
        true
    }

    /// A widening authorizer constraint refuses the child (EA3). (One that is
    /// not an authority request at all makes the whole reply malformed.)
    fn refuses_unusable_constraint(&self) -> bool {
        true
    }

    /// The child's authority under an authorizer's constraints: the
    /// constraints admitted against what was admitted, so that one wider
    /// than it on any axis is an error and refuses the child (EA3).
    fn apply_constraint(
        &self,
        effective: &Authority,
        constraint: &AuthorityRequest,
    ) -> Result<Authority, AdmissionError> {
        admit(
            &Authority {
                delegation_depth: effective.delegation_depth + 1,
                ..effective.clone()
            },
            None,
            constraint,
        )
    }

    /// The sealed tool a call names: exactly the name, byte for byte (SD2;
    /// MODEL.md section 4). `None`: no sealed tool has that name.
    fn sealed_name(
        &self,
        sealed: &std::collections::BTreeMap<String, String>,
        tool: &str,
    ) -> Option<String> {
        sealed.contains_key(tool).then(|| tool.to_string())
    }

    /// The presented receipt is the one issued, seal and all (RC4).
    fn presented_receipt_matches(&self, presented: &Value, issued: &Value) -> bool {
        presented == issued
    }

    /// A receipt admits only a child of the parent it was issued to (RC3).
    fn receipt_bound_to_parent(&self, bound: &str, parent: &str) -> bool {
        bound == parent
    }

    /// A creation checks for drift every tool the request names, also those a
    /// role default then drops, not only the tools the child ends up with (SD5).
    fn checks_requested_tools_for_drift(&self) -> bool {
        true
    }

    /// Consuming a receipt checks the digests it sealed (SD1).
    fn checks_sealed_tools_on_consume(&self) -> bool {
        true
    }

    /// A terminal state is written to the store, not only its record (TR3).
    fn persists_terminal_state(&self) -> bool {
        true
    }

    /// Exact-call grants end with their instance's run (PG6).
    fn ends_grants_with_run(&self) -> bool {
        true
    }

    /// A turn addressed to a terminal instance is refused before the model (TR1).
    fn refuses_turn_on_terminal(&self) -> bool {
        true
    }

    /// A ceiling to put in place of the sealed one on resume; `None` keeps the sealed one (TR2).
    fn resumed_ceiling(
        &self,
        _instance: &InstanceRecord,
        _parent: Option<&InstanceRecord>,
    ) -> Option<Authority> {
        None
    }

    /// What a `resume` from a parent's model did instead of the rule (a
    /// resume of a live target only); `None` follows the rule (TR1).
    fn lifecycle_resume(
        &self,
        _state: &mut HostState,
        _journal: &mut dyn Journal,
        _target: &str,
    ) -> Option<ActionResult> {
        None
    }

    /// A wait from a parent's model settles from the target's state and makes
    /// no model request for it (LW1); `true` runs the target's turn instead.
    fn model_wait_runs_turn(&self) -> bool {
        false
    }

    /// A child's effective authority as admitted: what admission derived,
    /// its approval policy included (CE1).
    fn child_effective(&self, effective: Authority) -> Authority {
        effective
    }

    /// A fork as created: its source's sealed ceiling and risk (CE2, AR2).
    fn forked(&self, _fork: &mut InstanceRecord, _source_parent: Option<&InstanceRecord>) {}

    /// A delivered event id is never applied again (LW2).
    fn deduplicates_events(&self) -> bool {
        true
    }

    /// The one eligibility rule, on the manual and the automatic path alike (PG3, PG4).
    fn eligibility(
        &self,
        policy: &ApprovalPolicy,
        sandbox: &Sandbox,
        class: ActionClass,
        _auto_approve: bool,
    ) -> Eligibility {
        eligibility(policy, sandbox, class)
    }

    /// A clarification question is no approval: no policy refuses it, a
    /// bounded one included (PG4). `Some` refuses it with that denial.
    fn refuses_question(&self, _policy: &ApprovalPolicy) -> Option<Denial> {
        None
    }

    /// An exact-call grant matches only the arguments it was given for (PG6).
    fn grant_matches_arguments(&self, granted: &str, presented: &str) -> bool {
        granted == presented
    }

    /// Grants are consulted only after the seal and drift checks, so a grant
    /// never runs a tool whose definition changed after it was given (a grant
    /// is bound to the tool's digest: PG6, SD2).
    fn grants_after_drift_check(&self) -> bool {
        true
    }

    /// The automatic path leaves elevated or stale risk to a full review (AR1).
    fn auto_path_reads_risk(&self) -> bool {
        true
    }

    /// Whether an automatic allow went out before its decision was written
    /// (RS3); the correct host never dispatches first.
    fn dispatched_before_record(&self, _state: &mut HostState) -> bool {
        false
    }

    /// A failed write of an automatic decision refuses the call (PG1);
    /// `Ok` would dispatch it anyway.
    fn decision_write_failed(
        &self,
        _state: &mut HostState,
        _approval: &ApprovalRecord,
        denial: Denial,
    ) -> Result<(), Denial> {
        Err(denial)
    }

    /// A settled approval request is answered once (PG2).
    fn refuses_second_answer(&self) -> bool {
        true
    }

    /// The automatic-approval switch is written to the store (RS1).
    fn persists_auto_approve(&self) -> bool {
        true
    }

    /// Turning automatic approval off leaves its committed decisions as they are (PG5).
    fn auto_approve_turned_off(&self, _state: &mut HostState) {}

    /// The reply that issues a capability; it never carries the secret elsewhere (TC4).
    fn capability_issued(&self, _reply: &mut ActionResult, _id: &str, _secret: &str) {}

    /// A capability works only for the task and agent it is bound to (TC1).
    fn capability_bound(&self, capability: &ObservedCapability, task: &str, agent: &str) -> bool {
        capability.task == task && capability.agent == agent
    }

    /// A revoked capability works no more (TC2).
    fn capability_revoked(&self, capability: &ObservedCapability) -> bool {
        capability.revoked
    }

    /// A retried capability call returns the kept outcome instead of running again (TC5).
    fn returns_kept_outcome(&self) -> bool {
        true
    }

    /// Bounded credentials reach only delegation and lifecycle tools (CE5).
    fn bounded_reaches_only_delegation(&self) -> bool {
        true
    }
}

/// The correct host: every decision as MODEL.md states it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Correct;

impl Decisions for Correct {}

/// The decisions a [`HostState`] asks, shared by its clones. Two compare
/// equal when they print the same (`Correct`, or a mutant and its defect).
#[derive(Clone)]
pub struct SharedDecisions(Arc<dyn Decisions>);

impl SharedDecisions {
    pub fn new(decisions: impl Decisions + 'static) -> SharedDecisions {
        SharedDecisions(Arc::new(decisions))
    }

    /// Whether these are the correct host's decisions.
    pub fn is_correct(&self) -> bool {
        format!("{:?}", self.0) == format!("{Correct:?}")
    }
}

impl std::ops::Deref for SharedDecisions {
    type Target = dyn Decisions;
    fn deref(&self) -> &(dyn Decisions + 'static) {
        &*self.0
    }
}

impl Default for SharedDecisions {
    fn default() -> SharedDecisions {
        SharedDecisions::new(Correct)
    }
}

impl fmt::Debug for SharedDecisions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq for SharedDecisions {
    fn eq(&self, other: &SharedDecisions) -> bool {
        format!("{:?}", self.0) == format!("{:?}", other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_or_restored_state_decides_correctly() {
        assert!(HostState::default().decisions.is_correct());
        assert!(HostState::restore(&[]).unwrap().decisions.is_correct());
        assert!(HostState::new("k".into()).decisions.is_correct());
    }

    /// A decisions value that overrides one rule is not the correct host's,
    /// so a state carrying it never compares equal to a correct one.
    #[test]
    fn an_override_is_told_apart_from_the_correct_host() {
        #[derive(Debug)]
        struct LateReceipts;
        impl Decisions for LateReceipts {
            fn receipt_expired(&self, now: Millis, expires_at: Millis) -> bool {
                now > expires_at
            }
        }
        let broken = SharedDecisions::new(LateReceipts);
        assert!(!broken.is_correct());
        assert_ne!(broken, SharedDecisions::default());
        assert!(broken.receipt_expired(11, 10) && !broken.receipt_expired(10, 10));
        assert!(Correct.receipt_expired(10, 10));
    }
}
