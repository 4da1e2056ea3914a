//! The RS checkers (restart): MODEL.md section 3, family RS.

use super::*;

/// The restarts still waiting for the first observation after them.
#[derive(Default)]
pub(super) struct Restarts {
    /// Each restart's step and the index of the last observed entry before it.
    pending: Vec<(usize, Option<usize>)>,
}

impl Restarts {
    /// Takes in an entry; returns each restart whose first observation after
    /// it is this entry's (the restart step's own, when the runner made one),
    /// with the last observation before it.
    fn resolved<'a>(
        &mut self,
        facts: &Facts<'a>,
        entry: &HistoryEntry,
    ) -> Vec<(usize, Option<&'a Observed>)> {
        if let StepKind::Restart = entry.kind {
            self.pending.push((entry.step, facts.last_observed_at));
        }
        if observed_of(entry).is_none() {
            return Vec::new();
        }
        self.pending
            .drain(..)
            .map(|(step, before)| (step, before.and_then(|i| facts.observed_at(i))))
            .collect()
    }
}

/// RS1. Across a restart (last observation before, first after): every
/// instance is still listed with the same ceiling and, if terminal, the same
/// state; consumed receipts stay consumed; decided approvals keep their
/// decision; no grant survives; and the restart itself runs no handler.
#[derive(Default)]
pub(super) struct Rs1 {
    restarts: Restarts,
}

impl Checker for Rs1 {
    fn take(&mut self, facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        if let StepKind::Restart = entry.kind
            && !entry.evidence.handler_calls.is_empty()
        {
            out.push(violation(
                InvariantId::RS1,
                entry.step,
                format!(
                    "the restart ran {} handler call(s); nothing is re-dispatched on restart",
                    entry.evidence.handler_calls.len()
                ),
                json!({"handler_calls": entry.evidence.handler_calls}),
            ));
        }
        for (restart_step, before) in self.restarts.resolved(facts, entry) {
            let (Some(before), Some(after)) = (before, observed_of(entry)) else {
                continue;
            };
            rs1_across(restart_step, before, (entry.step, after), out);
        }
    }
}

/// RS1 across one restart, from the last observation before it to the first after it.
fn rs1_across(
    restart_step: usize,
    before: &Observed,
    (step, after): (usize, &Observed),
    out: &mut Vec<Violation>,
) {
    {
        let mut lost = |what: String, evidence: Value| {
            out.push(violation(
                InvariantId::RS1,
                step,
                format!("after the restart at step {restart_step}: {what}"),
                evidence,
            ));
        };
        for instance in &before.instances {
            match after.instance(&instance.id) {
                None => lost(
                    format!("instance `{}` is gone", instance.id),
                    json!({"before": instance}),
                ),
                Some(now) if now.ceiling != instance.ceiling => lost(
                    format!(
                        "ceiling of `{}` changed on {:?}",
                        instance.id,
                        differing_axes(&now.ceiling, &instance.ceiling)
                    ),
                    json!({"before": instance.ceiling, "after": now.ceiling}),
                ),
                Some(now) if instance.state.is_terminal() && now.state != instance.state => lost(
                    format!(
                        "`{}` was {:?} and is now {:?}",
                        instance.id, instance.state, now.state
                    ),
                    json!({"before": instance.state, "after": now.state}),
                ),
                _ => {}
            }
        }
        for receipt in before
            .receipts
            .iter()
            .filter(|r| r.state == ReceiptState::Consumed)
        {
            let now = after
                .receipts
                .iter()
                .find(|r| r.id == receipt.id)
                .map(|r| r.state);
            if now != Some(ReceiptState::Consumed) {
                lost(
                    format!("consumed receipt `{}` is now {now:?}", receipt.id),
                    json!({"receipt": receipt.id}),
                );
            }
        }
        for approval in before.approvals.iter().filter(|a| is_decided(a)) {
            let now = after
                .approvals
                .iter()
                .find(|a| a.id == approval.id)
                .and_then(|a| a.decision);
            if now != approval.decision {
                lost(
                    format!(
                        "approval `{}` was decided {:?} and is now {now:?}",
                        approval.id, approval.decision
                    ),
                    json!({"approval": approval}),
                );
            }
        }
        for grant in &after.grants {
            if before.grants.iter().any(|g| g.id == grant.id) {
                lost(
                    format!("run-scoped grant `{}` survived", grant.id),
                    json!({"grant": grant}),
                );
            }
        }
    }
}

