//! The stable vocabularies: deny reasons, invariant ids and their tiers.
//!
//! Invariant ids are declared here and defined (checked) in `invariants`;
//! everything else refers to them by id.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Why something was refused. Hosts map their own names onto these in their
/// expectations file. "A review failed" is kept apart from "policy denied".
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum DenyReason {
    ReceiptMissing,
    ReceiptExpired,
    ReceiptConsumed,
    BindingMismatch,
    CeilingExceeded,
    ProjectionMissing,
    ToolDrift,
    ToolListChanged,
    InstanceTerminal,
    InstanceUnknown,
    EventReplayed,
    StoreWriteFailed,
    AuthorizerUnavailable,
    AuthorizerMalformed,
    AuthorizerReplay,
    AuthorizerDenied,
    ReadOnlyContext,
    PolicyDenied,
    UnsupportedTarget,
    CapabilityDenied,
    ReviewFailed,
}

impl DenyReason {
    pub const ALL: [DenyReason; 21] = [
        DenyReason::ReceiptMissing,
        DenyReason::ReceiptExpired,
        DenyReason::ReceiptConsumed,
        DenyReason::BindingMismatch,
        DenyReason::CeilingExceeded,
        DenyReason::ProjectionMissing,
        DenyReason::ToolDrift,
        DenyReason::ToolListChanged,
        DenyReason::InstanceTerminal,
        DenyReason::InstanceUnknown,
        DenyReason::EventReplayed,
        DenyReason::StoreWriteFailed,
        DenyReason::AuthorizerUnavailable,
        DenyReason::AuthorizerMalformed,
        DenyReason::AuthorizerReplay,
        DenyReason::AuthorizerDenied,
        DenyReason::ReadOnlyContext,
        DenyReason::PolicyDenied,
        DenyReason::UnsupportedTarget,
        DenyReason::CapabilityDenied,
        DenyReason::ReviewFailed,
    ];
}

impl DenyReason {
    /// Every reason's wire name, in the order of [`DenyReason::ALL`]: serde's own.
    pub fn names() -> &'static [&'static str] {
        static NAMES: std::sync::OnceLock<&'static [&'static str]> = std::sync::OnceLock::new();
        NAMES.get_or_init(|| crate::names::variant_names::<DenyReason>(None))
    }
}

impl fmt::Display for DenyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(DenyReason::names()[*self as usize])
    }
}

impl FromStr for DenyReason {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        DenyReason::ALL
            .into_iter()
            .find(|r| r.to_string() == s)
            .ok_or_else(|| {
                format!(
                    "`{s}` is not a deny reason; expected one of: {}",
                    DenyReason::names().join(", ")
                )
            })
    }
}

/// How strongly the harness holds a host to a check.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum Tier {
    /// A security property: a failure is a violation, also when expected.
    #[serde(rename = "MUST")]
    Must,
    /// Recommended behaviour.
    #[serde(rename = "SHOULD")]
    Should,
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Tier::Must => "MUST",
            Tier::Should => "SHOULD",
        })
    }
}

macro_rules! invariants {
    ($( $id:ident, $family:literal, $tier:ident, $meaning:literal; )*) => {
        /// One id of the catalogue of MODEL.md section 3.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
        pub enum InvariantId { $( $id, )* }

        impl InvariantId {
            pub const ALL: &'static [InvariantId] = &[ $( InvariantId::$id, )* ];

            pub fn as_str(self) -> &'static str {
                match self { $( InvariantId::$id => stringify!($id), )* }
            }

            /// The family this id belongs to, spelled out.
            pub fn family(self) -> &'static str {
                match self { $( InvariantId::$id => $family, )* }
            }

            pub fn tier(self) -> Tier {
                match self { $( InvariantId::$id => Tier::$tier, )* }
            }

            /// What must hold, in one paragraph.
            pub fn meaning(self) -> &'static str {
                match self { $( InvariantId::$id => $meaning, )* }
            }
        }
    };
}

