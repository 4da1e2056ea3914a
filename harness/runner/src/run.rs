//! Runs a selection of scenarios: `--jobs` at a time, controls before their
//! negatives, verdicts adjusted by controls and the expectations file, and
//! an interrupt that still ends with a report of what finished.

use std::collections::HashMap;
use std::sync::Arc;

use delegation_host::HostLauncher;
use delegation_model::Tier;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use crate::events::{EventSink, RunEvent};
use crate::execute::{ExecOptions, Execution, RawOutcome, execute};
use crate::expectations::{Expectations, Expected};
use crate::provenance::InferredCheck;
use crate::scenario::Scenario;
use crate::snapshot;
use crate::verdict::{ScenarioResult, Summary, Verdict};
use crate::world::WorldFactory;

#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Scenarios run at the same time, each with its own host, store and observers.
    pub jobs: usize,
    /// Seed of the run order; printed at the start so a run can be repeated.
    pub seed: u64,
    pub exec: ExecOptions,
    pub expectations: Expectations,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            jobs: 1,
            seed: 0,
            exec: ExecOptions::default(),
            expectations: Expectations::default(),
        }
    }
}

/// The end of a run: every result that finished, and whether it was interrupted.
#[derive(Debug)]
pub struct RunReport {
    pub results: Vec<ScenarioResult>,
    pub summary: Summary,
    pub interrupted: bool,
}

