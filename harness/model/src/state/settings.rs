//! Configuration, the clock, armed faults, risk scores and the observed view of the state.

use super::*;

impl HostState {
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
            questions: self.questions.values().cloned().collect(),
            records: self.records.clone(),
            inferred: Vec::new(),
        }
    }
}
