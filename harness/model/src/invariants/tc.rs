//! The TC checkers (task capabilities): MODEL.md section 3, family TC.

use super::*;

/// Runs `judge` on every capability call with the capability its secret names.
pub(super) fn each_capability_call<'h>(
    run: &Run<'h>,
    mut judge: impl FnMut(
        &Facts<'_, 'h>,
        &'h HistoryEntry,
        &CapabilityCallSeen<'h>,
        Option<&Capability<'h>>,
    ),
) {
    let issued = capabilities(run.history);
    run.walk(|facts, entry| {
        if let Some(call) = capability_call(entry) {
            let capability = issued
                .get(call.secret)
                .filter(|c| c.issued_at_step < entry.step);
            judge(facts, entry, &call, capability);
        }
    });
}

/// TC1. A capability call presenting a secret with another task or agent
/// than the capability was issued for is refused with zero handler calls.
pub(super) fn tc1(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    each_capability_call(run, |_, entry, call, capability| {
        if let Some(c) = capability
            && (c.task != call.task || c.agent != call.agent)
        {
            let why = format!(
                "capability `{}` is bound to task `{}` and agent `{}`, not `{}`/`{}`",
                c.id, c.task, c.agent, call.task, call.agent
            );
            refuse_capability_call(InvariantId::TC1, entry, call, &why, &mut out);
        }
    });
    out
}

/// TC2. A capability call of a tool outside the allowlist, or after the
/// capability was successfully revoked, is refused with zero handler calls.
pub(super) fn tc2(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let mut revoked: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in history {
        if let Some((Action::RevokeCapability { capability }, _)) = ok_result(entry) {
            revoked.entry(capability).or_insert(entry.step);
        }
    }
    each_capability_call(run, |_, entry, call, capability| {
        let Some(c) = capability else { return };
        if let Some(at) = revoked.get(c.id).filter(|at| **at < entry.step) {
            let why = format!("capability `{}` was revoked at step {at}", c.id);
            refuse_capability_call(InvariantId::TC2, entry, call, &why, &mut out);
        } else if !c.tools.iter().any(|t| t == call.tool) {
            let why = format!(
                "`{}` is not on capability `{}`'s allowlist {:?}",
                call.tool, c.id, c.tools
            );
            refuse_capability_call(InvariantId::TC2, entry, call, &why, &mut out);
        }
    });
    out
}

/// TC3. A capability call at a clock at or past the capability's expiry is
/// refused with zero handler calls, and the host never lists the capability
/// with an expiry other than the one issued.
pub(super) fn tc3(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    each_capability_call(run, |facts, entry, call, capability| {
        if let Some(c) = capability
            && facts.now >= c.expires_at
        {
            let why = format!(
                "capability `{}` expired at {} and the clock reads {}",
                c.id, c.expires_at, facts.now
            );
            refuse_capability_call(InvariantId::TC3, entry, call, &why, &mut out);
        }
    });
    let issued = capabilities(history);
    let by_id: BTreeMap<&str, Millis> = issued.values().map(|c| (c.id, c.expires_at)).collect();
    for entry in history {
        for listed in observed_of(entry).iter().flat_map(|o| &o.capabilities) {
            if let Some(expires_at) = by_id.get(listed.id.as_str())
                && listed.expires_at != *expires_at
            {
                out.push(violation(
                    InvariantId::TC3,
                    entry.step,
                    format!("capability `{}` is listed expiring at {} but was issued to expire at {expires_at}", listed.id, listed.expires_at),
                    json!({"listed": listed, "issued_expires_at": expires_at}),
                ));
            }
        }
    }
    out
}

