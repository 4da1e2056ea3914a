//! The CE checkers (ceilings): MODEL.md section 3, family CE.

use super::*;

/// [`Authority::axes_exceeding`] for ceilings that are observed again at
/// every step, remembering per pair of instances the last pair of values
/// found within bounds: the comparison builds the approval policies' class
/// sets on every call, and re-comparing unchanged values was the largest
/// cost of CE1 and CE2. A changed value on either side is compared afresh.
#[derive(Default)]
pub(super) struct WithinBounds {
    /// By subject, then by what bounds it: the last pair of values found within bounds.
    last_within: BTreeMap<String, BTreeMap<String, (Authority, Authority)>>,
}

impl WithinBounds {
    fn axes_exceeding(
        &mut self,
        (subject, authority): (&str, &Authority),
        (bound_by, bound): (&str, &Authority),
    ) -> Vec<Axis> {
        if self
            .last_within
            .get(subject)
            .and_then(|bounds| bounds.get(bound_by))
            .is_some_and(|(a, b)| a == authority && b == bound)
        {
            return Vec::new();
        }
        let axes = authority.axes_exceeding(bound);
        if axes.is_empty() {
            if !self.last_within.contains_key(subject) {
                self.last_within
                    .insert(subject.to_string(), BTreeMap::new());
            }
            let bounds = self.last_within.get_mut(subject).expect("inserted above");
            bounds.insert(bound_by.to_string(), (authority.clone(), bound.clone()));
        }
        axes
    }
}

/// CE1. Every child (observed with its parent, or created by a successful
/// delegation) has a ceiling at most its parent's, on every axis.
#[derive(Default)]
pub(super) struct Ce1 {
    reported: BTreeSet<String>,
    within: WithinBounds,
}

impl Checker for Ce1 {
    fn take(&mut self, facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        let mut pairs: Vec<(&str, &Authority, &str, &Authority)> = Vec::new();
        for creation in creation_attempt(entry).iter().filter(|c| c.is_delegation()) {
            if let (Some(child), Some(parent), Some(effective)) = (
                creation.created(),
                creation.from,
                &creation.result.effective,
            ) && let Some(parent_ceiling) = facts.ceiling(parent)
            {
                pairs.push((child, effective, parent, parent_ceiling));
            }
        }
        if let Some(observed) = observed_of(entry) {
            for child in &observed.instances {
                let Some(parent) = child.parent.as_deref() else {
                    continue;
                };
                let parent_ceiling = observed
                    .instance(parent)
                    .map(|p| &p.ceiling)
                    .or_else(|| facts.ceiling(parent));
                if let Some(parent_ceiling) = parent_ceiling {
                    pairs.push((&child.id, &child.ceiling, parent, parent_ceiling));
                }
            }
        }
        for (child, ceiling, parent, parent_ceiling) in pairs {
            let axes = self
                .within
                .axes_exceeding((child, ceiling), (parent, parent_ceiling));
            if !axes.is_empty() && !self.reported.contains(child) {
                self.reported.insert(child.to_string());
                out.push(violation(
                    InvariantId::CE1,
                    entry.step,
                    format!("child `{child}` exceeds its parent `{parent}`'s ceiling on {axes:?}"),
                    json!({"child": ceiling, "parent": parent_ceiling, "axes": axes}),
                ));
            }
        }
    }
}

