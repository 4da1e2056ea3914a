//! What a harness asks of a host, what the host answers, what it shows when
//! observed, and what the harness's own observers saw: the vocabulary shared
//! by the model, the protocol, the invariant checkers and the runner.
//!
//! Every `Action` serialises as `{"method": ..., "params": {...}}`, which is
//! exactly the body of a JSON-RPC 2.0 request, so the protocol adds only the
//! envelope.

use std::collections::BTreeMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::authority::{ActionClass, Authority, AuthorityRequest};
use crate::vocabulary::DenyReason;

/// Instance, receipt, approval, grant, capability and event ids: opaque
/// strings chosen by the host, unique for the life of its store.
pub type Id = String;

/// Milliseconds on the harness's clock. The harness owns time: a host reads
/// it only from `clock/set`.
pub type Millis = u64;

/// Host-wide settings, sent once after `initialize` and again after a restart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Configuration {
    /// Role defaults by role name. A role absent here has no default: the parent's ceiling applies.
    #[serde(default)]
    pub roles: BTreeMap<String, AuthorityRequest>,
    /// Automatic approval on start (persisted by the host; `approval/auto` changes it).
    #[serde(default)]
    pub auto_approve: bool,
    /// Strict mode: a child without a sandbox (full-access) is refused (CE4).
    #[serde(default)]
    pub strict_mode: bool,
    /// The external authorizer must allow every child creation (EA).
    #[serde(default)]
    pub authorizer_required: bool,
    /// Receipts live this long after issue unless the request says otherwise.
    #[serde(default = "default_receipt_ttl")]
    pub receipt_ttl_ms: Millis,
}

fn default_receipt_ttl() -> Millis {
    60_000
}

/// The same defaults an empty JSON object gets, so that code and scenario files agree.
impl Default for Configuration {
    fn default() -> Self {
        Configuration {
            roles: BTreeMap::new(),
            auto_approve: false,
            strict_mode: false,
            authorizer_required: false,
            receipt_ttl_ms: default_receipt_ttl(),
        }
    }
}

/// A root instance the harness starts directly.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRequest {
    pub role: String,
    #[serde(default = "default_model")]
    pub model: String,
    /// As written: the host normalises its roots.
    pub sandbox: crate::authority::RequestedSandbox,
    pub approval_policy: crate::authority::ApprovalPolicy,
    /// Tool names to seal from the tool server's current definitions.
    #[serde(default)]
    pub tools: Vec<String>,
    pub cwd: String,
    #[serde(default = "default_provider")]
    pub provider: String,
    #[serde(default = "default_depth")]
    pub delegation_depth: u32,
}

pub fn default_model() -> String {
    "reference-model".into()
}
pub fn default_provider() -> String {
    "harness".into()
}
fn default_depth() -> u32 {
    2
}

/// What a parent asks for when it delegates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnRequest {
    pub role: String,
    /// The child's first input.
    pub task: String,
    #[serde(default)]
    pub authority: AuthorityRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `local` (the default) or a remote target name; remote targets are a capability.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Relocate the child into a new worktree; a capability.
    #[serde(default, skip_serializing_if = "is_false")]
    pub worktree: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One of the model-facing tools a parent's model addresses an existing child with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LifecycleOp {
    /// Give the child input: it runs a turn (its model request).
    SendInput,
    /// Reopen an idle child; with a `message`, it then runs a turn on it.
    Resume,
    /// Close the child: terminal.
    Close,
    /// Ask whether the child has settled, without blocking (the deadline is now).
    Wait,
}

/// A parent's model calling one lifecycle tool on one child, by the child's id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LifecycleCall {
    pub op: LifecycleOp,
    /// The child's instance id (a scenario names it by alias; the runner resolves it).
    pub target: Id,
    /// The input of `send_input` (required there) or of a `resume` that also runs a turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A delegation grant as the host issued it. The harness may hand it back
