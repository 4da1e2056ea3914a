//! A race in a generated case: the actions the driver sent at once, written as one `concurrently` step.

use std::collections::BTreeMap;

use delegation_model::linearizability::{RaceState, RacedAction, linearize};
use delegation_model::{Action, HistoryEntry, Observed, Outcome, StepKind};

use super::{Translator, Untranslatable, touched_ids};
use crate::scenario::{
    CapabilityRef, ConcurrentSteps, ConsumeReceiptStep, InstanceRef, SetExpect, Step, StepAction,
    TurnStep,
};

impl Translator {
    /// The alias of the capability issued with `secret`.
    fn capability_alias(&self, secret: &str) -> Result<String, Untranslatable> {
        self.driver
            .capability_with_secret(secret)
            .and_then(|id| self.aliases.get(&id).cloned())
            .ok_or_else(|| "a raced capability call of a capability with no alias".to_string())
    }

    /// The actions the driver raced, as one `concurrently` step. The model
    /// applied them one at a time in the order written; its answers must be
    /// one of the orders the linearizability rules give (the rules the
    /// runner judges the host's answers by), or the rules do not decide this
    /// race and the case ends here. Every generated race ends in the same
    /// state whichever order the host takes (one consume wins, or none; the
    /// instance ends closed), so later predictions hold; the answers are
    /// expected as a set only when the actions are all alike.
    pub(super) fn race(
        &mut self,
        k: usize,
        entries: &[HistoryEntry],
        before: &Observed,
    ) -> Result<(), Untranslatable> {
        if self.crashed {
            return Ok(());
        }
        let mut actions = Vec::new();
        let mut answers = Vec::new();
        let mut model_requests: BTreeMap<String, u64> = BTreeMap::new();
        let mut handler_calls = Vec::new();
        let mut after = before.clone();
        for e in entries {
            let StepKind::Action { action, result } = &e.kind else {
                continue;
            };
            let r = result
                .as_ref()
                .map_err(|e| format!("a raced action crashed the model's host: {e}"))?;
            for (id, n) in &e.evidence.model_requests {
                *model_requests.entry(id.clone()).or_default() += n;
            }
            handler_calls.extend(e.evidence.handler_calls.iter().cloned());
            if let Some(observed) = &e.observed {
                after = (**observed).clone();
            }
            actions.push(action.clone());
            answers.push(r.clone());
        }
        let raced = actions
            .iter()
            .map(|action| {
                RacedAction::from_action(action, &|secret| {
                    self.driver.capability_with_secret(secret)
                })
            })
            .collect::<Option<Vec<_>>>()
            .ok_or("a raced action the linearizability rules do not decide")?;
        let start = RaceState::before(before, &raced);
        let end = RaceState::after(before, &after, &model_requests, &handler_calls, &raced);
        let observed: Vec<_> = answers.iter().map(|r| (r.outcome, r.reason)).collect();
        // The model answers one action after another: no real-time order to respect.
        linearize(&start, &raced, &observed, &end, &[]).map_err(|not| {
            format!(
                "the model's answers to a race, {:?}, are no order of the linearizability rules: they do not decide it",
                not.observed
            )
        })?;
        let mut inner = Vec::new();
        let mut touched = Vec::new();
        let mut receipts = BTreeMap::new();
        for action in &actions {
            let step = match action {
                Action::ConsumeReceipt {
                    receipt,
                    parent,
                    request,
                } => {
                    let rid = receipt["id"].as_str().unwrap_or_default();
                    let alias = self
                        .aliases
                        .get(rid)
                        .cloned()
                        .ok_or_else(|| format!("receipt `{rid}` has no alias"))?;
                    receipts.insert(rid.to_string(), alias.clone());
                    let parent = self.instance(parent)?;
                    touched.push(parent.clone());
                    StepAction::ConsumeReceipt(ConsumeReceiptStep {
                        receipt: alias,
                        parent,
                        request: request.clone(),
                        tamper: None,
                        alias: None,
                    })
                }
                Action::Turn { instance, input } => {
                    let instance = self.instance(instance)?;
                    touched.push(instance.clone());
                    StepAction::Turn(TurnStep {
                        instance,
                        input: input.clone(),
                        alias: None,
                        approval_as: None,
                    })
                }
                Action::Close { instance } => StepAction::Close(InstanceRef {
                    instance: self.instance(instance)?,
                }),
                Action::Cancel { instance } => StepAction::Cancel(InstanceRef {
                    instance: self.instance(instance)?,
                }),
                Action::CapabilityCall { secret, .. } => {
                    let capability = self.capability_alias(secret)?;
                    self.capability_call_step(capability, false, action, &mut touched)?
                }
                Action::RevokeCapability { capability } => {
                    StepAction::RevokeCapability(CapabilityRef {
                        capability: self.capability(capability)?,
                    })
                }
                other => return Err(format!("`{}` is not raced by the driver", other.method())),
            };
            inner.push(Step {
                action: step,
                expect: None,
                note: None,
            });
        }
        for (action, r) in actions.iter().zip(&answers) {
            self.decided(action.method(), r);
        }
        let mut expect = self.state_expect(&after, touched_ids(&self.aliases, &touched), false);
        for (id, alias) in receipts {
            if let Some(r) = after.receipts.iter().find(|r| r.id == id) {
                expect.receipts.insert(alias, r.state);
            }
        }
        if actions.windows(2).all(|w| w[0] == w[1]) {
            let mut denied = BTreeMap::new();
            for r in answers.iter().filter(|r| r.outcome == Outcome::Denied) {
                if let Some(reason) = r.reason {
                    *denied.entry(reason).or_default() += 1;
                }
            }
            expect.set = Some(SetExpect {
                ok: Some(answers.iter().filter(|r| r.outcome == Outcome::Ok).count() as u64),
                denied,
            });
        }
        self.push(
            k,
            StepAction::Concurrently(ConcurrentSteps(inner)),
            Some(expect),
        );
        Ok(())
    }
}
