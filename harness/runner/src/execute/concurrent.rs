//! Running a `concurrently` step: every action sent at once, the answers judged by linearizability, then as a set.
//!
//! The host's answers and the state it ends in must be those of some
//! one-at-a-time order of the actions under the model's rules
//! ([`delegation_model::linearizability`]); no such order is a violation of
//! the invariant the raced actions are about (RC1 for receipts, TR4 for a
//! follow-up against a close). The actions then enter the history in the
//! order found, so the invariant checkers read them as the host's
//! one-at-a-time story; the step's observer evidence goes with the first of
//! them (a consume's winner, a follow-up that ran before the close), the
//! state observed after the step with the last.
//!
//! The observers are marked as each answer arrives, so that real time
//! counts where they can place it: a handler call the tool server saw only
//! after a revoke's answer had arrived started after the revoke committed
//! ([`delegation_model::linearizability::real_time_order`], TC2).

use std::sync::Arc;

use delegation_model::linearizability::{RaceState, RacedAction, linearize, real_time_order};
use delegation_model::{
    Action, ActionResult, Evidence, HistoryEntry, InvariantId, Observed, Outcome, StepKind,
};
use serde_json::json;

use super::{HostFault, OUTER_DEADLINE_MARGIN, ScenarioRun};
use crate::expect_check::{StepSeen, check_expect};
use crate::observer_set::ObserverMark;
use crate::scenario::{ConcurrentSteps, Expect, SetExpect};
use crate::verdict::{Failure, FailureKind};

