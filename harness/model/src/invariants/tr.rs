//! The TR checkers (terminal reuse rejection): MODEL.md section 3, family TR.

use super::*;

/// The instance a follow-up, turn, tool call, spawn, resume or fork addresses.
pub(super) fn reuse_target(action: &Action) -> Option<&str> {
    match action {
        Action::Turn { instance, .. }
        | Action::ToolCall { instance, .. }
        | Action::Resume { instance }
        | Action::Fork { instance } => Some(instance),
        Action::Delegate { parent, .. }
        | Action::PrepareReceipt { parent, .. }
        | Action::ConsumeReceipt { parent, .. } => Some(parent),
        _ => None,
    }
}

/// TR1. After an instance was seen closed, cancelled or failed (observed, or
/// a successful close/cancel/fail, or a failed model call), every later
/// turn, tool call, delegation, receipt, resume or fork addressed to it is
/// not successful, and no later step shows a model request for it, whoever
/// addressed it (the harness, or another instance's model).
pub(super) fn tr1(facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
    let Some((action, _)) = action_of(entry) else {
        return;
    };
    let direct = reuse_target(action);
    // Addressed by someone else: a parent's model reaching the instance
    // through its own lifecycle tools (resume, send_input), counted at
    // the harness's endpoint whatever the host reports about it.
    for (instance, &requests) in &entry.evidence.model_requests {
        let Some(state) = facts.terminal(instance) else {
            continue;
        };
        if requests > 0 && direct != Some(instance.as_str()) {
            out.push(violation(
                InvariantId::TR1,
                entry.step,
                format!(
                    "`{}` caused {requests} model request(s) for {state:?} instance `{instance}`; expected zero",
                    action.method()
                ),
                json!({"model_requests": entry.evidence.model_requests}),
            ));
        }
    }
    let Some(target) = direct else {
        return;
    };
    let Some(state) = facts.terminal(target) else {
        return;
    };
    if succeeded(entry) {
        out.push(violation(
            InvariantId::TR1,
            entry.step,
            format!(
                "`{}` addressed to {state:?} instance `{target}` succeeded; expected instance_terminal",
                action.method()
            ),
            json!({"action": action, "result": action_of(entry).and_then(|(_, r)| r)}),
        ));
    }
    let requests = model_requests_for(&entry.evidence, target);
    if requests > 0 {
        out.push(violation(
            InvariantId::TR1,
            entry.step,
            format!(
                "`{}` addressed to {state:?} instance `{target}` caused {requests} model request(s); expected zero",
                action.method()
            ),
            json!({"model_requests": entry.evidence.model_requests}),
        ));
    }
}

/// TR2. A successful resume answers with the instance's sealed ceiling, not a
/// ceiling derived anew (for example from the parent's current one).
pub(super) fn tr2(facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
    let Some((Action::Resume { instance }, result)) = ok_result(entry) else {
        return;
    };
    let (Some(effective), Some(sealed)) = (&result.effective, facts.ceiling(instance.as_str()))
    else {
        return;
    };
    if effective != sealed {
        out.push(violation(
            InvariantId::TR2,
            entry.step,
            format!(
                "resume of `{instance}` answered an authority differing from its sealed ceiling on {:?}",
                differing_axes(effective, sealed)
            ),
            json!({"sealed": sealed, "effective": effective}),
        ));
    }
}

pub(super) fn differing_axes(a: &Authority, b: &Authority) -> Vec<Axis> {
    let mut axes = a.axes_exceeding(b);
    for axis in b.axes_exceeding(a) {
        if !axes.contains(&axis) {
            axes.push(axis);
        }
    }
    axes
}

/// TR3. An instance once seen terminal is observed in that same state ever
/// after (across restarts), and an id returned for a new instance was never
/// seen before.
pub(super) fn tr3(facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
    if let Some(creation) = creation_attempt(entry) {
        if let Some(id) = creation.created()
            && let Some(first) = facts.first_seen(id)
        {
            out.push(violation(
                InvariantId::TR3,
                entry.step,
                format!(
                    "new instance id `{id}` was already used at step {first}; ids are never reused"
                ),
                json!({"instance": id, "first_seen": first}),
            ));
        }
    }
    if let Some(observed) = observed_of(entry) {
        for instance in &observed.instances {
            if let Some(terminal) = facts.terminal(instance.id.as_str())
                && instance.state != terminal
            {
                out.push(violation(
                    InvariantId::TR3,
                    entry.step,
                    format!(
                        "instance `{}` was {terminal:?} and is now observed {:?}; terminal states are final",
                        instance.id, instance.state
                    ),
                    json!({"instance": instance.id, "was": terminal, "now": instance.state}),
                ));
            }
        }
    }
}

/// TR4. After the step in which a close of an instance succeeded (or it was
/// observed closed), no later step's evidence has a model request for it.
#[derive(Default)]
pub(super) struct Tr4 {
    /// Each closed instance and the step its close was first seen.
    closed_at: BTreeMap<String, usize>,
}

impl Checker for Tr4 {
    fn take(&mut self, _: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        for (instance, at) in &self.closed_at {
            let requests = model_requests_for(&entry.evidence, instance);
            if requests > 0 {
                out.push(violation(
                    InvariantId::TR4,
                    entry.step,
                    format!(
                        "{requests} model request(s) for `{instance}` after its close was committed at step {at}; expected none"
                    ),
                    json!({"instance": instance, "closed_at": at, "model_requests": entry.evidence.model_requests}),
                ));
            }
        }
        let mut close = |instance: &str| {
            if !self.closed_at.contains_key(instance) {
                self.closed_at.insert(instance.to_string(), entry.step);
            }
        };
        if let Some((Action::Close { instance }, _)) = ok_result(entry) {
            close(instance);
        }
        if let Some(observed) = observed_of(entry) {
            for instance in &observed.instances {
                if instance.state == LifecycleState::Closed {
                    close(&instance.id);
                }
            }
        }
    }
}