/// altered to test tamper detection, so every field is plain data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Receipt {
    pub id: Id,
    pub parent: Id,
    pub call_id: String,
    /// Digest of the canonical spawn request.
    pub commitment: String,
    pub role: String,
    pub authority: Authority,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<String>,
    pub issued_at: Millis,
    pub expires_at: Millis,
    /// The host's seal over every other field.
    pub seal: String,
}

/// An approval answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    Allow,
    Deny,
    /// Allow, and allow this exact call again during this run.
    AllowExact,
}

/// Fault points a host can arm (capability `fault-injection`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum FaultPoint {
    #[serde(rename = "store.write_approval_request")]
    StoreWriteApprovalRequest,
    #[serde(rename = "store.write_decision")]
    StoreWriteDecision,
    #[serde(rename = "store.write_instance")]
    StoreWriteInstance,
    #[serde(rename = "event.deliver")]
    EventDeliver,
    #[serde(rename = "authorizer.call")]
    AuthorizerCall,
    #[serde(rename = "model.call")]
    ModelCall,
    /// The process dies after a decision is committed and before it is dispatched (RS3).
    #[serde(rename = "crash.after_decision_commit")]
    CrashAfterDecisionCommit,
}

/// Everything the harness can ask a host to do. Serialises as a JSON-RPC
/// `method` and `params`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "method", content = "params")]
pub enum Action {
    #[serde(rename = "host/configure")]
    Configure(Configuration),
    #[serde(rename = "instance/start")]
    Start(StartRequest),
    /// One-shot delegation: admission, receipt and creation in one call.
    #[serde(rename = "instance/delegate")]
    Delegate { parent: Id, request: SpawnRequest },
    #[serde(rename = "receipt/prepare")]
    PrepareReceipt {
        parent: Id,
        call_id: String,
        request: SpawnRequest,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl_ms: Option<Millis>,
    },
    #[serde(rename = "receipt/consume")]
    ConsumeReceipt {
        receipt: Value,
        /// The parent presenting the receipt and the request it claims; a mismatch is RC3.
        parent: Id,
        request: SpawnRequest,
    },
    #[serde(rename = "receipt/revoke")]
    RevokeReceipt { receipt: Id },
    /// A turn: the host sends `input` to the model endpoint on behalf of the
    /// instance and acts on the scripted reply. A follow-up is a turn on an
    /// instance that already ran.
    #[serde(rename = "instance/turn")]
    Turn { instance: Id, input: String },
    /// Direct tool-call injection, as if the instance's model had asked for it.
    #[serde(rename = "instance/tool_call")]
    ToolCall {
        instance: Id,
        tool: String,
        #[serde(default)]
        arguments: Value,
    },
    #[serde(rename = "instance/close")]
    Close { instance: Id },
    #[serde(rename = "instance/cancel")]
    Cancel { instance: Id },
    #[serde(rename = "instance/fail")]
    Fail { instance: Id },
    #[serde(rename = "instance/resume")]
    Resume { instance: Id },
    #[serde(rename = "instance/fork")]
    Fork { instance: Id },
    /// Block until the instance reaches a terminal or completed state, or the deadline passes.
    #[serde(rename = "instance/wait")]
    Wait { instance: Id, deadline: Millis },
    /// Deliver a host event (from a child, a task); ids are single use (LW2).
    #[serde(rename = "event/deliver")]
    DeliverEvent {
        event: Id,
        instance: Id,
        kind: String,
    },
    #[serde(rename = "approval/answer")]
    Answer { request: Id, decision: Decision },
    /// The instance asks a person a clarification question: not an
    /// approval, so it reaches the person and waits for an answer also
    /// under `never` or a bounded ceiling (PG4).
    #[serde(rename = "instance/ask")]
    Ask { instance: Id, question: String },
    /// A person's answer to a clarification question.
    #[serde(rename = "question/answer")]
    AnswerQuestion { question: Id, answer: String },
    #[serde(rename = "approval/auto")]
    SetAutoApprove { enabled: bool },
    #[serde(rename = "grant/revoke")]
    RevokeGrant { grant: Id },
    #[serde(rename = "capability/issue")]
    IssueCapability {
        task: String,
        agent: Id,
        tools: Vec<String>,
        expires_at: Millis,
        /// A secret chosen by the harness (a canary); the host must use it and
        /// never echo it. Absent: the host generates one and returns it once.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        secret: Option<String>,
    },
    #[serde(rename = "capability/call")]
    CapabilityCall {
        secret: String,
        task: String,
        agent: Id,
        tool: String,
        #[serde(default)]
        arguments: Value,
        /// Idempotency key: once a call with this id ran, its outcome is
        /// kept (durably, before its completion event), and a retry with the
        /// same id is refused `event_replayed` with the kept outcome in
        /// `detail`; the handler never runs again (TC5).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    #[serde(rename = "capability/revoke")]
    RevokeCapability { capability: Id },
    #[serde(rename = "clock/set")]
    SetClock { now: Millis },
    #[serde(rename = "fault/arm")]
    ArmFault {
        point: FaultPoint,
        /// Fail this many calls; absent: until cleared.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        times: Option<u32>,
    },
    #[serde(rename = "fault/clear")]
    ClearFault { point: FaultPoint },
    /// The harness, playing the host's approval reviewer, scores an
    /// instance's risk: `low`, `elevated` or `stale` (capability `reviewer`).
    #[serde(rename = "review/score")]
    ScoreRisk { instance: Id, risk: String },
    #[serde(rename = "state/observe")]
    Observe,
}

impl Action {
    /// Every action's JSON-RPC method name: serde's own list, so a method
    /// is known exactly when some action deserialises from it.
    pub fn method_names() -> &'static [&'static str] {
        static NAMES: std::sync::OnceLock<&'static [&'static str]> = std::sync::OnceLock::new();
        NAMES.get_or_init(|| crate::names::variant_names::<Action>(Some("method")))
    }

    /// Whether a host lists the MCP tools to perform this action, and so
    /// takes in a pending `tools/list_changed` first (SD3): the one list the
    /// model's world and the reference host both follow.
    pub fn lists_tools(&self) -> bool {
        matches!(
            self,
            Action::Start(_)
                | Action::Delegate { .. }
                | Action::PrepareReceipt { .. }
                | Action::ConsumeReceipt { .. }
                | Action::Turn { .. }
                | Action::ToolCall { .. }
                | Action::Answer { .. }
                | Action::CapabilityCall { .. }
        )
    }

    /// The JSON-RPC method name.
    pub fn method(&self) -> &'static str {
        match self {
            Action::Configure(_) => "host/configure",
            Action::Start(_) => "instance/start",
            Action::Delegate { .. } => "instance/delegate",
            Action::PrepareReceipt { .. } => "receipt/prepare",
            Action::ConsumeReceipt { .. } => "receipt/consume",
            Action::RevokeReceipt { .. } => "receipt/revoke",
            Action::Turn { .. } => "instance/turn",
            Action::ToolCall { .. } => "instance/tool_call",
            Action::Close { .. } => "instance/close",
            Action::Cancel { .. } => "instance/cancel",
            Action::Fail { .. } => "instance/fail",
            Action::Resume { .. } => "instance/resume",
            Action::Fork { .. } => "instance/fork",
            Action::Wait { .. } => "instance/wait",
            Action::DeliverEvent { .. } => "event/deliver",
            Action::Answer { .. } => "approval/answer",
            Action::Ask { .. } => "instance/ask",
            Action::AnswerQuestion { .. } => "question/answer",
            Action::SetAutoApprove { .. } => "approval/auto",
            Action::RevokeGrant { .. } => "grant/revoke",
            Action::IssueCapability { .. } => "capability/issue",
            Action::CapabilityCall { .. } => "capability/call",
            Action::RevokeCapability { .. } => "capability/revoke",
            Action::SetClock { .. } => "clock/set",
            Action::ArmFault { .. } => "fault/arm",
            Action::ClearFault { .. } => "fault/clear",
            Action::ScoreRisk { .. } => "review/score",
            Action::Observe => "state/observe",
        }
    }

    /// The instance an action is addressed to, for terminal-reuse checks.
    pub fn addressed_instance(&self) -> Option<&str> {
        match self {
            Action::Delegate { parent, .. } | Action::PrepareReceipt { parent, .. } => Some(parent),
            Action::Turn { instance, .. }
            | Action::ToolCall { instance, .. }
            | Action::Close { instance }
            | Action::Cancel { instance }
            | Action::Fail { instance }
            | Action::Resume { instance }
            | Action::Fork { instance }
            | Action::Wait { instance, .. }
            | Action::Ask { instance, .. } => Some(instance),
            _ => None,
        }
    }
}

