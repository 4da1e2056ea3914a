//! Tool calls and approvals: eligibility, grants, the automatic path and answers, every decision committed before dispatch (PG, AR).

use super::*;

impl HostState {
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
        let Some(name) = self.decisions.sealed_name(&inst.ceiling.tools, tool) else {
            return ToolPlan::Denied(Denial::new(
                DenyReason::CapabilityDenied,
                format!("tool `{tool}` is not sealed into this instance's ceiling"),
            ));
        };
        let sealed_digest = inst.ceiling.tools[&name].clone();
        let tool = name.as_str();
        if !self.decisions.grants_after_drift_check()
            && let Ok(arguments_digest) = digest_value(arguments)
            && self.grants.values().any(|g| {
                g.grant.instance == instance
                    && g.grant.tool == tool
                    && g.grant.arguments_digest == arguments_digest
            })
        {
            return ToolPlan::Execute {
                tool: name,
                arguments: arguments.clone(),
                approval: None,
            };
        }
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

    pub(super) fn commit_decision(
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
    pub(super) fn dispatch(&mut self, journal: &mut dyn Journal, id: &str) -> ToolPlan {
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
}
