//! The expectation check of one step, as a pure function: what a scenario's `expect` says against what the step showed.
//!
//! Everything it compares is handed in ([`StepSeen`]): the reply, the
//! state observed before and after, the observers' evidence, the aliases
//! bound so far and the tools the model was shown. It answers with the
//! fields that differ and the checks that held only on values the adapter
//! declared inferred; the runner turns those into failures with evidence.

use std::collections::{BTreeMap, BTreeSet};

use delegation_model::{
    ActionResult, ApprovalState, DecidedBy, Decision, Evidence, Observed, QuestionState,
    ReportedValue, TurnReport,
};
use serde_json::{Value, json};

use crate::execute::Bound;
use crate::provenance::{self, Basis, InferredCheck};
use crate::scenario::{DELEGATION_TRANSITIONS, Expect, RequestCount};

/// What one step showed, for its expectations.
pub struct StepSeen<'a> {
    /// The step's index in the scenario.
    pub index: usize,
    /// The host's reply, when it answered.
    pub result: Option<&'a ActionResult>,
    pub before: &'a Observed,
    pub after: &'a Observed,
    /// The harness's observers during the step.
    pub evidence: &'a Evidence,
    /// Host ids (and what came with them) by the scenario's aliases.
    pub aliases: &'a BTreeMap<String, Bound>,
    /// `expect.model_saw` entries whose tools differ from what the model was
    /// shown: (alias, expected, observed), read from the model endpoint by the caller.
    pub model_saw: &'a [(String, Value, Value)],
}

/// One expected field that the step did not show.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// Its path under `steps[i].expect`.
    pub field: String,
    pub expected: Value,
    pub observed: Value,
    /// The values the adapter declared inferred behind what was observed.
    pub inferred: Vec<ReportedValue>,
}

/// What the expectations of one step came to.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExpectCheck {
    /// In the order the fields are checked.
    pub mismatches: Vec<Mismatch>,
    /// Fields that matched, but only on inferred values.
    pub held_on_inference: Vec<InferredCheck>,
}

