//! The TC checkers (task capabilities): MODEL.md section 3, family TC.

use super::*;

/// The capability call of an entry, if any, with the capability its secret names.
pub(super) fn capability_call_with<'a, 'h>(
    facts: &Facts<'a>,
    entry: &'h HistoryEntry,
) -> Option<(CapabilityCallSeen<'h>, Option<&'a Capability>)> {
    let call = capability_call(entry)?;
    let capability = facts.capability(call.secret, entry.step);
    Some((call, capability))
}

/// TC1. A capability call presenting a secret with another task or agent
/// than the capability was issued for is refused with zero handler calls.
pub(super) fn tc1(facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
    if let Some((call, Some(c))) = capability_call_with(facts, entry)
        && (c.task != call.task || c.agent != call.agent)
    {
        let why = format!(
            "capability `{}` is bound to task `{}` and agent `{}`, not `{}`/`{}`",
            c.id, c.task, c.agent, call.task, call.agent
        );
        refuse_capability_call(InvariantId::TC1, entry, &call, &why, out);
    }
}

/// TC2. A capability call of a tool outside the allowlist, or after the
/// capability was successfully revoked, is refused with zero handler calls.
pub(super) fn tc2(facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
    let Some((call, Some(c))) = capability_call_with(facts, entry) else {
        return;
    };
    if let Some(at) = facts
        .learned
        .revoked_capabilities
        .get(&c.id)
        .filter(|at| **at < entry.step)
    {
        let why = format!("capability `{}` was revoked at step {at}", c.id);
        refuse_capability_call(InvariantId::TC2, entry, &call, &why, out);
    } else if !c.tools.iter().any(|t| t == call.tool) {
        let why = format!(
            "`{}` is not on capability `{}`'s allowlist {:?}",
            call.tool, c.id, c.tools
        );
        refuse_capability_call(InvariantId::TC2, entry, &call, &why, out);
    }
}

/// The capabilities issued so far, by secret: before the entry, and by the entry itself.
fn capabilities_through<'a>(
    facts: &Facts<'a>,
    entry: &'a HistoryEntry,
) -> impl Iterator<Item = (&'a str, std::borrow::Cow<'a, Capability>)> {
    let own = capability_issued(entry);
    let own_secret = own.as_ref().map(|(secret, _)| *secret);
    facts
        .learned
        .capabilities
        .iter()
        .filter(move |(secret, _)| Some(secret.as_str()) != own_secret)
        .map(|(secret, c)| (secret.as_str(), std::borrow::Cow::Borrowed(c)))
        .chain(own.map(|(secret, c)| (secret, std::borrow::Cow::Owned(c))))
}