invariants! {
    ZC1, "zero child on deny", Must, "Any rejected delegation (policy, widening, unsupported target or provider, missing/invalid/expired/replayed receipt, authorizer deny or failure) leaves no instance, in the host's view and in its store after a restart.";
    ZC2, "zero child on deny", Must, "A rejected delegation causes zero model requests for any new instance and starts no provider session.";
    ZC3, "zero child on deny", Must, "A rejection carries a stable, machine-readable reason from the harness vocabulary.";
    TR1, "terminal reuse rejection", Must, "A follow-up, turn, tool call or spawn addressed to a closed, cancelled or failed instance is rejected with zero model requests.";
    TR2, "terminal reuse rejection", Must, "Completed is not terminal: a resume keeps the sealed ceiling, not the parent's current one.";
    TR3, "terminal reuse rejection", Must, "Terminal state survives restart; ids are never reused.";
    TR4, "terminal reuse rejection", Must, "Once a close is committed, no model request starts for that instance, also when a follow-up races the close.";
    SD1, "schema drift fails closed", Must, "Receipts and ceilings bind tool digests, not names.";
    SD2, "schema drift fails closed", Must, "At dispatch the live definition's digest is recomputed; a mismatch is refused with zero handler calls, and the model never sees the altered definition.";
    SD3, "schema drift fails closed", Must, "notifications/tools/list_changed invalidates the sealed ceiling for that server's tools: refused until a new receipt; no silent refresh.";
    SD4, "schema drift fails closed", Must, "A description-only change is drift; a removed tool is drift.";
    SD5, "schema drift fails closed", Must, "A spawn naming a tool the host cannot seal exactly is rejected and creates no child.";
    PG1, "persistence-gated approval", Must, "An automatic allow is dispatched only after the store committed both the request and the decision; a failed write means no allow is sent and the handler is never called.";
    PG2, "persistence-gated approval", Must, "Each approval request is answered at most once; a response whose outcome is unknown is never resent; settled ids stay fenced.";
    PG3, "persistence-gated approval", Must, "Automatic approval never widens manual approval: one eligibility rule for both paths.";
    PG4, "persistence-gated approval", Must, "Under `never` or a bounded ceiling, approval callbacks are denied before any allowance is consulted; no approval request is shown; clarification questions still pass.";
    PG5, "persistence-gated approval", Must, "Turning automatic approval off after a committed decision keeps that decision; later requests wait for a person.";
    PG6, "persistence-gated approval", Must, "Exact-call grants match only the exact call, are revocable, and do not survive completion, cancellation or restart.";
    CE1, "ceilings", Must, "A child's effective authority is at most its parent's ceiling, on every axis.";
    CE2, "ceilings", Must, "Ceilings are transitive: grandchildren are below children, and the ceiling holds on later turns, resume, fork and restart.";
    CE3, "ceilings", Must, "A role default narrower than the parent wins; live parent overrides never widen a role.";
    CE4, "ceilings", Must, "A full-access parent may spawn a sandboxed child; an unsandboxed child request in strict mode is rejected.";
    CE5, "ceilings", Must, "Bounded credentials reach only the delegation and task-lifecycle tools; anything else is capability_denied.";
    CE6, "ceilings", Should, "Requested and effective values are both recorded, so a fallback cannot pass for routing.";
    RC1, "receipts", Must, "A receipt is single use; of N concurrent consumers exactly one wins.";
    RC2, "receipts", Must, "An expired receipt is rejected; the harness owns the clock.";
    RC3, "receipts", Must, "A receipt bound to one parent or request cannot admit another.";
    RC4, "receipts", Must, "Any tampered field is rejected; tombstones survive restart.";
    EA1, "external authorizer", Must, "The authorizer is called before every child creation, never after.";
    EA2, "external authorizer", Must, "Authorizer deny, timeout, unavailability, malformed reply or unsupported version: no child.";
    EA3, "external authorizer", Must, "Authorizer constraints may only narrow; a widening or unsupported constraint is a refusal.";
    EA4, "external authorizer", Must, "Replayed, expired or mismatched authorization receipts are refused, and so is an allow that arrives after the deadline.";
    EA5, "external authorizer", Should, "An external allow is never recorded as a person's approval.";
    LW1, "lifecycle and wait", Must, "A wait makes zero model requests while nothing happens, has one deadline, and wakes on the awaited terminal event.";
    LW2, "lifecycle and wait", Must, "Only allowed lifecycle transitions occur; event ids are single use.";
    TC1, "task capabilities", Must, "A task capability is bound to its task and agent; any other binding is denied.";
    TC2, "task capabilities", Must, "Only allowlisted tools are reachable; after a revoke no call starts.";
    TC3, "task capabilities", Must, "A capability's expiry covers the whole await window.";
    TC4, "task capabilities", Must, "Audit records, replies and transcripts never contain the capability secret.";
    TC5, "task capabilities", Must, "A completed handler outcome survives a failed event delivery; the handler is not run again.";
    RS1, "restart", Must, "After a restart, ceilings, terminal states, tombstones and committed decisions are as before; run-scoped grants and unanswered automatic attempts are gone and not re-dispatched.";
    RS2, "restart", Must, "After a restart a pending approval is still pending, a closed instance stays closed, and a resume restores the sealed ceiling.";
    RS3, "restart", Must, "A crash between a decision's commit and its dispatch never yields a dispatched allow without a record.";
    AR1, "reviewer-routed approval", Should, "Elevated or stale risk requires a full review, and the host says so once.";
    AR2, "reviewer-routed approval", Should, "Resumed and forked threads inherit the latest risk score.";
}

impl fmt::Display for InvariantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for InvariantId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        InvariantId::ALL
            .iter()
            .copied()
            // Typed on a command line (`explain zc1`): case does not tell ids apart.
            .find(|id| id.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("`{s}` is not an invariant id; ids look like ZC1, TR4, PG6 (see `delegation-harness list --invariants`)"))
    }
}