/// TC4. No capability secret appears in any answer, observation, handler
/// call's arguments or anything the host logged (stderr, `log`
/// notifications); the one exception is the token of the answer that
/// issued a host-generated secret. A harness-chosen secret (the canary) is
/// never echoed at all.
pub(super) fn tc4(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let issued = capabilities(history);
    // With no secret handed out there is nothing to look for, and writing
    // out every answer and observation would cost more than every other checker.
    if issued.is_empty() {
        return out;
    }
    for entry in history {
        // Borrowed where the text is already there: a host's log can be long.
        let mut texts: Vec<(&str, std::borrow::Cow<'_, str>)> = Vec::new();
        if let Some((_, Some(result))) = action_of(entry) {
            let mut shown = result.clone();
            // A host-generated secret is handed over once, in its issuing answer's token.
            let issues_host_secret = issued
                .values()
                .any(|c| c.issued_at_step == entry.step && c.host_generated);
            if let (true, Some(token)) = (issues_host_secret, shown.capability.as_mut()) {
                token.secret = None;
            }
            texts.push((
                "answer",
                serde_json::to_string(&shown).unwrap_or_default().into(),
            ));
        }
        if let Some(observed) = &entry.observed {
            texts.push((
                "observation",
                serde_json::to_string(observed).unwrap_or_default().into(),
            ));
        }
        texts.push((
            "handler call arguments",
            serde_json::to_string(&entry.evidence.handler_calls)
                .unwrap_or_default()
                .into(),
        ));
        // PROTOCOL.md: the secret never appears in logs, and the harness searches.
        texts.push((
            "host's log (stderr or a `log` notification)",
            entry.evidence.host_log.as_str().into(),
        ));
        for (where_, text) in texts {
            for (secret, capability) in issued
                .iter()
                .filter(|(s, _)| !s.is_empty() && text.contains(**s))
            {
                out.push(violation(
                    InvariantId::TC4,
                    entry.step,
                    format!(
                        "the secret of capability `{}` (length {}) appears in the {where_}; it must never be echoed",
                        capability.id,
                        secret.len()
                    ),
                    json!({"where": where_, "capability": capability.id}),
                ));
            }
        }
    }
    out
}

/// Actions that may legitimately run a tool handler.
pub(super) fn dispatches_tools(entry: &HistoryEntry) -> bool {
    matches!(
        action_of(entry),
        Some((
            Action::ToolCall { .. }
                | Action::Turn { .. }
                | Action::CapabilityCall { .. }
                | Action::Answer { .. },
            _
        ))
    )
}

/// TC5. Once a handler ran while event delivery was armed to fail, no later
/// step that dispatches no tool (a redelivery, a wait, a restart, an
/// observation) runs that tool's handler again; and a capability call
/// retried with the `call_id` of one whose handler already ran, through
/// the same capability, runs no handler.
pub(super) fn tc5(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let mut delivery_failing = false;
    let mut completed: BTreeMap<&str, usize> = BTreeMap::new();
    // A call id names a call of one capability (the one whose secret is
    // presented): the same id on another capability is another call.
    let mut ran_call_ids: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for entry in history {
        if let Some((
            Action::CapabilityCall {
                call_id: Some(call_id),
                secret,
                tool,
                ..
            },
            _,
        )) = action_of(entry)
        {
            let handled = handler_calls_for(&entry.evidence, tool);
            let key = (secret.as_str(), call_id.as_str());
            match ran_call_ids.get(&key) {
                Some(at) if handled > 0 => out.push(violation(
                    InvariantId::TC5,
                    entry.step,
                    format!("retry of capability call `{call_id}` ran the `{tool}` handler again although it completed at step {at}; expected the recorded outcome"),
                    json!({"call_id": call_id, "handler_calls": handled, "completed_at": at}),
                )),
                None if handled > 0 => {
                    ran_call_ids.insert(key, entry.step);
                }
                _ => {}
            }
        }
        if !dispatches_tools(entry) {
            for call in &entry.evidence.handler_calls {
                if let Some(at) = completed.get(call.tool.as_str()) {
                    out.push(violation(
                        InvariantId::TC5,
                        entry.step,
                        format!("handler of `{}` ran again although it completed at step {at} and only the event delivery failed", call.tool),
                        json!({"handler_call": call, "completed_at": at}),
                    ));
                }
            }
        } else if delivery_failing {
            for call in &entry.evidence.handler_calls {
                completed.entry(&call.tool).or_insert(entry.step);
            }
        }
        if matches!(entry.kind, StepKind::Restart) {
            delivery_failing = false;
        }
        match ok_result(entry) {
            Some((
                Action::ArmFault {
                    point: FaultPoint::EventDeliver,
                    ..
                },
                _,
            )) => delivery_failing = true,
            Some((
                Action::ClearFault {
                    point: FaultPoint::EventDeliver,
                },
                _,
            )) => delivery_failing = false,
            _ => {}
        }
    }
    out
}
