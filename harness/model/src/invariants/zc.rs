//! The ZC checkers (zero child on deny): MODEL.md section 3, family ZC.

use super::*;

/// ZC1. Once a delegation from a parent was denied (instance/delegate,
/// receipt/consume, or a spawn inside a turn), no observation (also after a
/// restart) may show an instance of that parent that no successful creation
/// ever returned.
#[derive(Default)]
pub(super) struct Zc1 {
    /// Each parent with a denied delegation, and the step of the first denial.
    denied_parents: BTreeMap<String, usize>,
}

impl Checker for Zc1 {
    fn take(&mut self, facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        let attempts = creation_attempt(entry);
        for attempt in attempts.iter().filter(|c| c.is_delegation() && c.denied()) {
            if let Some(parent) = attempt.from
                && !self.denied_parents.contains_key(parent)
            {
                self.denied_parents.insert(parent.to_string(), entry.step);
            }
        }
        let created: BTreeSet<&str> = attempts.iter().filter_map(Creation::created).collect();
        let Some(observed) = observed_of(entry) else {
            return;
        };
        for instance in &observed.instances {
            if facts.knows(&instance.id) || created.contains(instance.id.as_str()) {
                continue;
            }
            if let Some(denied_at) = instance
                .parent
                .as_deref()
                .and_then(|p| self.denied_parents.get(p))
            {
                out.push(violation(
                    InvariantId::ZC1,
                    entry.step,
                    format!(
                        "instance `{}` of parent `{}` appeared although its delegation was denied at step {denied_at} and no successful creation returned it",
                        instance.id,
                        instance.parent.as_deref().unwrap_or_default()
                    ),
                    json!({"instance": instance, "denied_at": denied_at}),
                ));
            }
        }
    }
}

/// ZC2. In a step whose delegation was denied and that created nothing, the
/// model endpoint saw no request for any instance id unknown before the step.
pub(super) fn zc2(facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
    let attempts = creation_attempt(entry);
    let denied = attempts.iter().any(|c| c.is_delegation() && c.denied());
    if !denied || attempts.iter().any(|c| c.created().is_some()) {
        return;
    }
    for (instance, count) in &entry.evidence.model_requests {
        if *count > 0 && instance != "unattributed" && !facts.knows(instance) {
            out.push(violation(
                InvariantId::ZC2,
                entry.step,
                format!(
                    "denied delegation, yet the model endpoint saw {count} request(s) for new instance `{instance}`; expected zero"
                ),
                json!({"model_requests": entry.evidence.model_requests}),
            ));
        }
    }
}

/// ZC3. Every denied answer (action, nested spawn, tool-call report) names a
/// reason, and no successful one carries a reason. The reason's membership in
/// the vocabulary is guaranteed by the type.
pub(super) fn zc3(_: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
    fn visit(step: usize, result: &ActionResult, path: &str, out: &mut Vec<Violation>) {
        match (result.outcome, result.reason) {
            (Outcome::Denied, None) => out.push(violation(
                InvariantId::ZC3,
                step,
                format!("{path} was denied without a reason; expected one of the deny-reason vocabulary"),
                json!({"result": result}),
            )),
            (Outcome::Ok, Some(reason)) => out.push(violation(
                InvariantId::ZC3,
                step,
                format!("{path} succeeded but carries deny reason `{reason}`; a reason belongs to denials only"),
                json!({"result": result}),
            )),
            _ => {}
        }
        if let Some(report) = &result.tool_call {
            let denied = report.outcome == ToolCallOutcome::Denied;
            if denied != report.reason.is_some() {
                out.push(violation(
                    InvariantId::ZC3,
                    step,
                    format!(
                        "{path}: tool call `{}` has outcome {:?} with reason {:?}; a denied call needs a reason and only a denied one",
                        report.tool, report.outcome, report.reason
                    ),
                    json!({"tool_call": report}),
                ));
            }
        }
        if let Some(TurnReport::Spawn { spawn }) = &result.turn {
            visit(step, spawn, &format!("{path} (spawn)"), out);
        }
    }
    if let Some((action, Some(result))) = action_of(entry) {
        visit(entry.step, result, action.method(), out);
    }
}