/// Runs `scenarios` (already ordered, see [`crate::catalogue::order`]).
/// `interrupt` turning `true` stops the run: running scenarios are
/// abandoned, the results so far are reported, `RunInterrupted` is sent.
pub async fn run(
    scenarios: Vec<Scenario>,
    launcher: Arc<dyn HostLauncher>,
    worlds: Arc<dyn WorldFactory>,
    options: RunOptions,
    events: EventSink,
    mut interrupt: watch::Receiver<bool>,
) -> RunReport {
    let total = scenarios.len();
    let _ = events.send(RunEvent::RunStarted {
        host: launcher.describe(),
        total,
        seed: options.seed,
        jobs: options.jobs.max(1),
        model_checkers: crate::checks::MODEL_CHECKERS_WIRED,
    });

    // Each control publishes its final verdict; its negatives wait for it
    // before taking a job slot, so waiting never holds a slot.
    let mut verdicts: HashMap<String, watch::Sender<Option<Verdict>>> = HashMap::new();
    for s in &scenarios {
        verdicts.insert(s.id.clone(), watch::channel(None).0);
    }
    let slots = Arc::new(Semaphore::new(options.jobs.max(1)));
    let options = Arc::new(options);
    let mut tasks = JoinSet::new();
    for scenario in scenarios {
        let publish = verdicts[&scenario.id].clone();
        let control = scenario
            .control
            .as_ref()
            .and_then(|c| verdicts.get(c))
            .map(|tx| (scenario.control.clone().unwrap_or_default(), tx.subscribe()));
        let (launcher, worlds, options, events, slots) = (
            launcher.clone(),
            worlds.clone(),
            options.clone(),
            events.clone(),
            slots.clone(),
        );
        tasks.spawn(async move {
            let control_verdict = match control {
                Some((id, mut rx)) => {
                    let v = rx
                        .wait_for(|v| v.is_some())
                        .await
                        .ok()
                        .and_then(|v| v.clone());
                    Some((id, v))
                }
                None => None,
            };
            let _slot = slots
                .acquire_owned()
                .await
                .expect("the semaphore is never closed");
            let _ = events.send(RunEvent::ScenarioStarted {
                id: scenario.id.clone(),
            });
            let execution = execute(
                &scenario,
                launcher.as_ref(),
                worlds.as_ref(),
                &options.exec,
                &events,
            )
            .await;
            let result = judge(&scenario, execution, control_verdict, &options.expectations);
            publish.send_replace(Some(result.verdict.clone()));
            let _ = events.send(RunEvent::ScenarioFinished(Box::new(result.clone())));
            result
        });
    }

    let mut results = Vec::new();
    let mut interrupted = *interrupt.borrow();
    while !interrupted {
        tokio::select! {
            next = tasks.join_next() => match next {
                Some(Ok(result)) => results.push(result),
                Some(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Some(Err(_)) => {}
                None => break,
            },
            changed = interrupt.changed() => {
                // A dropped sender is not an interrupt; stop listening to it.
                interrupted = changed.is_ok() && *interrupt.borrow();
                if changed.is_err() {
                    while let Some(next) = tasks.join_next().await {
                        if let Ok(result) = next { results.push(result) }
                    }
                    break;
                }
            }
        }
    }
    if interrupted {
        tasks.abort_all();
    }
    let mut summary = Summary::from_results(&results);
    summary.not_run = total - results.len();
    let _ = events.send(if interrupted {
        RunEvent::RunInterrupted {
            summary: summary.clone(),
        }
    } else {
        RunEvent::RunFinished {
            summary: summary.clone(),
        }
    });
    RunReport {
        results,
        summary,
        interrupted,
    }
}

/// The final verdict: the raw outcome, then the control, then the expectations file.
pub fn judge(
    scenario: &Scenario,
    execution: Execution,
    control: Option<(String, Option<Verdict>)>,
    expectations: &Expectations,
) -> ScenarioResult {
    let raw = match &execution.outcome {
        RawOutcome::Unsupported(missing) => Verdict::Unsupported {
            missing: missing.clone(),
        },
        RawOutcome::Error {
            message,
            stderr_tail,
        } => Verdict::Error {
            message: message.clone(),
            stderr_tail: stderr_tail.clone(),
        },
        // The provenance rule: a failure on what was observed is the host's;
        // a check that failed or held only on the adapter's inference is neither.
        RawOutcome::Completed | RawOutcome::Stopped
            if execution.failures.iter().any(|f| f.inferred.is_empty()) =>
        {
            Verdict::Fail
        }
        RawOutcome::Completed | RawOutcome::Stopped
            if execution.failures.is_empty() && execution.held_on_inference.is_empty() =>
        {
            Verdict::Pass
        }
        RawOutcome::Completed | RawOutcome::Stopped => Verdict::Unverified {
            rests_on: execution
                .failures
                .iter()
                .map(|f| InferredCheck {
                    at: format!("{} (failed)", f.at),
                    values: f.inferred.clone(),
                })
                .chain(execution.held_on_inference.iter().cloned())
                .map(|c| c.text())
                .collect(),
        },
    };
    let raw_name = raw.name().to_string();

    // A passing negative whose control did not pass proves nothing (MODEL.md
    // section 5). A failing one is still a failure: what it observed is
    // evidence of its own, whatever became of the control.
    let mut verdict = match (&raw, control) {
        (Verdict::Pass, Some((id, control_verdict)))
            if !matches!(control_verdict, Some(Verdict::Pass)) =>
        {
            Verdict::Inconclusive {
                control: id,
                control_verdict: control_verdict
                    .map(|v| v.name().to_string())
                    .unwrap_or_else(|| "not run".into()),
            }
        }
        _ => raw,
    };

    // A host's own deny-reason name that broke decoding: say which and how to map it.
    if let Verdict::Error { message, .. } = &mut verdict
        && let Some(unmapped) = expectations.unmapped_in_error(message)
    {
        let hint = match expectations.deny_reasons.get(&unmapped.name) {
            Some(mapped) => format!(
                "the host's reason `{}` is mapped to `{}` by the expectations file, but this host layer decoded the reply before the runner could translate it: apply `Expectations::translate_reply` to raw replies in the host layer",
                unmapped.name,
                serde_json::to_value(mapped)
                    .unwrap_or_default()
                    .as_str()
                    .unwrap_or_default()
            ),
            None => unmapped.to_string(),
        };
        message.push_str("\n");
        message.push_str(&hint);
    }

    // A listed failure that now fails at other checks is a change to look at.
    let mut changed_failure = None;
    if let Some(entry) = expectations.lookup(&scenario.id) {
        let failing_at: std::collections::BTreeSet<String> =
            execution.failures.iter().map(|f| f.at.clone()).collect();
        let listed_failure = match (entry.expect, &verdict) {
            (Expected::Fail, Verdict::Fail) => match entry.change(&failing_at) {
                None => true,
                Some(change) => {
                    changed_failure = Some((change, entry.failed.clone(), failing_at));
                    false
                }
            },
            (Expected::Unsupported, Verdict::Unsupported { .. })
            | (Expected::Unverified, Verdict::Unverified { .. })
            | (Expected::Error, Verdict::Error { .. }) => true,
            (_, Verdict::Pass) => {
                verdict = Verdict::Stale {
                    reason: format!(
                        "listed as expected {} ({}) by `{}`, but it passed: remove the entry",
                        entry.expect.name(),
                        entry.reason_text(),
                        entry.pattern
                    ),
                };
                false
            }
            _ => false,
        };
        if listed_failure {
            verdict = Verdict::KnownFailure {
                reason: entry.reason.clone(),
                issue: entry.issue.clone(),
                expected: entry.expect.name().to_string(),
                // A MUST property the host is known to break, or cannot be
                // checked on because it errors, is a known security hole;
                // a missing capability is not (MODEL.md section 6).
                // Nor is a check that cannot be verified on this host.
                security: scenario.tier == Tier::Must
                    && !matches!(entry.expect, Expected::Unsupported | Expected::Unverified),
            };
        }
    }

    let transcript = snapshot::normalise(&execution.transcript);
    let secrets = &execution.transcript.secrets;
    let mut failures = execution.failures;
    if let Some((message, listed, now)) = changed_failure {
        failures.push(crate::verdict::Failure {
            kind: crate::verdict::FailureKind::Expectation,
            invariants: scenario.checks.clone(),
            step: 0,
            at: "expectations.failed".into(),
            expected: serde_json::json!(listed),
            observed: serde_json::json!(now),
            message,
            evidence: serde_json::Value::Null,
            inferred: Vec::new(),
        });
    }
    for f in &mut failures {
        for v in [&mut f.expected, &mut f.observed, &mut f.evidence] {
            snapshot::redact_secrets(v, secrets);
        }
    }
    ScenarioResult {
        id: scenario.id.clone(),
        area: scenario.area().to_string(),
        title: scenario.title.clone(),
        tier: scenario.tier,
        checks: scenario.checks.clone(),
        verdict,
        raw_verdict: raw_name,
        failures,
        steps_run: execution.steps_run,
        steps_total: scenario.steps.len(),
        duration: execution.duration,
        transcript,
    }
}
