//! The store side of the state: restoring from committed rows, committing a batch (faults first), ids, records and denial records.

use super::*;

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
                Table::Questions => {
                    s.questions.insert(key.clone(), decode_row(*table, key, v)?);
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

    /// Commits a batch: armed store faults fail it first, then the journal
    /// may fail it. Nothing in memory changes before this returns `Ok`.
    pub(super) fn commit(&mut self, journal: &mut dyn Journal, writes: Vec<Write>) -> Decided<()> {
        // With no fault armed none can fire, and finding the points reads approvals as JSON.
        let points = if self.faults.is_empty() {
            Vec::new()
        } else {
            store_fault_points(&writes)
        };
        for point in points {
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

    pub(super) fn fresh_id(&mut self, prefix: &str) -> Id {
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

    pub(super) fn instance_write(i: &InstanceRecord) -> Write {
        Write {
            table: Table::Instances,
            key: i.id.clone(),
            value: RowValue::new(i.clone()),
        }
    }

    pub(super) fn record_write(r: &DecisionRecord) -> Write {
        Write {
            table: Table::Records,
            key: format!("{:012}", r.seq),
            value: RowValue::new(r.clone()),
        }
    }

    pub(super) fn new_record(&mut self, transition: &str) -> DecisionRecord {
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
    pub(super) fn record_denial(
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