/// TC3. A capability call at a clock at or past the capability's expiry is
/// refused with zero handler calls, and the host never lists the capability
/// with an expiry other than the one issued.
pub(super) fn tc3(facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
    if let Some((call, Some(c))) = capability_call_with(facts, entry)
        && facts.now >= c.expires_at
    {
        let why = format!(
            "capability `{}` expired at {} and the clock reads {}",
            c.id, c.expires_at, facts.now
        );
        refuse_capability_call(InvariantId::TC3, entry, &call, &why, out);
    }
    let listed: &[ObservedCapability] = observed_of(entry).map_or(&[], |o| &o.capabilities);
    if listed.is_empty() {
        return;
    }
    let by_id: BTreeMap<String, Millis> = capabilities_through(facts, entry)
        .map(|(_, c)| (c.id.clone(), c.expires_at))
        .collect();
    for listed in listed {
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

/// TC4. No capability secret appears in any answer, observation, handler
/// call's arguments or anything the host logged (stderr, `log`
/// notifications); the one exception is the token of the answer that
/// issued a host-generated secret. A harness-chosen secret (the canary) is
/// never echoed at all. The secrets looked for are those issued so far.
///
/// The written form of the latest observation is kept: an entry that shares
/// its snapshot with the one before (an observation right after a step) is
/// searched in the same text, which is not written out again; a new
/// snapshot is written from the parts that changed (`observation_text`).
#[derive(Default)]
pub(super) struct Tc4 {
    /// The latest observation written out, held so that its address names it, and its text.
    written_observation: Option<(std::sync::Arc<Observed>, String)>,
    writer: super::observation_text::ObservationWriter,
}

impl Tc4 {
    /// The JSON text of an entry's observation.
    fn observation_text(&mut self, observed: &std::sync::Arc<Observed>) -> &str {
        let unchanged = self
            .written_observation
            .as_ref()
            .is_some_and(|(seen, _)| std::sync::Arc::ptr_eq(seen, observed));
        if !unchanged {
            let text = self.writer.write(observed);
            self.written_observation = Some((observed.clone(), text));
        }
        &self.written_observation.as_ref().expect("written above").1
    }
}

impl Checker for Tc4 {
    fn take(&mut self, facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        let issued: Vec<(&str, std::borrow::Cow<'_, Capability>)> =
            capabilities_through(facts, entry).collect();
        // With no secret handed out there is nothing to look for, and writing
        // out every answer and observation would cost more than every other checker.
        if issued.is_empty() {
            return;
        }
        // Borrowed where the text is already there: a host's log can be long.
        let mut texts: Vec<(&str, std::borrow::Cow<'_, str>)> = Vec::new();
        if let Some((_, Some(result))) = action_of(entry) {
            // A host-generated secret is handed over once, in its issuing answer's token.
            let issues_host_secret = issued
                .iter()
                .any(|(_, c)| c.issued_at_step == entry.step && c.host_generated);
            let answer = match (issues_host_secret, &result.capability) {
                (true, Some(_)) => {
                    let mut shown = result.clone();
                    if let Some(token) = shown.capability.as_mut() {
                        token.secret = None;
                    }
                    serde_json::to_string(&shown)
                }
                _ => serde_json::to_string(result),
            };
            texts.push(("answer", answer.unwrap_or_default().into()));
        }
        if let Some(observed) = &entry.observed {
            texts.push(("observation", self.observation_text(observed).into()));
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
                .filter(|(s, _)| !s.is_empty() && text.contains(*s))
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
#[derive(Default)]
pub(super) struct Tc5 {
    delivery_failing: bool,
    /// Each tool whose handler ran while event delivery was failing, and the step.
    completed: BTreeMap<String, usize>,
    /// Each capability call whose handler ran, by the secret presented and
    /// its call id, and the step: a call id names a call of one capability,
    /// so the same id on another capability is another call.
    ran_call_ids: BTreeMap<(String, String), usize>,
}

impl Checker for Tc5 {
    fn take(&mut self, _: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
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
            let key = (secret.clone(), call_id.clone());
            match self.ran_call_ids.get(&key) {
                Some(at) if handled > 0 => out.push(violation(
                    InvariantId::TC5,
                    entry.step,
                    format!("retry of capability call `{call_id}` ran the `{tool}` handler again although it completed at step {at}; expected the recorded outcome"),
                    json!({"call_id": call_id, "handler_calls": handled, "completed_at": at}),
                )),
                None if handled > 0 => {
                    self.ran_call_ids.insert(key, entry.step);
                }
                _ => {}
            }
        }
        if !dispatches_tools(entry) {
            for call in &entry.evidence.handler_calls {
                if let Some(at) = self.completed.get(call.tool.as_str()) {
                    out.push(violation(
                        InvariantId::TC5,
                        entry.step,
                        format!("handler of `{}` ran again although it completed at step {at} and only the event delivery failed", call.tool),
                        json!({"handler_call": call, "completed_at": at}),
                    ));
                }
            }
        } else if self.delivery_failing {
            for call in &entry.evidence.handler_calls {
                if !self.completed.contains_key(&call.tool) {
                    self.completed.insert(call.tool.clone(), entry.step);
                }
            }
        }
        if matches!(entry.kind, StepKind::Restart) {
            self.delivery_failing = false;
        }
        match ok_result(entry) {
            Some((
                Action::ArmFault {
                    point: FaultPoint::EventDeliver,
                    ..
                },
                _,
            )) => self.delivery_failing = true,
            Some((
                Action::ClearFault {
                    point: FaultPoint::EventDeliver,
                },
                _,
            )) => self.delivery_failing = false,
            _ => {}
        }
    }
}
