//! The scenario file format: what a host maintainer reads to know what was
//! done to their host, what the harness watched, and what had to hold.
//!
//! One JSON file per scenario at `scenarios/<area>/<NNN-name>.json`. Parsing
//! goes through `serde_path_to_error` so a mistake is reported with the file,
//! the JSON path (`steps[3].expect.delta.instances`) and serde's statement of
//! what was expected; [`Scenario::validate`] then checks what a type cannot
//! (aliases bound before use, the id matching the path, controls present).
//! A `concurrently` step sends several actions at once, with expectations
//! over the set of answers (`expect.set`): see [`concurrent`].

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

pub mod concurrent;
mod validate;

pub use concurrent::{ConcurrentSteps, RACEABLE_KEYS, SetExpect};

/// A tool the harness's MCP server serves: the tool server's own scenario type.
pub use delegation_observers::tool_server::{DefinitionText, ToolSpec};

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
    "ask" => Ask(AskStep),
    "answer_question" => AnswerQuestion(AnswerQuestionStep),
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
    "concurrently" => Concurrently(ConcurrentSteps),
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

/// An instance asks a person a clarification question (capability
/// `clarification-questions`): no approval, so it passes under `never` too (PG4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskStep {
    pub instance: String,
    pub question: String,
    /// Alias for the question, bound when the host accepts it.
    #[serde(rename = "as", default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
}

/// A person answers a clarification question.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerQuestionStep {
    /// A question alias, or `@unknown` for an id the host never issued.
    pub question: String,
    pub answer: String,
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
        /// Served byte for byte as written, layout aside (see `ToolSpec`).
        definition: DefinitionText,
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
    /// Clarification questions in the host's observed state after the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub questions: Option<QuestionsExpect>,
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
    /// For a `concurrently` step: counts over its actions' answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<SetExpect>,
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

/// Counts of clarification questions by state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuestionsExpect {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered: Option<u64>,
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

/// What an alias stands for; an alias is bound to one kind of host id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AliasKind {
    Instance,
    Receipt,
    Approval,
    Capability,
    Question,
}

impl fmt::Display for AliasKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AliasKind::Instance => "instance",
            AliasKind::Receipt => "receipt",
            AliasKind::Approval => "approval request",
            AliasKind::Capability => "capability",
            AliasKind::Question => "clarification question",
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
            S::Ask(s) => vec![("instance", &s.instance, Instance)],
            S::AnswerQuestion(s) => vec![("question", &s.question, Question)],
            S::CapabilityCall(s) => vec![
                ("capability", &s.capability, Capability),
                ("agent", &s.agent, Instance),
            ],
            S::RevokeCapability(s) => vec![("capability", &s.capability, Capability)],
            S::ScoreRisk(s) => vec![("instance", &s.instance, Instance)],
            S::Concurrently(c) => {
                return c.0.iter().flat_map(|step| step.action.uses()).collect();
            }
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
            S::Ask(s) => out.extend(s.alias.clone().map(|a| (a, Question))),
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
