//! The scenario file format: what a host maintainer reads to know what was
//! done to their host, what the harness watched, and what had to hold.
//!
//! One JSON file per scenario at `scenarios/<area>/<NNN-name>.json`. Parsing
//! goes through `serde_path_to_error` so a mistake is reported with the file,
//! the JSON path (`steps[3].expect.delta.instances`) and serde's statement of
//! what was expected; [`Scenario::validate`] then checks what a type cannot
//! (aliases bound before use, the id matching the path, controls present).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use delegation_model::{
    Configuration, Decision, DenyReason, FaultPoint, InvariantId, LifecycleState, Millis, Outcome,
    ReceiptState, SpawnRequest, StartRequest, Tier, ToolCallOutcome, WakeReason,
};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// A tool the harness's MCP server serves: the tool server's own scenario type.
pub use delegation_observers::tool_server::ToolSpec;

/// One scripted reply of the fake model endpoint (`{when: {...}, reply: {...}, delay_ms}`):
/// the model endpoint's own scenario type. `when.instance` and `attribute_to`
/// may name an instance alias: the runner re-scripts the endpoint with the
/// host id as soon as the alias is bound (before that, such a rule matches nothing).
pub type ModelRuleSpec = delegation_observers::ModelRule;

/// How the harness's external authorizer answers (`{"reply": "deny"}`,
/// `{"reply": "allow_narrowed", "constraint": {...}}`, ...): the model's own
/// vocabulary, so the invariant checkers read the same value.
pub type AuthorizerModeSpec = delegation_model::AuthorizerBehaviour;

/// What kind of scenario this is, for positive controls (MODEL.md section 5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ScenarioKind {
    /// A check that passes on its own merits.
    #[default]
    Plain,
    /// A negative check ("nothing happened"): meaningless unless its control shows the host can do the thing.
    Negative,
    /// The allowed twin of one or more negatives.
    Control,
}

/// One scenario file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// `area/NNN-name`; must equal the file's path below the catalogue directory, without `.json`.
    pub id: String,
    /// One sentence saying what must hold.
    pub title: String,
    /// The invariant ids this scenario checks; the checkers for exactly these run after every step.
    pub checks: Vec<InvariantId>,
    pub tier: Tier,
    /// Host capability names this scenario needs (see `delegation_protocol::capability`).
    #[serde(default)]
    pub needs: Vec<String>,
    /// Capability names that make this scenario `unsupported` when the host
    /// declares them: declared properties under which the scenario's
    /// question does not apply (`reusable-agents`: the host's model may
    /// reopen what it closed, by design).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unless: Vec<String>,
    #[serde(default)]
    pub kind: ScenarioKind,
    /// The id of this scenario's positive control; required when `kind` is `negative`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<String>,
    /// The id of the scenario this one is the spawn-based twin of: the same
    /// question, with every child created by the model's `spawn` reply in a
    /// parent's turn instead of `instance/delegate`, so that hosts without
    /// client-side delegation can be asked. A twin checks exactly its
    /// original's invariants, at its tier and kind, and a negative twin's
    /// control is the twin of the original's control.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub twin_of: Option<String>,
    #[serde(default)]
    pub setup: Setup,
    pub steps: Vec<Step>,
}

/// The world a scenario starts in: host configuration and the observers' scripts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Setup {
    /// Sent as `host/configure` after `initialize`, and again after every restart.
    #[serde(default)]
    pub configuration: Configuration,
    /// Tools the harness's MCP server serves from the start.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// The model endpoint's scripted replies, first match wins.
    #[serde(default)]
    pub model: Vec<ModelRuleSpec>,
    /// Start an external authorizer in this mode; absent: none is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorizer: Option<AuthorizerModeSpec>,
    /// Harness clock at the start, sent as `clock/set`; absent: the clock is not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<Millis>,
    /// Plant a canary secret and search every host reply and record for it (TC4).
    #[serde(default)]
    pub canaries: bool,
}

/// One step: an action plus, optionally, what must hold afterwards.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub action: StepAction,
    pub expect: Option<Expect>,
    /// A note for readers of the file and the reports.
    pub note: Option<String>,
}

/// Keys a step may have besides its action.
pub const STEP_KEYS_EXTRA: &[&str] = &["expect", "note"];

macro_rules! step_actions {
    ($( $key:literal => $variant:ident($ty:ty) ),* $(,)?) => {
        /// What one step does. In a file, the action is the step's one key besides `expect` and `note`.
        #[derive(Clone, Debug, PartialEq)]
        pub enum StepAction { $( $variant($ty), )* }

        /// Every action key a step may have.
        pub const STEP_ACTION_KEYS: &[&str] = &[ $( $key, )* ];

        impl StepAction {
            /// The key this action has in a scenario file.
            pub fn key(&self) -> &'static str {
                match self { $( StepAction::$variant(_) => $key, )* }
            }

            fn next_from_map<'de, A: MapAccess<'de>>(key: &str, map: &mut A) -> Result<Option<StepAction>, A::Error> {
                match key {
                    $( $key => Ok(Some(StepAction::$variant(map.next_value::<$ty>()?))), )*
                    _ => Ok(None),
                }
            }

            fn serialize_entry<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
                match self { $( StepAction::$variant(v) => map.serialize_entry($key, v), )* }
            }

            fn schema_variants(generator: &mut SchemaGenerator) -> Vec<(&'static str, Schema)> {
                vec![ $( ($key, generator.subschema_for::<$ty>()), )* ]
            }
        }
    };
}

