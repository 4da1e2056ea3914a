//! The SD checkers (schema drift fails closed): MODEL.md section 3, family SD.

use super::*;

pub(super) fn is_digest(text: &str) -> bool {
    // A fold rather than a short-circuiting `all`: it compiles to vector
    // compares, and SD1 checks every digest of every observation.
    text.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex.bytes().fold(true, |hex_so_far, b| {
                hex_so_far & matches!(b, b'0'..=b'9' | b'a'..=b'f')
            })
    })
}

/// Where an authority was seen; written out only for a violation.
pub(super) enum AuthoritySource<'h> {
    Effective,
    Receipt(&'h str),
    Ceiling(&'h str),
    Record(u64),
}

impl std::fmt::Display for AuthoritySource<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthoritySource::Effective => write!(f, "effective"),
            AuthoritySource::Receipt(id) => write!(f, "receipt `{id}`"),
            AuthoritySource::Ceiling(id) => write!(f, "ceiling of `{id}`"),
            AuthoritySource::Record(seq) => write!(f, "record {seq}"),
        }
    }
}

/// Every authority a step shows, with where it was seen.
pub(super) fn authorities_in(
    entry: &HistoryEntry,
) -> impl Iterator<Item = (AuthoritySource<'_>, &Authority)> {
    let result = action_of(entry).and_then(|(_, r)| r);
    let spawned = result.and_then(|r| match &r.turn {
        Some(TurnReport::Spawn { spawn }) => Some(&**spawn),
        _ => None,
    });
    let answered = result.into_iter().chain(spawned).flat_map(|r| {
        let effective = r.effective.iter().map(|a| (AuthoritySource::Effective, a));
        let receipt = r
            .receipt
            .iter()
            .map(|receipt| (AuthoritySource::Receipt(&receipt.id), &receipt.authority));
        effective.chain(receipt)
    });
    // An observation's records come last, from `records_in`.
    let ceilings = observed_of(entry).into_iter().flat_map(|observed| {
        observed
            .instances
            .iter()
            .map(|i| (AuthoritySource::Ceiling(&i.id), &i.ceiling))
    });
    answered.chain(ceilings)
}

/// The sealed authority of a decision record, with where it was seen.
fn record_authority(record: &DecisionRecord) -> Option<(AuthoritySource<'_>, &Authority)> {
    record
        .effective
        .as_ref()
        .map(|effective| (AuthoritySource::Record(record.seq), effective))
}

/// SD1. Every sealed tool in a ceiling, effective authority, receipt or
/// record is bound to a SHA-256 digest (`sha256:` and 64 hex digits), and a
/// child admitted from a receipt seals exactly the digests the receipt sealed.
///
/// A decision record is immutable and shared between the observations that
/// list it: one whose digests were all well formed is not looked at again
/// (a record with a malformed digest is, and reported in every observation
/// that lists it). Every observation lists every record, so looking at each
/// again made the check quadratic in the history's length.
#[derive(Default)]
pub(super) struct Sd1 {
    /// The receipts issued, by id: the latest issue of an id.
    issued: BTreeMap<String, Receipt>,
    /// The records of the last observation, at their index, where each was
    /// found well formed (`None`: a malformed one, looked at again).
    well_formed_records: Vec<Option<std::sync::Arc<DecisionRecord>>>,
}