impl ScenarioRun<'_> {
    /// Runs steps[`index`], a concurrent step. `Ok(false)`: a failure that makes later steps meaningless.
    pub(super) async fn concurrent_step(
        &mut self,
        index: usize,
        steps: &ConcurrentSteps,
        before: Arc<Observed>,
        mark: ObserverMark,
    ) -> Result<bool, HostFault> {
        let mut actions = Vec::with_capacity(steps.0.len());
        for (j, inner) in steps.0.iter().enumerate() {
            match self.build_action(&inner.action, &before) {
                Ok(action) => actions.push(action),
                Err(message) => {
                    self.failures.push(Failure {
                        kind: FailureKind::Expectation,
                        invariants: self.scenario.checks.clone(),
                        step: index,
                        at: format!("steps[{index}].concurrently[{j}].{}", inner.action.key()),
                        expected: json!("an action the runner can build"),
                        observed: json!(message),
                        message: format!("cannot run this step: {message}"),
                        evidence: json!({}),
                        inferred: Vec::new(),
                    });
                    return Ok(false);
                }
            }
        }
        let (results, answered_at) = self.call_at_once(&actions).await?;
        let mut evidence = self.world.evidence_since(&mark);
        // The handler calls the tool server saw after each answer arrived.
        let late: Vec<Vec<delegation_model::HandlerCall>> = answered_at
            .iter()
            .map(|at| {
                at.as_ref()
                    .map(|at| {
                        let seen = at.tools.saturating_sub(mark.tools);
                        evidence.handler_calls.iter().skip(seen).cloned().collect()
                    })
                    .unwrap_or_default()
            })
            .collect();
        let after = Arc::new(self.observe().await?);
        self.observed = after.clone();
        evidence.host_log = self.take_host_log();

        let failures_before = self.failures.len();
        let order = self.judge_race(index, &actions, &results, &before, &evidence, &late);
        let linearizable = self.failures.len() == failures_before;
        let (first, last) = (order.first().copied(), order.last().copied());
        for &i in &order {
            let entry = HistoryEntry {
                step: index,
                kind: StepKind::Action {
                    action: actions[i].clone(),
                    result: Ok(results[i].clone()),
                },
                evidence: if Some(i) == first {
                    evidence.clone()
                } else {
                    Evidence::default()
                },
                // Only the state after all of them was observed; an
                // action in the middle of the order has no observation of its own.
                observed: (Some(i) == last).then(|| after.clone()),
            };
            self.history.push(entry);
        }
        self.extra_entries += order.len().saturating_sub(1);
        self.record_race_transcript(index, &actions, linearizable, &after);
        if let Some(expect) = &self.scenario.steps[index].expect {
            self.check_set(index, expect, &results, &before, &evidence, &mark);
        }
        self.check_invariants(index, &mark);
        Ok(true)
    }

    /// One transcript entry for the whole step: the requests as written,
    /// whether some order explained the answers, and the state after. Which
    /// action won, and so each answer and the step's observer counts, is the
    /// host's choice and may differ from run to run: a snapshot must not.
    fn record_race_transcript(
        &mut self,
        index: usize,
        actions: &[Action],
        linearizable: bool,
        after: &Observed,
    ) {
        if !self.options.transcript {
            return;
        }
        self.transcript.steps.push(json!({
            "step": index,
            "do": "concurrently",
            "requests": actions,
            "linearizable": linearizable,
            "observed": after,
        }));
    }

    /// Sends every action at once, under the outer deadline; the first
    /// error of any answer is the step's. With the answers, the observers'
    /// mark when each arrived (`None`: the host did not say).
    async fn call_at_once(
        &mut self,
        actions: &[Action],
    ) -> Result<(Vec<ActionResult>, Vec<Option<ObserverMark>>), HostFault> {
        let outer = self.options.step_deadline + OUTER_DEADLINE_MARGIN;
        let world = &*self.world;
        let marks = std::sync::Mutex::new(vec![None; actions.len()]);
        let noted = |i: usize| {
            if let Ok(mut marks) = marks.lock()
                && let Some(slot) = marks.get_mut(i)
            {
                *slot = Some(world.mark());
            }
        };
        let called = self.host.call_concurrently_noting(actions, &noted);
        let answers = match tokio::time::timeout(outer, called).await {
            Ok(answers) => answers,
            Err(_) => {
                return Err(HostFault::Broken(format!(
                    "no answers to {} requests in flight at once within {} ms",
                    actions.len(),
                    self.options.step_deadline.as_millis()
                )));
            }
        };
        if answers.len() != actions.len() {
            return Err(HostFault::Harness(format!(
                "{} answers to {} requests in flight at once",
                answers.len(),
                actions.len()
            )));
        }
        let results = answers
            .into_iter()
            .map(|a| a.map_err(HostFault::from))
            .collect::<Result<Vec<_>, _>>()?;
        let marks = marks.into_inner().unwrap_or_default();
        Ok((results, marks))
    }

    /// The order of the actions that explains the answers and the state
    /// after; when none does, a failure for the raced invariants, and the
    /// actions in the order they were written.
    fn judge_race(
        &mut self,
        index: usize,
        actions: &[Action],
        results: &[ActionResult],
        before: &Observed,
        evidence: &Evidence,
        late: &[Vec<delegation_model::HandlerCall>],
    ) -> Vec<usize> {
        let written: Vec<usize> = (0..actions.len()).collect();
        let capability_of = |secret: &str| {
            self.aliases
                .values()
                .find(|b| b.secret.as_deref() == Some(secret))
                .map(|b| b.id.clone())
        };
        let Some(raced) = actions
            .iter()
            .map(|a| RacedAction::from_action(a, &capability_of))
            .collect::<Option<Vec<_>>>()
        else {
            self.failures.push(Failure {
                kind: FailureKind::Expectation,
                invariants: self.scenario.checks.clone(),
                step: index,
                at: format!("steps[{index}].concurrently"),
                expected: json!("actions the linearizability rules decide"),
                observed: json!(actions.iter().map(Action::method).collect::<Vec<_>>()),
                message: "the harness cannot judge these actions raced (the scenario's validation should have refused them)".into(),
                evidence: json!({}),
                inferred: Vec::new(),
            });
            return written;
        };
        let start = RaceState::before(before, &raced);
        let after = RaceState::after(
            before,
            &self.observed,
            &evidence.model_requests,
            &evidence.handler_calls,
            &raced,
        );
        let answers: Vec<_> = results.iter().map(|r| (r.outcome, r.reason)).collect();
        let late: Vec<&[delegation_model::HandlerCall]> = late.iter().map(Vec::as_slice).collect();
        let precedes = real_time_order(&raced, &answers, &late);
        match linearize(&start, &raced, &answers, &after, &precedes) {
            Ok(order) => order,
            Err(not) => {
                let mut ids: Vec<InvariantId> = raced.iter().map(RacedAction::invariant).collect();
                ids.sort();
                ids.dedup();
                let named: Vec<InvariantId> = ids
                    .iter()
                    .copied()
                    .filter(|id| self.scenario.checks.contains(id))
                    .collect();
                let invariants = if named.is_empty() {
                    self.scenario.checks.clone()
                } else {
                    named
                };
                let timing = if precedes.is_empty() {
                    String::new()
                } else {
                    let pairs: Vec<String> = precedes
                        .iter()
                        .map(|(a, b)| format!("{a} before {b}"))
                        .collect();
                    format!(
                        " (with the order real time imposes: {}, as the tool server saw a handler run only after the revoke was answered)",
                        pairs.join(", ")
                    )
                };
                let message = format!(
                    "no one-at-a-time order of the {} actions sent at once gives the answers and the state observed{timing}: {} instead of one of {} possible outcomes",
                    actions.len(),
                    summary(&answers),
                    not.possible.len()
                );
                self.failures.push(Failure {
                    kind: FailureKind::Invariant,
                    invariants,
                    step: index,
                    at: format!("steps[{index}].concurrently"),
                    expected: json!({
                        "some order of": raced,
                        "with before": precedes,
                        "possible": not.possible,
                    }),
                    observed: json!({"answers": not.observed, "after": not.observed_after}),
                    message,
                    evidence: json!({
                        "host_replies": results,
                        "observers": evidence,
                        "start": start,
                    }),
                    inferred: Vec::new(),
                });
                written
            }
        }
    }

    /// The step's expectations: the state fields as for any step, with the
    /// whole step's evidence, and `set` over the answers.
    fn check_set(
        &mut self,
        index: usize,
        expect: &Expect,
        results: &[ActionResult],
        before: &Observed,
        evidence: &Evidence,
        mark: &ObserverMark,
    ) {
        let checked = check_expect(
            expect,
            &StepSeen {
                index,
                result: None,
                before,
                after: &self.observed,
                evidence,
                aliases: &self.aliases,
                model_saw: &[],
            },
        );
        self.held_on_inference.extend(checked.held_on_inference);
        let mut mismatches: Vec<(String, serde_json::Value, serde_json::Value)> = checked
            .mismatches
            .into_iter()
            .map(|m| (m.field, m.expected, m.observed))
            .collect();
        if let Some(set) = &expect.set {
            mismatches.extend(set_mismatches(set, results));
        }
        for (field, expected, observed) in mismatches {
            let failure = self.failure(index, &field, expected, observed, None, mark);
            self.failures.push(failure);
        }
    }
}