step_actions! {
    "start" => Start(StartStep),
    "delegate" => Delegate(DelegateStep),
    "prepare_receipt" => PrepareReceipt(PrepareReceiptStep),
    "consume_receipt" => ConsumeReceipt(ConsumeReceiptStep),
    "revoke_receipt" => RevokeReceipt(ReceiptRef),
    "turn" => Turn(TurnStep),
    "tool_call" => ToolCall(ToolCallStep),
    "close" => Close(InstanceRef),
    "cancel" => Cancel(InstanceRef),
    "fail" => Fail(InstanceRef),
    "resume" => Resume(InstanceRef),
    "fork" => Fork(ForkStep),
    "wait" => Wait(WaitStep),
    "deliver_event" => DeliverEvent(DeliverEventStep),
    "answer" => Answer(AnswerStep),
    "auto" => Auto(AutoStep),
    "score_risk" => ScoreRisk(ScoreRiskStep),
    "revoke_grant" => RevokeGrant(RevokeGrantStep),
    "issue_capability" => IssueCapability(IssueCapabilityStep),
    "capability_call" => CapabilityCall(CapabilityCallStep),
    "revoke_capability" => RevokeCapability(CapabilityRef),
    "clock" => Clock(ClockStep),
    "fault" => Fault(FaultStep),
    "clear_fault" => ClearFault(ClearFaultStep),
    "restart" => Restart(Empty),
    "observe" => Observe(Empty),
    "tool_server" => ToolServer(ToolServerStep),
    "authorizer" => Authorizer(AuthorizerStep),
    "model_endpoint" => ModelEndpoint(ModelEndpointStep),
}

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Step, D::Error> {
        struct StepVisitor;
        impl<'de> Visitor<'de> for StepVisitor {
            type Value = Step;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a step: an object with exactly one action key (start, delegate, turn, restart, ...) and optionally `expect` and `note`")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Step, A::Error> {
                let mut action: Option<StepAction> = None;
                let mut expect = None;
                let mut note = None;
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "expect" => expect = Some(map.next_value::<Expect>()?),
                        "note" => note = Some(map.next_value::<String>()?),
                        other => {
                            if let Some(previous) = &action {
                                return Err(de::Error::custom(format!(
                                    "a step has exactly one action, but this one has both `{}` and `{other}`: split it into two steps",
                                    previous.key()
                                )));
                            }
                            match StepAction::next_from_map(other, &mut map)? {
                                Some(a) => action = Some(a),
                                None => {
                                    let mut expected: Vec<&str> = STEP_ACTION_KEYS.to_vec();
                                    expected.extend_from_slice(STEP_KEYS_EXTRA);
                                    return Err(de::Error::custom(format!(
                                        "unknown step key `{other}`; expected one of: {}",
                                        expected.join(", ")
                                    )));
                                }
                            }
                        }
                    }
                }
                let action = action.ok_or_else(|| {
                    de::Error::custom(format!(
                        "a step needs one action key, one of: {}",
                        STEP_ACTION_KEYS.join(", ")
                    ))
                })?;
                Ok(Step {
                    action,
                    expect,
                    note,
                })
            }
        }
        deserializer.deserialize_map(StepVisitor)
    }
}

impl Serialize for Step {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let len = 1 + self.expect.is_some() as usize + self.note.is_some() as usize;
        let mut map = serializer.serialize_map(Some(len))?;
        self.action.serialize_entry(&mut map)?;
        if let Some(expect) = &self.expect {
            map.serialize_entry("expect", expect)?;
        }
        if let Some(note) = &self.note {
            map.serialize_entry("note", note)?;
        }
        map.end()
    }
}

impl JsonSchema for Step {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Step".into()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let expect = generator.subschema_for::<Expect>();
        let variants: Vec<Value> = StepAction::schema_variants(generator)
            .into_iter()
            .map(|(key, schema)| {
                serde_json::json!({
                    "type": "object",
                    "properties": { key: schema, "expect": expect, "note": { "type": "string" } },
                    "required": [key],
                    "additionalProperties": false,
                })
            })
            .collect();
        json_schema!({
            "description": "One step: exactly one action key, plus optional `expect` (what must hold afterwards) and `note`. Wherever a step reads an instance, receipt, approval or capability alias, the reserved alias `@unknown` stands for a fresh id the host never issued (`instance_unknown` scenarios).",
            "oneOf": variants,
        })
    }
}

/// A step without parameters (`{"restart": {}}`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// Start a root instance and bind it to an alias.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StartStep {
    /// The alias later steps use for this instance.
    #[serde(rename = "as")]
    pub alias: String,
    #[serde(flatten)]
    pub request: StartRequest,
}

