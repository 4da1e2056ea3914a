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
pub(super) fn ar1(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut decided: BTreeSet<&str> = BTreeSet::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    run.walk(|facts, entry| {
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
            let first_sight = seen.insert(&approval.id);
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
            if !decided.insert(&approval.id) {
                continue;
            }
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
    });
    out
}

/// AR2. A forked instance is first observed with its source's latest risk,
/// and a resumed instance keeps the risk it had before the resume.
pub(super) fn ar2(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut expected: BTreeMap<&str, (&str, usize)> = BTreeMap::new();
    run.walk(|facts, entry| {
        match ok_result(entry) {
            Some((Action::Fork { instance }, result)) => {
                if let (Some(risk), Some(child)) = (
                    facts.risk(instance.as_str()),
                    result.instance.as_deref(),
                ) {
                    expected.insert(child, (risk, entry.step));
                }
            }
            Some((Action::Resume { instance }, _)) => {
                if let Some(risk) = facts.risk(instance.as_str()) {
                    expected.insert(instance, (risk, entry.step));
                }
            }
            _ => {}
        }
        if let Some(observed) = observed_of(entry) {
            expected.retain(|id, (risk, at)| {
                let Some(instance) = observed.instance(id) else { return true };
                if instance.risk.as_deref() != Some(*risk) {
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
    });
    out
}
