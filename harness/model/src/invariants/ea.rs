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
pub(super) fn ea1(facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
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
                .and_then(|id| facts.issued(id))
                .map_or(0, |i| i.authorizer_calls),
            _ => 0,
        };
        if calls == 0 && at_prepare == 0 {
            out.push(violation(
                InvariantId::EA1,
                entry.step,
                format!("child `{child}` was created without the required authorizer being called"),
                json!({"child": child, "authorizer_calls": calls}),
            ));
        }
    }
}

/// The behaviour that decided a creation: at its receipt's preparation when
/// the authorizer was consulted then, else the one in force at the step.
pub(super) fn deciding_behaviour<'a>(
    facts: &Facts<'a>,
    entry: &HistoryEntry,
) -> Option<&'a AuthorizerBehaviour> {
    if let Some(c) = consume(entry)
        && let Some(issue) = presented_receipt_id(c.receipt).and_then(|id| facts.issued(id))
        && issue.authorizer_calls > 0
    {
        return issue.script.as_ref();
    }
    facts.authorizer_script()
}

/// EA2 and EA4. While the authorizer is required and scripted to answer in a
/// way this invariant forbids a child for (deny, timeout, unavailable,
/// malformed, unsupported version for EA2; replayed, expired or mismatched
/// authorization receipt, or a late allow for EA4), no delegation succeeds.
pub(super) fn ea_forbidden_child(
    id: InvariantId,
    facts: &Facts,
    entry: &HistoryEntry,
    out: &mut Vec<Violation>,
) {
    if facts.authorizer_required()
        && let Some(behaviour) = deciding_behaviour(facts, entry)
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

/// EA3. A widening or unsupported constraint from the authorizer admits no
/// child (as EA2/EA4 for `allow_widening`); a child admitted under narrowing
/// constraints stays within them on every constrained axis; and the
/// constraints themselves are checked too, not only the child against
/// them: no child is admitted under constraints that the parent's sealed
/// ceiling does not admit (wider than the parent on some axis), since a
/// constraint that widens anything is a refusal, never clipped.
pub(super) fn ea3(facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
    ea_forbidden_child(InvariantId::EA3, facts, entry, out);
    if facts.authorizer_required()
        && let Some(AuthorizerBehaviour::AllowNarrowed { constraint }) =
            deciding_behaviour(facts, entry)
    {
        for creation in creation_attempt(entry).iter().filter(|c| c.is_delegation()) {
            if let (Some(child), Some(parent_ceiling)) = (
                creation.created(),
                creation.from.and_then(|p| facts.ceiling(p)),
            ) && let Err(widens) = admit(parent_ceiling, None, constraint)
            {
                out.push(violation(
                    InvariantId::EA3,
                    entry.step,
                    format!("child `{child}` was admitted under authorizer constraints that are no narrowing of its parent's ceiling ({widens}); a widening constraint refuses the child"),
                    json!({"constraint": constraint, "parent_ceiling": parent_ceiling, "child": child}),
                ));
            }
            if let (Some(child), Some(effective)) = (creation.created(), &creation.result.effective)
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

/// EA5. No approval is listed as decided by a person unless a person (the
/// harness) answered it, and no decision record of a child whose creation
/// consulted the authorizer says a person decided.
#[derive(Default)]
pub(super) struct Ea5 {
    answered: BTreeSet<String>,
    externally_allowed: BTreeSet<String>,
    reported: BTreeSet<String>,
}

impl Checker for Ea5 {
    fn take(&mut self, _: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        if let Some((Action::Answer { request, .. }, _)) = action_of(entry) {
            self.answered.insert(request.clone());
        }
        if entry.evidence.authorizer_calls > 0 {
            self.externally_allowed.extend(
                creation_attempt(entry)
                    .iter()
                    .filter_map(Creation::created)
                    .map(str::to_string),
            );
        }
        let Some(observed) = observed_of(entry) else {
            return;
        };
        for approval in &observed.approvals {
            if approval.decided_by == Some(DecidedBy::Person)
                && !self.answered.contains(approval.id.as_str())
                && self.reported.insert(approval.id.clone())
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
                    .filter(|c| self.externally_allowed.contains(*c))
                && self.reported.insert(format!("record {}", record.seq))
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
}
