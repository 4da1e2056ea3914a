//! The reference state machine: what a correct host decides, given every external input.
//!
//! The host around it does the I/O (model endpoint, MCP server, authorizer,
//! SQLite) and hands the results in; the state machine decides, and writes
//! every durable change through a [`Journal`] *before* the change takes
//! effect in memory. A failed write leaves the in-memory state as it was and
//! the action denied with `store_write_failed`: fail closed, lose nothing.
//!
//! Faults armed by the harness are consulted here, so that the in-process
//! model used as a fuzzing oracle and the reference host fail at the same
//! points.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::authority::{AdmissionError, Authority, AuthorityRequest};
use crate::decisions::SharedDecisions;
use crate::digest::{ToolDefinition, digest_value, sha256_hex};
use crate::eligibility::{Eligibility, class_of};
use crate::path::NormalPath;
use crate::vocabulary::DenyReason;
use crate::wire::*;

mod approvals;
mod capabilities;
mod delegation;
mod lifecycle;
mod questions;
mod receipts;
mod settings;
mod store;
mod tools;

/// Tool definitions as the host sees them live on its MCP servers right now, by name.
pub type LiveTools = BTreeMap<String, ToolDefinition>;

pub use crate::side_channels::AUTHORIZER_DEADLINE_MS;

/// One durable row change. Tables are named by the entity they hold.
#[derive(Clone, Debug)]
pub struct Write {
    pub table: Table,
    pub key: String,
    pub value: RowValue,
}

/// The id and sequence counters, stored with every commit.
#[derive(Debug, Serialize)]
struct Counters {
    next_id: u64,
    seq: u64,
}

/// A row's content, kept as the typed value it was written from until a
/// store needs it as JSON: the in-memory journal (the fuzzing oracle's
/// store) then serialises only when a restart reads it back, not on every
/// write, where building `serde_json` values was an eighth of the model's time.
#[derive(Clone, Debug)]
pub struct RowValue(Arc<dyn StoredRow>);

/// What a row's content must offer a store.
pub trait StoredRow: std::fmt::Debug + Send + Sync {
    fn to_json(&self) -> Value;
    /// The same JSON as text, written straight from the record: a store
    /// that keeps text need not build the value and then print it.
    fn to_json_text(&self) -> String;
}

impl<T: Serialize + std::fmt::Debug + Send + Sync> StoredRow for T {
    fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("state records serialise")
    }

    fn to_json_text(&self) -> String {
        serde_json::to_string(self).expect("state records serialise")
    }
}

impl RowValue {
    pub fn new(content: impl StoredRow + 'static) -> RowValue {
        RowValue(Arc::new(content))
    }

    /// The row as the JSON a store keeps and a restart reads.
    pub fn to_json(&self) -> Value {
        self.0.to_json()
    }