/// RS2. Across a restart: an approval pending before is pending after, with
/// no decision; an instance closed before is listed closed after; and a
/// successful resume of an instance that existed before the restart answers
/// its pre-restart ceiling.
#[derive(Default)]
pub(super) struct Rs2 {
    /// Restarts waiting for an observation, with the approvals answered
    /// since the last observation before each.
    pending: Vec<(usize, Option<usize>, BTreeSet<String>)>,
    /// Approvals answered since the latest observation: a step that kills the
    /// host observes nothing, and its decision may have been committed just
    /// before the crash, which RS3 asks for, so "pending" is not what the
    /// store held at the restart.
    answered_unobserved: BTreeSet<String>,
    /// The index of the last observed entry before the latest restart.
    before_latest_restart: Option<usize>,
}

impl Checker for Rs2 {
    fn take(&mut self, facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        if let StepKind::Restart = entry.kind {
            self.before_latest_restart = facts.last_observed_at;
            self.pending.push((
                entry.step,
                facts.last_observed_at,
                self.answered_unobserved.clone(),
            ));
        } else if let Some((Action::Resume { instance }, result)) = ok_result(entry)
            && let Some(before) = self
                .before_latest_restart
                .and_then(|i| facts.observed_at(i))
            && let (Some(effective), Some(sealed)) = (
                &result.effective,
                before.instance(instance).map(|i| &i.ceiling),
            )
            && effective != sealed
        {
            out.push(violation(
                InvariantId::RS2,
                entry.step,
                format!("resume of `{instance}` after the restart answered an authority differing from its sealed ceiling on {:?}", differing_axes(effective, sealed)),
                json!({"sealed": sealed, "effective": effective}),
            ));
        }
        let Some(after) = observed_of(entry) else {
            if let Some((Action::Answer { request, .. }, _)) = action_of(entry) {
                self.answered_unobserved.insert(request.clone());
            }
            return;
        };
        self.answered_unobserved.clear();
        for (restart_step, before, answered_unobserved) in std::mem::take(&mut self.pending) {
            let Some(before) = before.and_then(|i| facts.observed_at(i)) else {
                continue;
            };
            let step = entry.step;
            for approval in before.approvals.iter().filter(|a| {
                a.state == ApprovalState::Pending && !answered_unobserved.contains(a.id.as_str())
            }) {
                let now = after.approvals.iter().find(|a| a.id == approval.id);
                if now.is_none_or(|a| a.state != ApprovalState::Pending || a.decision.is_some()) {
                    out.push(violation(
                        InvariantId::RS2,
                        step,
                        format!("approval `{}` was pending before the restart at step {restart_step} and is now {:?}", approval.id, now.map(|a| (a.state, a.decision))),
                        json!({"before": approval, "after": now}),
                    ));
                }
            }
            for instance in before
                .instances
                .iter()
                .filter(|i| i.state == LifecycleState::Closed)
            {
                let now = after.instance(&instance.id).map(|i| i.state);
                if now != Some(LifecycleState::Closed) {
                    out.push(violation(
                        InvariantId::RS2,
                        step,
                        format!("instance `{}` was closed before the restart at step {restart_step} and is now listed as {now:?}", instance.id),
                        json!({"instance": instance.id, "after": now}),
                    ));
                }
            }
        }
    }
}

/// RS3. After a restart, no approval is dispatched that was not already
/// dispatched before it (a crash between commit and dispatch leaves it
/// decided, not silently sent), and none is dispatched without a decision.
#[derive(Default)]
pub(super) struct Rs3 {
    restarts: Restarts,
}

impl Checker for Rs3 {
    fn take(&mut self, facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        for (restart_step, before) in self.restarts.resolved(facts, entry) {
            let Some(after) = observed_of(entry) else {
                continue;
            };
            for approval in after
                .approvals
                .iter()
                .filter(|a| a.state == ApprovalState::Dispatched)
            {
                let was_dispatched = before
                    .and_then(|b| b.approvals.iter().find(|a| a.id == approval.id))
                    .is_some_and(|a| a.state == ApprovalState::Dispatched);
                let why = if approval.decision.is_none() || approval.decided_by.is_none() {
                    Some("is dispatched without a recorded decision")
                } else if !was_dispatched {
                    Some(
                        "was not dispatched before the restart and is dispatched after it without any step dispatching it",
                    )
                } else {
                    None
                };
                if let Some(why) = why {
                    out.push(violation(
                        InvariantId::RS3,
                        entry.step,
                        format!(
                            "approval `{}` {why} (restart at step {restart_step})",
                            approval.id
                        ),
                        json!({"approval": approval}),
                    ));
                }
            }
        }
    }
}
