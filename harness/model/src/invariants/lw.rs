//! The LW checkers (lifecycle and wait): MODEL.md section 3, family LW.

use super::*;

pub(super) fn is_settled(state: LifecycleState) -> bool {
    state == LifecycleState::Completed || state.is_terminal()
}

/// LW1. A wait step makes zero model requests (attributed or not); it wakes
/// on its deadline only when the clock has reached it and the instance was
/// not already completed or terminal; it wakes on an event only when the
/// instance is then completed or terminal.
pub(super) fn lw1(facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
    let Some((Action::Wait { instance, deadline }, result)) = action_of(entry) else {
        return;
    };
    let requests = entry.evidence.total_model_requests();
    if requests > 0 {
        out.push(violation(
            InvariantId::LW1,
            entry.step,
            format!("waiting on `{instance}` made {requests} model request(s); a wait blocks on host events only"),
            json!({"model_requests": entry.evidence.model_requests}),
        ));
    }
    let before = facts.state(instance.as_str());
    let after = observed_of(entry)
        .and_then(|o| o.instance(instance))
        .map(|i| i.state)
        .or(before);
    match result.and_then(|r| r.woke) {
        Some(WakeReason::Deadline) if facts.now < *deadline => out.push(violation(
            InvariantId::LW1,
            entry.step,
            format!("wait on `{instance}` woke on its deadline {deadline} while the clock read {}", facts.now),
            json!({"now": facts.now, "deadline": deadline}),
        )),
        Some(WakeReason::Deadline) if before.is_some_and(is_settled) => out.push(violation(
            InvariantId::LW1,
            entry.step,
            format!("wait on `{instance}` reported its deadline although the instance was already {before:?}; expected an event wake"),
            json!({"state": before}),
        )),
        Some(WakeReason::Event) if !after.is_some_and(is_settled) => out.push(violation(
            InvariantId::LW1,
            entry.step,
            format!("wait on `{instance}` woke on an event while the instance is {after:?}; expected completed or terminal"),
            json!({"state": after}),
        )),
        _ => {}
    }
}

/// LW2. Between consecutive observations (restarts included) every
/// instance's state change is an allowed transition; and a delivery of an
/// event id already delivered successfully is refused with `event_replayed`.
#[derive(Default)]
pub(super) struct Lw2 {
    /// Each event id delivered successfully, and the step it was.
    delivered: BTreeMap<String, usize>,
}

impl Checker for Lw2 {
    fn take(&mut self, facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        if let Some((Action::DeliverEvent { event, .. }, result)) = action_of(entry) {
            if let Some(first) = self.delivered.get(event.as_str()) {
                let answer = result.map(|r| (r.outcome, r.reason));
                if answer.is_some_and(|(o, r)| {
                    o == Outcome::Ok || !refused_as(r, DenyReason::EventReplayed)
                }) {
                    out.push(violation(
                        InvariantId::LW2,
                        entry.step,
                        format!("event `{event}` was delivered at step {first} and again now with answer {answer:?}; expected denied event_replayed"),
                        json!({"event": event, "result": result}),
                    ));
                }
            } else if succeeded(entry) {
                self.delivered.insert(event.clone(), entry.step);
            }
        }
        if let Some(observed) = observed_of(entry) {
            for instance in &observed.instances {
                if let Some(before) = facts.last_observed.and_then(|p| p.instance(&instance.id))
                    && !before.state.may_become(instance.state)
                {
                    out.push(violation(
                        InvariantId::LW2,
                        entry.step,
                        format!("instance `{}` went from {:?} to {:?}, which is not an allowed transition", instance.id, before.state, instance.state),
                        json!({"instance": instance.id, "from": before.state, "to": instance.state}),
                    ));
                }
            }
        }
    }
}