/// Whether an action went through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    Denied,
}

/// The host's answer to any action. Fields an action does not produce are absent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ActionResult {
    pub outcome: Outcome,
    /// Present exactly when `outcome` is `denied`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<DenyReason>,
    /// Free text for people; never parsed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The instance created (start, delegate, consume, fork) or addressed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<Id>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Receipt>,
    /// The effective authority (start, delegate, consume, resume, fork).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective: Option<Authority>,
    /// What a turn did after the model answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnReport>,
    /// What a tool call did (direct, or inside a turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<ToolCallReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<CapabilityToken>,
    /// The clarification question an `instance/ask` raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<Id>,
    /// Why a wait returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub woke: Option<WakeReason>,
    /// The host's full state, for `state/observe`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<Observed>,
    /// The values of this answer that an adapter inferred instead of reading
    /// them from the host's API, output or store (absent: all from the host).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inferred: Vec<ReportedValue>,
}

impl ActionResult {
    pub fn ok() -> ActionResult {
        ActionResult {
            outcome: Outcome::Ok,
            reason: None,
            detail: None,
            instance: None,
            receipt: None,
            effective: None,
            turn: None,
            tool_call: None,
            capability: None,
            question: None,
            woke: None,
            observed: None,
            inferred: Vec::new(),
        }
    }