/// CE2. An instance's ceiling never changes between observations (restarts
/// included); every instance is below every ancestor, not only its parent;
/// and a resumed or forked instance answers an authority at most the sealed one.
#[derive(Default)]
pub(super) struct Ce2 {
    reported: BTreeSet<(String, &'static str)>,
    within: WithinBounds,
}

impl Checker for Ce2 {
    fn take(&mut self, facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        if let Some((Action::Resume { instance } | Action::Fork { instance }, result)) =
            ok_result(entry)
            && let (Some(effective), Some(sealed)) =
                (&result.effective, facts.ceiling(instance.as_str()))
            && !effective.leq(sealed)
        {
            out.push(violation(
                    InvariantId::CE2,
                    entry.step,
                    format!("resume or fork of `{instance}` answered an authority above its sealed ceiling on {:?}", effective.axes_exceeding(sealed)),
                    json!({"sealed": sealed, "effective": effective}),
                ));
        }
        let Some(observed) = observed_of(entry) else {
            return;
        };
        for instance in &observed.instances {
            let sealed = facts.ceiling(instance.id.as_str()).or_else(|| {
                creation_attempt(entry)
                    .into_iter()
                    .filter(|c| c.created() == Some(instance.id.as_str()))
                    .find_map(|c| c.result.effective.as_ref())
            });
            if let Some(sealed) = sealed
                && instance.ceiling != *sealed
                && self.reported.insert((instance.id.clone(), "changed"))
            {
                out.push(violation(
                    InvariantId::CE2,
                    entry.step,
                    format!(
                        "ceiling of `{}` changed on {:?} since it was sealed",
                        instance.id,
                        differing_axes(&instance.ceiling, sealed)
                    ),
                    json!({"sealed": sealed, "now": instance.ceiling}),
                ));
            }
            // The direct parent is CE1's; walk from the grandparent up, guarding against cycles.
            // A list, not a set: most instances have no grandparent, and an
            // empty list costs no allocation.
            let mut seen = Vec::new();
            let parent_of = |id: &str| {
                observed
                    .instance(id)
                    .and_then(|i| i.parent.as_deref())
                    .or_else(|| facts.parent(id))
            };
            let mut ancestor = instance.parent.as_deref().and_then(parent_of);
            while let Some(id) = ancestor {
                if id == instance.id || seen.contains(&id) {
                    break;
                }
                seen.push(id);
                let ceiling = observed
                    .instance(id)
                    .map(|i| &i.ceiling)
                    .or_else(|| facts.ceiling(id));
                if let Some(ceiling) = ceiling {
                    let axes = self
                        .within
                        .axes_exceeding((&instance.id, &instance.ceiling), (id, ceiling));
                    if !axes.is_empty() && self.reported.insert((instance.id.clone(), "ancestor")) {
                        out.push(violation(
                                InvariantId::CE2,
                                entry.step,
                                format!("`{}` exceeds the ceiling of its ancestor `{id}` on {axes:?}", instance.id),
                                json!({"instance": instance.ceiling, "ancestor": ceiling, "axes": axes}),
                            ));
                    }
                }
                ancestor = parent_of(id);
            }
        }
    }
}

/// CE3. A child's ceiling (and a record's effective authority) stays within
/// every axis its delegation requested and within its role's default from
/// the configuration: a narrower role default or request wins.
///
/// A record's verdict rests on the record alone, and a record is immutable
/// and shared between the observations that list it (as for SD1): one
/// already looked at is not looked at again.
#[derive(Default)]
pub(super) struct Ce3 {
    reported: BTreeSet<(String, &'static str)>,
    /// The records of the last observation, at their index.
    records_seen: Vec<std::sync::Arc<DecisionRecord>>,
}

impl Checker for Ce3 {
    fn take(&mut self, facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        let Some(observed) = observed_of(entry) else {
            return;
        };
        let roles = facts.config.map(|c| &c.roles);
        // The subject is named only for a violation: an observation lists
        // every record so far, and naming each one on every step cost more
        // than the comparison itself.
        enum Subject<'a> {
            Instance(&'a str),
            Record(u64),
        }
        let mut checks: Vec<(Subject, &Authority, &AuthorityRequest, &str)> = Vec::new();
        for instance in observed.instances.iter().filter(|i| i.parent.is_some()) {
            if let Some(requested) = &instance.requested {
                checks.push((
                    Subject::Instance(&instance.id),
                    &instance.ceiling,
                    requested,
                    "request",
                ));
            }
            if let Some(default) = roles.and_then(|r| r.get(&instance.role)) {
                checks.push((
                    Subject::Instance(&instance.id),
                    &instance.ceiling,
                    default,
                    "role default",
                ));
            }
        }
        let seen = &mut self.records_seen;
        seen.truncate(observed.records.len());
        for (i, record) in observed.records.iter().enumerate() {
            match seen.get_mut(i) {
                Some(kept) if std::sync::Arc::ptr_eq(kept, record) => continue,
                Some(kept) => *kept = record.clone(),
                None => seen.push(record.clone()),
            }
            if let (Some(requested), Some(effective), true) =
                (&record.requested, &record.effective, record.allowed)
            {
                checks.push((Subject::Record(record.seq), effective, requested, "request"));
            }
        }
        for (subject, authority, bound, what) in checks {
            let axes = axes_above_request(authority, bound);
            if axes.is_empty() {
                continue;
            }
            let subject = match subject {
                Subject::Instance(id) => id.to_string(),
                Subject::Record(seq) => format!("record {seq}"),
            };
            if self.reported.insert((subject.clone(), what)) {
                out.push(violation(
                    InvariantId::CE3,
                    entry.step,
                    format!("{subject} holds more than its {what} allows on {axes:?}"),
                    json!({"authority": authority, what: bound, "axes": axes}),
                ));
            }
        }
    }
}

/// CE4. In strict mode no delegation creates, and no observation shows, a
/// child with a full-access sandbox.
#[derive(Default)]
pub(super) struct Ce4 {
    reported: BTreeSet<String>,
}

impl Checker for Ce4 {
    fn take(&mut self, facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        if !facts.strict_mode() {
            return;
        }
        let mut children: Vec<(&str, &Sandbox)> = creation_attempt(entry)
            .iter()
            .filter(|c| c.is_delegation())
            .filter_map(|c| Some((c.created()?, &c.result.effective.as_ref()?.sandbox)))
            .collect();
        if let Some(observed) = observed_of(entry) {
            children.extend(
                observed
                    .instances
                    .iter()
                    .filter(|i| i.parent.is_some())
                    .map(|i| (i.id.as_str(), &i.ceiling.sandbox)),
            );
        }
        for (child, sandbox) in children {
            if sandbox.is_full_access() && !self.reported.contains(child) {
                self.reported.insert(child.to_string());
                out.push(violation(
                        InvariantId::CE4,
                        entry.step,
                        format!("child `{child}` runs with full access in strict mode; expected the request refused"),
                        json!({"instance": child, "sandbox": sandbox}),
                    ));
            }
        }
    }
}

/// One capability call, with what it presented.
pub(super) struct CapabilityCallSeen<'h> {
    pub(super) secret: &'h str,
    pub(super) task: &'h str,
    pub(super) agent: &'h str,
    pub(super) tool: &'h str,
    pub(super) result: Option<&'h ActionResult>,
}

pub(super) fn capability_call(entry: &HistoryEntry) -> Option<CapabilityCallSeen<'_>> {
    match action_of(entry)? {
        (
            Action::CapabilityCall {
                secret,
                task,
                agent,
                tool,
                ..
            },
            result,
        ) => Some(CapabilityCallSeen {
            secret,
            task,
            agent,
            tool,
            result,
        }),
        _ => None,
    }
}

