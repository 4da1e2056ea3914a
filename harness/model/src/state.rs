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

use crate::authority::{AdmissionError, Authority, AuthorityRequest, admit};
use crate::decisions::SharedDecisions;
use crate::digest::{ToolDefinition, digest_value, sha256_hex};
use crate::eligibility::{Eligibility, class_of};
use crate::path::NormalPath;
use crate::vocabulary::DenyReason;
use crate::wire::*;

/// Tool definitions as the host sees them live on its MCP servers right now, by name.
pub type LiveTools = BTreeMap<String, ToolDefinition>;

/// How long the authorizer's allow is good for, on the harness's clock.
pub const AUTHORIZER_DEADLINE_MS: Millis = 5_000;

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
}

impl<T: Serialize + std::fmt::Debug + Send + Sync> StoredRow for T {
    fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("state records serialise")
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
}

impl Table {
    pub const ALL: [Table; 9] = [
        Table::Settings,
        Table::Instances,
        Table::Receipts,
        Table::Approvals,
        Table::Capabilities,
        Table::CapabilityOutcomes,
        Table::Records,
        Table::Events,
        Table::Authorizations,
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

impl HostState {
    /// A fresh host. `seal_key` must be unpredictable to the harness in a
    /// real host; the reference host derives it from its store path and a
    /// random seed.
    pub fn new(seal_key: String) -> HostState {
        HostState {
            seal_key,
            ..HostState::default()
        }
    }

    /// Rebuilds a host from what its store committed: the restart (RS1).
    /// Grants and faults are run-scoped and start empty.
    pub fn restore(rows: &[(Table, String, Value)]) -> Result<HostState, String> {
        let mut s = HostState::default();
        let bad =
            |t: Table, k: &str, e: serde_json::Error| format!("store row {}/{k}: {e}", t.name());
        for (table, key, value) in rows {
            let v = value.clone();
            match table {
                Table::Settings => match key.as_str() {
                    "config" => {
                        s.config = serde_json::from_value(v).map_err(|e| bad(*table, key, e))?
                    }
                    "auto_approve" => s.auto_approve = v.as_bool().unwrap_or(false),
                    "counters" => {
                        s.next_id = v["next_id"].as_u64().unwrap_or(0);
                        s.seq = v["seq"].as_u64().unwrap_or(0);
                    }
                    "seal_key" => s.seal_key = v.as_str().unwrap_or_default().to_string(),
                    "now" => s.now = v.as_u64().unwrap_or(0),
                    other => return Err(format!("store row settings/{other}: unknown setting")),
                },
                Table::Instances => {
                    s.instances.insert(key.clone(), decode_row(*table, key, v)?);
                }
                Table::Receipts => {
                    s.receipts.insert(key.clone(), decode_row(*table, key, v)?);
                }
                Table::Approvals => {
                    s.approvals.insert(key.clone(), decode_row(*table, key, v)?);
                }
                Table::Capabilities => {
                    s.capabilities
                        .insert(key.clone(), decode_row(*table, key, v)?);
                }
                Table::CapabilityOutcomes => {
                    s.capability_outcomes
                        .insert(key.clone(), v.as_str().unwrap_or_default().to_string());
                }
                Table::Records => s.records.push(Arc::new(
                    serde_json::from_value(v).map_err(|e| bad(*table, key, e))?,
                )),
                Table::Events => {
                    s.delivered_events.insert(key.clone());
                }
                Table::Authorizations => {
                    s.used_authorizations.insert(key.clone());
                }
            }
        }
        s.records.sort_by_key(|r| r.seq);
        // Expiry follows from the restored clock, as `set_clock` derives it.
        for r in s.receipts.values_mut() {
            if r.state == ReceiptState::Issued && s.now >= r.receipt.expires_at {
                r.state = ReceiptState::Expired;
            }
        }
        Ok(s)
    }

    // ---------------------------------------------------------------- writes

    /// Commits a batch: armed store faults fail it first, then the journal
    /// may fail it. Nothing in memory changes before this returns `Ok`.
    fn commit(&mut self, journal: &mut dyn Journal, writes: Vec<Write>) -> Decided<()> {
        for point in store_fault_points(&writes) {
            if self.take_fault(point) {
                return Err(Denial::new(
                    DenyReason::StoreWriteFailed,
                    format!("store write failed (fault {point:?} armed)"),
                ));
            }
        }
        let mut writes = writes;
        writes.push(Write {
            table: Table::Settings,
            key: "counters".into(),
            value: RowValue::new(Counters {
                next_id: self.next_id,
                seq: self.seq,
            }),
        });
        journal.commit(writes).map_err(|e| {
            Denial::new(
                DenyReason::StoreWriteFailed,
                format!("store write failed: {e}"),
            )
        })
    }

    /// Consumes one firing of an armed fault.
    pub fn take_fault(&mut self, point: FaultPoint) -> bool {
        match self.faults.get_mut(&point) {
            None => false,
            Some(None) => true,
            Some(Some(n)) => {
                *n -= 1;
                if *n == 0 {
                    self.faults.remove(&point);
                }
                true
            }
        }
    }

    fn fresh_id(&mut self, prefix: &str) -> Id {
        self.next_id += 1;
        format!("{prefix}-{}", self.next_id)
    }

    /// Commits one instance row as it stands, bypassing [`HostState::transition`]'s
    /// rules (for a mutant's [`crate::decisions::Decisions::lifecycle_resume`]).
    pub fn commit_instance(
        &mut self,
        journal: &mut dyn Journal,
        i: &InstanceRecord,
    ) -> Decided<()> {
        self.commit(journal, vec![Self::instance_write(i)])
    }

    fn instance_write(i: &InstanceRecord) -> Write {
        Write {
            table: Table::Instances,
            key: i.id.clone(),
            value: RowValue::new(i.clone()),
        }
    }

    fn record_write(r: &DecisionRecord) -> Write {
        Write {
            table: Table::Records,
            key: format!("{:012}", r.seq),
            value: RowValue::new(r.clone()),
        }
    }

    fn new_record(&mut self, transition: &str) -> DecisionRecord {
        self.seq += 1;
        DecisionRecord {
            seq: self.seq,
            transition: transition.into(),
            parent: None,
            child: None,
            requested_role: None,
            requested: None,
            effective: None,
            allowed: false,
            deny_reasons: vec![],
            receipt_ids: vec![],
            decided_by: None,
            approval: None,
            created_instances_delta: 0,
        }
    }

    /// Writes a denial record; a store failure here cannot turn the denial into anything else.
    fn record_denial(
        &mut self,
        journal: &mut dyn Journal,
        transition: &str,
        parent: Option<&str>,
        request: Option<&SpawnRequest>,
        denial: &Denial,
    ) {
        let before = self.seq;
        let mut r = self.new_record(transition);
        r.parent = parent.map(str::to_string);
        r.requested_role = request.map(|q| q.role.clone());
        r.requested = request.map(|q| q.authority.clone());
        r.deny_reasons = vec![denial.reason];
        let write = Self::record_write(&r);
        if self.commit(journal, vec![write]).is_ok() {
            self.records.push(Arc::new(r));
        } else {
            self.seq = before;
        }
    }

    // ------------------------------------------------------------- lookups

    pub fn live_instance(&self, id: &str) -> Decided<&InstanceRecord> {
        let inst = self.instances.get(id).ok_or_else(|| {
            Denial::new(DenyReason::InstanceUnknown, format!("no instance `{id}`"))
        })?;
        if inst.state.is_terminal() {
            return Err(Denial::new(
                DenyReason::InstanceTerminal,
                format!("instance `{id}` is {:?}", inst.state),
            ));
        }
        Ok(inst)
    }

    /// Seals named tools from the live definitions, exactly or not at all (SD5).
    fn seal_tools(names: &[String], live: &LiveTools) -> Decided<BTreeMap<String, String>> {
        names
            .iter()
            .map(|n| {
                live.get(n)
                    .map(|d| (n.clone(), d.digest.clone()))
                    .ok_or_else(|| {
                        Denial::new(
                            DenyReason::ProjectionMissing,
                            format!("tool `{n}` is not served, so it cannot be sealed exactly"),
                        )
                    })
            })
            .collect()
    }

    /// Every sealed tool of `ceiling` still matches its live definition (SD2, SD4).
    fn check_sealed_tools(
        &self,
        inst: &InstanceRecord,
        names: &[&String],
        live: &LiveTools,
    ) -> Decided<()> {
        if inst.tools_invalidated && !names.is_empty() {
            return Err(Denial::new(
                DenyReason::ToolListChanged,
                "the tool list changed after the seal; a new receipt is needed",
            ));
        }
        for name in names {
            // A name the ceiling does not hold was never sealed for this
            // instance (a receipt of another parent reaches here only through
            // a mutant): refused, never a lookup that panics.
            let Some(sealed) = inst.ceiling.tools.get(*name) else {
                return Err(Denial::new(
                    DenyReason::CeilingExceeded,
                    format!("tool `{name}` is not sealed in the instance's ceiling"),
                ));
            };
            match live.get(*name) {
                Some(def) if self.decisions.sealed_tool_matches(sealed, def) => {}
                Some(def) => {
                    return Err(Denial::new(
                        DenyReason::ToolDrift,
                        format!(
                            "tool `{name}` changed: sealed {sealed}, live {}",
                            def.digest
                        ),
                    ));
                }
                None => {
                    return Err(Denial::new(
                        DenyReason::ToolDrift,
                        format!("tool `{name}` was removed after it was sealed"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The sealed tools whose live definitions still match: all the model may be shown (SD2).
    pub fn model_visible_tools(&self, instance: &str, live: &LiveTools) -> Vec<Value> {
        self.model_visible_definitions(instance, live)
            .into_iter()
            .map(|d| d.raw.clone())
            .collect()
    }

    /// The definitions behind [`HostState::model_visible_tools`], already
    /// digested: re-digesting what the model is shown costs two canonical
    /// JSON writes and hashes per tool per turn.
    pub fn model_visible_definitions<'l>(
        &self,
        instance: &str,
        live: &'l LiveTools,
    ) -> Vec<&'l ToolDefinition> {
        let Some(inst) = self.instances.get(instance) else {
            return vec![];
        };
        if inst.tools_invalidated {
            return vec![];
        }
        inst.ceiling
            .tools
            .iter()
            .filter_map(|(name, digest)| {
                live.get(name)
                    .filter(|d| self.decisions.sealed_tool_matches(digest, d))
            })
            .collect()
    }

    // ------------------------------------------------------------- actions

    pub fn configure(&mut self, journal: &mut dyn Journal, config: Configuration) -> ActionResult {
        let mut writes = vec![Write {
            table: Table::Settings,
            key: "config".into(),
            value: RowValue::new(config.clone()),
        }];
        if !self.instances.is_empty() || self.seq > 0 {
            // After a restart the persisted automatic-approval switch wins over the scenario's initial value.
        } else {
            writes.push(Write {
                table: Table::Settings,
                key: "auto_approve".into(),
                value: RowValue::new(json!(config.auto_approve)),
            });
        }
        writes.push(Write {
            table: Table::Settings,
            key: "seal_key".into(),
            value: RowValue::new(json!(self.seal_key)),
        });
        match self.commit(journal, writes) {
            Ok(()) => {
                if self.instances.is_empty() && self.seq == 0 {
                    self.auto_approve = config.auto_approve;
                }
                self.config = config;
                ActionResult::ok()
            }
            Err(d) => d.into(),
        }
    }

    pub fn set_clock(&mut self, journal: &mut dyn Journal, now: Millis) -> ActionResult {
        let write = Write {
            table: Table::Settings,
            key: "now".into(),
            value: RowValue::new(json!(now)),
        };
        match self.commit(journal, vec![write]) {
            Ok(()) => {
                self.now = now;
                // Receipts past their expiry become expired as soon as the clock says so.
                for r in self.receipts.values_mut() {
                    if r.state == ReceiptState::Issued
                        && self
                            .decisions
                            .receipt_expired(self.now, r.receipt.expires_at)
                    {
                        r.state = ReceiptState::Expired;
                    }
                }
                ActionResult::ok()
            }
            Err(d) => d.into(),
        }
    }

    pub fn start(
        &mut self,
        journal: &mut dyn Journal,
        req: &StartRequest,
        live: &LiveTools,
    ) -> ActionResult {
        let result = (|| {
            let cwd = NormalPath::parse(&req.cwd).map_err(|e| {
                Denial::new(
                    DenyReason::CeilingExceeded,
                    format!("cwd `{}`: {e}", req.cwd),
                )
            })?;
            let mut tools = Self::seal_tools(&req.tools, live)?;
            for (name, digest) in tools.iter_mut() {
                *digest = self.decisions.sealed_digest(&live[name]);
            }
            let ceiling = Authority {
                sandbox: req.sandbox.clone(),
                approval_policy: req.approval_policy.clone().canonical(),
                tools,
                cwd,
                provider: req.provider.clone(),
                delegation_depth: req.delegation_depth,
            };
            let id = self.fresh_id("inst");
            let inst = InstanceRecord {
                id: id.clone(),
                parent: None,
                state: LifecycleState::Running,
                role: req.role.clone(),
                model: req.model.clone(),
                requested: None,
                ceiling: ceiling.clone(),
                tools_invalidated: false,
                risk: None,
            };
            let mut rec = self.new_record("start");
            rec.child = Some(id.clone());
            rec.requested_role = Some(req.role.clone());
            rec.effective = Some(ceiling.clone());
            rec.allowed = true;
            rec.created_instances_delta = 1;
            self.commit(
                journal,
                vec![Self::instance_write(&inst), Self::record_write(&rec)],
            )?;
            self.instances.insert(id.clone(), inst);
            self.records.push(Arc::new(rec));
            let mut r = ActionResult::ok();
            r.instance = Some(id);
            r.effective = Some(ceiling);
            Ok(r)
        })();
        result.unwrap_or_else(|d: Denial| d.into())
    }

    /// The canonical commitment to a spawn request: what a receipt binds.
    pub fn commitment(request: &SpawnRequest) -> String {
        digest_value(&to_value(request)).unwrap_or_else(|e| format!("invalid:{e}"))
    }

    /// Local admission of a delegation: lifecycle, target, ceiling, role, tools (no side effects).
    pub fn admit_delegation(
        &self,
        parent: &str,
        request: &SpawnRequest,
        live: &LiveTools,
    ) -> Decided<Admission> {
        let p = self.live_instance(parent)?;
        if let Some(target) = &request.target
            && target != "local"
        {
            return Err(Denial::new(
                DenyReason::UnsupportedTarget,
                format!("target `{target}` is not supported; only local children"),
            ));
        }
        if request.worktree {
            return Err(Denial::new(
                DenyReason::UnsupportedTarget,
                "worktree relocation is not supported",
            ));
        }
        let role_default = self
            .decisions
            .role_default(self.config.roles.get(&request.role));
        let effective = self
            .decisions
            .admit(&p.ceiling, role_default, &request.authority)
            .map_err(|e| match &e {
                AdmissionError::CeilingExceeded(_) | AdmissionError::BadPath(..) => {
                    Denial::new(DenyReason::CeilingExceeded, e.to_string())
                }
                AdmissionError::ProjectionMissing(_) => {
                    Denial::new(DenyReason::ProjectionMissing, e.to_string())
                }
                AdmissionError::UnsupportedProvider(_) => {
                    Denial::new(DenyReason::UnsupportedTarget, e.to_string())
                }
                AdmissionError::DelegationExhausted => {
                    Denial::new(DenyReason::PolicyDenied, e.to_string())
                }
            })?;
        if self
            .decisions
            .strict_mode_refuses(self.config.strict_mode, &effective)
        {
            return Err(Denial::new(
                DenyReason::PolicyDenied,
                "strict mode refuses a child without a sandbox",
            ));
        }
        let names: Vec<&String> = effective.tools.keys().collect();
        self.check_sealed_tools(p, &names, live)?;
        Ok(Admission {
            parent: parent.to_string(),
            request: request.clone(),
            effective,
            commitment: Self::commitment(request),
            receipt: None,
        })
    }

    /// What the host sends the authorizer for an admission.
    pub fn authorizer_request(&self, admission: &Admission) -> Value {
        json!({
            "version": "1",
            "parent": admission.parent,
            "request": admission.request,
            "request_digest": admission.commitment,
            "now": self.now,
            "deadline": self.now + AUTHORIZER_DEADLINE_MS,
        })
    }

    /// Applies the authorizer's answer: narrowing only, bound, fresh, on time (EA2 to EA4).
    pub fn apply_authorizer(
        &self,
        mut admission: Admission,
        answer: &AuthorizerAnswer,
    ) -> Decided<(Admission, String)> {
        let body = match answer {
            AuthorizerAnswer::TimedOut | AuthorizerAnswer::Unavailable(_)
                if self.decisions.unanswered_authorizer_allows() =>
            {
                return Ok((admission, format!("fail-open-{}", self.seq + 1)));
            }
            AuthorizerAnswer::TimedOut => {
                return Err(Denial::new(
                    DenyReason::AuthorizerUnavailable,
                    "authorizer timed out",
                ));
            }
            AuthorizerAnswer::Unavailable(e) => {
                return Err(Denial::new(
                    DenyReason::AuthorizerUnavailable,
                    format!("authorizer unavailable: {e}"),
                ));
            }
            AuthorizerAnswer::Body(b) => b,
        };
        let malformed = |what: &str| {
            Denial::new(
                DenyReason::AuthorizerMalformed,
                format!("authorizer reply {what}"),
            )
        };
        let reply: Value = serde_json::from_str(body).map_err(|_| malformed("is not JSON"))?;
        if reply["version"] != "1" {
            return Err(malformed(&format!(
                "has unsupported version {}",
                reply["version"]
            )));
        }
        match reply["decision"].as_str() {
            Some("allow") => {}
            Some("deny") => {
                return Err(Denial::new(
                    DenyReason::AuthorizerDenied,
                    "authorizer denied",
                ));
            }
            _ => return Err(malformed("has no decision")),
        }
        let receipt = &reply["receipt"];
        let (Some(rid), Some(binding), Some(expires)) = (
            receipt["id"].as_str(),
            receipt["binding"].as_str(),
            receipt["expires_at"].as_u64(),
        ) else {
            return Err(malformed("has no complete authorization receipt"));
        };
        if binding != admission.commitment {
            return Err(Denial::new(
                DenyReason::BindingMismatch,
                "authorization receipt bound to another request",
            ));
        }
        if self.now >= expires {
            return Err(Denial::new(
                DenyReason::AuthorizerReplay,
                "authorization receipt expired",
            ));
        }
        if self.used_authorizations.contains(rid) && self.decisions.refuses_replayed_authorization()
        {
            return Err(Denial::new(
                DenyReason::AuthorizerReplay,
                format!("authorization receipt `{rid}` replayed"),
            ));
        }
        let decided_at = reply["decided_at"]
            .as_u64()
            .ok_or_else(|| malformed("has no decided_at"))?;
        if decided_at >= self.now + AUTHORIZER_DEADLINE_MS {
            return Err(Denial::new(
                DenyReason::AuthorizerUnavailable,
                "authorizer allowed after the deadline",
            ));
        }
        if let Some(constraints) = reply.get("constraints").filter(|c| !c.is_null()) {
            let constraints: AuthorityRequest = match serde_json::from_value(constraints.clone()) {
                Ok(c) => c,
                Err(_) if !self.decisions.refuses_unusable_constraint() => {
                    return Ok((admission, rid.to_string()));
                }
                Err(e) => return Err(malformed(&format!("has an unsupported constraint: {e}"))),
            };
            let narrowed = admit(
                &Authority {
                    delegation_depth: admission.effective.delegation_depth + 1,
                    ..admission.effective.clone()
                },
                None,
                &constraints,
            )
            .map_err(|e| {
                Denial::new(
                    DenyReason::AuthorizerMalformed,
                    format!("authorizer constraint widens: {e}"),
                )
            });
            match narrowed {
                Ok(narrowed) => admission.effective = narrowed,
                Err(_) if !self.decisions.refuses_unusable_constraint() => {}
                Err(d) => return Err(d),
            }
        }
        Ok((admission, rid.to_string()))
    }

    /// Creates the child: instance, record, receipt tombstone and the used
    /// authorization in one transaction. Returns the new id.
    pub fn commit_child(
        &mut self,
        journal: &mut dyn Journal,
        admission: Admission,
        authorization: Option<String>,
    ) -> Decided<(Id, Authority)> {
        let (next_id, seq) = (self.next_id, self.seq);
        let id = self.fresh_id("inst");
        let inst = InstanceRecord {
            id: id.clone(),
            parent: Some(admission.parent.clone()),
            state: LifecycleState::Running,
            role: admission.request.role.clone(),
            model: admission
                .request
                .model
                .clone()
                .unwrap_or_else(default_model),
            requested: Some(admission.request.authority.clone()),
            ceiling: admission.effective.clone(),
            tools_invalidated: false,
            risk: self
                .instances
                .get(&admission.parent)
                .and_then(|p| p.risk.clone()),
        };
        let mut rec = self.new_record(if admission.receipt.is_some() {
            "consume"
        } else {
            "delegate"
        });
        rec.parent = Some(admission.parent.clone());
        rec.child = Some(id.clone());
        rec.requested_role = Some(admission.request.role.clone());
        rec.requested = Some(admission.request.authority.clone());
        rec.effective = Some(admission.effective.clone());
        rec.allowed = true;
        rec.created_instances_delta = 1;
        rec.decided_by = authorization.as_ref().map(|_| DecidedBy::External);
        self.decisions.admission_record(&mut rec);
        let mut writes = vec![Self::instance_write(&inst), Self::record_write(&rec)];
        let mut consumed = None;
        let tombstone = self.decisions.tombstones_consumed_receipts();
        if let Some(rid) = admission.receipt.as_ref().filter(|_| tombstone) {
            let mut r = self.receipts[rid].clone();
            r.state = ReceiptState::Consumed;
            rec.receipt_ids = vec![rid.clone()];
            writes[1] = Self::record_write(&rec);
            writes.push(Write {
                table: Table::Receipts,
                key: rid.clone(),
                value: RowValue::new(r.clone()),
            });
            consumed = Some(r);
        }
        if let Some(a) = &authorization {
            writes.push(Write {
                table: Table::Authorizations,
                key: a.clone(),
                value: RowValue::new(json!(true)),
            });
        }
        if let Err(d) = self.commit(journal, writes) {
            self.next_id = next_id;
            self.seq = seq;
            return Err(d);
        }
        if let Some(r) = consumed {
            self.receipts.insert(r.receipt.id.clone(), r);
        }
        if let Some(a) = authorization {
            self.used_authorizations.insert(a);
        }
        self.instances.insert(id.clone(), inst);
        self.records.push(Arc::new(rec));
        Ok((id, admission.effective))
    }

    /// Records a refused delegation and returns the reply.
    pub fn deny_delegation(
        &mut self,
        journal: &mut dyn Journal,
        transition: &str,
        parent: &str,
        request: &SpawnRequest,
        denial: Denial,
    ) -> ActionResult {
        self.record_denial(journal, transition, Some(parent), Some(request), &denial);
        let mut r: ActionResult = denial.into();
        self.decisions.delegation_refusal(&mut r);
        r
    }

    pub fn prepare_receipt(
        &mut self,
        journal: &mut dyn Journal,
        parent: &str,
        call_id: &str,
        request: &SpawnRequest,
        ttl: Option<Millis>,
        live: &LiveTools,
    ) -> ActionResult {
        let admission = match self.admit_delegation(parent, request, live) {
            Ok(a) => a,
            Err(d) => return self.deny_delegation(journal, "prepare", parent, request, d),
        };
        let (next_id, seq) = (self.next_id, self.seq);
        let id = self.fresh_id("rcpt");
        let mut receipt = Receipt {
            id: id.clone(),
            parent: parent.into(),
            call_id: call_id.into(),
            commitment: admission.commitment,
            role: request.role.clone(),
            authority: admission.effective,
            authorization: None,
            issued_at: self.now,
            expires_at: self.now + ttl.unwrap_or(self.config.receipt_ttl_ms),
            seal: String::new(),
        };
        receipt.seal = self.seal_of(&receipt);
        let record = ReceiptRecord {
            receipt: receipt.clone(),
            state: ReceiptState::Issued,
        };
        let write = Write {
            table: Table::Receipts,
            key: id.clone(),
            value: RowValue::new(record.clone()),
        };
        if let Err(d) = self.commit(journal, vec![write]) {
            self.next_id = next_id;
            self.seq = seq;
            return d.into();
        }
        self.receipts.insert(id, record);
        let mut r = ActionResult::ok();
        r.receipt = Some(receipt);
        r
    }

    fn seal_of(&self, receipt: &Receipt) -> String {
        let mut unsealed = to_value(receipt);
        unsealed["seal"] = json!("");
        let canonical = crate::digest::canonical_json(&unsealed).unwrap_or_default();
        sha256_hex(format!("{}\n{canonical}", self.seal_key).as_bytes())
    }

    /// Checks a presented receipt: known, untampered, unexpired, unconsumed,
    /// bound to this parent and request (RC1 to RC4), then admits.
    pub fn admit_receipt(
        &mut self,
        journal: &mut dyn Journal,
        presented: &Value,
        parent: &str,
        request: &SpawnRequest,
        live: &LiveTools,
    ) -> Decided<Admission> {
        let Some(id) = presented.get("id").and_then(Value::as_str) else {
            return Err(Denial::new(
                DenyReason::ReceiptMissing,
                "no receipt id presented",
            ));
        };
        let Some(stored) = self.receipts.get(id).cloned() else {
            return Err(Denial::new(
                DenyReason::ReceiptMissing,
                format!("no receipt `{id}` was issued"),
            ));
        };
        if !self
            .decisions
            .presented_receipt_matches(presented, &to_value(&stored.receipt))
        {
            return Err(Denial::new(
                DenyReason::BindingMismatch,
                format!("receipt `{id}` was altered"),
            ));
        }
        match stored.state {
            ReceiptState::Consumed => {
                return Err(Denial::new(
                    DenyReason::ReceiptConsumed,
                    format!("receipt `{id}` was already used"),
                ));
            }
            ReceiptState::Revoked | ReceiptState::Expired => {
                return Err(Denial::new(
                    DenyReason::ReceiptExpired,
                    format!("receipt `{id}` is {:?}", stored.state),
                ));
            }
            ReceiptState::Issued => {}
        }
        if self
            .decisions
            .receipt_expired(self.now, stored.receipt.expires_at)
        {
            let mut expired = stored.clone();
            expired.state = ReceiptState::Expired;
            let write = Write {
                table: Table::Receipts,
                key: id.into(),
                value: RowValue::new(expired.clone()),
            };
            if self.commit(journal, vec![write]).is_ok() {
                self.receipts.insert(id.into(), expired);
            }
            return Err(Denial::new(
                DenyReason::ReceiptExpired,
                format!("receipt `{id}` expired"),
            ));
        }
        let other_parent = !self
            .decisions
            .receipt_bound_to_parent(&stored.receipt.parent, parent);
        if other_parent || stored.receipt.commitment != Self::commitment(request) {
            return Err(Denial::new(
                DenyReason::BindingMismatch,
                format!("receipt `{id}` is bound to another parent or request"),
            ));
        }
        let p = self.live_instance(parent)?;
        let names: Vec<&String> = stored.receipt.authority.tools.keys().collect();
        if self.decisions.checks_sealed_tools_on_consume() {
            self.check_sealed_tools(p, &names, live)?;
        }
        Ok(Admission {
            parent: parent.into(),
            request: request.clone(),
            effective: stored.receipt.authority.clone(),
            commitment: stored.receipt.commitment.clone(),
            receipt: Some(id.into()),
        })
    }

    pub fn revoke_receipt(&mut self, journal: &mut dyn Journal, id: &str) -> ActionResult {
        let Some(mut r) = self.receipts.get(id).cloned() else {
            return Denial::new(DenyReason::ReceiptMissing, format!("no receipt `{id}`")).into();
        };
        if r.state != ReceiptState::Issued {
            return Denial::new(
                DenyReason::ReceiptConsumed,
                format!("receipt `{id}` is {:?}", r.state),
            )
            .into();
        }
        r.state = ReceiptState::Revoked;
        let write = Write {
            table: Table::Receipts,
            key: id.into(),
            value: RowValue::new(r.clone()),
        };
        match self.commit(journal, vec![write]) {
            Ok(()) => {
                self.receipts.insert(id.into(), r);
                ActionResult::ok()
            }
            Err(d) => d.into(),
        }
    }

    /// Moves an instance along its lifecycle; refuses transitions the model does not allow (LW2).
    pub fn transition(
        &mut self,
        journal: &mut dyn Journal,
        id: &str,
        next: LifecycleState,
    ) -> Decided<()> {
        let inst = self.instances.get(id).ok_or_else(|| {
            Denial::new(DenyReason::InstanceUnknown, format!("no instance `{id}`"))
        })?;
        if !inst.state.may_become(next) {
            return Err(Denial::new(
                DenyReason::InstanceTerminal,
                format!(
                    "instance `{id}` is {:?} and cannot become {next:?}",
                    inst.state
                ),
            ));
        }
        if inst.state == next {
            return Ok(());
        }
        let mut updated = inst.clone();
        updated.state = next;
        let mut writes = vec![Self::instance_write(&updated)];
        let seq = self.seq;
        let mut rec = None;
        if next.is_terminal() {
            let mut r = self.new_record(match next {
                LifecycleState::Closed => "close",
                LifecycleState::Cancelled => "cancel",
                _ => "fail",
            });
            r.child = Some(id.into());
            r.allowed = true;
            writes.push(Self::record_write(&r));
            rec = Some(r);
            if !self.decisions.persists_terminal_state() {
                writes.remove(0);
            }
        }
        if let Err(d) = self.commit(journal, writes) {
            self.seq = seq;
            return Err(d);
        }
        self.instances.insert(id.into(), updated);
        if let Some(r) = rec {
            self.records.push(Arc::new(r));
        }
        if (next.is_terminal() || next == LifecycleState::Completed)
            && self.decisions.ends_grants_with_run()
        {
            // Exact-call grants last for the run they were given in: completion,
            // cancellation and failure end them (PG6), as a restart does.
            self.grants.retain(|_, g| g.grant.instance != id);
        }
        Ok(())
    }

    /// Close, cancel or fail: terminal, and answered only once (TR1).
    pub fn end(
        &mut self,
        journal: &mut dyn Journal,
        id: &str,
        next: LifecycleState,
    ) -> ActionResult {
        if let Err(d) = self.live_instance(id) {
            return d.into();
        }
        match self.transition(journal, id, next) {
            Ok(()) => {
                let mut r = ActionResult::ok();
                r.instance = Some(id.into());
                r
            }
            Err(d) => d.into(),
        }
    }

    /// Turn admission: the instance is live, and the model may be called.
    /// Nothing has been sent to the model when this returns an error (TR1).
    pub fn begin_turn(&mut self, journal: &mut dyn Journal, id: &str) -> Decided<()> {
        let terminal = self
            .instances
            .get(id)
            .is_some_and(|i| i.state.is_terminal());
        if terminal && !self.decisions.refuses_turn_on_terminal() {
            return Ok(());
        }
        self.live_instance(id)?;
        if self.take_fault(FaultPoint::ModelCall) {
            self.transition(journal, id, LifecycleState::Failed)?;
            return Err(Denial::new(
                DenyReason::StoreWriteFailed,
                "model call failed (fault armed); instance failed",
            ));
        }
        self.transition(journal, id, LifecycleState::Running)
    }

    /// The model endpoint failed during a turn: the instance fails and the
    /// turn ends there. If `failed` cannot be committed, the instance stays as
    /// the store has it and the turn is refused as `store_write_failed`, so no
    /// reply claims a failure that a restart would not show.
    pub fn model_failed(
        &mut self,
        journal: &mut dyn Journal,
        id: &str,
        detail: String,
    ) -> ActionResult {
        match self.transition(journal, id, LifecycleState::Failed) {
            Ok(()) => {
                let mut r = ActionResult::ok();
                r.instance = Some(id.into());
                r.turn = Some(TurnReport::ModelFailed { detail });
                r
            }
            Err(d) => {
                let mut r: ActionResult = Denial::new(
                    d.reason,
                    format!(
                        "the model failed ({detail}) and the failure could not be recorded: {}",
                        d.detail
                    ),
                )
                .into();
                r.instance = Some(id.into());
                r
            }
        }
    }

    /// The turn ended normally: the instance is idle and resumable.
    pub fn finish_turn(&mut self, journal: &mut dyn Journal, id: &str) -> Decided<()> {
        if self
            .instances
            .get(id)
            .is_some_and(|i| i.state == LifecycleState::Running)
        {
            self.transition(journal, id, LifecycleState::Completed)?;
        }
        Ok(())
    }

    pub fn resume(&mut self, journal: &mut dyn Journal, id: &str) -> ActionResult {
        if let Err(d) = self.live_instance(id) {
            return d.into();
        }
        let inst = &self.instances[id];
        let parent = inst.parent.as_ref().and_then(|p| self.instances.get(p));
        if let Some(ceiling) = self.decisions.resumed_ceiling(inst, parent) {
            self.instances.get_mut(id).expect("live").ceiling = ceiling;
        }
        match self.transition(journal, id, LifecycleState::Running) {
            Ok(()) => {
                let mut r = ActionResult::ok();
                r.instance = Some(id.into());
                // The sealed ceiling, never one derived again from the parent (TR2, RS2).
                r.effective = Some(self.instances[id].ceiling.clone());
                r
            }
            Err(d) => d.into(),
        }
    }

    /// A lifecycle tool call of a parent's model on `call.target`. Every op
    /// on a terminal target is refused (`instance_terminal`) before anything
    /// reaches the model (TR1); `send_input` and a `resume` with a message
    /// run the target's turn, `close` closes it, `wait` polls with the
    /// deadline now. The harness's `instance/*` methods and the model's tools
    /// are one lifecycle: a close by either is terminal for both.
    pub fn plan_lifecycle(
        &mut self,
        journal: &mut dyn Journal,
        call: &LifecycleCall,
    ) -> LifecyclePlan {
        let target = call.target.as_str();
        let input = call.message.clone().unwrap_or_default();
        match call.op {
            LifecycleOp::SendInput => LifecyclePlan::Turn { input },
            LifecycleOp::Resume => {
                let decisions = self.decisions.clone();
                let resumed = decisions
                    .lifecycle_resume(self, journal, target)
                    .unwrap_or_else(|| self.resume(journal, target));
                match &call.message {
                    Some(_) if resumed.is_ok() => LifecyclePlan::Turn { input },
                    _ => LifecyclePlan::Done(resumed),
                }
            }
            LifecycleOp::Close => {
                LifecyclePlan::Done(self.end(journal, target, LifecycleState::Closed))
            }
            LifecycleOp::Wait => LifecyclePlan::Done(self.wait(target, self.now)),
        }
    }

    pub fn fork(&mut self, journal: &mut dyn Journal, id: &str) -> ActionResult {
        let source = match self.live_instance(id) {
            Ok(i) => i.clone(),
            Err(d) => return d.into(),
        };
        let (next_id, seq) = (self.next_id, self.seq);
        let new_id = self.fresh_id("inst");
        let mut fork = InstanceRecord {
            id: new_id.clone(),
            state: LifecycleState::Running,
            ..source.clone()
        };
        let source_parent = source.parent.as_ref().and_then(|p| self.instances.get(p));
        self.decisions.forked(&mut fork, source_parent);
        let mut rec = self.new_record("fork");
        rec.parent = source.parent.clone();
        rec.child = Some(new_id.clone());
        rec.effective = Some(fork.ceiling.clone());
        rec.allowed = true;
        rec.created_instances_delta = 1;
        if let Err(d) = self.commit(
            journal,
            vec![Self::instance_write(&fork), Self::record_write(&rec)],
        ) {
            self.next_id = next_id;
            self.seq = seq;
            return d.into();
        }
        let effective = fork.ceiling.clone();
        self.instances.insert(new_id.clone(), fork);
        self.records.push(Arc::new(rec));
        let mut r = ActionResult::ok();
        r.instance = Some(new_id);
        r.effective = Some(effective);
        r
    }

    /// A wait never calls the model. Turns run to completion inside their
    /// action, so an instance that is not running has already produced its
    /// event. A running one has nothing pending: it wakes at its deadline
    /// once the harness's clock has reached it, and before that the wait
    /// returns with no wake, since only the harness can move time.
    pub fn wait(&self, id: &str, deadline: Millis) -> ActionResult {
        let Some(inst) = self.instances.get(id) else {
            return Denial::new(DenyReason::InstanceUnknown, format!("no instance `{id}`")).into();
        };
        let mut r = ActionResult::ok();
        r.instance = Some(id.into());
        if inst.state != LifecycleState::Running {
            r.woke = Some(WakeReason::Event);
        } else if self.decisions.wait_reached_deadline(self.now, deadline) {
            r.woke = Some(WakeReason::Deadline);
        } else {
            r.detail = Some(format!(
                "nothing pending and the clock ({}) is before the deadline ({deadline})",
                self.now
            ));
        }
        r
    }

    pub fn deliver_event(
        &mut self,
        journal: &mut dyn Journal,
        event: &str,
        instance: &str,
        kind: &str,
    ) -> ActionResult {
        if self.delivered_events.contains(event) && self.decisions.deduplicates_events() {
            return Denial::new(
                DenyReason::EventReplayed,
                format!("event `{event}` was already delivered"),
            )
            .into();
        }
        let next = match kind {
            "completed" => LifecycleState::Completed,
            "failed" => LifecycleState::Failed,
            "cancelled" => LifecycleState::Cancelled,
            "closed" => LifecycleState::Closed,
            other => {
                return Denial::new(DenyReason::PolicyDenied, format!("unknown event kind `{other}`; expected completed, failed, cancelled or closed")).into();
            }
        };
        if self.take_fault(FaultPoint::EventDeliver) {
            return Denial::new(
                DenyReason::StoreWriteFailed,
                "event delivery failed (fault armed)",
            )
            .into();
        }
        let write = Write {
            table: Table::Events,
            key: event.into(),
            value: RowValue::new(json!({"instance": instance, "kind": kind})),
        };
        if let Err(d) = self.commit(journal, vec![write]) {
            return d.into();
        }
        self.delivered_events.insert(event.into());
        match self.transition(journal, instance, next) {
            Ok(()) => {
                let mut r = ActionResult::ok();
                r.instance = Some(instance.into());
                r
            }
            Err(d) => d.into(),
        }
    }

    // ----------------------------------------------------------- approvals

    /// Decides a tool call of an instance: lifecycle, seal, drift, the one
    /// eligibility rule, grants, then approvals with every decision committed
    /// before anything is dispatched (PG1, PG3, PG4).
    pub fn plan_tool_call(
        &mut self,
        journal: &mut dyn Journal,
        instance: &str,
        tool: &str,
        arguments: &Value,
        live: &LiveTools,
    ) -> ToolPlan {
        let inst = match self.live_instance(instance) {
            Ok(i) => i.clone(),
            Err(d) => return ToolPlan::Denied(d),
        };
        let Some(sealed_digest) = inst.ceiling.tools.get(tool).cloned() else {
            return ToolPlan::Denied(Denial::new(
                DenyReason::CapabilityDenied,
                format!("tool `{tool}` is not sealed into this instance's ceiling"),
            ));
        };
        let name = tool.to_string();
        if let Err(d) = self.check_sealed_tools(&inst, &[&name], live) {
            return ToolPlan::Denied(d);
        }
        let class = class_of(&live[tool].raw);
        let arguments_digest = digest_value(arguments).unwrap_or_else(|e| format!("invalid:{e}"));
        match self.decisions.eligibility(
            &inst.ceiling.approval_policy,
            &inst.ceiling.sandbox,
            class,
            self.auto_approve,
        ) {
            Eligibility::Denied(reason) => {
                return ToolPlan::Denied(Denial::new(
                    reason,
                    format!("{class:?} is not allowed here"),
                ));
            }
            Eligibility::Runs => {
                return ToolPlan::Execute {
                    tool: name,
                    arguments: arguments.clone(),
                    approval: None,
                };
            }
            Eligibility::Approvable => {}
        }
        if self.grants.values().any(|g| {
            g.grant.instance == instance
                && g.grant.tool == tool
                && g.grant.tool_digest == sealed_digest
                && self
                    .decisions
                    .grant_matches_arguments(&g.grant.arguments_digest, &arguments_digest)
        }) {
            return ToolPlan::Execute {
                tool: name,
                arguments: arguments.clone(),
                approval: None,
            };
        }
        let (next_id, seq) = (self.next_id, self.seq);
        let id = self.fresh_id("appr");
        let mut approval = ApprovalRecord {
            approval: ObservedApproval {
                id: id.clone(),
                instance: instance.into(),
                class,
                tool: name.clone(),
                tool_digest: sealed_digest,
                arguments_digest,
                state: ApprovalState::Pending,
                decision: None,
                decided_by: None,
            },
            arguments: arguments.clone(),
        };
        let write = Write {
            table: Table::Approvals,
            key: id.clone(),
            value: RowValue::new(approval.clone()),
        };
        if let Err(d) = self.commit(journal, vec![write]) {
            self.next_id = next_id;
            self.seq = seq;
            return ToolPlan::Denied(d);
        }
        self.approvals.insert(id.clone(), approval.clone());
        if !self.auto_approve {
            return ToolPlan::Pending { approval: id };
        }
        if inst.risk.as_deref().is_some_and(requires_full_review)
            && self.decisions.auto_path_reads_risk()
        {
            // Elevated or stale risk: no automatic answer; a full review decides,
            // and the host says so once, in one record per request (AR1).
            let seq = self.seq;
            let mut rec = self.new_record(STRICT_REVIEW_REQUIRED);
            rec.child = Some(instance.into());
            rec.approval = Some(id.clone());
            if let Err(d) = self.commit(journal, vec![Self::record_write(&rec)]) {
                self.seq = seq;
                return ToolPlan::Denied(d);
            }
            self.records.push(Arc::new(rec));
            return ToolPlan::Pending { approval: id };
        }
        // The automatic path answers exactly where a person could: the same eligibility said Approvable.
        approval.approval.state = ApprovalState::Decided;
        approval.approval.decision = Some(Decision::Allow);
        approval.approval.decided_by = Some(DecidedBy::Policy);
        let decisions = self.decisions.clone();
        if decisions.dispatched_before_record(self) {
            return ToolPlan::Execute {
                tool: name,
                arguments: arguments.clone(),
                approval: Some(id),
            };
        }
        if let Err(d) = self.commit_decision(journal, &approval)
            && let Err(d) = decisions.decision_write_failed(self, &approval, d)
        {
            return ToolPlan::Denied(d);
        }
        if self.take_fault(FaultPoint::CrashAfterDecisionCommit) {
            return ToolPlan::Crash;
        }
        self.dispatch(journal, &id)
    }

    fn commit_decision(
        &mut self,
        journal: &mut dyn Journal,
        approval: &ApprovalRecord,
    ) -> Decided<()> {
        let seq = self.seq;
        let mut rec = self.new_record("approval");
        rec.child = Some(approval.approval.instance.clone());
        rec.approval = Some(approval.approval.id.clone());
        rec.allowed = matches!(
            approval.approval.decision,
            Some(Decision::Allow | Decision::AllowExact)
        );
        rec.decided_by = approval.approval.decided_by;
        let writes = vec![
            Write {
                table: Table::Approvals,
                key: approval.approval.id.clone(),
                value: RowValue::new(approval.clone()),
            },
            Self::record_write(&rec),
        ];
        if let Err(d) = self.commit(journal, writes) {
            self.seq = seq;
            return Err(d);
        }
        self.approvals
            .insert(approval.approval.id.clone(), approval.clone());
        self.records.push(Arc::new(rec));
        Ok(())
    }

    /// Marks a decided allow as dispatched (committed first) and tells the host to run the handler.
    fn dispatch(&mut self, journal: &mut dyn Journal, id: &str) -> ToolPlan {
        let mut approval = self.approvals[id].clone();
        approval.approval.state = ApprovalState::Dispatched;
        let write = Write {
            table: Table::Approvals,
            key: id.into(),
            value: RowValue::new(approval.clone()),
        };
        if let Err(d) = self.commit(journal, vec![write]) {
            return ToolPlan::Denied(d);
        }
        self.approvals.insert(id.into(), approval.clone());
        ToolPlan::Execute {
            tool: approval.approval.tool,
            arguments: approval.arguments,
            approval: Some(id.into()),
        }
    }

    /// A person's answer: once per request, immutable, committed before dispatch (PG2).
    pub fn answer(
        &mut self,
        journal: &mut dyn Journal,
        id: &str,
        decision: Decision,
        live: &LiveTools,
    ) -> ToolPlan {
        let Some(mut approval) = self.approvals.get(id).cloned() else {
            return ToolPlan::Denied(Denial::new(
                DenyReason::InstanceUnknown,
                format!("no approval request `{id}`"),
            ));
        };
        if approval.approval.state != ApprovalState::Pending
            && self.decisions.refuses_second_answer()
        {
            return ToolPlan::Denied(Denial::new(
                DenyReason::EventReplayed,
                format!("approval request `{id}` was already answered"),
            ));
        }
        let instance = approval.approval.instance.clone();
        if let Err(d) = self.live_instance(&instance) {
            return ToolPlan::Denied(d);
        }
        approval.approval.state = ApprovalState::Decided;
        approval.approval.decision = Some(decision);
        approval.approval.decided_by = Some(DecidedBy::Person);
        if let Err(d) = self.commit_decision(journal, &approval) {
            return ToolPlan::Denied(d);
        }
        if decision == Decision::Deny {
            return ToolPlan::Denied(Denial::new(
                DenyReason::PolicyDenied,
                "a person denied the call",
            ));
        }
        // The definition may have drifted while the request waited.
        let inst = self.instances[&instance].clone();
        if let Err(d) = self.check_sealed_tools(&inst, &[&approval.approval.tool], live) {
            return ToolPlan::Denied(d);
        }
        // A grant is for the running instance's current run; an idle one has no run to extend.
        if decision == Decision::AllowExact && inst.state == LifecycleState::Running {
            let gid = self.fresh_id("grant");
            self.grants.insert(
                gid.clone(),
                Grant {
                    grant: ObservedGrant {
                        id: gid,
                        instance: instance.clone(),
                        tool: approval.approval.tool.clone(),
                        tool_digest: approval.approval.tool_digest.clone(),
                        arguments_digest: approval.approval.arguments_digest.clone(),
                    },
                },
            );
        }
        if self.take_fault(FaultPoint::CrashAfterDecisionCommit) {
            return ToolPlan::Crash;
        }
        self.dispatch(journal, id)
    }

    pub fn set_auto_approve(&mut self, journal: &mut dyn Journal, enabled: bool) -> ActionResult {
        let write = Write {
            table: Table::Settings,
            key: "auto_approve".into(),
            value: RowValue::new(json!(enabled)),
        };
        let persisted = self.decisions.persists_auto_approve();
        match self.commit(journal, [write].into_iter().filter(|_| persisted).collect()) {
            Ok(()) => {
                self.auto_approve = enabled;
                if !enabled {
                    let decisions = self.decisions.clone();
                    decisions.auto_approve_turned_off(self);
                }
                ActionResult::ok()
            }
            Err(d) => d.into(),
        }
    }

    pub fn revoke_grant(&mut self, id: &str) -> ActionResult {
        match self.grants.remove(id) {
            Some(_) => ActionResult::ok(),
            None => Denial::new(DenyReason::CapabilityDenied, format!("no grant `{id}`")).into(),
        }
    }

    // ------------------------------------------------- task capabilities

    pub fn issue_capability(
        &mut self,
        journal: &mut dyn Journal,
        task: &str,
        agent: &str,
        tools: &[String],
        expires_at: Millis,
        secret: Option<&str>,
    ) -> ActionResult {
        let inst = match self.live_instance(agent) {
            Ok(i) => i.clone(),
            Err(d) => return d.into(),
        };
        if let Some(t) = tools.iter().find(|t| !inst.ceiling.tools.contains_key(*t)) {
            return Denial::new(
                DenyReason::CeilingExceeded,
                format!("tool `{t}` is not in the agent's ceiling; a capability cannot widen it"),
            )
            .into();
        }
        let (next_id, seq) = (self.next_id, self.seq);
        let id = self.fresh_id("cap");
        let generated = secret.is_none();
        let secret = secret.map(str::to_string).unwrap_or_else(|| {
            sha256_hex(format!("{}\ncapability\n{id}", self.seal_key).as_bytes())
        });
        let record = CapabilityRecord {
            capability: ObservedCapability {
                id: id.clone(),
                task: task.into(),
                agent: agent.into(),
                tools: tools.to_vec(),
                expires_at,
                revoked: false,
            },
            secret_digest: sha256_hex(secret.as_bytes()),
        };
        let write = Write {
            table: Table::Capabilities,
            key: id.clone(),
            value: RowValue::new(record.clone()),
        };
        if let Err(d) = self.commit(journal, vec![write]) {
            self.next_id = next_id;
            self.seq = seq;
            return d.into();
        }
        self.capabilities.insert(id.clone(), record);
        let mut r = ActionResult::ok();
        self.decisions.capability_issued(&mut r, &id, &secret);
        r.capability = Some(CapabilityToken {
            id,
            secret: generated.then_some(secret),
        });
        r
    }

    pub fn revoke_capability(&mut self, journal: &mut dyn Journal, id: &str) -> ActionResult {
        let Some(mut c) = self.capabilities.get(id).cloned() else {
            return Denial::new(
                DenyReason::CapabilityDenied,
                format!("no capability `{id}`"),
            )
            .into();
        };
        c.capability.revoked = true;
        let write = Write {
            table: Table::Capabilities,
            key: id.into(),
            value: RowValue::new(c.clone()),
        };
        match self.commit(journal, vec![write]) {
            Ok(()) => {
                self.capabilities.insert(id.into(), c);
                ActionResult::ok()
            }
            Err(d) => d.into(),
        }
    }

    /// Rechecks a capability on every call: secret, binding, revocation,
    /// expiry, allowlist, and for bounded agents the delegation tools only
    /// (TC1 to TC3, CE5). Returns the plan and the outcome key for TC5.
    #[allow(clippy::too_many_arguments)]
    pub fn plan_capability_call(
        &mut self,
        secret: &str,
        task: &str,
        agent: &str,
        tool: &str,
        arguments: &Value,
        call_id: Option<&str>,
        live: &LiveTools,
    ) -> (ToolPlan, Option<String>) {
        let denied = |detail: String| {
            (
                ToolPlan::Denied(Denial::new(DenyReason::CapabilityDenied, detail)),
                None,
            )
        };
        let digest = sha256_hex(secret.as_bytes());
        let Some(cap) = self
            .capabilities
            .values()
            .find(|c| c.secret_digest == digest)
            .cloned()
        else {
            return denied("no capability matches the presented secret".into());
        };
        let c = &cap.capability;
        if !self.decisions.capability_bound(c, task, agent) {
            return denied(format!(
                "capability `{}` is bound to another task or agent",
                c.id
            ));
        }
        if self.decisions.capability_revoked(c) {
            return denied(format!("capability `{}` was revoked", c.id));
        }
        if self.decisions.capability_expired(self.now, c.expires_at) {
            return denied(format!("capability `{}` expired", c.id));
        }
        if !c.tools.iter().any(|t| t == tool) {
            return denied(format!(
                "tool `{tool}` is not on capability `{}`'s allowlist",
                c.id
            ));
        }
        let key = call_id.map(|k| format!("{}/{k}", c.id));
        if let Some(k) = &key
            && self.decisions.returns_kept_outcome()
            && let Some(outcome) = self.capability_outcomes.get(k)
        {
            return (
                ToolPlan::Denied(Denial::new(
                    DenyReason::EventReplayed,
                    format!("already completed: {outcome}"),
                )),
                key,
            );
        }
        let inst = match self.live_instance(agent) {
            Ok(i) => i.clone(),
            Err(d) => return (ToolPlan::Denied(d), None),
        };
        let name = tool.to_string();
        if let Err(d) = self.check_sealed_tools(&inst, &[&name], live) {
            return (ToolPlan::Denied(d), None);
        }
        if inst.ceiling.approval_policy.is_bounded()
            && self.decisions.bounded_reaches_only_delegation()
            && class_of(&live[tool].raw) != crate::authority::ActionClass::Delegation
        {
            return denied(format!(
                "bounded credentials reach only delegation and lifecycle tools, not `{tool}`"
            ));
        }
        (
            ToolPlan::Execute {
                tool: name,
                arguments: arguments.clone(),
                approval: None,
            },
            key,
        )
    }

    /// Keeps a completed capability call's outcome, before its event is delivered (TC5).
    pub fn capability_finished(
        &mut self,
        journal: &mut dyn Journal,
        key: &str,
        outcome: &str,
    ) -> Decided<()> {
        let write = Write {
            table: Table::CapabilityOutcomes,
            key: key.into(),
            value: RowValue::new(json!(outcome)),
        };
        self.commit(journal, vec![write])?;
        self.capability_outcomes.insert(key.into(), outcome.into());
        Ok(())
    }

    // --------------------------------------------------------------- tools

    /// The MCP server announced `tools/list_changed`: every live instance's
    /// seal is invalid until a new receipt (SD3). Durable, so a restart does not forget it.
    pub fn tool_list_changed(&mut self, journal: &mut dyn Journal) -> Decided<()> {
        if !self.decisions.takes_in_list_changed() {
            return Ok(());
        }
        let mut writes = Vec::new();
        let mut updated = Vec::new();
        for inst in self.instances.values() {
            if !inst.state.is_terminal()
                && !inst.tools_invalidated
                && !inst.ceiling.tools.is_empty()
            {
                let mut u = inst.clone();
                u.tools_invalidated = true;
                writes.push(Self::instance_write(&u));
                updated.push(u);
            }
        }
        if writes.is_empty() {
            return Ok(());
        }
        self.commit(journal, writes)?;
        for u in updated {
            self.instances.insert(u.id.clone(), u);
        }
        Ok(())
    }

    pub fn arm_fault(&mut self, point: FaultPoint, times: Option<u32>) -> ActionResult {
        if times == Some(0) {
            self.faults.remove(&point);
        } else {
            self.faults.insert(point, times);
        }
        ActionResult::ok()
    }

    pub fn clear_fault(&mut self, point: FaultPoint) -> ActionResult {
        self.faults.remove(&point);
        ActionResult::ok()
    }

    /// The reviewer's latest risk score for an instance; it is durable and
    /// inherited by forks and children (AR2).
    pub fn score_risk(&mut self, journal: &mut dyn Journal, id: &str, risk: &str) -> ActionResult {
        let mut inst = match self.live_instance(id) {
            Ok(i) => i.clone(),
            Err(d) => return d.into(),
        };
        inst.risk = Some(risk.to_string());
        match self.commit(journal, vec![Self::instance_write(&inst)]) {
            Ok(()) => {
                self.instances.insert(id.into(), inst);
                let mut r = ActionResult::ok();
                r.instance = Some(id.into());
                r
            }
            Err(d) => d.into(),
        }
    }

    /// The host's state as `state/observe` shows it. Never contains a capability secret.
    pub fn observe(&self) -> Observed {
        Observed {
            now: self.now,
            auto_approve: self.auto_approve,
            instances: self
                .instances
                .values()
                .map(|i| ObservedInstance {
                    id: i.id.clone(),
                    parent: i.parent.clone(),
                    state: i.state,
                    role: i.role.clone(),
                    model: i.model.clone(),
                    requested: i.requested.clone(),
                    ceiling: i.ceiling.clone(),
                    risk: i.risk.clone(),
                    inferred: Vec::new(),
                })
                .collect(),
            approvals: self
                .approvals
                .values()
                .map(|a| a.approval.clone())
                .collect(),
            receipts: self
                .receipts
                .values()
                .map(|r| ObservedReceipt {
                    id: r.receipt.id.clone(),
                    parent: r.receipt.parent.clone(),
                    state: r.state,
                })
                .collect(),
            grants: self.grants.values().map(|g| g.grant.clone()).collect(),
            capabilities: self
                .capabilities
                .values()
                .map(|c| c.capability.clone())
                .collect(),
            records: self.records.clone(),
            inferred: Vec::new(),
        }
    }
}

/// The record transition that tells a full review is required (AR1).
pub const STRICT_REVIEW_REQUIRED: &str = "strict_review_required";

/// Risk scores under which the automatic path must not answer (AR1).
pub fn requires_full_review(risk: &str) -> bool {
    matches!(risk, "elevated" | "stale" | "high")
}

/// One stored row as the record it holds, or an error naming the row.
fn decode_row<T: serde::de::DeserializeOwned>(
    table: Table,
    key: &str,
    value: Value,
) -> Result<T, String> {
    serde_json::from_value(value).map_err(|e| format!("store row {}/{key}: {e}", table.name()))
}

/// The fault points a batch of writes passes through.
fn store_fault_points(writes: &[Write]) -> Vec<FaultPoint> {
    let mut points = Vec::new();
    for w in writes {
        let point = match w.table {
            Table::Approvals => match w.value.to_json()["approval"]["state"].as_str() {
                Some("pending") => Some(FaultPoint::StoreWriteApprovalRequest),
                Some("decided") => Some(FaultPoint::StoreWriteDecision),
                _ => None,
            },
            Table::Instances => Some(FaultPoint::StoreWriteInstance),
            _ => None,
        };
        if let Some(p) = point
            && !points.contains(&p)
        {
            points.push(p);
        }
    }
    points
}