/// One-shot delegation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DelegateStep {
    pub parent: String,
    /// Alias for the child, bound only when the delegation is admitted.
    #[serde(rename = "as", default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    pub request: SpawnRequest,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrepareReceiptStep {
    pub parent: String,
    pub call_id: String,
    /// Alias for the receipt, bound when it is issued.
    #[serde(rename = "as")]
    pub alias: String,
    pub request: SpawnRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<Millis>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsumeReceiptStep {
    /// Alias of a receipt issued by an earlier `prepare_receipt`, or
    /// `@unknown`: a well-formed receipt the host never issued.
    pub receipt: String,
    pub parent: String,
    pub request: SpawnRequest,
    /// Hand the receipt back altered (RC4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tamper: Option<Tamper>,
    /// Alias for the child, bound only when the receipt is accepted.
    #[serde(rename = "as", default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
}

/// Alter one field of a receipt before handing it back: one RFC 6902 JSON
/// Patch operation on the receipt as the host issued it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Tamper {
    /// `replace` (the default) a field that exists, `add` one the host did
    /// not write, or `remove` one it did.
    #[serde(default, skip_serializing_if = "TamperOp::is_replace")]
    pub op: TamperOp,
    /// RFC 6901 JSON pointer into the receipt, e.g. `/authority/sandbox`.
    pub pointer: String,
    /// The new value; required by `replace` and `add`, refused with `remove`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TamperOp {
    #[default]
    Replace,
    Add,
    Remove,
}

impl TamperOp {
    fn is_replace(&self) -> bool {
        *self == TamperOp::Replace
    }