    pub fn denied(reason: DenyReason, detail: impl Into<String>) -> ActionResult {
        ActionResult {
            outcome: Outcome::Denied,
            reason: Some(reason),
            detail: Some(detail.into()),
            ..ActionResult::ok()
        }
    }

    pub fn is_ok(&self) -> bool {
        self.outcome == Outcome::Ok
    }
}

/// What the model endpoint answered in a turn, and what the host did with it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", tag = "reply")]
pub enum TurnReport {
    /// The model answered with a message; the turn ended and the instance is completed.
    Message { text: String },
    /// The model asked for a tool; see `tool_call` in the result.
    ToolCall { tool: String },
    /// The model asked to delegate; the nested result is the delegation's.
    Spawn { spawn: Box<ActionResult> },
    /// The model called a lifecycle tool on a child; the nested result is
    /// what the host did to the target (refused, closed, resumed, or the
    /// target's own turn, with its `turn`).
    Lifecycle {
        op: LifecycleOp,
        target: Id,
        lifecycle: Box<ActionResult>,
    },
    /// The model endpoint failed; the instance failed.
    ModelFailed { detail: String },
}

/// What became of one tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCallReport {
    pub tool: String,
    pub outcome: ToolCallOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<DenyReason>,
    /// The approval request raised for this call, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Id>,
    /// The handler's result text, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallOutcome {
    /// The handler ran.
    Executed,
    /// Waiting for a person's answer; nothing ran.
    PendingApproval,
    /// Refused; nothing ran.
    Denied,
}

/// A task capability as issued. A host-generated secret appears here once
/// and nowhere else; a harness-chosen secret is never echoed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CapabilityToken {
    pub id: Id,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WakeReason {
    /// The awaited instance completed or reached a terminal state.
    Event,
    /// The deadline passed first.
    Deadline,
}

