//! The PG checkers (persistence-gated approval): MODEL.md section 3, family PG.

use super::*;

pub(super) fn is_approval_write_fault(point: FaultPoint) -> bool {
    matches!(
        point,
        FaultPoint::StoreWriteApprovalRequest | FaultPoint::StoreWriteDecision
    )
}

/// Whether a call needed an approval: it raised one, or its class (as the
/// host's approval requests named it) is approvable under the instance's ceiling.
pub(super) fn needed_approval(
    facts: &Facts,
    classes: &BTreeMap<&str, ActionClass>,
    call: &ToolCallSeen,
) -> bool {
    if call.report.is_some_and(|r| r.approval.is_some()) {
        return true;
    }
    match (facts.ceiling(call.instance), classes.get(call.tool)) {
        (Some(ceiling), Some(class)) => {
            eligibility(&ceiling.approval_policy, &ceiling.sandbox, *class)
                == Eligibility::Approvable
        }
        _ => false,
    }
}

/// PG1. While automatic approval is on and a store write of an approval
/// request or decision is armed to fail, a call that needed approval does
/// not run and the tool server sees no handler call for it (each such call
/// uses up one armed failure when a count was given); and no observation
/// ever shows a dispatched approval without a committed decision.
pub(super) fn pg1(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let classes = tool_classes(history);
    // None: not armed; Some(None): until cleared; Some(Some(n)): n more failures.
    let mut armed: Option<Option<u32>> = None;
    run.walk(|facts, entry| {
        if let Some(call) = tool_call_in(entry) {
            let fault_live = !matches!(armed, None | Some(Some(0)));
            if fault_live && needed_approval(facts, &classes, &call) {
                if facts.auto_approve {
                    refused_without_handler(
                        InvariantId::PG1,
                        entry,
                        &call,
                        "automatic approval could not be committed (store write armed to fail)",
                        &mut out,
                    );
                }
                // A request for a person is written too, so it uses up a firing as well.
                if let Some(Some(n)) = &mut armed {
                    *n -= 1;
                }
            }
        }
        // A person's answer whose decision could not be written used up a
        // firing too (fuzzing found the checker still counting it armed).
        if let Some((Action::Answer { .. }, Some(result))) = action_of(entry)
            && result.reason == Some(DenyReason::StoreWriteFailed)
            && let Some(Some(n)) = &mut armed
        {
            *n = n.saturating_sub(1);
        }
        // Armed faults are run-scoped: a restarted host starts with none.
        if matches!(entry.kind, StepKind::Restart) {
            armed = None;
        }
        match ok_result(entry) {
            Some((Action::ArmFault { point, times }, _)) if is_approval_write_fault(*point) => {
                armed = Some(*times)
            }
            Some((Action::ClearFault { point }, _)) if is_approval_write_fault(*point) => {
                armed = None
            }
            _ => {}
        }
        for approval in observed_of(entry).iter().flat_map(|o| &o.approvals) {
            if approval.state == ApprovalState::Dispatched
                && (approval.decision.is_none() || approval.decided_by.is_none())
            {
                out.push(violation(
                    InvariantId::PG1,
                    entry.step,
                    format!(
                        "approval `{}` is dispatched without a committed decision",
                        approval.id
                    ),
                    json!({"approval": approval}),
                ));
            }
        }
    });
    out
}

/// PG2. An approval is answered successfully at most once (a second answer,
/// or an answer to one already decided, is refused); its observed decision
/// never changes or vanishes; and at most one executed call cites it.
pub(super) fn pg2(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let mut answered: BTreeMap<&str, usize> = BTreeMap::new();
    let mut decisions: BTreeMap<&str, (Decision, usize)> = BTreeMap::new();
    let mut executions: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in history {
        if let Some((Action::Answer { request, .. }, _)) = ok_result(entry) {
            let earlier = answered
                .get(request.as_str())
                .map(|s| format!("it was answered at step {s}"))
                .or_else(|| {
                    decisions
                        .get(request.as_str())
                        .map(|(d, s)| format!("it was decided {d:?} by step {s}"))
                });
            if let Some(earlier) = earlier {
                out.push(violation(
                    InvariantId::PG2,
                    entry.step,
                    format!("approval `{request}` was answered again although {earlier}; expected a refusal"),
                    json!({"approval": request}),
                ));
            }
            answered.entry(request).or_insert(entry.step);
        }
        if let Some(call) = tool_call_in(entry) {
            if let (true, Some(approval)) = (
                call.executed,
                call.report.and_then(|r| r.approval.as_deref()),
            ) {
                let count = executions.entry(approval).or_default();
                *count += 1;
                if *count > 1 {
                    out.push(violation(
                        InvariantId::PG2,
                        entry.step,
                        format!("approval `{approval}` let tool `{}` run {count} times; an answer dispatches once", call.tool),
                        json!({"approval": approval, "executions": count}),
                    ));
                }
            }
        }
        for approval in observed_of(entry).iter().flat_map(|o| &o.approvals) {
            match (decisions.get(approval.id.as_str()), approval.decision) {
                (Some((before, at)), now) if now != Some(*before) => out.push(violation(
                    InvariantId::PG2,
                    entry.step,
                    format!("approval `{}` was decided {before:?} at step {at} and is now {now:?}; a decision is final", approval.id),
                    json!({"approval": approval, "was": before}),
                )),
                (None, Some(decision)) => {
                    decisions.insert(&approval.id, (decision, entry.step));
                }
                _ => {}
            }
        }
    }
    out
}