/// Compares every field `expect` names with what `seen` shows.
pub fn check_expect(expect: &Expect, seen: &StepSeen<'_>) -> ExpectCheck {
    let StepSeen {
        index,
        result,
        before,
        after,
        evidence,
        aliases,
        model_saw,
    } = *seen;
    // Each compared field with the inferred values behind it (provenance).
    let mut found: Vec<(String, Value, Value, Vec<ReportedValue>)> = Vec::new();
    let mut held_on_inference: Vec<InferredCheck> = Vec::new();
    let both: [&Observed; 2] = [before, after];
    let id_of = |alias: &str| aliases.get(alias).map(|b| b.id.as_str());
    let behind = |basis: Basis<'_>| provenance::inferred_behind(basis, result, &both);
    let mut cmp = |field: &str, inferred: Vec<ReportedValue>, expected: Value, observed: Value| {
        if expected != observed {
            found.push((field.to_string(), expected, observed, inferred));
        } else if !inferred.is_empty() {
            held_on_inference.push(InferredCheck {
                at: format!("steps[{index}].expect.{field}"),
                values: inferred,
            });
        }
    };
    let res = |v| behind(Basis::Result(v));

    if let Some(outcome) = expect.outcome {
        cmp(
            "outcome",
            res(ReportedValue::Outcome),
            json!(outcome),
            json!(result.map(|r| r.outcome)),
        );
    }
    if let Some(reason) = expect.reason {
        cmp(
            "reason",
            res(ReportedValue::Reason),
            json!(reason),
            json!(result.and_then(|r| r.reason)),
        );
    }
    if let Some(spawn) = &expect.spawn {
        let nested = result.and_then(|r| match &r.turn {
            Some(TurnReport::Spawn { spawn }) => Some(spawn.as_ref()),
            _ => None,
        });
        cmp(
            "spawn.outcome",
            res(ReportedValue::Spawn),
            json!(spawn.outcome),
            json!(nested.map(|s| s.outcome)),
        );
        if let Some(reason) = spawn.reason {
            cmp(
                "spawn.reason",
                res(ReportedValue::Spawn),
                json!(reason),
                json!(nested.and_then(|s| s.reason)),
            );
        }
    }
    if let Some(delta) = &expect.delta {
        let known: BTreeSet<&str> = before.instances.iter().map(|i| i.id.as_str()).collect();
        let pending = |o: &Observed| {
            o.approvals
                .iter()
                .filter(|a| a.state == ApprovalState::Pending)
                .count() as i64
        };
        let dispatched = |o: &Observed| {
            o.approvals
                .iter()
                .filter(|a| a.state == ApprovalState::Dispatched)
                .count() as i64
        };
        if let Some(n) = delta.instances {
            cmp(
                "delta.instances",
                behind(Basis::Observed(ReportedValue::Instances)),
                json!(n),
                json!(after.instances.len() as i64 - before.instances.len() as i64),
            );
        }
        // A range that admits what was seen is no mismatch; otherwise the
        // expectation is shown as written (a number or a range).
        let mut within = |field: &str, expected: &RequestCount, seen: u64| {
            if !expected.admits(seen) {
                cmp(field, Vec::new(), json!(expected), json!(seen));
            }
        };
        if let Some(n) = &delta.model_requests {
            within("delta.model_requests", n, evidence.total_model_requests());
        }
        if let Some(n) = &delta.model_requests_new_instances {
            let new: u64 = evidence
                .model_requests
                .iter()
                .filter(|(id, _)| !known.contains(id.as_str()))
                .map(|(_, n)| n)
                .sum();
            within("delta.model_requests_new_instances", n, new);
        }
        for (alias, n) in &delta.model_requests_for {
            let id = aliases.get(alias).map(|b| b.id.as_str()).unwrap_or("");
            let seen = evidence.model_requests.get(id).copied().unwrap_or(0);
            within(&format!("delta.model_requests_for.{alias}"), n, seen);
        }
        if let Some(n) = delta.handler_calls {
            cmp(
                "delta.handler_calls",
                Vec::new(),
                json!(n),
                json!(evidence.handler_calls.len()),
            );
        }
        if let Some(n) = delta.authorizer_calls {
            cmp(
                "delta.authorizer_calls",
                Vec::new(),
                json!(n),
                json!(evidence.authorizer_calls),
            );
        }
        if let Some(n) = delta.approvals_dispatched {
            cmp(
                "delta.approvals_dispatched",
                behind(Basis::Observed(ReportedValue::Approvals)),
                json!(n),
                json!(dispatched(after) - dispatched(before)),
            );
        }
        if let Some(n) = delta.approvals_pending {
            cmp(
                "delta.approvals_pending",
                behind(Basis::Observed(ReportedValue::Approvals)),
                json!(n),
                json!(pending(after) - pending(before)),
            );
        }
    }
    for (alias, state) in &expect.state {
        let id = id_of(alias);
        let seen = id.and_then(|id| after.instance(id)).map(|i| i.state);
        cmp(
            &format!("state.{alias}"),
            behind(Basis::Instance(ReportedValue::State, id)),
            json!(state),
            json!(seen),
        );
    }
    if let Some(count) = &expect.instances {
        cmp(
            "instances.count",
            behind(Basis::Observed(ReportedValue::Instances)),
            json!(count.count),
            json!(after.instances.len()),
        );
    }
    if let Some(questions) = &expect.questions {
        let inferred = behind(Basis::Observed(ReportedValue::Questions));
        for (field, expected, state) in [
            (
                "questions.pending",
                questions.pending,
                QuestionState::Pending,
            ),
            (
                "questions.answered",
                questions.answered,
                QuestionState::Answered,
            ),
        ] {
            if let Some(n) = expected {
                let seen = after.questions.iter().filter(|q| q.state == state).count();
                cmp(field, inferred.clone(), json!(n), json!(seen));
            }
        }
    }
    if let Some(approvals) = &expect.approvals {
        let approvals_inferred = behind(Basis::Observed(ReportedValue::Approvals));
        let count = |f: &dyn Fn(&delegation_model::ObservedApproval) -> bool| {
            after.approvals.iter().filter(|a| f(a)).count() as u64
        };
        if let Some(n) = approvals.pending {
            cmp(
                "approvals.pending",
                approvals_inferred.clone(),
                json!(n),
                json!(count(&|a| a.state == ApprovalState::Pending)),
            );
        }
        if let Some(n) = approvals.allowed {
            cmp(
                "approvals.allowed",
                approvals_inferred.clone(),
                json!(n),
                json!(count(&|a| matches!(
                    a.decision,
                    Some(Decision::Allow | Decision::AllowExact)
                ))),
            );
        }
        if let Some(n) = approvals.denied {
            cmp(
                "approvals.denied",
                approvals_inferred.clone(),
                json!(n),
                json!(count(&|a| a.decision == Some(Decision::Deny))),
            );
        }
        if let Some(n) = approvals.dispatched {
            cmp(
                "approvals.dispatched",
                approvals_inferred.clone(),
                json!(n),
                json!(count(&|a| a.state == ApprovalState::Dispatched)),
            );
        }
        for (field, expected, by) in [
            ("person", approvals.decided_by_person, DecidedBy::Person),
            ("policy", approvals.decided_by_policy, DecidedBy::Policy),
            (
                "external",
                approvals.decided_by_external,
                DecidedBy::External,
            ),
        ] {
            if let Some(n) = expected {
                cmp(
                    &format!("approvals.decided_by_{field}"),
                    approvals_inferred.clone(),
                    json!(n),
                    json!(count(&|a| a.decided_by == Some(by))),
                );
            }
        }
    }
    if let Some(grants) = &expect.grants {
        cmp(
            "grants.count",
            behind(Basis::Observed(ReportedValue::Grants)),
            json!(grants.count),
            json!(after.grants.len()),
        );
    }
    if let Some(records) = &expect.records {
        let records_inferred = behind(Basis::Observed(ReportedValue::Records));
        let delegations = || {
            after
                .records
                .iter()
                .filter(|r| DELEGATION_TRANSITIONS.contains(&r.transition.as_str()))
        };
        let allowed = delegations().filter(|r| r.allowed).count() as u64;
        if let Some(n) = records.allowed_delegations {
            cmp(
                "records.allowed_delegations",
                records_inferred.clone(),
                json!(n),
                json!(allowed),
            );
        }
        if let Some(n) = records.denied_delegations {
            let denied = delegations().filter(|r| !r.allowed).count() as u64;
            cmp(
                "records.denied_delegations",
                records_inferred.clone(),
                json!(n),
                json!(denied),
            );
        }
        if let Some(n) = records.allowed_delegations_with_requested_and_effective {
            let both = delegations()
                .filter(|r| r.allowed && r.requested.is_some() && r.effective.is_some())
                .count() as u64;
            cmp(
                "records.allowed_delegations_with_requested_and_effective",
                records_inferred.clone(),
                json!(n),
                json!(both),
            );
        }
    }
    for (alias, expected, observed) in model_saw {
        cmp(
            &format!("model_saw.{alias}"),
            Vec::new(),
            expected.clone(),
            observed.clone(),
        );
    }
    for (alias, state) in &expect.receipts {
        let id = id_of(alias);
        let seen = id
            .and_then(|id| after.receipts.iter().find(|r| r.id == id))
            .map(|r| r.state);
        cmp(
            &format!("receipts.{alias}"),
            behind(Basis::Observed(ReportedValue::Receipts)),
            json!(state),
            json!(seen),
        );
    }
    if let Some(tool_call) = &expect.tool_call {
        let report = result.and_then(|r| r.tool_call.as_ref());
        cmp(
            "tool_call.outcome",
            res(ReportedValue::ToolCall),
            json!(tool_call.outcome),
            json!(report.map(|t| t.outcome)),
        );
        if let Some(reason) = tool_call.reason {
            cmp(
                "tool_call.reason",
                res(ReportedValue::ToolCall),
                json!(reason),
                json!(report.and_then(|t| t.reason)),
            );
        }
    }
    if let Some(woke) = expect.woke {
        cmp(
            "woke",
            res(ReportedValue::Woke),
            json!(woke),
            json!(result.and_then(|r| r.woke)),
        );
    }
    if let Some(alias) = &expect.effective_equals_ceiling_of {
        let id = id_of(alias);
        let ceiling = id.and_then(|id| before.instance(id)).map(|i| &i.ceiling);
        let mut inferred = res(ReportedValue::Effective);
        inferred.extend(behind(Basis::Instance(ReportedValue::Ceiling, id)));
        cmp(
            "effective_equals_ceiling_of",
            inferred,
            json!(ceiling),
            json!(result.and_then(|r| r.effective.as_ref())),
        );
    }
    if let Some(partial) = &expect.effective {
        let effective = result
            .and_then(|r| r.effective.as_ref())
            .map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
            .unwrap_or(Value::Null);
        let inferred = res(ReportedValue::Effective);
        if !partial_match(partial, &effective) {
            cmp("effective", inferred, partial.clone(), effective);
        } else if !inferred.is_empty() {
            cmp("effective", inferred, Value::Null, Value::Null);
        }
    }

    ExpectCheck {
        mismatches: found
            .into_iter()
            .map(|(field, expected, observed, inferred)| Mismatch {
                field,
                expected,
                observed,
                inferred,
            })
            .collect(),
        held_on_inference,
    }
}

/// Whether every field given in `partial` is equal in `actual` (objects recursively; anything else exactly).
pub fn partial_match(partial: &Value, actual: &Value) -> bool {
    match (partial, actual) {
        (Value::Object(p), Value::Object(a)) => p
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|av| partial_match(v, av))),
        _ => partial == actual,
    }
}