    /// [`RowValue::to_json`] as text. Its keys come in the record's order
    /// rather than sorted; parsed, it is the same value.
    pub fn to_json_text(&self) -> String {
        self.0.to_json_text()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Table {
    Settings,
    Instances,
    Receipts,
    Approvals,
    Capabilities,
    CapabilityOutcomes,
    Records,
    Events,
    Authorizations,
    Questions,
}

impl Table {
    pub const ALL: [Table; 10] = [
        Table::Settings,
        Table::Instances,
        Table::Receipts,
        Table::Approvals,
        Table::Capabilities,
        Table::CapabilityOutcomes,
        Table::Records,
        Table::Events,
        Table::Authorizations,
        Table::Questions,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Table::Settings => "settings",
            Table::Instances => "instances",
            Table::Receipts => "receipts",
            Table::Approvals => "approvals",
            Table::Capabilities => "capabilities",
            Table::CapabilityOutcomes => "capability_outcomes",
            Table::Records => "records",
            Table::Events => "events",
            Table::Authorizations => "authorizations",
            Table::Questions => "questions",
        }
    }
}

/// The authoritative store, as the state machine sees it: a batch of writes
/// commits atomically or not at all.
pub trait Journal {
    /// Takes the writes by value: the in-memory journal keeps them as they are.
    fn commit(&mut self, writes: Vec<Write>) -> Result<(), String>;
}

/// An in-memory journal: the model's own store, used by tests and the fuzzing oracle.
#[derive(Clone, Debug, Default)]
pub struct MemoryJournal {
    pub rows: BTreeMap<(Table, String), RowValue>,
}

impl Journal for MemoryJournal {
    fn commit(&mut self, writes: Vec<Write>) -> Result<(), String> {
        for w in writes {
            self.rows.insert((w.table, w.key), w.value);
        }
        Ok(())
    }
}

impl MemoryJournal {
    pub fn rows(&self) -> Vec<(Table, String, Value)> {
        self.rows
            .iter()
            .map(|((t, k), v)| (*t, k.clone(), v.to_json()))
            .collect()
    }
}

/// Why an action could not go through, before it is turned into a reply.
#[derive(Clone, Debug, PartialEq)]
pub struct Denial {
    pub reason: DenyReason,
    pub detail: String,
}

impl Denial {
    fn new(reason: DenyReason, detail: impl Into<String>) -> Denial {
        Denial {
            reason,
            detail: detail.into(),
        }
    }
}

impl From<Denial> for ActionResult {
    fn from(d: Denial) -> ActionResult {
        ActionResult::denied(d.reason, d.detail)
    }
}

type Decided<T> = Result<T, Denial>;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InstanceRecord {
    pub id: Id,
    pub parent: Option<Id>,
    pub state: LifecycleState,
    pub role: String,
    pub model: String,
    pub requested: Option<AuthorityRequest>,
    pub ceiling: Authority,
    /// A `tools/list_changed` arrived after the seal: every sealed tool is refused until a new receipt (SD3).
    #[serde(default)]
    pub tools_invalidated: bool,
    #[serde(default)]
    pub risk: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReceiptRecord {
    pub receipt: Receipt,
    pub state: ReceiptState,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    pub approval: ObservedApproval,
    pub arguments: Value,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapabilityRecord {
    pub capability: ObservedCapability,
    /// Only a digest of the secret is kept, so no record can leak it (TC4).
    pub secret_digest: String,
}

/// Run-scoped: never written, gone after a restart (PG6).
#[derive(Clone, Debug, PartialEq)]
pub struct Grant {
    pub grant: ObservedGrant,
}

/// What the host must do about a tool call after the state machine decided.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolPlan {
    /// Call the handler now; afterwards report with [`HostState::tool_finished`].
    Execute {
        tool: String,
        arguments: Value,
        approval: Option<Id>,
    },
    Pending {
        approval: Id,
    },
    Denied(Denial),
    /// The crash fault fired between the decision's commit and its dispatch:
    /// the host must die now, without dispatching.
    Crash,
}

/// How a decided tool call ended, for its reply.
#[derive(Clone, Debug, PartialEq)]
pub enum PlanEnd {
    /// The handler ran; its text, or the error that stopped it.
    Ran {
        approval: Option<Id>,
        result: Result<String, String>,
    },
    Pending(Id),
    Denied(Denial),
    /// The crash fault fired before dispatch: nothing ran.
    Crashed,
}

impl PlanEnd {
    /// The reply to a tool call: the one mapping the reference host and the
    /// model's world share, so their answers cannot drift apart.
    pub fn reply(self, tool: &str) -> ActionResult {
        let report = |outcome, reason, approval, result| ToolCallReport {
            tool: tool.to_string(),
            outcome,
            reason,
            approval,
            result,
        };
        let mut r = match self {
            PlanEnd::Ran { approval, result } => {
                let mut r = ActionResult::ok();
                let text = match result {
                    Ok(text) => Some(text),
                    Err(e) => {
                        r.detail = Some(format!("handler failed: {e}"));
                        None
                    }
                };
                r.tool_call = Some(report(ToolCallOutcome::Executed, None, approval, text));
                r
            }
            PlanEnd::Pending(approval) => {
                let mut r = ActionResult::ok();
                r.tool_call = Some(report(
                    ToolCallOutcome::PendingApproval,
                    None,
                    Some(approval),
                    None,
                ));
                r
            }
            PlanEnd::Denied(d) => ActionResult::denied(d.reason, d.detail),
            PlanEnd::Crashed => {
                ActionResult::denied(DenyReason::StoreWriteFailed, "host crashed before dispatch")
            }
        };
        // An answer to a request nobody issued names no tool: there is no
        // call to report, only the answer's own denial.
        if r.tool_call.is_none() && !tool.is_empty() {
            r.tool_call = Some(report(ToolCallOutcome::Denied, r.reason, None, None));
        }
        r
    }
}

/// What the host must do about a lifecycle tool call of a parent's model,
/// after the state machine decided: the one plan the reference host and the
/// model's world share, so their answers cannot drift apart.
#[derive(Clone, Debug, PartialEq)]
pub enum LifecyclePlan {
    /// Nothing more to do; the answer for the target.
    Done(ActionResult),
    /// Run a turn on the target with this input, as for `instance/turn`
    /// (refused there, before any model request, when the target is terminal).
    Turn { input: String },
}

impl LifecyclePlan {
    /// The turn report of the parent whose model made `call`, given what the plan came to.
    pub fn report(call: &LifecycleCall, outcome: ActionResult) -> TurnReport {
        TurnReport::Lifecycle {
            op: call.op,
            target: call.target.clone(),
            lifecycle: Box::new(outcome),
        }
    }
}

/// A delegation that passed local admission and now waits for the authorizer (if any) and the commit.
#[derive(Clone, Debug, PartialEq)]
pub struct Admission {
    pub parent: Id,
    pub request: SpawnRequest,
    pub effective: Authority,
    pub commitment: String,
    /// Present when a receipt is being consumed.
    pub receipt: Option<Id>,
}

/// The authorizer's answer as the host got it.
#[derive(Clone, Debug, PartialEq)]
pub enum AuthorizerAnswer {
    /// The raw body of an HTTP 200 reply.
    Body(String),
    /// Connection refused or a non-success status.
    Unavailable(String),
    /// No reply within the host's deadline.
    TimedOut,
}

/// Everything a host knows and must keep. `Serialize` only for evidence and debugging.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostState {
    pub now: Millis,
    pub config: Configuration,
    pub auto_approve: bool,
    pub instances: BTreeMap<Id, InstanceRecord>,
    pub receipts: BTreeMap<Id, ReceiptRecord>,
    pub approvals: BTreeMap<Id, ApprovalRecord>,
    pub capabilities: BTreeMap<Id, CapabilityRecord>,
    /// Clarification questions asked of a person, durable like approval requests.
    pub questions: BTreeMap<Id, ObservedQuestion>,
    /// Outcomes of capability calls by `(capability, call_id)`, so a retry never reruns a handler (TC5).
    pub capability_outcomes: BTreeMap<String, String>,
    /// Shared with every observation taken since: records never change once written.
    pub records: Vec<Arc<DecisionRecord>>,
    pub delivered_events: BTreeSet<Id>,
    pub used_authorizations: BTreeSet<String>,
    pub next_id: u64,
    pub seq: u64,
    /// Key for receipt seals, chosen at first start and kept in the store.
    pub seal_key: String,
    // Run-scoped below: never written.
    pub grants: BTreeMap<Id, Grant>,
    pub faults: BTreeMap<FaultPoint, Option<u32>>,
    /// The decisions a deliberately broken host changes (`selftest`'s
    /// mutants, see [`crate::decisions`]); the correct ones in every state
    /// this crate makes. Never stored: a mutant host sets them again after a restart.
    pub decisions: SharedDecisions,
}

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("state records serialise")
}

/// The record transition that tells a full review is required (AR1).
pub const STRICT_REVIEW_REQUIRED: &str = "strict_review_required";

/// Risk scores under which the automatic path must not answer (AR1).
pub fn requires_full_review(risk: &str) -> bool {
    matches!(risk, "elevated" | "stale" | "high")
}