/// Where the answers differ from `set`: (field under `expect`, expected, observed).
fn set_mismatches(
    set: &SetExpect,
    results: &[ActionResult],
) -> Vec<(String, serde_json::Value, serde_json::Value)> {
    let mut out = Vec::new();
    let ok = results.iter().filter(|r| r.outcome == Outcome::Ok).count() as u64;
    if let Some(expected) = set.ok
        && expected != ok
    {
        out.push(("set.ok".into(), json!(expected), json!(ok)));
    }
    if !set.denied.is_empty() {
        let mut denied: std::collections::BTreeMap<String, u64> = Default::default();
        for r in results.iter().filter(|r| r.outcome == Outcome::Denied) {
            let reason = r
                .reason
                .map_or("(no reason)".to_string(), |d| d.to_string());
            *denied.entry(reason).or_default() += 1;
        }
        let expected: std::collections::BTreeMap<String, u64> = set
            .denied
            .iter()
            .map(|(reason, n)| (reason.to_string(), *n))
            .collect();
        if expected != denied {
            out.push(("set.denied".into(), json!(expected), json!(denied)));
        }
    }
    out
}

/// The answers in one line: `ok, denied receipt_consumed, ...`.
fn summary(answers: &[delegation_model::linearizability::Answer]) -> String {
    answers
        .iter()
        .map(|(outcome, reason)| match (outcome, reason) {
            (Outcome::Ok, _) => "ok".to_string(),
            (Outcome::Denied, Some(r)) => format!("denied {r}"),
            (Outcome::Denied, None) => "denied without a reason".to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}