/// PG3. Every allowed approval is for a call the one eligibility rule
/// ([`eligibility`] over the instance's ceiling and the approval's class)
/// says is approvable: an allow of a class it denies is a widening by
/// whoever decided, and a policy allow of a class that runs unasked shows an
/// approval path the manual one does not have.
pub(super) fn pg3(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut reported = BTreeSet::new();
    run.walk(|facts, entry| {
        let Some(observed) = observed_of(entry) else {
            return;
        };
        for approval in &observed.approvals {
            if !is_allow(approval.decision) || reported.contains(approval.id.as_str()) {
                continue;
            }
            let ceiling = observed
                .instance(&approval.instance)
                .map(|i| &i.ceiling)
                .or_else(|| facts.ceiling(approval.instance.as_str()));
            let Some(ceiling) = ceiling else { continue };
            let verdict = eligibility(&ceiling.approval_policy, &ceiling.sandbox, approval.class);
            let wrong = match verdict {
                Eligibility::Denied(reason) => {
                    Some(format!("the eligibility rule denies it ({reason})"))
                }
                Eligibility::Runs if approval.decided_by == Some(DecidedBy::Policy) => Some(
                    "the eligibility rule says it runs unasked, so no approval was needed".into(),
                ),
                _ => None,
            };
            if let Some(wrong) = wrong {
                reported.insert(approval.id.as_str());
                out.push(violation(
                    InvariantId::PG3,
                    entry.step,
                    format!(
                        "approval `{}` ({:?} call of `{}` on `{}`) was allowed by {:?}, but {wrong}",
                        approval.id, approval.class, approval.tool, approval.instance, approval.decided_by
                    ),
                    json!({"approval": approval, "policy": ceiling.approval_policy, "sandbox": ceiling.sandbox, "eligibility": verdict}),
                ));
            }
        }
    });
    out
}

/// PG4. An instance whose ceiling has a bounded approval policy never has an
/// approval request in any observation, and none of its calls ends pending
/// approval. (That clarification questions still pass is not observable here.)
pub(super) fn pg4(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut reported = BTreeSet::new();
    run.walk(|facts, entry| {
        let bounded = |instance: &str| {
            facts
                .ceiling(instance)
                .is_some_and(|c| c.approval_policy.is_bounded())
        };
        if let Some(call) = tool_call_in(entry) {
            if bounded(call.instance)
                && call
                    .report
                    .is_some_and(|r| r.outcome == ToolCallOutcome::PendingApproval)
            {
                out.push(violation(
                    InvariantId::PG4,
                    entry.step,
                    format!("call of `{}` on bounded instance `{}` is waiting for approval; expected an immediate refusal", call.tool, call.instance),
                    json!({"report": call.report}),
                ));
            }
        }
        let Some(observed) = observed_of(entry) else {
            return;
        };
        for approval in &observed.approvals {
            let bounded_now = observed
                .instance(&approval.instance)
                .map(|i| i.ceiling.approval_policy.is_bounded())
                .unwrap_or_else(|| bounded(&approval.instance));
            if bounded_now && reported.insert(approval.id.as_str()) {
                out.push(violation(
                    InvariantId::PG4,
                    entry.step,
                    format!("approval request `{}` exists for `{}`, whose ceiling is bounded; none may be shown", approval.id, approval.instance),
                    json!({"approval": approval}),
                ));
            }
        }
    });
    out
}

