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
pub(super) fn needed_approval(facts: &Facts, classes: &ToolClasses, call: &ToolCallSeen) -> bool {
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

/// Whether the last observation lists a grant of the call's instance and
/// tool for exactly its arguments, and the call ran without an approval.
fn covered_by_listed_grant(facts: &Facts, call: &ToolCallSeen) -> bool {
    let Some(arguments) = call.arguments else {
        return false;
    };
    if call.report.is_some_and(|r| r.approval.is_some()) {
        return false;
    }
    let Ok(digest) = digest_value(arguments) else {
        return false;
    };
    facts
        .last_observed
        .iter()
        .flat_map(|o| &o.grants)
        .any(|g| g.instance == call.instance && g.tool == call.tool && g.arguments_digest == digest)
}

/// PG1. While automatic approval is on and a store write of an approval
/// request or decision is armed to fail, a call that needed approval does
/// not run and the tool server sees no handler call for it (each such call
/// uses up one armed failure when a count was given); and no observation
/// ever shows a dispatched approval without a committed decision.
#[derive(Default)]
pub(super) struct Pg1 {
    classes: ToolClasses,
    /// None: not armed; Some(None): until cleared; Some(Some(n)): n more failures.
    armed: Option<Option<u32>>,
}

impl Checker for Pg1 {
    fn take(&mut self, facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        self.classes.learn(entry);
        let armed = &mut self.armed;
        if let Some(call) = tool_call_in(entry) {
            let fault_live = !matches!(armed, None | Some(Some(0)));
            // A call an earlier grant covers writes no approval, so the armed
            // write cannot fail it (fuzzing found the checker refusing it).
            let needed = needed_approval(facts, &self.classes, &call)
                && !covered_by_listed_grant(facts, &call);
            if fault_live && needed && facts.auto_approve {
                refused_without_handler(
                    InvariantId::PG1,
                    entry,
                    &call,
                    "automatic approval could not be committed (store write armed to fail)",
                    out,
                );
            }
            // A request for a person is written too, so it uses up a firing
            // as well; and a call refused because that write failed used one
            // up, even when no approval has shown the tool's class yet
            // (fuzzing found the checker still counting the fault armed).
            let write_failed = action_of(entry)
                .and_then(|(_, result)| result)
                .is_some_and(|result| result.reason == Some(DenyReason::StoreWriteFailed));
            if fault_live
                && (needed || write_failed)
                && let Some(Some(n)) = armed
            {
                *n -= 1;
            }
        }
        // A person's answer whose decision could not be written used up a
        // firing too (fuzzing found the checker still counting it armed).
        if let Some((Action::Answer { .. }, Some(result))) = action_of(entry)
            && result.reason == Some(DenyReason::StoreWriteFailed)
            && let Some(Some(n)) = armed
        {
            *n = n.saturating_sub(1);
        }
        // Armed faults are run-scoped: a restarted host starts with none.
        if matches!(entry.kind, StepKind::Restart) {
            *armed = None;
        }
        match ok_result(entry) {
            Some((Action::ArmFault { point, times }, _)) if is_approval_write_fault(*point) => {
                *armed = Some(*times)
            }
            Some((Action::ClearFault { point }, _)) if is_approval_write_fault(*point) => {
                *armed = None
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
    }
}

/// PG2. An approval is answered successfully at most once (a second answer,
/// or an answer to one already decided, is refused); its observed decision
/// never changes or vanishes; and at most one executed call cites it.
#[derive(Default)]
pub(super) struct Pg2 {
    /// Each approval answered successfully, and the step of the first answer.
    answered: BTreeMap<String, usize>,
    /// Each approval's first observed decision, and its step.
    decisions: BTreeMap<String, (Decision, usize)>,
    /// How many executed calls cited each approval.
    executions: BTreeMap<String, usize>,
}

impl Checker for Pg2 {
    fn take(&mut self, _: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        if let Some((Action::Answer { request, .. }, _)) = ok_result(entry) {
            let earlier = self
                .answered
                .get(request.as_str())
                .map(|s| format!("it was answered at step {s}"))
                .or_else(|| {
                    self.decisions
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
            self.answered.entry(request.clone()).or_insert(entry.step);
        }
        if let Some(call) = tool_call_in(entry) {
            if let (true, Some(approval)) = (
                call.executed,
                call.report.and_then(|r| r.approval.as_deref()),
            ) {
                let count = self.executions.entry(approval.to_string()).or_default();
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
            match (self.decisions.get(approval.id.as_str()), approval.decision) {
                (Some((before, at)), now) if now != Some(*before) => out.push(violation(
                    InvariantId::PG2,
                    entry.step,
                    format!("approval `{}` was decided {before:?} at step {at} and is now {now:?}; a decision is final", approval.id),
                    json!({"approval": approval, "was": before}),
                )),
                (None, Some(decision)) => {
                    self.decisions
                        .insert(approval.id.clone(), (decision, entry.step));
                }
                _ => {}
            }
        }
    }
}

/// PG3. Every allowed approval is for a call the one eligibility rule
/// ([`eligibility`] over the instance's ceiling and the approval's class)
/// says is approvable: an allow of a class it denies is a widening by
/// whoever decided, and a policy allow of a class that runs unasked shows an
/// approval path the manual one does not have.
#[derive(Default)]
pub(super) struct Pg3 {
    reported: BTreeSet<String>,
}

impl Checker for Pg3 {
    fn take(&mut self, facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        let Some(observed) = observed_of(entry) else {
            return;
        };
        for approval in &observed.approvals {
            if !is_allow(approval.decision) || self.reported.contains(approval.id.as_str()) {
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
                self.reported.insert(approval.id.clone());
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
    }
}

/// PG4. An instance whose ceiling has a bounded approval policy never has an
/// approval request in any observation, and none of its calls ends pending
/// approval. Its clarification questions still pass: an `instance/ask` of
/// a live bounded instance is not refused for its policy (only an unknown
/// or terminal instance, or a failed write, refuses it), the question it
/// raised is listed in the observation after it, and a person's first
/// answer to it is not refused for its policy either.
#[derive(Default)]
pub(super) struct Pg4 {
    reported: BTreeSet<String>,
    /// The instance of each question raised, by question id.
    questions: BTreeMap<String, String>,
}

/// The refusals that say nothing about a question being treated as an
/// approval: the instance is gone, the question was answered, a write failed.
fn refuses_any_question(reason: Option<DenyReason>) -> bool {
    matches!(
        reason,
        Some(
            DenyReason::InstanceUnknown
                | DenyReason::InstanceTerminal
                | DenyReason::EventReplayed
                | DenyReason::StoreWriteFailed
        )
    )
}

impl Pg4 {
    /// The question side: asks and answers of bounded instances pass.
    fn questions(
        &mut self,
        bounded: &dyn Fn(&str) -> bool,
        entry: &HistoryEntry,
        out: &mut Vec<Violation>,
    ) {
        let Some((action, Some(result))) = action_of(entry) else {
            return;
        };
        match action {
            Action::Ask { instance, question } => {
                if result.is_ok() {
                    let Some(id) = &result.question else {
                        return;
                    };
                    self.questions.insert(id.clone(), instance.clone());
                    let listed = observed_of(entry).map(|o| {
                        o.questions
                            .iter()
                            .any(|q| &q.id == id && &q.instance == instance)
                    });
                    if bounded(instance.as_str()) && listed == Some(false) {
                        out.push(violation(
                            InvariantId::PG4,
                            entry.step,
                            format!("question `{id}` of bounded instance `{instance}` was accepted but the host does not show it; a clarification question must reach a person"),
                            json!({"question": id, "text": question, "questions": observed_of(entry).map(|o| &o.questions)}),
                        ));
                    }
                } else if bounded(instance.as_str()) && !refuses_any_question(result.reason) {
                    out.push(violation(
                        InvariantId::PG4,
                        entry.step,
                        format!("clarification question of bounded instance `{instance}` was refused ({:?}); under a bounded ceiling approval requests are denied, questions still reach a person", result.reason),
                        json!({"question": question, "result": result}),
                    ));
                }
            }
            Action::AnswerQuestion { question, answer } => {
                let Some(instance) = self.questions.get(question) else {
                    return;
                };
                if !result.is_ok()
                    && bounded(instance.as_str())
                    && !refuses_any_question(result.reason)
                {
                    out.push(violation(
                        InvariantId::PG4,
                        entry.step,
                        format!("a person's answer to question `{question}` of bounded instance `{instance}` was refused ({:?}); a clarification question stays answerable", result.reason),
                        json!({"question": question, "answer": answer, "result": result}),
                    ));
                }
            }
            _ => {}
        }
    }
}

impl Checker for Pg4 {
    fn take(&mut self, facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        let bounded = |instance: &str| {
            facts
                .ceiling(instance)
                .is_some_and(|c| c.approval_policy.is_bounded())
        };
        self.questions(&bounded, entry, out);
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
            if bounded_now && !self.reported.contains(&approval.id) {
                self.reported.insert(approval.id.clone());
                out.push(violation(
                        InvariantId::PG4,
                        entry.step,
                        format!("approval request `{}` exists for `{}`, whose ceiling is bounded; none may be shown", approval.id, approval.instance),
                        json!({"approval": approval}),
                    ));
            }
        }
    }
}

/// PG5. After automatic approval is switched off: every approval decided
/// before stays listed with its decision; an approval raised while it is off
/// (cited by a call in a step while off, or first listed after an
/// observation taken while off that lacked it) is never decided by policy.
#[derive(Default)]
pub(super) struct Pg5 {
    /// Each approval's first observed decision.
    decisions: BTreeMap<String, Decision>,
    /// The decisions taken before automatic approval was turned off.
    kept_from_before_off: BTreeMap<String, Decision>,
    /// The step automatic approval was turned off, while it is off.
    off_since: Option<usize>,
    /// The approvals the latest observation while off listed.
    listed_while_off: Option<BTreeSet<String>>,
    raised_while_off: BTreeSet<String>,
}

impl Checker for Pg5 {
    fn take(&mut self, _: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        if self.off_since.is_some() {
            if let Some(call) = tool_call_in(entry) {
                if let Some(approval) = call.report.and_then(|r| r.approval.as_deref()) {
                    self.raised_while_off.insert(approval.to_string());
                }
            }
        }
        let listed_in = |observed: &Observed| -> BTreeSet<String> {
            observed.approvals.iter().map(|a| a.id.clone()).collect()
        };
        if let Some(observed) = observed_of(entry) {
            if let Some(off) = self.off_since {
                for (id, decision) in &self.kept_from_before_off {
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
                let listed = listed_in(observed);
                if let Some(before) = &self.listed_while_off {
                    self.raised_while_off
                        .extend(listed.difference(before).cloned());
                }
                for approval in &observed.approvals {
                    if self.raised_while_off.contains(approval.id.as_str())
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
                self.listed_while_off = Some(listed);
            }
            for approval in &observed.approvals {
                if let Some(decision) = approval.decision
                    && !self.decisions.contains_key(&approval.id)
                {
                    self.decisions.insert(approval.id.clone(), decision);
                }
            }
        }
        match ok_result(entry) {
            Some((Action::SetAutoApprove { enabled: false }, _)) if self.off_since.is_none() => {
                self.off_since = Some(entry.step);
                self.kept_from_before_off = self.decisions.clone();
                self.listed_while_off = observed_of(entry).map(listed_in);
            }
            Some((Action::SetAutoApprove { enabled: true }, _)) => {
                self.off_since = None;
                self.listed_while_off = None;
                self.raised_while_off.clear();
            }
            _ => {}
        }
    }
}

/// PG6. No observation lists a grant of an instance it shows completed or
/// terminal, a grant listed before a restart, or a grant after its
/// successful revoke; a grant is bound to the instance's sealed digest of
/// its tool; and a direct call that needed approval and ran without one
/// while grants existed for that tool ran on a grant with exactly its
/// arguments digest.
#[derive(Default)]
pub(super) struct Pg6 {
    classes: ToolClasses,
    /// Grants that may no longer be listed, with why.
    gone: BTreeMap<String, String>,
    reported: BTreeSet<String>,
}

impl Checker for Pg6 {
    fn take(&mut self, facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        self.classes.learn(entry);
        if let Some(call) = tool_call_in(entry)
            && let (Some(arguments), true) = (call.arguments, call.executed)
            && !call.report.is_some_and(|r| r.approval.is_some())
            && needed_approval(facts, &self.classes, &call)
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
                    .or_else(|| self.gone.get(grant.id.as_str()).cloned())
                    .or(wrong_digest)
                    && !self.reported.contains(&grant.id)
                {
                    self.reported.insert(grant.id.clone());
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
                self.gone.insert(
                    grant.id.clone(),
                    format!("the host restarted at step {}", entry.step),
                );
            }
        }
        if let Some((Action::RevokeGrant { grant }, _)) = ok_result(entry) {
            self.gone.insert(
                grant.clone(),
                format!("it was revoked at step {}", entry.step),
            );
        }
    }
}
