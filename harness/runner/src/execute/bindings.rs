//! A step's action built from the scenario (aliases resolved, receipts tampered, the model endpoint's rules) and the aliases its reply binds.

use super::*;

impl ScenarioRun<'_> {
    /// Whether any model rule names an instance by alias (`when.instance`,
    /// `attribute_to`, a lifecycle call's `target`).
    pub(super) fn rules_name_aliases(&self) -> bool {
        self.rules.iter().any(|r| {
            let target = match &r.reply {
                delegation_observers::ModelReply::Lifecycle(call) => Some(call.target.as_str()),
                _ => None,
            };
            [
                r.when.instance.as_deref(),
                r.attribute_to.as_deref(),
                target,
            ]
            .into_iter()
            .flatten()
            .any(|name| name == UNKNOWN_ALIAS || self.aliases.contains_key(name))
        })
    }

    /// The model rules with instance aliases replaced by the host ids bound so far.
    pub(super) fn resolved_rules(&self) -> Vec<delegation_observers::ModelRule> {
        let resolve = |name: &mut Option<String>| {
            if let Some(bound) = name.as_ref().and_then(|n| self.aliases.get(n)) {
                *name = Some(bound.id.clone());
            }
        };
        let mut rules = self.rules.clone();
        for rule in &mut rules {
            resolve(&mut rule.when.instance);
            resolve(&mut rule.attribute_to);
            if let delegation_observers::ModelReply::Lifecycle(call) = &mut rule.reply {
                if call.target == UNKNOWN_ALIAS {
                    call.target = self.unknown_id.clone();
                } else if let Some(bound) = self.aliases.get(&call.target) {
                    call.target = bound.id.clone();
                }
            }
        }
        rules
    }

    pub(super) fn id_of(&self, alias: &str) -> Result<String, String> {
        if alias == UNKNOWN_ALIAS {
            return Ok(self.unknown_id.clone());
        }
        self.aliases.get(alias).map(|b| b.id.clone()).ok_or_else(|| {
            format!(
                "alias `{alias}` is not bound: the step that should have bound it was refused or returned no id"
            )
        })
    }

    /// Turns a scenario step into the host action, resolving aliases.
    pub(super) fn build_action(
        &mut self,
        step: &StepAction,
        observed: &Observed,
    ) -> Result<Action, String> {
        use StepAction as S;
        Ok(match step {
            S::Start(s) => Action::Start(s.request.clone()),
            S::Delegate(s) => Action::Delegate {
                parent: self.id_of(&s.parent)?,
                request: s.request.clone(),
            },
            S::PrepareReceipt(s) => Action::PrepareReceipt {
                parent: self.id_of(&s.parent)?,
                call_id: s.call_id.clone(),
                request: s.request.clone(),
                ttl_ms: s.ttl_ms,
            },
            S::ConsumeReceipt(s) if s.receipt == UNKNOWN_ALIAS => {
                // Well-formed, so a refusal is about the receipt being unknown, not its shape.
                let parent = self.id_of(&s.parent)?;
                let receipt = json!({
                    "id": self.unknown_id,
                    "parent": parent,
                    "call_id": "never-issued",
                    "commitment": "0".repeat(64),
                    "role": s.request.role,
                    "authority": {},
                    "issued_at": self.clock.unwrap_or(0),
                    "expires_at": self.clock.unwrap_or(0) + 3_600_000,
                    "seal": format!("{}-seal", self.unknown_id),
                });
                Action::ConsumeReceipt {
                    receipt,
                    parent,
                    request: s.request.clone(),
                }
            }
            S::ConsumeReceipt(s) => {
                let receipt = self
                    .aliases
                    .get(&s.receipt)
                    .and_then(|b| b.receipt.clone())
                    .ok_or_else(|| {
                        format!("receipt alias `{}` holds no issued receipt", s.receipt)
                    })?;
                let mut value = serde_json::to_value(receipt).map_err(|e| e.to_string())?;
                if let Some(tamper) = &s.tamper {
                    apply_tamper(&mut value, tamper)?;
                }
                Action::ConsumeReceipt {
                    receipt: value,
                    parent: self.id_of(&s.parent)?,
                    request: s.request.clone(),
                }
            }
            S::RevokeReceipt(s) => Action::RevokeReceipt {
                receipt: self.id_of(&s.receipt)?,
            },
            S::Turn(s) => Action::Turn {
                instance: self.id_of(&s.instance)?,
                input: s.input.clone(),
            },
            S::ToolCall(s) => Action::ToolCall {
                instance: self.id_of(&s.instance)?,
                tool: s.tool.clone(),
                arguments: s.arguments.clone(),
            },
            S::Close(s) => Action::Close {
                instance: self.id_of(&s.instance)?,
            },
            S::Cancel(s) => Action::Cancel {
                instance: self.id_of(&s.instance)?,
            },
            S::Fail(s) => Action::Fail {
                instance: self.id_of(&s.instance)?,
            },
            S::Resume(s) => Action::Resume {
                instance: self.id_of(&s.instance)?,
            },
            S::Fork(s) => Action::Fork {
                instance: self.id_of(&s.instance)?,
            },
            S::Wait(s) => Action::Wait {
                instance: self.id_of(&s.instance)?,
                deadline: self.clock.unwrap_or(0) + s.within_ms,
            },
            S::DeliverEvent(s) => Action::DeliverEvent {
                event: s.event.clone(),
                instance: self.id_of(&s.instance)?,
                kind: s.kind.clone(),
            },
            S::Answer(s) => {
                let request = if s.request == LATEST_PENDING {
                    observed
                        .approvals
                        .iter()
                        .rev()
                        .find(|a| a.state == ApprovalState::Pending)
                        .map(|a| a.id.clone())
                        .ok_or("`latest-pending`: the host shows no pending approval request")?
                } else {
                    self.id_of(&s.request)?
                };
                Action::Answer {
                    request,
                    decision: s.decision,
                }
            }
            S::Ask(s) => Action::Ask {
                instance: self.id_of(&s.instance)?,
                question: s.question.clone(),
            },
            S::AnswerQuestion(s) => Action::AnswerQuestion {
                question: self.id_of(&s.question)?,
                answer: s.answer.clone(),
            },
            S::Auto(s) => Action::SetAutoApprove { enabled: s.enabled },
            S::ScoreRisk(s) => Action::ScoreRisk {
                instance: self.id_of(&s.instance)?,
                risk: s.risk.clone(),
            },
            S::RevokeGrant(s) => {
                let grant = if s.grant == UNKNOWN_ALIAS {
                    self.unknown_id.clone()
                } else if s.grant == "latest" {
                    observed
                        .grants
                        .last()
                        .map(|g| g.id.clone())
                        .ok_or("`latest`: the host shows no exact-call grant")?
                } else {
                    s.grant.clone()
                };
                Action::RevokeGrant { grant }
            }
            S::IssueCapability(s) => {
                let secret = self.scenario.setup.canaries.then(|| {
                    let canary = format!(
                        "CANARY-{}-{}",
                        self.scenario.id.replace('/', "-"),
                        self.canaries.len()
                    );
                    self.canaries.push(canary.clone());
                    self.transcript.secrets.push(canary.clone());
                    canary
                });
                Action::IssueCapability {
                    task: s.task.clone(),
                    agent: self.id_of(&s.agent)?,
                    tools: s.tools.clone(),
                    expires_at: s.expires_at,
                    secret,
                }
            }
            S::CapabilityCall(s) if s.capability == UNKNOWN_ALIAS => Action::CapabilityCall {
                secret: self.unknown_id.clone(),
                task: s.task.clone(),
                agent: self.id_of(&s.agent)?,
                tool: s.tool.clone(),
                arguments: s.arguments.clone(),
                call_id: s.call_id.clone(),
            },
            S::CapabilityCall(s) => {
                let bound = self
                    .aliases
                    .get(&s.capability)
                    .ok_or_else(|| format!("capability alias `{}` is not bound", s.capability))?;
                let secret = if s.wrong_secret {
                    "not-the-issued-secret".to_string()
                } else {
                    bound.secret.clone().ok_or_else(|| {
                        format!(
                            "capability `{}` was issued without a secret the harness knows",
                            s.capability
                        )
                    })?
                };
                Action::CapabilityCall {
                    secret,
                    task: s.task.clone(),
                    agent: self.id_of(&s.agent)?,
                    tool: s.tool.clone(),
                    arguments: s.arguments.clone(),
                    call_id: s.call_id.clone(),
                }
            }
            S::RevokeCapability(s) => Action::RevokeCapability {
                capability: self.id_of(&s.capability)?,
            },
            S::Fault(f) => Action::ArmFault {
                point: f.point,
                times: f.times,
            },
            S::ClearFault(f) => Action::ClearFault { point: f.point },
            S::Observe(_) => Action::Observe,
            S::Clock(_)
            | S::Restart(_)
            | S::ToolServer(_)
            | S::Authorizer(_)
            | S::ModelEndpoint(_)
            | S::Concurrently(_) => unreachable!("handled before `build_action`"),
        })
    }

    /// Binds the aliases a step names to the ids the host returned.
    pub(super) fn bind(&mut self, step: &StepAction, result: &ActionResult) {
        use StepAction as S;
        let mut put = |alias: &Option<String>, _kind: AliasKind, id: Option<String>| {
            if let (Some(alias), Some(id)) = (alias, id) {
                self.transcript.aliases.push((id.clone(), alias.clone()));
                self.aliases.insert(
                    alias.clone(),
                    Bound {
                        id,
                        receipt: None,
                        secret: None,
                    },
                );
            }
        };
        let ok_instance = result.is_ok().then(|| result.instance.clone()).flatten();
        let approval = result.tool_call.as_ref().and_then(|t| t.approval.clone());
        match step {
            S::Start(s) => put(&Some(s.alias.clone()), AliasKind::Instance, ok_instance),
            S::Delegate(s) => put(&s.alias, AliasKind::Instance, ok_instance),
            S::ConsumeReceipt(s) => put(&s.alias, AliasKind::Instance, ok_instance),
            S::Fork(s) => put(&Some(s.alias.clone()), AliasKind::Instance, ok_instance),
            S::Turn(s) => {
                let child = match &result.turn {
                    Some(TurnReport::Spawn { spawn }) if spawn.is_ok() => spawn.instance.clone(),
                    _ => None,
                };
                put(&s.alias, AliasKind::Instance, child);
                put(&s.approval_as, AliasKind::Approval, approval);
            }
            S::ToolCall(s) => put(&s.approval_as, AliasKind::Approval, approval),
            S::Ask(s) => put(
                &s.alias,
                AliasKind::Question,
                result.is_ok().then(|| result.question.clone()).flatten(),
            ),
            S::PrepareReceipt(s) => {
                if let Some(receipt) = result.receipt.clone().filter(|_| result.is_ok()) {
                    self.transcript
                        .aliases
                        .push((receipt.id.clone(), s.alias.clone()));
                    self.transcript.secrets.push(receipt.seal.clone());
                    self.aliases.insert(
                        s.alias.clone(),
                        Bound {
                            id: receipt.id.clone(),
                            receipt: Some(receipt),
                            secret: None,
                        },
                    );
                }
            }
            S::IssueCapability(s) => {
                if let Some(token) = result.capability.clone().filter(|_| result.is_ok()) {
                    // A harness-chosen secret (canary) is never echoed; the host's own comes back once.
                    let secret = match &token.secret {
                        Some(secret) => Some(secret.clone()),
                        None => self.canaries.last().cloned(),
                    };
                    self.transcript.secrets.extend(secret.clone());
                    self.transcript
                        .aliases
                        .push((token.id.clone(), s.alias.clone()));
                    self.aliases.insert(
                        s.alias.clone(),
                        Bound {
                            id: token.id,
                            receipt: None,
                            secret,
                        },
                    );
                }
            }
            _ => {}
        }
    }
}