pub(super) fn refuse_capability_call(
    id: InvariantId,
    entry: &HistoryEntry,
    call: &CapabilityCallSeen,
    why: &str,
    out: &mut Vec<Violation>,
) {
    let handled = handler_calls_for(&entry.evidence, call.tool);
    if succeeded(entry) || handled > 0 {
        out.push(violation(
            id,
            entry.step,
            format!("capability call of `{}` went through although {why}; expected capability_denied with zero handler calls", call.tool),
            json!({"tool": call.tool, "task": call.task, "agent": call.agent, "handler_calls": handled, "result": call.result}),
        ));
    }
}

/// CE5. A capability call reaches at most the one tool it names and only if
/// that tool is on the allowlist of a capability the host issued: any other
/// handler call in its step is a violation, and a refusal of a tool outside
/// the allowlist or of an unknown credential says `capability_denied`.
pub(super) fn ce5(facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
    let Some(call) = capability_call(entry) else {
        return;
    };
    let allowlisted = facts
        .capability(call.secret, entry.step)
        .is_some_and(|c| c.tools.iter().any(|t| t == call.tool));
    for handler in &entry.evidence.handler_calls {
        if handler.tool != call.tool || !allowlisted {
            out.push(violation(
                InvariantId::CE5,
                entry.step,
                format!("capability call naming `{}` made the tool server run `{}`; a bounded credential reaches only its allowlisted tool", call.tool, handler.tool),
                json!({"named": call.tool, "ran": handler, "allowlisted": allowlisted}),
            ));
        }
    }
    if let Some(result) = call.result
        && !allowlisted
        && !result.is_ok()
        && !refused_as(result.reason, DenyReason::CapabilityDenied)
    {
        out.push(violation(
            InvariantId::CE5,
            entry.step,
            format!("capability call of `{}` outside the allowlist was refused with {:?}; expected capability_denied", call.tool, result.reason),
            json!({"result": result}),
        ));
    }
}

/// CE6. Every allowed delegation record (transition `delegate`, `consume` or
/// `spawn`, with a child) records both the requested and the effective authority.
#[derive(Default)]
pub(super) struct Ce6 {
    reported: BTreeSet<u64>,
}

impl Checker for Ce6 {
    fn take(&mut self, _: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        for record in observed_of(entry).iter().flat_map(|o| &o.records) {
            let delegation = matches!(record.transition.as_str(), "delegate" | "consume" | "spawn");
            if delegation
                && record.allowed
                && (record.requested.is_none() || record.effective.is_none())
                && self.reported.insert(record.seq)
            {
                out.push(violation(
                    InvariantId::CE6,
                    entry.step,
                    format!(
                        "allowed `{}` record {} lacks its {}; both requested and effective must be recorded",
                        record.transition,
                        record.seq,
                        if record.requested.is_none() { "requested authority" } else { "effective authority" }
                    ),
                    json!({"record": record}),
                ));
            }
        }
    }
}
