//! The EA checkers (external authorizer): MODEL.md section 3, family EA.

use super::*;

/// Whether an action can lead to a child creation, and so may consult the authorizer.
pub(super) fn may_consult_authorizer(entry: &HistoryEntry) -> bool {
    match action_of(entry) {
        Some((
            Action::Delegate { .. } | Action::PrepareReceipt { .. } | Action::ConsumeReceipt { .. },
            _,
        )) => true,
        Some((Action::Turn { .. }, result)) => !matches!(
            result.and_then(|r| r.turn.as_ref()),
            Some(TurnReport::Message { .. } | TurnReport::ToolCall { .. })
        ),
        _ => false,
    }
}

/// EA1. When the authorizer is required, every successful delegation had the
/// authorizer called in its own step (or, for a consume, when its receipt
/// was prepared); and the authorizer is never called in a step that cannot
/// create a child (so never after the child exists).
pub(super) fn ea1(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let issued = issued_receipts(history);
    run.walk(|facts, entry| {
        let calls = entry.evidence.authorizer_calls;
        if calls > 0 && !may_consult_authorizer(entry) {
            out.push(violation(
                InvariantId::EA1,
                entry.step,
                format!("the authorizer was called {calls} time(s) in a step that creates no child; it is consulted only before a creation"),
                json!({"authorizer_calls": calls, "kind": entry.kind}),
            ));
        }
        if !facts.authorizer_required() {
            return;
        }
        for creation in creation_attempt(entry).iter().filter(|c| c.is_delegation()) {
            let Some(child) = creation.created() else {
                continue;
            };
            let at_prepare = match (creation.kind, consume(entry)) {
                (CreationKind::Consume, Some(c)) => presented_receipt_id(c.receipt)
                    .and_then(|id| issued.get(id))
                    .map_or(0, |i| i.authorizer_calls),
                _ => 0,
            };
            if calls == 0 && at_prepare == 0 {
                out.push(violation(
                    InvariantId::EA1,
                    entry.step,
                    format!(
                        "child `{child}` was created without the required authorizer being called"
                    ),
                    json!({"child": child, "authorizer_calls": calls}),
                ));
            }
        }
    });
    out
}

/// The authorizer's scripted behaviour in force at each step.
pub(super) fn authorizer_scripts(history: &[HistoryEntry]) -> Vec<Option<&AuthorizerBehaviour>> {
    let mut current = None;
    history
        .iter()
        .map(|entry| {
            if let Some(WorldChange::AuthorizerScripted { behaviour }) = world_change(entry) {
                current = Some(behaviour);
            }
            current
        })
        .collect()
}

/// The behaviour that decided a creation: at its receipt's preparation when
/// the authorizer was consulted then, else at the step itself.
pub(super) fn deciding_behaviour<'h>(
    history: &'h [HistoryEntry],
    scripts: &[Option<&'h AuthorizerBehaviour>],
    issued: &BTreeMap<&str, Issued<'h>>,
    index: usize,
) -> Option<&'h AuthorizerBehaviour> {
    let entry = &history[index];
    if let Some(c) = consume(entry)
        && let Some(issue) = presented_receipt_id(c.receipt).and_then(|id| issued.get(id))
        && issue.authorizer_calls > 0
        && let Some(prepared_at) = history.iter().position(|e| e.step == issue.step)
    {
        return scripts[prepared_at];
    }
    scripts[index]
}

/// EA2 and EA4. While the authorizer is required and scripted to answer in a
/// way this invariant forbids a child for (deny, timeout, unavailable,
/// malformed, unsupported version for EA2; replayed, expired or mismatched
/// authorization receipt, or a late allow for EA4), no delegation succeeds.
pub(super) fn ea_forbidden_child(id: InvariantId, run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let scripts = authorizer_scripts(history);
    let issued = issued_receipts(history);
    for (index, entry) in history.iter().enumerate() {
        if run.facts_before(index).authorizer_required()
            && let Some(behaviour) = deciding_behaviour(history, &scripts, &issued, index)
            && behaviour.forbids_child() == Some(id)
        {
            for creation in creation_attempt(entry).iter().filter(|c| c.is_delegation()) {
                if let Some(child) = creation.created() {
                    out.push(violation(
                        id,
                        entry.step,
                        format!("child `{child}` was created although the authorizer answered {behaviour:?}; expected no child"),
                        json!({"child": child, "authorizer": behaviour}),
                    ));
                }
            }
        }
    }
    out
}

/// EA3. A widening or unsupported constraint from the authorizer admits no
/// child (as EA2/EA4 for `allow_widening`); a child admitted under narrowing
/// constraints stays within them on every constrained axis.
pub(super) fn ea3(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = ea_forbidden_child(InvariantId::EA3, run);
    let scripts = authorizer_scripts(history);
    let issued = issued_receipts(history);
    for (index, entry) in history.iter().enumerate() {
        if run.facts_before(index).authorizer_required()
            && let Some(AuthorizerBehaviour::AllowNarrowed { constraint }) =
                deciding_behaviour(history, &scripts, &issued, index)
        {
            for creation in creation_attempt(entry).iter().filter(|c| c.is_delegation()) {
                if let (Some(child), Some(effective)) =
                    (creation.created(), &creation.result.effective)
                {
                    let axes = axes_above_request(effective, constraint);
                    if !axes.is_empty() {
                        out.push(violation(
                            InvariantId::EA3,
                            entry.step,
                            format!("child `{child}` exceeds the authorizer's narrowing constraints on {axes:?}"),
                            json!({"effective": effective, "constraint": constraint, "axes": axes}),
                        ));
                    }
                }
            }
        }
    }
    out
}

/// EA5. No approval is listed as decided by a person unless a person (the
/// harness) answered it, and no decision record of a child whose creation
/// consulted the authorizer says a person decided.
pub(super) fn ea5(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let mut answered: BTreeSet<&str> = BTreeSet::new();
    let mut externally_allowed: BTreeSet<&str> = BTreeSet::new();
    let mut reported = BTreeSet::new();
    for entry in history {
        if let Some((Action::Answer { request, .. }, _)) = action_of(entry) {
            answered.insert(request);
        }
        if entry.evidence.authorizer_calls > 0 {
            externally_allowed.extend(creation_attempt(entry).iter().filter_map(Creation::created));
        }
        let Some(observed) = observed_of(entry) else {
            continue;
        };
        for approval in &observed.approvals {
            if approval.decided_by == Some(DecidedBy::Person)
                && !answered.contains(approval.id.as_str())
                && reported.insert(approval.id.clone())
            {
                out.push(violation(
                    InvariantId::EA5,
                    entry.step,
                    format!("approval `{}` is recorded as decided by a person, but no person answered it", approval.id),
                    json!({"approval": approval}),
                ));
            }
        }
        for record in &observed.records {
            // Only a creation can be credited: the child's own later
            // approvals, answered by a person, are records about it too.
            if record.decided_by == Some(DecidedBy::Person)
                && record.created_instances_delta > 0
                && let Some(child) = record
                    .child
                    .as_deref()
                    .filter(|c| externally_allowed.contains(c))
                && reported.insert(format!("record {}", record.seq))
            {
                out.push(violation(
                    InvariantId::EA5,
                    entry.step,
                    format!("record {} credits a person with the creation of `{child}`, which the external authorizer allowed", record.seq),
                    json!({"record": record}),
                ));
            }
        }
    }
    out
}
