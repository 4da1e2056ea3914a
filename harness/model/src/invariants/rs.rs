//! The RS checkers (restart): MODEL.md section 3, family RS.

use super::*;

/// A restart, the last observation before it, and the first after it with its step.
pub(super) type RestartView<'h> = (
    &'h HistoryEntry,
    Option<&'h Observed>,
    Option<(usize, &'h Observed)>,
);

/// Each restart with the last observation before it and the first after it.
pub(super) fn restarts(history: &[HistoryEntry]) -> Vec<RestartView<'_>> {
    let mut found = Vec::new();
    let mut last: Option<&Observed> = None;
    for (index, entry) in history.iter().enumerate() {
        if let StepKind::Restart = entry.kind {
            // The restart step's own observation (when the runner made one) is the first after it.
            let after = observed_of(entry)
                .map(|o| (entry.step, o))
                .or_else(|| next_observation(history, index));
            found.push((entry, last, after));
        }
        if let Some(observed) = observed_of(entry) {
            last = Some(observed);
        }
    }
    found
}

/// RS1. Across a restart (last observation before, first after): every
/// instance is still listed with the same ceiling and, if terminal, the same
/// state; consumed receipts stay consumed; decided approvals keep their
/// decision; no grant survives; and the restart itself runs no handler.
pub(super) fn rs1(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    for (restart, before, after) in restarts(history) {
        if !restart.evidence.handler_calls.is_empty() {
            out.push(violation(
                InvariantId::RS1,
                restart.step,
                format!(
                    "the restart ran {} handler call(s); nothing is re-dispatched on restart",
                    restart.evidence.handler_calls.len()
                ),
                json!({"handler_calls": restart.evidence.handler_calls}),
            ));
        }
        let (Some(before), Some((step, after))) = (before, after) else {
            continue;
        };
        let mut lost = |what: String, evidence: Value| {
            out.push(violation(
                InvariantId::RS1,
                step,
                format!("after the restart at step {}: {what}", restart.step),
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
    out
}

/// RS2. Across a restart: an approval pending before is pending after, with
/// no decision; an instance closed before is listed closed after; and a
/// successful resume of an instance that existed before the restart answers
/// its pre-restart ceiling.
pub(super) fn rs2(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    for (restart, before, after) in restarts(history) {
        let Some(before) = before else { continue };
        let restart_index = history
            .iter()
            .position(|e| std::ptr::eq(e, restart))
            .unwrap_or(0);
        // Answers given after the last observation (a step that kills the
        // host observes nothing): the decision may have been committed just
        // before the crash, which RS3 asks for, so "pending" is not what the
        // store held at the restart.
        let answered_unobserved: BTreeSet<&str> = history[..restart_index]
            .iter()
            .rev()
            .take_while(|e| observed_of(e).is_none())
            .filter_map(|e| match action_of(e) {
                Some((Action::Answer { request, .. }, _)) => Some(request.as_str()),
                _ => None,
            })
            .collect();
        if let Some((step, after)) = after {
            for approval in before.approvals.iter().filter(|a| {
                a.state == ApprovalState::Pending && !answered_unobserved.contains(a.id.as_str())
            }) {
                let now = after.approvals.iter().find(|a| a.id == approval.id);
                if now.is_none_or(|a| a.state != ApprovalState::Pending || a.decision.is_some()) {
                    out.push(violation(
                        InvariantId::RS2,
                        step,
                        format!("approval `{}` was pending before the restart at step {} and is now {:?}", approval.id, restart.step, now.map(|a| (a.state, a.decision))),
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
                        format!("instance `{}` was closed before the restart at step {} and is now listed as {now:?}", instance.id, restart.step),
                        json!({"instance": instance.id, "after": now}),
                    ));
                }
            }
        }
        for entry in history
            .iter()
            .skip(restart_index + 1)
            .take_while(|e| !matches!(e.kind, StepKind::Restart))
        {
            if let Some((Action::Resume { instance }, result)) = ok_result(entry)
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
        }
    }
    out
}

/// RS3. After a restart, no approval is dispatched that was not already
/// dispatched before it (a crash between commit and dispatch leaves it
/// decided, not silently sent), and none is dispatched without a decision.
pub(super) fn rs3(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    for (restart, before, after) in restarts(history) {
        let Some((step, after)) = after else { continue };
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
                    step,
                    format!(
                        "approval `{}` {why} (restart at step {})",
                        approval.id, restart.step
                    ),
                    json!({"approval": approval}),
                ));
            }
        }
    }
    out
}
