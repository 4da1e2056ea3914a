//! Task capabilities: issue, revoke, the check on every call and kept outcomes (TC).

use super::*;

impl HostState {
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
}