/// PG5. After automatic approval is switched off: every approval decided
/// before stays listed with its decision; an approval raised while it is off
/// (cited by a call in a step while off, or first listed after an
/// observation taken while off that lacked it) is never decided by policy.
pub(super) fn pg5(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let mut decisions: BTreeMap<&str, Decision> = BTreeMap::new();
    let mut kept_from_before_off: BTreeMap<&str, Decision> = BTreeMap::new();
    let mut off_since: Option<usize> = None;
    let mut listed_while_off: Option<BTreeSet<&str>> = None;
    let mut raised_while_off: BTreeSet<&str> = BTreeSet::new();
    for entry in history {
        if off_since.is_some() {
            if let Some(call) = tool_call_in(entry) {
                if let Some(approval) = call.report.and_then(|r| r.approval.as_deref()) {
                    raised_while_off.insert(approval);
                }
            }
        }
        if let Some(observed) = observed_of(entry) {
            let listed: BTreeSet<&str> = observed.approvals.iter().map(|a| a.id.as_str()).collect();
            if let Some(off) = off_since {
                for (id, decision) in &kept_from_before_off {
                    let now = observed
                        .approvals
                        .iter()
                        .find(|a| a.id == *id)
                        .and_then(|a| a.decision);
                    if now != Some(*decision) {
                        out.push(violation(
                            InvariantId::PG5,
                            entry.step,
                            format!("approval `{id}` was decided {decision:?} before automatic approval was turned off at step {off}, and is now {now:?}; the decision must stay"),
                            json!({"approval": id, "was": decision, "now": now}),
                        ));
                    }
                }
                if let Some(before) = &listed_while_off {
                    raised_while_off.extend(listed.difference(before).copied());
                }
                for approval in &observed.approvals {
                    if raised_while_off.contains(approval.id.as_str())
                        && approval.decided_by == Some(DecidedBy::Policy)
                    {
                        out.push(violation(
                            InvariantId::PG5,
                            entry.step,
                            format!("approval `{}` was raised after automatic approval was turned off at step {off}, yet was decided by policy; it must wait for a person", approval.id),
                            json!({"approval": approval}),
                        ));
                    }
                }
                listed_while_off = Some(listed);
            }
            for approval in &observed.approvals {
                if let Some(decision) = approval.decision {
                    decisions.entry(&approval.id).or_insert(decision);
                }
            }
        }
        match ok_result(entry) {
            Some((Action::SetAutoApprove { enabled: false }, _)) if off_since.is_none() => {
                off_since = Some(entry.step);
                kept_from_before_off = decisions.clone();
                listed_while_off =
                    observed_of(entry).map(|o| o.approvals.iter().map(|a| a.id.as_str()).collect());
            }
            Some((Action::SetAutoApprove { enabled: true }, _)) => {
                off_since = None;
                listed_while_off = None;
                raised_while_off.clear();
            }
            _ => {}
        }
    }
    out
}

/// PG6. No observation lists a grant of an instance it shows completed or
/// terminal, a grant listed before a restart, or a grant after its
/// successful revoke; a grant is bound to the instance's sealed digest of
/// its tool; and a direct call that needed approval and ran without one
/// while grants existed for that tool ran on a grant with exactly its
/// arguments digest.
pub(super) fn pg6(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let classes = tool_classes(history);
    let mut gone: BTreeMap<&str, String> = BTreeMap::new();
    let mut reported = BTreeSet::new();
    run.walk(|facts, entry| {
        if let Some(call) = tool_call_in(entry)
            && let (Some(arguments), true) = (call.arguments, call.executed)
            && !call.report.is_some_and(|r| r.approval.is_some())
            && needed_approval(facts, &classes, &call)
        {
            let grants: Vec<&ObservedGrant> = facts
                .last_observed
                .iter()
                .flat_map(|o| &o.grants)
                .filter(|g| g.instance == call.instance && g.tool == call.tool)
                .collect();
            if !grants.is_empty()
                && let Ok(digest) = digest_value(arguments)
                && !grants.iter().any(|g| g.arguments_digest == digest)
            {
                out.push(violation(
                    InvariantId::PG6,
                    entry.step,
                    format!("call of `{}` on `{}` ran without approval with arguments digest {digest}, which no grant matches", call.tool, call.instance),
                    json!({"arguments": arguments, "arguments_digest": digest, "grants": grants}),
                ));
            }
        }
        if let Some(observed) = observed_of(entry) {
            for grant in &observed.grants {
                let ended = observed
                    .instance(&grant.instance)
                    .map(|i| i.state)
                    .filter(|s| *s == LifecycleState::Completed || s.is_terminal())
                    .map(|s| format!("its instance is {s:?}"));
                let sealed = facts
                    .ceiling(grant.instance.as_str())
                    .and_then(|c| c.tools.get(&grant.tool));
                let wrong_digest = sealed.filter(|d| **d != grant.tool_digest).map(|d| {
                    format!(
                        "it binds tool digest `{}` but the instance sealed `{d}`",
                        grant.tool_digest
                    )
                });
                if let Some(why) = ended
                    .or_else(|| gone.get(grant.id.as_str()).cloned())
                    .or(wrong_digest)
                    && reported.insert(grant.id.as_str())
                {
                    out.push(violation(
                        InvariantId::PG6,
                        entry.step,
                        format!("grant `{}` is still listed although {why}", grant.id),
                        json!({"grant": grant}),
                    ));
                }
            }
        }
        if let StepKind::Restart = entry.kind {
            for grant in facts.last_observed.iter().flat_map(|o| &o.grants) {
                gone.insert(
                    &grant.id,
                    format!("the host restarted at step {}", entry.step),
                );
            }
        }
        if let Some((Action::RevokeGrant { grant }, _)) = ok_result(entry) {
            gone.insert(grant, format!("it was revoked at step {}", entry.step));
        }
    });
    out
}