/// Lifecycle states (MODEL.md section 2).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum LifecycleState {
    Preregistered,
    Running,
    /// Idle and resumable with the same ceiling.
    Completed,
    Closed,
    Cancelled,
    Failed,
}

impl LifecycleState {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            LifecycleState::Closed | LifecycleState::Cancelled | LifecycleState::Failed
        )
    }

    /// The allowed transitions; anything else is an LW2 violation.
    pub fn may_become(self, next: LifecycleState) -> bool {
        use LifecycleState::*;
        match (self, next) {
            (a, b) if a == b => true,
            (Preregistered, Running | Closed | Cancelled | Failed) => true,
            (Running, Completed | Closed | Cancelled | Failed) => true,
            (Completed, Running | Closed | Cancelled | Failed) => true,
            _ => false,
        }
    }
}

/// A value a host reports through its adapter, as named in an `inferred`
/// list: the adapter's declaration that it did not read this value from the
/// host's own API, output or store but worked it out itself. A verdict never
/// rests on such a value alone (the runner's provenance rule).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ReportedValue {
    /// A result's `outcome`.
    Outcome,
    /// A result's deny `reason`.
    Reason,
    /// A result's `effective` authority.
    Effective,
    /// The result of a spawn inside a turn (`turn.spawn`).
    Spawn,
    /// A tool call's report (`tool_call`).
    ToolCall,
    /// What a turn reports (`turn`), apart from its spawn and tool call.
    Turn,
    /// The instance a result names (`instance`).
    Instance,
    /// Why a wait returned (`woke`).
    Woke,
    /// The set of instances an observation lists.
    Instances,
    /// An instance's lifecycle state.
    State,
    /// An instance's sealed ceiling.
    Ceiling,
    /// What an instance's delegation asked for.
    Requested,
    /// An instance's parent.
    Parent,
    /// An instance's reviewer risk score.
    Risk,
    /// Decision records.
    Records,
    /// Approval requests and their decisions.
    Approvals,
    /// Receipts and tombstones.
    Receipts,
    /// Exact-call grants.
    Grants,
    /// Task capabilities.
    Capabilities,
    /// Clarification questions and their answers.
    Questions,
}

impl ReportedValue {
    /// The name used in `inferred` lists and in reports.
    pub fn name(self) -> &'static str {
        match self {
            ReportedValue::Outcome => "outcome",
            ReportedValue::Reason => "reason",
            ReportedValue::Effective => "effective",
            ReportedValue::Spawn => "spawn",
            ReportedValue::ToolCall => "tool_call",
            ReportedValue::Turn => "turn",
            ReportedValue::Instance => "instance",
            ReportedValue::Woke => "woke",
            ReportedValue::Instances => "instances",
            ReportedValue::State => "state",
            ReportedValue::Ceiling => "ceiling",
            ReportedValue::Requested => "requested",
            ReportedValue::Parent => "parent",
            ReportedValue::Risk => "risk",
            ReportedValue::Records => "records",
            ReportedValue::Approvals => "approvals",
            ReportedValue::Receipts => "receipts",
            ReportedValue::Grants => "grants",
            ReportedValue::Capabilities => "capabilities",
            ReportedValue::Questions => "questions",
        }
    }
}

/// The host's view of its whole state, as `state/observe` returns it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Observed {
    pub now: Millis,
    pub auto_approve: bool,
    #[serde(default)]
    pub instances: Vec<ObservedInstance>,
    #[serde(default)]
    pub approvals: Vec<ObservedApproval>,
    #[serde(default)]
    pub receipts: Vec<ObservedReceipt>,
    #[serde(default)]
    pub grants: Vec<ObservedGrant>,
    #[serde(default)]
    pub capabilities: Vec<ObservedCapability>,
    /// Clarification questions asked of a person, pending or answered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<ObservedQuestion>,
    // Each record shared, not copied: a history holds an observation per
    // step, and copying every record into each made it quadratic.
    #[serde(default)]
    pub records: Vec<Arc<DecisionRecord>>,
    /// The parts of this observation an adapter inferred rather than read
    /// from the host (absent: all from the host).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inferred: Vec<ReportedValue>,
}

