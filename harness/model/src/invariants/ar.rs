//! The AR checkers (reviewer-routed approval): MODEL.md section 3, family AR.

use super::*;

pub(super) fn is_high_risk(risk: &str) -> bool {
    matches!(
        risk.to_ascii_lowercase().as_str(),
        "elevated" | "stale" | "high"
    )
}

/// AR1. While an instance's latest observed risk is elevated, stale or high,
/// no approval of it is first seen decided by policy: a full review decides.
/// The host says so once: an approval request raised under automatic
/// approval for such an instance is named by exactly one
/// `strict_review_required` record, and no request by more than one.
#[derive(Default)]
pub(super) struct Ar1 {
    decided: BTreeSet<String>,
    seen: BTreeSet<String>,
}

impl Checker for Ar1 {
    fn take(&mut self, facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        let Some(observed) = observed_of(entry) else {
            return;
        };
        let notices = |id: &str| {
            observed
                .records
                .iter()
                .filter(|r| {
                    r.transition == STRICT_REVIEW_REQUIRED && r.approval.as_deref() == Some(id)
                })
                .count()
        };
        for approval in &observed.approvals {
            let count = notices(&approval.id);
            if count > 1 {
                out.push(violation(
                        InvariantId::AR1,
                        entry.step,
                        format!("approval `{}` is announced as needing a full review {count} times; expected once", approval.id),
                        json!({"approval": approval.id, "notices": count}),
                    ));
            }
            let first_sight = !self.seen.contains(&approval.id);
            if first_sight {
                self.seen.insert(approval.id.clone());
            }
            let risk = observed
                .instance(&approval.instance)
                .and_then(|i| i.risk.as_deref());
            if first_sight
                && facts.auto_approve
                && approval.decided_by.is_none()
                && risk.is_some_and(is_high_risk)
                && count == 0
            {
                out.push(violation(
                        InvariantId::AR1,
                        entry.step,
                        format!("approval `{}` of `{}` was left for a review under automatic approval without saying a full review is required", approval.id, approval.instance),
                        json!({"approval": approval, "risk": risk}),
                    ));
            }
        }
        for approval in observed.approvals.iter().filter(|a| is_decided(a)) {
            if self.decided.contains(&approval.id) {
                continue;
            }
            self.decided.insert(approval.id.clone());
            let risk = observed
                .instance(&approval.instance)
                .and_then(|i| i.risk.as_deref())
                .or_else(|| facts.risk(approval.instance.as_str()));
            if let Some(risk) = risk.filter(|r| is_high_risk(r))
                && approval.decided_by == Some(DecidedBy::Policy)
            {
                out.push(violation(
                        InvariantId::AR1,
                        entry.step,
                        format!("approval `{}` of `{}` was decided by policy while its risk is `{risk}`; expected a full review", approval.id, approval.instance),
                        json!({"approval": approval, "risk": risk}),
                    ));
            }
        }
    }
}

/// AR2. A forked instance is first observed with its source's latest risk,
/// and a resumed instance keeps the risk it had before the resume.
#[derive(Default)]
pub(super) struct Ar2 {
    /// Each resumed or forked instance with the risk it must show and the step.
    expected: BTreeMap<String, (String, usize)>,
}

impl Checker for Ar2 {
    fn take(&mut self, facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        match ok_result(entry) {
            Some((Action::Fork { instance }, result)) => {
                if let (Some(risk), Some(child)) =
                    (facts.risk(instance.as_str()), result.instance.as_deref())
                {
                    self.expected
                        .insert(child.to_string(), (risk.to_string(), entry.step));
                }
            }
            Some((Action::Resume { instance }, _)) => {
                if let Some(risk) = facts.risk(instance.as_str()) {
                    self.expected
                        .insert(instance.clone(), (risk.to_string(), entry.step));
                }
            }
            _ => {}
        }
        if let Some(observed) = observed_of(entry) {
            self.expected.retain(|id, (risk, at)| {
                    let Some(instance) = observed.instance(id) else { return true };
                    if instance.risk.as_deref() != Some(risk.as_str()) {
                        out.push(violation(
                            InvariantId::AR2,
                            entry.step,
                            format!("`{id}` (resumed or forked at step {at}) has risk {:?}; expected the inherited `{risk}`", instance.risk),
                            json!({"instance": id, "expected": risk, "observed": instance.risk}),
                        ));
                    }
                    false
                });
        }
    }
}