/// Reports each tool of `authority` bound to something other than a digest; whether there was none.
fn check_digests(
    step: usize,
    (where_, authority): (AuthoritySource<'_>, &Authority),
    out: &mut Vec<Violation>,
) -> bool {
    let mut well_formed = true;
    for (tool, digest) in &authority.tools {
        if !is_digest(digest) {
            well_formed = false;
            out.push(violation(
                InvariantId::SD1,
                step,
                format!(
                    "{where_} binds tool `{tool}` to `{digest}`, not to a `sha256:<64 hex>` digest"
                ),
                json!({"tool": tool, "bound_to": digest}),
            ));
        }
    }
    well_formed
}

impl Checker for Sd1 {
    fn take(&mut self, _: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        for seen in authorities_in(entry) {
            check_digests(entry.step, seen, out);
        }
        if let Some(observed) = observed_of(entry) {
            let known = &mut self.well_formed_records;
            known.truncate(observed.records.len());
            for (i, record) in observed.records.iter().enumerate() {
                let known_well_formed = matches!(
                    known.get(i),
                    Some(Some(seen)) if std::sync::Arc::ptr_eq(seen, record)
                );
                if known_well_formed {
                    continue;
                }
                let well_formed = record_authority(record)
                    .is_none_or(|seen| check_digests(entry.step, seen, out));
                let slot = well_formed.then(|| record.clone());
                match known.get_mut(i) {
                    Some(kept) => *kept = slot,
                    None => known.push(slot),
                }
            }
        }
        match ok_result(entry) {
            Some((Action::PrepareReceipt { .. }, result)) => {
                if let Some(receipt) = &result.receipt {
                    self.issued.insert(receipt.id.clone(), receipt.clone());
                }
            }
            Some((Action::ConsumeReceipt { receipt, .. }, result)) => {
                let sealed = presented_receipt_id(receipt).and_then(|id| self.issued.get(id));
                if let (Some(sealed), Some(effective)) = (sealed, &result.effective) {
                    for (tool, digest) in &effective.tools {
                        if sealed.authority.tools.get(tool) != Some(digest) {
                            out.push(violation(
                                InvariantId::SD1,
                                entry.step,
                                format!(
                                    "child admitted from receipt `{}` seals tool `{tool}` as `{digest}`, but the receipt sealed {:?}",
                                    sealed.id,
                                    sealed.authority.tools.get(tool)
                                ),
                                json!({"receipt_tools": sealed.authority.tools, "effective_tools": effective.tools}),
                            ));
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

/// Whether a call of `tool` by `instance` at `call_step` drifted through the
/// redefinition at `drift_step` from `previous_digest` to `new_digest`. With
/// a sealed digest, only the definition live at the call counts (the tool's
/// last redefinition before it): the call drifted when the instance sealed
/// another digest; an earlier definition, replaced before the instance
/// sealed or restored since, is no drift (fuzzing found the checker
/// counting a change made before the instance existed). Without one (a host
/// that reports no ceiling cannot have sealed anything but what was
/// served), by having existed before a change of the canonical form.
pub(super) fn sealed_before(
    facts: &Facts,
    instance: &str,
    tool: &str,
    (drift_step, call_step): (usize, usize),
    previous_digest: Option<&str>,
    new_digest: &str,
) -> bool {
    match facts.ceiling(instance).and_then(|c| c.tools.get(tool)) {
        Some(digest) => {
            let replaced_later = facts.drifts_before(call_step).any(|d| {
                d.step > drift_step
                    && matches!(&d.change, WorldChange::ToolRedefined { tool: t, .. } if t == tool)
            });
            digest != new_digest && !replaced_later
        }
        None => {
            previous_digest != Some(new_digest)
                && facts.first_seen(instance).is_some_and(|s| s < drift_step)
        }
    }
}

/// The redefinitions of `tool` before `step` (each its step and new digest)
/// through which a call of it by `instance` at `step` drifted ([`sealed_before`]).
fn redefinitions_sealed_before<'f>(
    facts: &Facts<'f>,
    instance: &str,
    tool: &str,
    step: usize,
) -> Vec<(usize, &'f str)> {
    facts
        .drifts_before(step)
        .filter_map(|drift| match &drift.change {
            WorldChange::ToolRedefined {
                tool: redefined,
                digest,
                previous_digest,
                ..
            } if redefined == tool
                && sealed_before(
                    facts,
                    instance,
                    tool,
                    (drift.step, step),
                    previous_digest.as_deref(),
                    digest,
                ) =>
            {
                Some((drift.step, digest.as_str()))
            }
            _ => None,
        })
        .collect()
}

/// SD2. After the tool server redefined a tool, a call of it by an instance
/// that sealed the old definition (directly, in a turn, or through a task
/// capability bound to that instance) is refused with zero handler calls; the
/// model is never shown a digest of a tool that no known ceiling seals
/// (when some ceiling seals that tool); and a direct tool call that ran
/// names, byte for byte, a tool its instance sealed, and the handler the
/// tool server saw run is that tool, byte for byte (MODEL.md section 4: a
/// look-alike name is another tool, never the sealed one).
pub(super) fn sd2(facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
    if let Some(call) = tool_call_in(entry)
        && call.arguments.is_some()
        && call.executed
        && let Some(ceiling) = facts.ceiling(call.instance)
    {
        let ran: Vec<&str> = entry
            .evidence
            .handler_calls
            .iter()
            .map(|h| h.tool.as_str())
            .collect();
        // A ceiling that names no tool at all is a host that does not report
        // its seals (an adapter in front of it), not one that sealed nothing.
        let unsealed = !ceiling.tools.is_empty() && !ceiling.tools.contains_key(call.tool);
        let other_ran = ran.iter().any(|t| *t != call.tool);
        if unsealed || other_ran {
            out.push(violation(
                InvariantId::SD2,
                entry.step,
                format!(
                    "call of `{}` on `{}` ran although {}; a tool is named byte for byte",
                    call.tool.escape_default(),
                    call.instance,
                    if unsealed {
                        "the instance sealed no tool of exactly that name"
                    } else {
                        "the tool server saw another tool's handler run"
                    }
                ),
                json!({"tool": call.tool, "sealed": ceiling.tools.keys().collect::<Vec<_>>(), "handlers_ran": ran}),
            ));
        }
    }
    if let Some(call) = tool_call_in(entry) {
        for (step, digest) in
            redefinitions_sealed_before(facts, call.instance, call.tool, entry.step)
        {
            let why = format!("its definition changed at step {step} (new digest {digest})");
            refused_without_handler(InvariantId::SD2, entry, &call, &why, out);
        }
    }
    // A task capability reaches its agent's sealed tools, drift included.
    if let Some(call) = capability_call(entry) {
        for (step, digest) in redefinitions_sealed_before(facts, call.agent, call.tool, entry.step)
        {
            let why = format!(
                "its definition changed at step {step} (new digest {digest}) after agent `{}` sealed it",
                call.agent
            );
            refuse_capability_call(InvariantId::SD2, entry, &call, &why, out);
        }
    }
    for (tool, shown) in &entry.evidence.model_visible_tools {
        let sealed: BTreeSet<&str> = facts
            .ceilings()
            .filter_map(|c| c.tools.get(tool).map(String::as_str))
            .collect();
        for digest in shown {
            if !sealed.is_empty() && !sealed.contains(digest.as_str()) {
                out.push(violation(
                    InvariantId::SD2,
                    entry.step,
                    format!("the model was shown tool `{tool}` with digest `{digest}`, which no ceiling seals; expected one of {sealed:?}"),
                    json!({"tool": tool, "shown": digest, "sealed": sealed}),
                ));
            }
        }
    }
}

/// SD3. After `notifications/tools/list_changed`, a tool call by an
/// instance that existed before the notification is refused with zero
/// handler calls, and that instance's sealed tools never change (no silent
/// refresh).
pub(super) fn sd3(facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
    let Some(first_change) = facts
        .drifts_before(entry.step)
        .find(|d| matches!(d.change, WorldChange::ToolListChanged))
        .map(|d| d.step)
    else {
        return;
    };
    if let Some(call) = tool_call_in(entry) {
        if facts
            .first_seen(call.instance)
            .is_some_and(|s| s < first_change)
        {
            let why = format!(
                "the tool list changed at step {first_change} and no new receipt sealed it again"
            );
            refused_without_handler(InvariantId::SD3, entry, &call, &why, out);
        }
    }
    if let Some(observed) = observed_of(entry) {
        for instance in &observed.instances {
            let sealed = facts.ceiling(instance.id.as_str()).or_else(|| {
                creation_attempt(entry)
                    .into_iter()
                    .filter(|c| c.created() == Some(instance.id.as_str()))
                    .find_map(|c| c.result.effective.as_ref())
            });
            if let Some(sealed) = sealed
                && sealed.tools != instance.ceiling.tools
            {
                out.push(violation(
                    InvariantId::SD3,
                    entry.step,
                    format!("sealed tools of `{}` changed after the tool list changed; a refresh needs a new receipt", instance.id),
                    json!({"sealed": sealed.tools, "now": instance.ceiling.tools}),
                ));
            }
        }
    }
}

/// SD4. After a tool was removed, no call of it runs; after a
/// description-only redefinition, a call by an instance that sealed the old
/// definition is refused. Both with zero handler calls.
pub(super) fn sd4(facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
    if let Some(call) = tool_call_in(entry) {
        // Only the tool's latest change counts: a removal followed by the
        // tool being served again is not drift for an instance sealed after it.
        let latest = facts.drifts_before(entry.step).rev().find(|d| {
            matches!(&d.change, WorldChange::ToolRemoved { tool } | WorldChange::ToolRedefined { tool, .. } if tool == call.tool)
        });
        if let Some(drift) = latest {
            match &drift.change {
                WorldChange::ToolRemoved { tool } if tool == call.tool => {
                    let why = format!("the tool was removed at step {}", drift.step);
                    refused_without_handler(InvariantId::SD4, entry, &call, &why, out);
                }
                WorldChange::ToolRedefined {
                    tool,
                    digest,
                    previous_digest,
                    description_only: true,
                } if tool == call.tool
                    && sealed_before(
                        facts,
                        call.instance,
                        tool,
                        (drift.step, entry.step),
                        previous_digest.as_deref(),
                        digest,
                    ) =>
                {
                    let why = format!("its description changed at step {}", drift.step);
                    refused_without_handler(InvariantId::SD4, entry, &call, &why, out);
                }
                _ => {}
            }
        }
    }
}

/// SD5. A delegate or consume naming a tool the parent's sealed ceiling does
/// not hold (or one removed or redefined since the parent sealed it) is not
/// successful; and a created child seals every tool with exactly its
/// parent's digest.
pub(super) fn sd5(facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
    let Some((action, Some(result))) = action_of(entry) else {
        return;
    };
    let (parent, request) = match action {
        Action::Delegate { parent, request }
        | Action::ConsumeReceipt {
            parent, request, ..
        } => (parent.as_str(), request),
        _ => return,
    };
    let Some(parent_ceiling) = facts.ceiling(parent) else {
        return;
    };
    for tool in request.authority.tools.iter().flatten() {
        let unsealable = match parent_ceiling.tools.get(tool) {
            None => Some("the parent's ceiling does not seal it".to_string()),
            // Only the tool's latest change counts: a removal followed by a
            // redefinition the parent then sealed leaves it sealable.
            Some(digest) => facts
                .drifts_before(entry.step)
                .rev()
                .find_map(|d| match &d.change {
                    WorldChange::ToolRemoved { tool: t } if t == tool => {
                        Some(Some(format!("it was removed at step {}", d.step)))
                    }
                    WorldChange::ToolRedefined {
                        tool: t,
                        digest: new,
                        ..
                    } if t == tool => (new != digest)
                        .then(|| format!("its definition changed at step {}", d.step))
                        .into(),
                    _ => None,
                })
                .flatten(),
        };
        if let (Some(why), true) = (unsealable, result.is_ok()) {
            out.push(violation(
                InvariantId::SD5,
                entry.step,
                format!("delegation from `{parent}` naming tool `{tool}` succeeded although {why}; expected projection_missing or tool_drift"),
                json!({"tool": tool, "parent_tools": parent_ceiling.tools}),
            ));
        }
    }
    if let (true, Some(effective)) = (result.is_ok(), &result.effective) {
        for (tool, digest) in &effective.tools {
            if parent_ceiling.tools.get(tool) != Some(digest) {
                out.push(violation(
                    InvariantId::SD5,
                    entry.step,
                    format!("child of `{parent}` seals tool `{tool}` as `{digest}`, not as the parent's {:?}", parent_ceiling.tools.get(tool)),
                    json!({"tool": tool, "child": digest, "parent": parent_ceiling.tools.get(tool)}),
                ));
            }
        }
    }
}