impl Observed {
    pub fn instance(&self, id: &str) -> Option<&ObservedInstance> {
        self.instances.iter().find(|i| i.id == id)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ObservedInstance {
    pub id: Id,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Id>,
    pub state: LifecycleState,
    pub role: String,
    pub model: String,
    /// What the delegation asked for (absent for roots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<AuthorityRequest>,
    /// The sealed ceiling: the effective authority at admission.
    pub ceiling: Authority,
    /// Latest reviewer risk score, where the host has a reviewer (AR).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<String>,
    /// This instance's values an adapter inferred rather than read from the
    /// host (absent: all from the host).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inferred: Vec<ReportedValue>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    Pending,
    Decided,
    Dispatched,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    Person,
    Policy,
    External,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ObservedApproval {
    pub id: Id,
    pub instance: Id,
    pub class: ActionClass,
    pub tool: String,
    pub tool_digest: String,
    pub arguments_digest: String,
    pub state: ApprovalState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<DecidedBy>,
}

/// Where a clarification question stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QuestionState {
    /// Shown to a person, waiting for the answer.
    Pending,
    Answered,
}

/// A clarification question an instance asked a person (`instance/ask`):
/// no approval, and no policy decides it (PG4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ObservedQuestion {
    pub id: Id,
    pub instance: Id,
    pub text: String,
    pub state: QuestionState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptState {
    Issued,
    /// Consumed: a tombstone that outlives restarts.
    Consumed,
    Expired,
    Revoked,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ObservedReceipt {
    pub id: Id,
    pub parent: Id,
    pub state: ReceiptState,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ObservedGrant {
    pub id: Id,
    pub instance: Id,
    pub tool: String,
    pub tool_digest: String,
    pub arguments_digest: String,
}

/// A task capability as observed: never its secret.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ObservedCapability {
    pub id: Id,
    pub task: String,
    pub agent: Id,
    pub tools: Vec<String>,
    pub expires_at: Millis,
    pub revoked: bool,
}

/// The audit record of one lifecycle decision (MODEL.md section 2). Secret-free.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DecisionRecord {
    /// Store commit sequence number.
    pub seq: u64,
    /// `delegate`, `consume`, `resume`, `fork`, `close`, `approval`, ...
    pub transition: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Id>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<Id>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<AuthorityRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective: Option<Authority>,
    pub allowed: bool,
    #[serde(default)]
    pub deny_reasons: Vec<DenyReason>,
    #[serde(default)]
    pub receipt_ids: Vec<Id>,
    /// Who decided, for approvals: a person, the policy or the external authorizer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<DecidedBy>,
    /// The approval request the record is about, for approvals and review notices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Id>,
    pub created_instances_delta: u32,
}

/// One handler call seen at the harness's tool server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HandlerCall {
    pub tool: String,
    pub arguments: Value,
}

/// What the harness's own observers saw during one step: the evidence that
/// counts, never the host's word.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Evidence {
    /// Model POSTs by the instance they were made for; `unattributed` for
    /// requests the endpoint could not attribute.
    #[serde(default)]
    pub model_requests: BTreeMap<Id, u64>,
    /// Title generation and the like: counted apart, never deciding a check.
    #[serde(default)]
    pub auxiliary_requests: u64,
    #[serde(default)]
    pub handler_calls: Vec<HandlerCall>,
    #[serde(default)]
    pub authorizer_calls: u64,
    /// Tool definitions (name to digest) the model was shown in this step's requests.
    #[serde(default)]
    pub model_visible_tools: BTreeMap<String, Vec<String>>,
    /// What the host logged during the step (its stderr and `log`
    /// notifications), as the harness kept it. The host's own words, so no
    /// evidence of what it did: only searched for what it must never say (TC4).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host_log: String,
}

