//! Deliberate single defects ("mutants") of the reference host, so the harness can prove its scenarios catch real bugs.
//!
//! A scenario catalogue that passes on the correct host proves little by
//! itself: a check that never fails is no check. Each [`Defect`] re-creates
//! one bug that real hosts shipped or nearly shipped (see `seeds/` and
//! MODEL.md) and breaks exactly one invariant. Most change one decision of
//! the model's state machine through its seam
//! ([`delegation_model::decisions::Decisions`], implemented here by
//! [`Mutant`]); the rest change what the reference host does around it
//! (`reference/mod.rs` asks [`Defect`] directly). The model itself holds
//! no defect. `delegation-harness selftest` runs the catalogue against
//! every defect and expects each to be killed by a scenario that names the
//! defect's invariant.

use std::fmt;
use std::str::FromStr;

use delegation_model::authority::{
    ActionClass, AdmissionError, ApprovalPolicy, Authority, AuthorityRequest, Axis,
    RequestedSandbox, Sandbox,
};
use delegation_model::decisions::{Correct, Decisions, SharedDecisions};
use delegation_model::digest::{ToolDefinition, digest_value, sha256_hex};
use delegation_model::eligibility::Eligibility;
use delegation_model::state::{
    Admission, ApprovalRecord, Denial, HostState, InstanceRecord, Journal,
};
use delegation_model::{
    ActionResult, ApprovalState, DecidedBy, Decision, DecisionRecord, DenyReason, FaultPoint,
    InvariantId, LifecycleState, Millis, ObservedCapability, SpawnRequest,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use unicode_normalization::UnicodeNormalization as _;

mod races;
pub use races::{
    STALE_CHECK_WINDOW, StaleCheck, StaleUndo, act_on_stale_check, check_before_acting,
    undo_stale_act,
};

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
    DriftCheckedOnChildToolsOnly, "drift-checked-on-child-tools-only", SD5,
        "a spawn's drift check looks only at the tools the child ends up with, so a redefined tool the request names is admitted when the child's role default drops it";
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
    DigestOverReceivedBytes, "digest-over-received-bytes", SD2,
        "the tool digest is taken over the definition's bytes as received, not its RFC 8785 form, so the same definition written another way (key order, `1e1` for `10.0`, an escape) counts as drift, and a seal never matches the digest the model was shown";
    RootCheckedAsWritten, "root-checked-as-written", CE1,
        "a requested writable root is compared with the parent's as written, `..` kept (a string-prefix test), and normalised only after: `/w/repo/../other` passes as inside `/w/repo` and the child may write to `/w/other`";
    NamesNormalisedBeforeComparing, "names-normalised-before-comparing", SD5,
        "tool names are compared after Unicode NFKC normalisation with invisible characters removed, so a spawn naming a fullwidth, decomposed or zero-width variant of a sealed tool is sealed with that tool";
    ChildApprovalWidened, "child-approval-widened", CE1,
        "a child is admitted with an approval policy that asks a person for nothing, so what its parent must ask for runs unasked in the child (opencode 1.18.33 copies only a parent's deny rules into a child)";
    ReceiptConsumeCheckThenAct, "receipt-consume-check-then-act", RC1,
        "consume reads the receipt as issued, lets go of the store while it works, then writes the tombstone unconditionally: two consumers racing both win";
    FollowupRacesClose, "followup-races-close", TR4,
        "a follow-up checks that its instance is live, then sends its model request after a close committed in between";
    CapabilityCallCheckThenAct, "capability-call-check-then-act", TC2,
        "a capability call checks that its capability is not revoked, lets go of the store while it works, then runs the handler although a revoke committed in between";
    ConstraintClippedToChild, "constraint-clipped-to-child", EA3,
        "an authorizer constraint is applied axis by axis as a minimum with the child's authority: the axes it narrows bind the child, the axes on which it is wider than the parent are ignored instead of refusing the child";
    DispatchNameNormalised, "dispatch-name-normalised", SD2,
        "a tool call is looked up among the instance's sealed tools by its NFKC form with invisible characters removed, so a call naming a fullwidth, decomposed or zero-width look-alike runs the sealed tool";
    QuestionDeniedAsApproval, "question-denied-as-approval", PG4,
        "under `never` or a bounded ceiling a child's clarification question is denied like an approval request, so the child can never ask a person anything";
    GrantBeforeDriftCheck, "grant-before-drift-check", SD2,
        "exact-call grants are looked up by tool name and arguments before the seal and drift checks, so a call a person allowed runs again after the tool's definition changed";
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

/// Puts a defect into a state just built or restored from the store: its
/// decisions, and what `pending-restored-as-allowed` does on the way in.
/// `None` leaves the correct host.
pub fn install(state: &mut HostState, defect: Option<Defect>) {
    let Some(defect) = defect else {
        return;
    };
    state.decisions = SharedDecisions::new(Mutant(defect));
    if defect == Defect::PendingRestoredAsAllowed {
        for a in state.approvals.values_mut() {
            if a.approval.state == ApprovalState::Pending {
                a.approval.state = ApprovalState::Decided;
                a.approval.decision = Some(Decision::Allow);
                a.approval.decided_by = Some(DecidedBy::Policy);
            }
        }
    }
}

/// `child-before-policy-check`: the admission the host commits before it
/// checks anything, with the parent's whole ceiling as the child's authority.
pub fn unchecked_admission(
    state: &HostState,
    parent: &str,
    request: &SpawnRequest,
) -> Option<Admission> {
    let p = state.instances.get(parent)?;
    Some(Admission {
        parent: parent.to_string(),
        request: request.clone(),
        effective: p.ceiling.clone(),
        commitment: HostState::commitment(request),
        receipt: None,
    })
}

/// `names-normalised-before-comparing`: a name as a careless host compares
/// it, NFKC-normalised with zero-width and other invisible format characters removed.
fn loose_name(name: &str) -> String {
    name.nfkc()
        .filter(|c| {
            !matches!(
                c,
                '\u{200B}'..='\u{200F}' | '\u{2060}' | '\u{FEFF}' | '\u{00AD}'
            )
        })
        .collect()
}

/// `root-checked-as-written`: every requested root starts with one of the
/// ceiling's roots as text, and the network flag fits.
fn roots_prefixed_as_written(ceiling: &Authority, request: &AuthorityRequest) -> bool {
    let (
        Some(RequestedSandbox::WorkspaceWrite {
            writable_roots,
            network,
        }),
        Sandbox::WorkspaceWrite {
            writable_roots: parent_roots,
            network: parent_network,
        },
    ) = (&request.sandbox, &ceiling.sandbox)
    else {
        return false;
    };
    (!network || *parent_network)
        && writable_roots.iter().all(|root| {
            parent_roots
                .iter()
                .any(|p| root.starts_with(&p.to_string()))
        })
}

/// The model's decisions with one defect in them; every decision the
/// defect does not touch is the correct one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mutant(pub Defect);

impl Mutant {
    fn is(&self, defect: Defect) -> bool {
        self.0 == defect
    }

    /// `description-not-digested`: the digest a buggy host keeps for a tool,
    /// over the definition without its description.
    fn digest_without_description(def: &ToolDefinition) -> String {
        let mut raw = def.raw.clone();
        if let Some(o) = raw.as_object_mut() {
            o.remove("description");
        }
        digest_value(&raw).unwrap_or_else(|e| format!("invalid:{e}"))
    }

    /// `digest-over-received-bytes`: SHA-256 of the text as it arrived.
    fn digest_of_received_bytes(def: &ToolDefinition) -> String {
        match &def.received {
            Some(text) => sha256_hex(text.as_bytes()),
            None => def.digest.clone(),
        }
    }
}

impl Decisions for Mutant {
    fn sealed_tool_matches(&self, sealed: &str, live: &ToolDefinition) -> bool {
        match self.0 {
            // A served name counts as a match.
            Defect::ToolsBoundByName => true,
            Defect::DescriptionNotDigested => Self::digest_without_description(live) == sealed,
            Defect::DigestOverReceivedBytes => Self::digest_of_received_bytes(live) == sealed,
            _ => Correct.sealed_tool_matches(sealed, live),
        }
    }

    fn sealed_digest(&self, live: &ToolDefinition) -> String {
        if self.is(Defect::DescriptionNotDigested) {
            return Self::digest_without_description(live);
        }
        if self.is(Defect::DigestOverReceivedBytes) {
            return Self::digest_of_received_bytes(live);
        }
        Correct.sealed_digest(live)
    }

    fn takes_in_list_changed(&self) -> bool {
        !self.is(Defect::SilentListChanged)
    }

    fn receipt_expired(&self, now: Millis, expires_at: Millis) -> bool {
        if self.is(Defect::ReceiptExpiryOffByOne) {
            return now > expires_at;
        }
        Correct.receipt_expired(now, expires_at)
    }

    fn capability_expired(&self, now: Millis, expires_at: Millis) -> bool {
        if self.is(Defect::CapabilityExpiryOffByOne) {
            return now > expires_at;
        }
        Correct.capability_expired(now, expires_at)
    }

    fn wait_reached_deadline(&self, now: Millis, deadline: Millis) -> bool {
        self.is(Defect::WaitDeadlineEarly) || Correct.wait_reached_deadline(now, deadline)
    }

    fn role_default<'a>(
        &self,
        configured: Option<&'a AuthorityRequest>,
    ) -> Option<&'a AuthorityRequest> {
        // The request wins over a narrower role.
        configured.filter(|_| !self.is(Defect::RoleDefaultIgnored))
    }

    fn admit(
        &self,
        ceiling: &Authority,
        role_default: Option<&AuthorityRequest>,
        request: &AuthorityRequest,
    ) -> Result<Authority, AdmissionError> {
        match Correct.admit(ceiling, role_default, request) {
            // The tools the parent cannot seal are left out.
            Err(AdmissionError::ProjectionMissing(_)) if self.is(Defect::UnsealableToolDropped) => {
                let mut narrowed = request.clone();
                if let Some(tools) = &mut narrowed.tools {
                    tools.retain(|t| ceiling.tools.contains_key(t));
                }
                Correct.admit(ceiling, role_default, &narrowed)
            }
            // Requested tool names are looked up by their normal form.
            Err(AdmissionError::ProjectionMissing(_))
                if self.is(Defect::NamesNormalisedBeforeComparing) =>
            {
                let mut narrowed = request.clone();
                if let Some(tools) = &mut narrowed.tools {
                    for name in tools.iter_mut() {
                        if let Some(sealed) = ceiling
                            .tools
                            .keys()
                            .find(|s| loose_name(s) == loose_name(name))
                        {
                            name.clone_from(sealed);
                        }
                    }
                }
                Correct.admit(ceiling, role_default, &narrowed)
            }
            // The roots pass a string-prefix test as written, then are normalised.
            Err(AdmissionError::CeilingExceeded(axes))
                if self.is(Defect::RootCheckedAsWritten)
                    && axes == [Axis::Sandbox]
                    && roots_prefixed_as_written(ceiling, request) =>
            {
                let mut as_parent = request.clone();
                as_parent.sandbox = Some(ceiling.sandbox.clone().into());
                let mut effective = Correct.admit(ceiling, role_default, &as_parent)?;
                if let Some(requested) = &request.sandbox {
                    effective.sandbox = requested.normalise()?;
                }
                Ok(effective)
            }
            // The network flag is not compared.
            Err(AdmissionError::CeilingExceeded(_)) if self.is(Defect::NetworkAxisIgnored) => {
                let mut ceiling = ceiling.clone();
                if let Sandbox::WorkspaceWrite { network, .. } = &mut ceiling.sandbox {
                    *network = true;
                }
                Correct.admit(&ceiling, role_default, request)
            }
            r => r,
        }
    }

    fn strict_mode_refuses(&self, strict_mode: bool, effective: &Authority) -> bool {
        !self.is(Defect::StrictModeIgnored) && Correct.strict_mode_refuses(strict_mode, effective)
    }

    fn admission_record(&self, record: &mut DecisionRecord) {
        match self.0 {
            Defect::RecordOmitsRequested => record.requested = None,
            Defect::ExternalAllowAsPerson if record.decided_by.is_some() => {
                record.decided_by = Some(DecidedBy::Person)
            }
            _ => {}
        }
    }

    fn tombstones_consumed_receipts(&self) -> bool {
        !self.is(Defect::ReceiptNotTombstoned)
    }

    fn delegation_refusal(&self, reply: &mut ActionResult) {
        if self.is(Defect::DenialWithoutReason) {
            reply.reason = None;
        }
    }

    fn unanswered_authorizer_allows(&self) -> bool {
        self.is(Defect::AuthorizerTimeoutAllows)
    }

    fn asks_authorizer_on_receipt(&self) -> bool {
        !self.is(Defect::AuthorizerSkippedOnReceipt)
    }

    fn refuses_replayed_authorization(&self) -> bool {
        !self.is(Defect::AuthorizationReplayAccepted)
    }

    fn refuses_unusable_constraint(&self) -> bool {
        !self.is(Defect::WideningConstraintDropped)
    }

    fn apply_constraint(
        &self,
        effective: &Authority,
        constraint: &AuthorityRequest,
    ) -> Result<Authority, AdmissionError> {
        match Correct.apply_constraint(effective, constraint) {
            // The axes the constraint widens are dropped; the rest still binds.
            Err(AdmissionError::CeilingExceeded(axes))
                if self.is(Defect::ConstraintClippedToChild) =>
            {
                let mut clipped = constraint.clone();
                for axis in axes {
                    match axis {
                        Axis::Sandbox => clipped.sandbox = None,
                        Axis::ApprovalPolicy => clipped.approval_policy = None,
                        Axis::Tools => clipped.tools = None,
                        Axis::Cwd => clipped.cwd = None,
                        Axis::Provider => clipped.provider = None,
                        Axis::Delegation => clipped.delegation_depth = None,
                    }
                }
                Correct.apply_constraint(effective, &clipped)
            }
            r => r,
        }
    }

    fn sealed_name(
        &self,
        sealed: &std::collections::BTreeMap<String, String>,
        tool: &str,
    ) -> Option<String> {
        if !self.is(Defect::DispatchNameNormalised) {
            return Correct.sealed_name(sealed, tool);
        }
        // The sealed tool whose normal form the call's name shares.
        sealed
            .keys()
            .find(|s| loose_name(s) == loose_name(tool))
            .cloned()
    }

    fn presented_receipt_matches(&self, presented: &Value, issued: &Value) -> bool {
        // The id alone is trusted.
        self.is(Defect::ReceiptSealNotChecked)
            || Correct.presented_receipt_matches(presented, issued)
    }

    fn receipt_bound_to_parent(&self, bound: &str, parent: &str) -> bool {
        self.is(Defect::ReceiptParentNotChecked) || Correct.receipt_bound_to_parent(bound, parent)
    }

    fn checks_sealed_tools_on_consume(&self) -> bool {
        !self.is(Defect::ReceiptBindsNames)
    }

    fn checks_requested_tools_for_drift(&self) -> bool {
        !self.is(Defect::DriftCheckedOnChildToolsOnly)
    }

    fn persists_terminal_state(&self) -> bool {
        // Only the audit record is written.
        !self.is(Defect::TerminalNotPersisted)
    }

    fn ends_grants_with_run(&self) -> bool {
        !self.is(Defect::GrantsSurviveCompletion)
    }

    fn refuses_turn_on_terminal(&self) -> bool {
        !self.is(Defect::FollowupAfterClose)
    }

    fn resumed_ceiling(
        &self,
        _instance: &InstanceRecord,
        parent: Option<&InstanceRecord>,
    ) -> Option<Authority> {
        // The parent's current ceiling, derived again.
        parent
            .filter(|_| self.is(Defect::ResumeRederivesCeiling))
            .map(|p| p.ceiling.clone())
    }

    fn lifecycle_resume(
        &self,
        state: &mut HostState,
        journal: &mut dyn Journal,
        target: &str,
    ) -> Option<ActionResult> {
        if !self.is(Defect::LifecycleResumeReopens) {
            return None;
        }
        // A terminal target is set running again, committed like any state change.
        let inst = state
            .instances
            .get(target)
            .filter(|i| i.state.is_terminal())?;
        let mut reopened = inst.clone();
        reopened.state = LifecycleState::Running;
        state.commit_instance(journal, &reopened).ok()?;
        state.instances.insert(target.to_string(), reopened);
        let mut r = ActionResult::ok();
        r.instance = Some(target.into());
        Some(r)
    }

    fn model_wait_runs_turn(&self) -> bool {
        self.is(Defect::ModelWaitRunsTurn)
    }

    fn child_effective(&self, mut effective: Authority) -> Authority {
        if self.is(Defect::ChildApprovalWidened) {
            // Asks for nothing and denies nothing, whatever the parent's policy.
            effective.approval_policy = ApprovalPolicy::Granular {
                ask: Default::default(),
                deny: Default::default(),
            };
        }
        effective
    }

    fn forked(&self, fork: &mut InstanceRecord, source_parent: Option<&InstanceRecord>) {
        match (self.0, source_parent) {
            (Defect::ForkDropsRisk, _) => fork.risk = None,
            (Defect::ForkTakesParentCeiling, Some(p)) => fork.ceiling = p.ceiling.clone(),
            _ => {}
        }
    }

    fn deduplicates_events(&self) -> bool {
        !self.is(Defect::EventReplayAccepted)
    }

    fn eligibility(
        &self,
        policy: &ApprovalPolicy,
        sandbox: &Sandbox,
        class: ActionClass,
        auto_approve: bool,
    ) -> Eligibility {
        match Correct.eligibility(policy, sandbox, class, auto_approve) {
            // The automatic path never asks the read-only rule.
            Eligibility::Denied(DenyReason::ReadOnlyContext)
                if auto_approve && self.is(Defect::AutoSkipsReadOnly) =>
            {
                Eligibility::Approvable
            }
            // Under `never` the escalation is asked for anyway.
            Eligibility::Denied(DenyReason::PolicyDenied)
                if *policy == ApprovalPolicy::Never && self.is(Defect::NeverRaisesApproval) =>
            {
                Eligibility::Approvable
            }
            e => e,
        }
    }

    fn refuses_question(&self, policy: &ApprovalPolicy) -> Option<Denial> {
        // The question goes down the approval path, where a bounded policy asks no one.
        (self.is(Defect::QuestionDeniedAsApproval) && policy.is_bounded()).then(|| Denial {
            reason: DenyReason::PolicyDenied,
            detail: "a bounded ceiling asks no one".into(),
        })
    }

    fn grant_matches_arguments(&self, granted: &str, presented: &str) -> bool {
        self.is(Defect::GrantMatchesToolOnly) || Correct.grant_matches_arguments(granted, presented)
    }

    fn grants_after_drift_check(&self) -> bool {
        !self.is(Defect::GrantBeforeDriftCheck)
    }

    fn auto_path_reads_risk(&self) -> bool {
        !self.is(Defect::AutoIgnoresRisk)
    }

    fn dispatched_before_record(&self, state: &mut HostState) -> bool {
        // The allow goes out first; the crash comes before the record.
        self.is(Defect::DispatchBeforeRecord)
            && state.take_fault(FaultPoint::CrashAfterDecisionCommit)
    }

    fn decision_write_failed(
        &self,
        state: &mut HostState,
        approval: &ApprovalRecord,
        denial: Denial,
    ) -> Result<(), Denial> {
        if !self.is(Defect::SwallowStoreError) {
            return Correct.decision_write_failed(state, approval, denial);
        }
        // The error is dropped and the allow goes out (seed 002).
        state
            .approvals
            .insert(approval.approval.id.clone(), approval.clone());
        Ok(())
    }

    fn refuses_second_answer(&self) -> bool {
        !self.is(Defect::AnswerTwice)
    }

    fn persists_auto_approve(&self) -> bool {
        !self.is(Defect::AutoApproveNotPersisted)
    }

    fn auto_approve_turned_off(&self, state: &mut HostState) {
        if !self.is(Defect::AutoOffDiscardsDecisions) {
            return;
        }
        // The automatic path's decisions go back to pending.
        for a in state.approvals.values_mut() {
            if a.approval.decided_by == Some(DecidedBy::Policy) {
                a.approval.state = ApprovalState::Pending;
                a.approval.decision = None;
                a.approval.decided_by = None;
            }
        }
    }

    fn capability_issued(&self, reply: &mut ActionResult, id: &str, secret: &str) {
        if self.is(Defect::SecretInAudit) {
            reply.detail = Some(format!("issued capability {id} with secret {secret}"));
        }
    }

    fn capability_bound(&self, capability: &ObservedCapability, task: &str, agent: &str) -> bool {
        self.is(Defect::CapabilityBindingUnchecked)
            || Correct.capability_bound(capability, task, agent)
    }

    fn capability_revoked(&self, capability: &ObservedCapability) -> bool {
        !self.is(Defect::CapabilityRevocationIgnored) && Correct.capability_revoked(capability)
    }

    fn returns_kept_outcome(&self) -> bool {
        !self.is(Defect::CapabilityRetryReruns)
    }

    fn bounded_reaches_only_delegation(&self) -> bool {
        !self.is(Defect::BoundedReachesAnyTool)
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
    fn install_puts_exactly_the_named_defect_in_and_none_leaves_the_correct_host() {
        let mut correct = HostState::restore(&[]).unwrap();
        install(&mut correct, None);
        assert!(correct.decisions.is_correct());
        for &d in Defect::ALL {
            let mut state = HostState::restore(&[]).unwrap();
            install(&mut state, Some(d));
            assert!(!state.decisions.is_correct(), "{d}");
            assert_eq!(format!("{:?}", state.decisions), format!("{:?}", Mutant(d)));
        }
    }

    /// A decision the mutant's defect does not touch stays the correct one.
    #[test]
    fn a_mutant_changes_only_its_own_decision() {
        let late = Mutant(Defect::ReceiptExpiryOffByOne);
        let other = Mutant(Defect::AnswerTwice);
        assert!(!late.receipt_expired(10, 10) && late.receipt_expired(11, 10));
        assert!(other.receipt_expired(10, 10));
        assert!(!late.capability_expired(9, 10) && late.capability_expired(10, 10));
        assert!(!other.refuses_second_answer() && late.refuses_second_answer());
    }
}