    pub fn name(self) -> &'static str {
        match self {
            TamperOp::Replace => "replace",
            TamperOp::Add => "add",
            TamperOp::Remove => "remove",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReceiptRef {
    /// A receipt alias, or `@unknown` for an id the host never issued.
    pub receipt: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstanceRef {
    /// An instance alias, or `@unknown` for an id the host never issued.
    pub instance: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnStep {
    pub instance: String,
    pub input: String,
    /// Alias for a child the model spawns in this turn.
    #[serde(rename = "as", default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// Alias for an approval request this turn raises.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_as: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCallStep {
    pub instance: String,
    pub tool: String,
    #[serde(default)]
    pub arguments: Value,
    /// Alias for an approval request this call raises.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_as: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkStep {
    pub instance: String,
    #[serde(rename = "as")]
    pub alias: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitStep {
    pub instance: String,
    /// The deadline, relative to the harness clock when the step starts.
    pub within_ms: Millis,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeliverEventStep {
    /// The event id; the harness chooses it so a scenario can deliver it twice (LW2).
    pub event: String,
    pub instance: String,
    pub kind: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerStep {
    /// An approval alias, or `latest-pending`: the last pending request in the host's observed state.
    pub request: String,
    pub decision: Decision,
}

/// The `answer` target meaning "the newest pending approval the host shows".
pub const LATEST_PENDING: &str = "latest-pending";

/// The reserved alias for an id the host never issued (`instance_unknown`
/// scenarios): accepted wherever an instance, receipt, approval or
/// capability alias is read, and resolved to an id of the form
/// `never-issued-<24 hex digits>` that no host hands out (derived from the
/// scenario id, so transcripts and snapshots stay stable).
/// Aliases starting with `@` are reserved for the harness; this is the only one.
pub const UNKNOWN_ALIAS: &str = "@unknown";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AutoStep {
    pub enabled: bool,
}

/// The harness, as the host's approval reviewer, scores an instance's risk (capability `reviewer`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScoreRiskStep {
    pub instance: String,
    /// `low`, `elevated` or `stale`.
    pub risk: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RevokeGrantStep {
    /// `latest`: the last grant in the host's observed state.
    pub grant: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IssueCapabilityStep {
    #[serde(rename = "as")]
    pub alias: String,
    pub task: String,
    /// Alias of the instance the capability is bound to.
    pub agent: String,
    pub tools: Vec<String>,
    pub expires_at: Millis,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapabilityCallStep {
    /// Alias of an issued capability; its secret is presented.
    pub capability: String,
    /// Present a wrong secret instead of the capability's own.
    #[serde(default)]
    pub wrong_secret: bool,
    pub task: String,
    pub agent: String,
    pub tool: String,
    #[serde(default)]
    pub arguments: Value,
    /// Idempotency key: a retry with the same `call_id` must not run the handler again (TC5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapabilityRef {
    pub capability: String,
}

/// Move the harness clock; the host learns it through `clock/set`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ClockStep {
    Set(Millis),
    Advance(Millis),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultStep {
    pub point: FaultPoint,
    /// Fail this many calls; absent: until cleared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClearFaultStep {
    pub point: FaultPoint,
}

/// Change what the harness's MCP server serves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ToolServerStep {
    /// Replace a tool's definition (for example only its description: SD4).
    Change {
        name: String,
        definition: Value,
    },
    Remove(String),
    Add(ToolSpec),
    /// Send `notifications/tools/list_changed` to every connected session (SD3).
    NotifyListChanged(Empty),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthorizerStep {
    pub mode: AuthorizerModeSpec,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ModelEndpointStep {
    Rules(Vec<ModelRuleSpec>),
    /// Answer every request with this HTTP status; `null` heals the endpoint.
    Failing(Option<u16>),
}

/// What must hold after a step. Every field is optional; only present ones are checked.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<DenyReason>,
    /// For a turn whose model reply was a spawn: the nested delegation's outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawn: Option<SpawnExpect>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<DeltaExpect>,
    /// Lifecycle state by alias, in the host's observed state after the step.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub state: BTreeMap<String, LifecycleState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<CountExpect>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals: Option<ApprovalsExpect>,
    /// Receipt state by alias.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub receipts: BTreeMap<String, ReceiptState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<ToolCallExpect>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub woke: Option<WakeReason>,
    /// For a resume: the effective authority equals this alias's sealed ceiling (TR2, RS2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_equals_ceiling_of: Option<String>,
    /// A partial match against the effective authority: every field given must be equal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective: Option<Value>,
    /// This step is expected to kill the host (for example under the fault
    /// `crash.after_decision_commit`, RS3): it passes when the host exits or
    /// answers with an error instead of a reply, and fails when it answers
    /// normally. The host is then dead: the steps up to the next `restart`
    /// may only change the observers. Default `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub host_exits: bool,
    /// Exact-call grants in the host's observed state after the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grants: Option<CountExpect>,
    /// Counts over the host's decision records after the step (CE6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records: Option<RecordsExpect>,
    /// By instance alias: exactly the tool names the model was shown in this
    /// step's requests for that instance. Each shown definition must also be
    /// byte-for-byte the one the harness's tool server serves (same digest),
    /// so a host that shows an altered or stale definition fails. An empty
    /// list means "shown no tool" (or no request was made for it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub model_saw: BTreeMap<String, Vec<String>>,
}

/// Counts over the decision records (`state/observe` `records`). A
/// delegation record is one with transition `delegate`, `consume` or `spawn`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordsExpect {
    /// Allowed delegation records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_delegations: Option<u64>,
    /// Denied delegation records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied_delegations: Option<u64>,
    /// Allowed delegation records that carry both `requested` and `effective`
    /// (CE6: fallback cannot pass for routing). Equal to `allowed_delegations`
    /// means every allowed delegation records both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_delegations_with_requested_and_effective: Option<u64>,
}

/// The transitions whose records are delegations (as the CE6 checker reads them).
pub const DELEGATION_TRANSITIONS: &[&str] = &["delegate", "consume", "spawn"];

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnExpect {
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<DenyReason>,
}

/// Changes during the step, measured by the harness's observers and by
/// comparing the host's observed state before and after.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeltaExpect {
    /// Instances in the host's view, after minus before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<i64>,
    /// Model requests for any instance (auxiliary requests excluded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_requests: Option<RequestCount>,
    /// Model requests for instances that did not exist before the step, or that the endpoint could not attribute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_requests_new_instances: Option<RequestCount>,
    /// Model requests by alias.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub model_requests_for: BTreeMap<String, RequestCount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler_calls: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorizer_calls: Option<u64>,
    /// Approvals that became `dispatched` during the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals_dispatched: Option<i64>,
    /// Pending approvals, after minus before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals_pending: Option<i64>,
}

/// A number of model requests: exact (`2`), or a range (`{"at_least": 1}`).
///
/// Hosts differ in how many requests a parent makes around a delegation (a
/// real host sends the spawn's result back to the model in a follow-up), so
/// a scenario pins exactly what the invariant is about, usually a zero or a
/// child's first request, and gives the rest a range.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RequestCount {
    Exactly(u64),
    Range {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_least: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_most: Option<u64>,
    },
}

impl RequestCount {
    pub fn admits(&self, seen: u64) -> bool {
        match *self {
            RequestCount::Exactly(n) => seen == n,
            RequestCount::Range { at_least, at_most } => {
                at_least.is_none_or(|low| seen >= low) && at_most.is_none_or(|high| seen <= high)
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CountExpect {
    pub count: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsExpect {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<u64>,
    /// Decided `allow` or `allow-exact`, dispatched or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied: Option<u64>,
    /// In state `dispatched` (absolute count, unlike `delta.approvals_dispatched`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatched: Option<u64>,
    /// Decided by a person (`decided_by: person`), whatever the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by_person: Option<u64>,
    /// Decided by the automatic policy (`decided_by: policy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by_policy: Option<u64>,
    /// Decided by the external authorizer (`decided_by: external`; EA5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by_external: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCallExpect {
    pub outcome: ToolCallOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<DenyReason>,
}

/// A scenario file that could not be used, with where and why.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: at `{path}`: {message}")]
    Parse {
        file: PathBuf,
        /// The JSON path of the offending value, e.g. `steps[3].expect.delta.instances`.
        path: String,
        message: String,
    },
    #[error("{file}: at `{path}`: {message}")]
    Invalid {
        file: PathBuf,
        path: String,
        message: String,
    },
}

impl ScenarioError {
    pub fn file(&self) -> &Path {
        match self {
            ScenarioError::Read { file, .. }
            | ScenarioError::Parse { file, .. }
            | ScenarioError::Invalid { file, .. } => file,
        }
    }
}

impl Step {
    /// A turn whose spawn is expected refused for the authority it asked
    /// for: it says something only about a host whose delegation tool can
    /// carry the request (`spawn-authority`).
    pub fn spawn_refused_for_its_request(&self) -> bool {
        matches!(self.action, StepAction::Turn(_))
            && self
                .expect
                .as_ref()
                .and_then(|e| e.spawn.as_ref())
                .is_some_and(|sp| {
                    sp.outcome == Outcome::Denied
                        && matches!(
                            sp.reason,
                            Some(
                                DenyReason::CeilingExceeded
                                    | DenyReason::ProjectionMissing
                                    | DenyReason::UnsupportedTarget
                            )
                        )
                })
    }
}

impl Scenario {
    /// The area: the part of the id before the slash (`zc` in `zc/004-...`).
    pub fn area(&self) -> &str {
        self.id.split_once('/').map(|(a, _)| a).unwrap_or(&self.id)
    }

    /// The file name part of the id (`004-network-above-ceiling`).
    pub fn name(&self) -> &str {
        self.id.split_once('/').map(|(_, n)| n).unwrap_or(&self.id)
    }

    /// Parses one scenario from text; `file` is only used in errors.
    pub fn parse(text: &str, file: &Path) -> Result<Scenario, ScenarioError> {
        let mut de = serde_json::Deserializer::from_str(text);
        let result: Result<Scenario, _> = serde_path_to_error::deserialize(&mut de);
        let scenario = result.map_err(|e| ScenarioError::Parse {
            file: file.to_path_buf(),
            path: e.path().to_string(),
            message: e.inner().to_string(),
        })?;
        de.end().map_err(|e| ScenarioError::Parse {
            file: file.to_path_buf(),
            path: ".".into(),
            message: format!("{e}: a scenario file holds exactly one JSON object"),
        })?;
        Ok(scenario)
    }

    /// Reads and parses one file, then checks that its id matches its
    /// path below `root` and that the scenario is consistent on its own.
    pub fn load(root: &Path, file: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(file).map_err(|source| ScenarioError::Read {
            file: file.to_path_buf(),
            source,
        })?;
        let scenario = Scenario::parse(&text, file)?;
        let expected_id = file
            .strip_prefix(root)
            .ok()
            .and_then(|rel| {
                let rel = rel.with_extension("");
                let parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                (parts.len() == 2).then(|| parts.join("/"))
            })
            .ok_or_else(|| ScenarioError::Invalid {
                file: file.to_path_buf(),
                path: ".".into(),
                message: format!(
                    "scenario files live at <catalogue>/<area>/<NNN-name>.json, directly below an area directory of {}",
                    root.display()
                ),
            })?;
        if scenario.id != expected_id {
            return Err(ScenarioError::Invalid {
                file: file.to_path_buf(),
                path: "id".into(),
                message: format!(
                    "id `{}` does not match the file's path: expected `{expected_id}`",
                    scenario.id
                ),
            });
        }
        scenario.validate(file)?;
        Ok(scenario)
    }

    /// Checks what the types cannot: aliases bound before use, a control
    /// where one is needed, known capability names, at least one check.
    /// Catalogue-wide checks (control ids exist, ids unique) are in [`crate::catalogue`].
    pub fn validate(&self, file: &Path) -> Result<(), ScenarioError> {
        let invalid = |path: String, message: String| ScenarioError::Invalid {
            file: file.to_path_buf(),
            path,
            message,
        };
        if self.checks.is_empty() {
            return Err(invalid(
                "checks".into(),
                "a scenario checks at least one invariant id (e.g. [\"ZC1\"])".into(),
            ));
        }
        match (self.kind, &self.control) {
            (ScenarioKind::Negative, None) => {
                return Err(invalid(
                    "control".into(),
                    "a negative scenario names its positive control (the allowed twin), e.g. \"control\": \"zc/003-network-within-ceiling\"".into(),
                ));
            }
            (ScenarioKind::Control, Some(_)) => {
                return Err(invalid(
                    "control".into(),
                    "a control scenario has no control of its own: remove `control` or make the kind `negative`".into(),
                ));
            }
            _ => {}
        }
        if self.twin_of.is_some()
            && let Some(i) = self
                .steps
                .iter()
                .position(|s| matches!(s.action, StepAction::Delegate(_)))
        {
            return Err(invalid(
                format!("steps[{i}].delegate"),
                "a twin (`twin_of`) creates every child through the model's spawn: replace this `delegate` with a `turn` on its parent whose scripted reply is {\"spawn\": {\"role\", \"task\"}}".into(),
            ));
        }
        let named = self
            .needs
            .iter()
            .enumerate()
            .map(|(i, n)| (format!("needs[{i}]"), n))
            .chain(
                self.unless
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (format!("unless[{i}]"), n)),
            );
        for (path, need) in named {
            if !delegation_protocol::capability::ALL.contains(&need.as_str()) {
                return Err(invalid(
                    path,
                    format!(
                        "`{need}` is not a capability name; expected one of: {}",
                        delegation_protocol::capability::ALL.join(", ")
                    ),
                ));
            }
        }
        if let Some(need) = self.needs.iter().find(|n| self.unless.contains(n)) {
            return Err(invalid(
                "unless".into(),
                format!("`{need}` is both needed and excluded: the scenario could never run"),
            ));
        }
        if let Some(i) = self.steps.iter().position(
            |s| matches!(&s.action, StepAction::Start(start) if !start.request.tools.is_empty()),
        ) && !self
            .needs
            .iter()
            .any(|n| n == delegation_protocol::capability::MCP)
        {
            return Err(invalid(
                format!("steps[{i}].start.tools"),
                "the instance seals tools served by the harness's MCP server: add \"mcp\" to `needs`".into(),
            ));
        }
        // A spawn refused for what it asked for says nothing about a host
        // whose delegation tool cannot carry the request.
        if let Some(i) = self
            .steps
            .iter()
            .position(Step::spawn_refused_for_its_request)
            && !self
                .needs
                .iter()
                .any(|n| n == delegation_protocol::capability::SPAWN_AUTHORITY)
        {
            return Err(invalid(
                format!("steps[{i}].expect.spawn.reason"),
                "a spawn refused for the authority it requested needs the request to reach the host: add \"spawn-authority\" to `needs`".into(),
            ));
        }
        if self.setup.authorizer.is_none()
            && let Some(i) = self
                .steps
                .iter()
                .position(|s| matches!(s.action, StepAction::Authorizer(_)))
        {
            return Err(invalid(
                format!("steps[{i}].authorizer"),
                "this step scripts the external authorizer, but `setup.authorizer` starts none: add e.g. \"authorizer\": {\"reply\": \"allow\"} to `setup`".into(),
            ));
        }
        if self.steps.is_empty() {
            return Err(invalid(
                "steps".into(),
                "a scenario has at least one step".into(),
            ));
        }
        let mut bound: BTreeMap<String, AliasKind> = BTreeMap::new();
        for (i, step) in self.steps.iter().enumerate() {
            let at = |field: &str| format!("steps[{i}].{}.{field}", step.action.key());
            if let StepAction::ConsumeReceipt(ConsumeReceiptStep {
                tamper: Some(tamper),
                ..
            }) = &step.action
            {
                match (tamper.op, &tamper.value) {
                    (TamperOp::Remove, Some(_)) => {
                        return Err(invalid(
                            at("tamper.value"),
                            "a `remove` tamper takes no value: it deletes the field at `pointer`"
                                .into(),
                        ));
                    }
                    (TamperOp::Replace | TamperOp::Add, None) => {
                        return Err(invalid(
                            at("tamper.value"),
                            format!(
                                "a `{}` tamper needs the `value` to write at `pointer`",
                                tamper.op.name()
                            ),
                        ));
                    }
                    _ => {}
                }
            }
            for (field, alias, kind) in step.action.uses() {
                if alias == UNKNOWN_ALIAS {
                    continue;
                }
                if alias.starts_with('@') {
                    return Err(invalid(
                        at(field),
                        format!(
                            "`{alias}`: aliases starting with `@` are reserved for the harness; the only one is `{UNKNOWN_ALIAS}` (an id the host never issued)"
                        ),
                    ));
                }
                match bound.get(alias) {
                    None => {
                        return Err(invalid(
                            at(field),
                            format!(
                                "alias `{alias}` is used before any earlier step binds it with `as`; bound so far: {}",
                                list_or_none(bound.keys())
                            ),
                        ));
                    }
                    Some(k) if *k != kind => {
                        return Err(invalid(
                            at(field),
                            format!("alias `{alias}` names a {k}, but a {kind} is expected here"),
                        ));
                    }
                    Some(_) => {}
                }
            }
            if let Some(expect) = &step.expect {
                if expect.host_exits {
                    self.validate_host_exits(i, expect, file)?;
                }
                let aliases = expect
                    .state
                    .keys()
                    .map(|a| ("state", a, AliasKind::Instance))
                    .chain(
                        expect
                            .receipts
                            .keys()
                            .map(|a| ("receipts", a, AliasKind::Receipt)),
                    )
                    .chain(expect.delta.iter().flat_map(|d| {
                        d.model_requests_for
                            .keys()
                            .map(|a| ("delta.model_requests_for", a, AliasKind::Instance))
                    }))
                    .chain(
                        expect
                            .effective_equals_ceiling_of
                            .iter()
                            .map(|a| ("effective_equals_ceiling_of", a, AliasKind::Instance)),
                    )
                    .chain(
                        expect
                            .model_saw
                            .keys()
                            .map(|a| ("model_saw", a, AliasKind::Instance)),
                    );
                // An expectation may name an alias this very step binds.
                let binds_here: Vec<(String, AliasKind)> = step.action.binds();
                for (field, alias, kind) in aliases {
                    if alias.starts_with('@') {
                        return Err(invalid(
                            format!("steps[{i}].expect.{field}"),
                            format!(
                                "`{alias}` is a reserved alias; an expectation names an alias an earlier step bound (an id the host never issued has no state to expect)"
                            ),
                        ));
                    }
                    let known = bound
                        .get(alias)
                        .copied()
                        .or_else(|| binds_here.iter().find(|(a, _)| a == alias).map(|(_, k)| *k));
                    match known {
                        Some(k) if k == kind => {}
                        Some(k) => {
                            return Err(invalid(
                                format!("steps[{i}].expect.{field}"),
                                format!(
                                    "alias `{alias}` names a {k}, but a {kind} is expected here"
                                ),
                            ));
                        }
                        None => {
                            return Err(invalid(
                                format!("steps[{i}].expect.{field}"),
                                format!(
                                    "alias `{alias}` is not bound by this or an earlier step; bound so far: {}",
                                    list_or_none(bound.keys())
                                ),
                            ));
                        }
                    }
                }
            }
            for (alias, kind) in step.action.binds() {
                if alias.starts_with('@') {
                    return Err(invalid(
                        format!("steps[{i}].{}", step.action.key()),
                        format!(
                            "`{alias}` cannot be bound: aliases starting with `@` are reserved for the harness; choose a plain name"
                        ),
                    ));
                }
                if let Some(previous) = bound.insert(alias.clone(), kind) {
                    return Err(invalid(
                        format!("steps[{i}].{}.as", step.action.key()),
                        format!(
                            "alias `{alias}` is already bound to a {previous}; choose a new alias (aliases are never rebound, like host ids)"
                        ),
                    ));
                }
            }
        }
        self.validate_lifecycle_replies(&bound, file)
    }

    /// Every scripted `lifecycle` reply: its target is an instance alias some
    /// step binds (the runner puts the host id there once it is bound), a
    /// `send_input` carries its input, and the scenario needs the capability
    /// for the tool, so a host without it is `unsupported` instead of passing
    /// on a call it never received.
    fn validate_lifecycle_replies(
        &self,
        bound: &BTreeMap<String, AliasKind>,
        file: &Path,
    ) -> Result<(), ScenarioError> {
        use delegation_model::LifecycleOp;
        use delegation_protocol::capability::{MODEL_CLOSE_TOOLS, MODEL_LIFECYCLE_TOOLS};
        let invalid = |path: String, message: String| ScenarioError::Invalid {
            file: file.to_path_buf(),
            path,
            message,
        };
        let setup = self
            .setup
            .model
            .iter()
            .enumerate()
            .map(|(r, rule)| (format!("setup.model[{r}].reply.lifecycle"), rule));
        let steps = self.steps.iter().enumerate().flat_map(|(i, step)| {
            let rules = match &step.action {
                StepAction::ModelEndpoint(ModelEndpointStep::Rules(rules)) => rules.as_slice(),
                _ => &[],
            };
            rules.iter().enumerate().map(move |(r, rule)| {
                (
                    format!("steps[{i}].model_endpoint.rules[{r}].reply.lifecycle"),
                    rule,
                )
            })
        });
        for (path, rule) in setup.chain(steps) {
            let delegation_observers::ModelReply::Lifecycle(call) = &rule.reply else {
                continue;
            };
            match bound.get(&call.target) {
                Some(AliasKind::Instance) => {}
                // An id the host never issued: the runner puts its fresh unknown id there.
                None if call.target == UNKNOWN_ALIAS => {}
                _ => {
                    return Err(invalid(
                        format!("{path}.target"),
                        format!(
                            "`{}` is not an instance alias any step binds; a lifecycle call names a child by the alias its spawn or delegation bound",
                            call.target
                        ),
                    ));
                }
            }
            if call.op == LifecycleOp::SendInput && call.message.is_none() {
                return Err(invalid(
                    format!("{path}.message"),
                    "a `send_input` gives the child input: add `message`".into(),
                ));
            }
            let gives_input = call.message.is_some()
                && matches!(call.op, LifecycleOp::SendInput | LifecycleOp::Resume);
            let need = if gives_input {
                MODEL_LIFECYCLE_TOOLS
            } else {
                MODEL_CLOSE_TOOLS
            };
            if !self.needs.iter().any(|n| n == need) {
                return Err(invalid(
                    path,
                    format!(
                        "a scripted `{}` call reaches only a host whose model has that tool: add \"{need}\" to `needs`",
                        serde_json::to_value(call.op)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default()
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl Scenario {
    /// A step expected to kill the host: it must be a host action, it cannot
    /// expect anything that needs the host's reply or its state afterwards,
    /// and no host action may follow before the next `restart`.
    fn validate_host_exits(
        &self,
        i: usize,
        expect: &Expect,
        file: &Path,
    ) -> Result<(), ScenarioError> {
        let invalid = |path: String, message: String| ScenarioError::Invalid {
            file: file.to_path_buf(),
            path,
            message,
        };
        let step = &self.steps[i];
        if !step.action.is_host_action() || matches!(step.action, StepAction::Observe(_)) {
            return Err(invalid(
                format!("steps[{i}].expect.host_exits"),
                format!(
                    "`host_exits` belongs on a step that asks the host to act (turn, tool_call, answer, ...), not on `{}`",
                    step.action.key()
                ),
            ));
        }
        let delta_needs_state = expect.delta.as_ref().is_some_and(|d| {
            d.instances.is_some()
                || d.approvals_dispatched.is_some()
                || d.approvals_pending.is_some()
        });
        let needs_host: Vec<&str> = [
            ("outcome", expect.outcome.is_some()),
            ("reason", expect.reason.is_some()),
            ("spawn", expect.spawn.is_some()),
            ("state", !expect.state.is_empty()),
            ("instances", expect.instances.is_some()),
            ("approvals", expect.approvals.is_some()),
            ("receipts", !expect.receipts.is_empty()),
            ("tool_call", expect.tool_call.is_some()),
            ("woke", expect.woke.is_some()),
            (
                "effective_equals_ceiling_of",
                expect.effective_equals_ceiling_of.is_some(),
            ),
            ("effective", expect.effective.is_some()),
            ("grants", expect.grants.is_some()),
            ("records", expect.records.is_some()),
            ("delta.instances / delta.approvals_*", delta_needs_state),
        ]
        .into_iter()
        .filter_map(|(name, present)| present.then_some(name))
        .collect();
        if !needs_host.is_empty() {
            return Err(invalid(
                format!("steps[{i}].expect"),
                format!(
                    "with `host_exits` the host gives no reply and cannot be observed after this step, so {} cannot be checked here: move them to the `restart` step that follows (only the observers' `delta` counts and `model_saw` can be checked on a step that kills the host)",
                    needs_host.join(", ")
                ),
            ));
        }
        for (j, later) in self.steps.iter().enumerate().skip(i + 1) {
            match &later.action {
                StepAction::Restart(_) => break,
                action if action.is_host_action() => {
                    return Err(invalid(
                        format!("steps[{j}].{}", action.key()),
                        format!(
                            "step {i} expects the host to exit (`host_exits`), so the host is dead until a `restart`: insert {{\"restart\": {{}}}} before this `{}` step",
                            action.key()
                        ),
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn list_or_none<'a>(items: impl Iterator<Item = &'a String>) -> String {
    let items: Vec<&str> = items.map(String::as_str).collect();
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

/// What an alias stands for; an alias is bound to one kind of host id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AliasKind {
    Instance,
    Receipt,
    Approval,
    Capability,
}

impl fmt::Display for AliasKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AliasKind::Instance => "instance",
            AliasKind::Receipt => "receipt",
            AliasKind::Approval => "approval request",
            AliasKind::Capability => "capability",
        })
    }
}

impl StepAction {
    /// Aliases this action reads: (field, alias, kind).
    pub fn uses(&self) -> Vec<(&'static str, &str, AliasKind)> {
        use AliasKind::*;
        use StepAction as S;
        match self {
            S::Delegate(s) => vec![("parent", &s.parent, Instance)],
            S::PrepareReceipt(s) => vec![("parent", &s.parent, Instance)],
            S::ConsumeReceipt(s) => vec![
                ("receipt", &s.receipt, Receipt),
                ("parent", &s.parent, Instance),
            ],
            S::RevokeReceipt(s) => vec![("receipt", &s.receipt, Receipt)],
            S::Turn(s) => vec![("instance", &s.instance, Instance)],
            S::ToolCall(s) => vec![("instance", &s.instance, Instance)],
            S::Close(s) | S::Cancel(s) | S::Fail(s) | S::Resume(s) => {
                vec![("instance", &s.instance, Instance)]
            }
            S::Fork(s) => vec![("instance", &s.instance, Instance)],
            S::Wait(s) => vec![("instance", &s.instance, Instance)],
            S::DeliverEvent(s) => vec![("instance", &s.instance, Instance)],
            S::Answer(s) if s.request != LATEST_PENDING => {
                vec![("request", &s.request, Approval)]
            }
            S::IssueCapability(s) => vec![("agent", &s.agent, Instance)],
            S::CapabilityCall(s) => vec![
                ("capability", &s.capability, Capability),
                ("agent", &s.agent, Instance),
            ],
            S::RevokeCapability(s) => vec![("capability", &s.capability, Capability)],
            S::ScoreRisk(s) => vec![("instance", &s.instance, Instance)],
            _ => vec![],
        }
        .into_iter()
        .map(|(f, a, k)| (f, a.as_str(), k))
        .collect()
    }

    /// Aliases this action may bind (only if the host admits it).
    pub fn binds(&self) -> Vec<(String, AliasKind)> {
        use AliasKind::*;
        use StepAction as S;
        let mut out = Vec::new();
        match self {
            S::Start(s) => out.push((s.alias.clone(), Instance)),
            S::Delegate(s) => out.extend(s.alias.clone().map(|a| (a, Instance))),
            S::PrepareReceipt(s) => out.push((s.alias.clone(), Receipt)),
            S::ConsumeReceipt(s) => out.extend(s.alias.clone().map(|a| (a, Instance))),
            S::Turn(s) => {
                out.extend(s.alias.clone().map(|a| (a, Instance)));
                out.extend(s.approval_as.clone().map(|a| (a, Approval)));
            }
            S::ToolCall(s) => out.extend(s.approval_as.clone().map(|a| (a, Approval))),
            S::Fork(s) => out.push((s.alias.clone(), Instance)),
            S::IssueCapability(s) => out.push((s.alias.clone(), Capability)),
            _ => {}
        }
        out
    }

    /// Whether this step is a host action (as opposed to restart, observe or an observer change).
    pub fn is_host_action(&self) -> bool {
        !matches!(
            self,
            StepAction::Restart(_)
                | StepAction::ToolServer(_)
                | StepAction::Authorizer(_)
                | StepAction::ModelEndpoint(_)
        )
    }
}

/// The JSON Schema of a scenario file, as committed at `scenarios/schema/scenario.schema.json`.
pub fn schema() -> Value {
    let schema = schemars::schema_for!(Scenario);
    serde_json::to_value(schema).expect("a JSON Schema serialises")
}

/// Checks that a set of scenario ids is duplicate-free; used by the catalogue.
pub fn duplicates<'a>(ids: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = BTreeSet::new();
    ids.filter(|id| !seen.insert(*id)).collect()
}