impl Evidence {
    pub fn total_model_requests(&self) -> u64 {
        self.model_requests.values().sum()
    }
}

/// What a host did in one step, as the harness recorded it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// An action sent to the host and its answer (or the protocol error instead).
    Action {
        action: Action,
        result: Result<ActionResult, String>,
    },
    /// The host was shut down and started again on the same store.
    Restart,
    /// Observer-side events: a tool definition changed, the authorizer was re-scripted.
    World {
        description: String,
        /// The same event in a form the invariant checkers read; absent for
        /// events no checker needs to know about.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        change: Option<WorldChange>,
    },
}

/// A change the harness made outside the host, between two actions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", tag = "change")]
pub enum WorldChange {
    /// The tool server now serves another definition under the same name (SD2, SD4).
    ToolRedefined {
        tool: String,
        /// Digest of the new definition.
        digest: String,
        /// Digest of the definition it replaced, when the tool server
        /// served one: a redefinition to an equal canonical form (another
        /// key order, number form or escape) changes nothing (SD2).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        previous_digest: Option<String>,
        /// Only the description text differs: still drift (SD4).
        #[serde(default)]
        description_only: bool,
    },
    /// The tool server no longer serves this tool (SD4).
    ToolRemoved { tool: String },
    /// The tool server sent `notifications/tools/list_changed` (SD3).
    ToolListChanged,
    /// The authorizer answers every later call this way (EA2..EA4).
    AuthorizerScripted { behaviour: AuthorizerBehaviour },
}

/// How the scripted external authorizer answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", tag = "reply")]
pub enum AuthorizerBehaviour {
    Allow,
    /// Allow, with constraints the child must stay within (EA3).
    AllowNarrowed {
        constraint: AuthorityRequest,
    },
    Deny,
    Timeout,
    Unavailable,
    Malformed,
    UnsupportedVersion,
    /// Allow with a constraint wider than the request, or one the host cannot enforce (EA3).
    AllowWidening,
    /// Allow carrying an authorization receipt already used (EA4).
    ReplayedReceipt,
    /// Allow carrying an expired authorization receipt (EA4).
    ExpiredReceipt,
    /// Allow carrying an authorization receipt bound to another request (EA4).
    MismatchedReceipt,
    /// Allow that arrives after the host's deadline (EA4).
    LateAllow,
}

impl AuthorizerBehaviour {
    /// The invariant that forbids a child under this reply, if any.
    pub fn forbids_child(&self) -> Option<crate::vocabulary::InvariantId> {
        use crate::vocabulary::InvariantId;
        match self {
            AuthorizerBehaviour::Allow | AuthorizerBehaviour::AllowNarrowed { .. } => None,
            AuthorizerBehaviour::Deny
            | AuthorizerBehaviour::Timeout
            | AuthorizerBehaviour::Unavailable
            | AuthorizerBehaviour::Malformed
            | AuthorizerBehaviour::UnsupportedVersion => Some(InvariantId::EA2),
            AuthorizerBehaviour::AllowWidening => Some(InvariantId::EA3),
            AuthorizerBehaviour::ReplayedReceipt
            | AuthorizerBehaviour::ExpiredReceipt
            | AuthorizerBehaviour::MismatchedReceipt
            | AuthorizerBehaviour::LateAllow => Some(InvariantId::EA4),
        }
    }
}

/// One entry of the history the invariant checkers read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HistoryEntry {
    /// Position in the scenario or sequence, from 0.
    pub step: usize,
    pub kind: StepKind,
    /// What the observers saw during this step.
    #[serde(default)]
    pub evidence: Evidence,
    /// The host's state after this step, when it was observed; shared with
    /// the entries after it for as long as nothing changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<Arc<Observed>>,
}