/// Alters a receipt as the scenario says, with one RFC 6902 operation. An
/// `add` must create a field: over an existing one it would be a `replace`,
/// and the scenario would not test what it says.
fn apply_tamper(receipt: &mut Value, tamper: &Tamper) -> Result<(), String> {
    let exists = receipt.pointer(&tamper.pointer).is_some();
    match (tamper.op, exists) {
        (TamperOp::Add, true) => {
            return Err(format!(
                "tamper `add` at `{}`: the receipt the host issued already has that field; use `replace`",
                tamper.pointer
            ));
        }
        (TamperOp::Replace | TamperOp::Remove, false) => {
            return Err(format!(
                "tamper `{}` at `{}`: the receipt the host issued has no such field",
                tamper.op.name(),
                tamper.pointer
            ));
        }
        _ => {}
    }
    let mut operation = json!({"op": tamper.op.name(), "path": tamper.pointer});
    if let Some(value) = &tamper.value {
        operation["value"] = value.clone();
    }
    let patch: json_patch::Patch = serde_json::from_value(json!([operation])).map_err(|e| {
        format!(
            "tamper at `{}` is not a JSON Patch operation: {e}",
            tamper.pointer
        )
    })?;
    json_patch::patch(receipt, &patch)
        .map_err(|e| format!("tamper `{}` at `{}`: {e}", tamper.op.name(), tamper.pointer))
}
