//! Starting a root and delegating a child: local admission, the authorizer's answer, the commit and refusals (ZC, CE, EA).

use super::*;
use crate::side_channels::{
    AUTHORIZER_VERSION, AuthorizationDecision, AuthorizationReceipt, AuthorizationReply,
    AuthorizationRequest,
};

impl HostState {
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
            let sandbox = req
                .sandbox
                .normalise()
                .map_err(|e| Denial::new(DenyReason::CeilingExceeded, e.to_string()))?;
            let mut tools = Self::seal_tools(&req.tools, live)?;
            for (name, digest) in tools.iter_mut() {
                *digest = self.decisions.sealed_digest(&live[name]);
            }
            let ceiling = Authority {
                sandbox,
                approval_policy: req.approval_policy.clone().canonical(),
                tools: tools.into(),
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
        thread_local! {
            static RECENT: std::cell::RefCell<crate::digest::Recent<SpawnRequest, String>> =
                const { std::cell::RefCell::new(crate::digest::Recent::new()) };
        }
        RECENT.with_borrow_mut(|recent| {
            recent.get_or(request, || {
                digest_value(&to_value(request)).unwrap_or_else(|e| format!("invalid:{e}"))
            })
        })
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
        let effective = self.decisions.child_effective(effective);
        let names = if self.decisions.checks_requested_tools_for_drift() {
            sealed_and_requested_tools(&effective, &request.authority)
        } else {
            effective.tools.keys().collect()
        };
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
    pub fn authorizer_request(&self, admission: &Admission) -> AuthorizationRequest {
        AuthorizationRequest::new(
            &admission.parent,
            &admission.request,
            &admission.commitment,
            self.now,
        )
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
        let reply: AuthorizationReply = serde_json::from_str(body).map_err(|e| match e.classify() {
            serde_json::error::Category::Data => malformed(&format!(
                "does not match {{version, decision, reason?, constraints?, receipt?, decided_at?}}: {e}"
            )),
            _ => malformed("is not JSON"),
        })?;
        if reply.version != AUTHORIZER_VERSION {
            return Err(malformed(&format!(
                "has unsupported version {:?}",
                reply.version
            )));
        }
        if reply.decision == AuthorizationDecision::Deny {
            return Err(Denial::new(
                DenyReason::AuthorizerDenied,
                "authorizer denied",
            ));
        }
        let Some(AuthorizationReceipt {
            id: rid,
            binding,
            expires_at: expires,
        }) = reply.receipt
        else {
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
        if self.used_authorizations.contains(&rid)
            && self.decisions.refuses_replayed_authorization()
        {
            return Err(Denial::new(
                DenyReason::AuthorizerReplay,
                format!("authorization receipt `{rid}` replayed"),
            ));
        }
        let decided_at = reply
            .decided_at
            .ok_or_else(|| malformed("has no decided_at"))?;
        if decided_at >= self.now + AUTHORIZER_DEADLINE_MS {
            return Err(Denial::new(
                DenyReason::AuthorizerUnavailable,
                "authorizer allowed after the deadline",
            ));
        }
        if let Some(constraints) = &reply.constraints {
            let narrowed = self
                .decisions
                .apply_constraint(&admission.effective, constraints)
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
        Ok((admission, rid))
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
}

/// The tools a creation must find undrifted (SD5): those the child seals,
/// and those the request names even where a role default then drops them,
/// since a spawn naming a tool that cannot be sealed exactly is refused
/// whatever the child would end up holding.
pub(super) fn sealed_and_requested_tools<'a>(
    effective: &'a Authority,
    request: &'a AuthorityRequest,
) -> Vec<&'a String> {
    let dropped = request
        .tools
        .iter()
        .flatten()
        .filter(|name| !effective.tools.contains_key(*name));
    effective.tools.keys().chain(dropped).collect()
}
