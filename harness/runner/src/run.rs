//! Runs a selection of scenarios: `--jobs` at a time, controls before their
//! negatives, verdicts adjusted by controls and the expectations file, and
//! an interrupt that still ends with a report of what finished.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use delegation_host::HostLauncher;
use delegation_model::Tier;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use crate::events::{EventSink, RunEvent};
use crate::execute::{ExecOptions, Execution, RawOutcome, execute};
use crate::host_expectations::{Expected, HostExpectations};
use crate::observer_set::ObserverSetFactory;
use crate::provenance::InferredCheck;
use crate::resources::DescriptorWatch;
use crate::scenario::{ModelEndpointStep, Scenario, StepAction};
use crate::snapshot;
use crate::verdict::{ScenarioResult, Summary, Verdict};

#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Scenarios run at the same time, each with its own host, store and observers.
    pub jobs: usize,
    /// Seed of the run order; printed at the start so a run can be repeated.
    pub seed: u64,
    pub exec: ExecOptions,
    pub expectations: HostExpectations,
    /// Where each scenario's transcript is compared with its committed
    /// snapshot (`--snapshots DIR`); `None` compares nothing.
    pub snapshots: Option<std::path::PathBuf>,
    /// What a command rerunning one scenario alone names besides the seed
    /// and the snapshots: `--host` as given (a shipped adapter's name rather
    /// than its command line) and the expectations file. A host left `None`
    /// is named by its launcher's description.
    pub rerun: crate::report::Rerun,
    /// The longest a scripted model reply is held (`delay_ms`); `None` holds
    /// each as written. A hold is a window in which a host that works on
    /// after it answered would show it; a host that answers only once all of
    /// an action's work is done (the embedded reference host) gains nothing
    /// from it, and the run can spare the wait.
    pub max_model_hold: Option<std::time::Duration>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            jobs: 1,
            seed: 0,
            exec: ExecOptions::default(),
            expectations: HostExpectations::default(),
            snapshots: None,
            rerun: crate::report::Rerun::default(),
            max_model_hold: None,
        }
    }
}

/// `scenario` with every scripted model reply held at most `longest`
/// (`RunOptions::max_model_hold`); what it checks is unchanged.
pub fn with_model_holds_capped(scenario: &Scenario, longest: std::time::Duration) -> Scenario {
    let longest = u64::try_from(longest.as_millis()).unwrap_or(u64::MAX);
    let cap = |rules: &mut Vec<crate::scenario::ModelRuleSpec>| {
        for rule in rules {
            rule.delay_ms = rule.delay_ms.min(longest);
        }
    };
    let mut capped = scenario.clone();
    cap(&mut capped.setup.model);
    for step in &mut capped.steps {
        if let StepAction::ModelEndpoint(ModelEndpointStep::Rules(rules)) = &mut step.action {
            cap(rules);
        }
    }
    capped
}

/// After this many scenarios in a row whose host could not be started or
/// did not answer `initialize`, the run stops trying the host: each more
/// attempt would cost a full step deadline and say nothing new.
pub const START_FAILURES_BEFORE_GIVING_UP: usize = 3;

/// The end of a run: every result that finished, and whether it was interrupted.
#[derive(Debug)]
pub struct RunReport {
    pub results: Vec<ScenarioResult>,
    pub summary: Summary,
    pub interrupted: bool,
    /// Why the run stopped trying the host, when it did: it could not be
    /// started or answered nothing [`START_FAILURES_BEFORE_GIVING_UP`] times
    /// in a row. The scenarios not run are in `summary.not_run`.
    pub gave_up: Option<String>,
    /// The run gave up on the host (`gave_up`), or no scenario ever got an
    /// answer to `initialize`: the run cannot speak for the host (exit 2).
    pub host_unreachable: bool,
}

/// Runs `scenarios` (already ordered, see [`crate::catalogue::order`]).
/// `interrupt` turning `true` stops the run: running scenarios are
/// abandoned, the results so far are reported, `RunInterrupted` is sent.
pub async fn run(
    scenarios: Vec<Scenario>,
    launcher: Arc<dyn HostLauncher>,
    worlds: Arc<dyn ObserverSetFactory>,
    options: RunOptions,
    events: EventSink,
    mut interrupt: watch::Receiver<bool>,
) -> RunReport {
    let total = scenarios.len();
    let host = launcher.describe();
    let described = crate::report::Rerun::from_description(&host, Some(options.seed));
    let rerun = crate::report::Rerun {
        host: options.rerun.host.clone().or(described.host),
        seed: described.seed,
        expectations: options.rerun.expectations.clone(),
        snapshots: options.snapshots.clone(),
    };
    let _ = events.send(RunEvent::RunStarted {
        host,
        total,
        seed: options.seed,
        jobs: options.jobs.max(1),
        model_checkers: crate::checks::MODEL_CHECKERS_WIRED,
        rerun,
    });

    // Each control publishes its final verdict; its negatives wait for it
    // before taking a job slot, so waiting never holds a slot.
    let mut verdicts: HashMap<String, watch::Sender<Option<Verdict>>> = HashMap::new();
    for s in &scenarios {
        verdicts.insert(s.id.clone(), watch::channel(None).0);
    }
    let slots = Arc::new(Semaphore::new(options.jobs.max(1)));
    let options = Arc::new(options);
    // A run starved of descriptors judges nothing about the host.
    let (descriptors, _watching) = DescriptorWatch::start();
    // Start failures in a row, scenarios whose host did start, and why the
    // run stopped trying the host once it did.
    let start_failures = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let (give_up, gave_up) = watch::channel(None::<String>);
    let give_up = Arc::new(give_up);
    // Every job runs on a runtime of its own (see `job_runtimes`), one job
    // too: the catalogue with `--jobs 2` took 2.5 to 2.8 s of CPU that way
    // against 2.8 to 2.9 s on the shared runtime; with `--jobs 1`, 3.2 to
    // 4.0 s of CPU against 5.7 s (load 1.2 to 1.9), the shared runtime's
    // workers spending a third of their time waking each other.
    let job_runtimes = match crate::job_runtimes::JobRuntimes::start(options.jobs) {
        Ok(runtimes) => Some(Arc::new(runtimes)),
        Err(e) => {
            tracing::warn!("cannot start a runtime per job ({e}); the jobs share one");
            None
        }
    };
    let mut tasks = JoinSet::new();
    for scenario in scenarios {
        let job_runtimes = job_runtimes.clone();
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
        let (descriptors, start_failures, give_up, started) = (
            descriptors.clone(),
            start_failures.clone(),
            give_up.clone(),
            started.clone(),
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
            if give_up.borrow().is_some() {
                // Not run. Its verdict's sender goes with this task, so its
                // negatives stop waiting, and are not run either.
                return None;
            }
            let _ = events.send(RunEvent::ScenarioStarted {
                id: scenario.id.clone(),
            });
            let mark = descriptors.mark();
            let to_run = match options.max_model_hold {
                Some(longest) => with_model_holds_capped(&scenario, longest),
                None => scenario.clone(),
            };
            let work = {
                let (launcher, options, events) =
                    (launcher.clone(), options.clone(), events.clone());
                let watched = FaultWatch::new(worlds.clone());
                async move {
                    let execution = execute(
                        &to_run,
                        launcher.as_ref(),
                        &watched,
                        &options.exec,
                        &events,
                    )
                    .await;
                    (execution, watched.first_fault())
                }
            };
            let (mut execution, observer_fault) = match &job_runtimes {
                Some(runtimes) => runtimes.run(work).await,
                None => work.await,
            };
            // The harness's own failure (an observer's, or too few
            // descriptors) decides nothing about the host, whatever the
            // host did with it.
            let harness_failure = observer_fault
                .map(|fault| format!("the harness's own observer failed: {fault}"))
                .or_else(|| descriptors.shortage_since(mark));
            if let Some(failure) = harness_failure
                && !matches!(execution.outcome, RawOutcome::Unsupported(_))
            {
                execution.outcome = RawOutcome::HarnessError(failure);
                execution.start_failed = false;
            }
            if execution.start_failed {
                let in_a_row = start_failures.fetch_add(1, Ordering::SeqCst) + 1;
                if in_a_row >= START_FAILURES_BEFORE_GIVING_UP {
                    let last = match &execution.outcome {
                        RawOutcome::Error { message, .. } => message.clone(),
                        _ => String::new(),
                    };
                    give_up.send_if_modified(|reason| {
                        reason.get_or_insert_with(|| {
                            format!(
                                "the host could not be started or answered nothing {in_a_row} times in a row, so the remaining scenarios were not run; the last attempt: {last}"
                            )
                        });
                        true
                    });
                }
            } else {
                start_failures.store(0, Ordering::SeqCst);
                started.fetch_add(1, Ordering::SeqCst);
            }
            let mut result = judge(&scenario, execution, control_verdict, &options.expectations);
            if let Some(dir) = &options.snapshots {
                result.snapshot = Some(snapshot::check(dir, &result));
            }
            publish.send_replace(Some(result.verdict.clone()));
            let _ = events.send(RunEvent::ScenarioFinished(Arc::new(result.clone())));
            Some(result)
        });
    }

    // Each scenario's task now holds the only sender of its verdict: a
    // control that ends without one (not run, aborted) closes its channel,
    // so its negatives stop waiting instead of hanging the run.
    drop(verdicts);
    let mut results = Vec::new();
    let mut interrupted = *interrupt.borrow();
    let mut listening = true;
    while !interrupted {
        tokio::select! {
            next = tasks.join_next() => match next {
                Some(Ok(Some(result))) => results.push(result),
                Some(Ok(None)) => {}
                Some(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Some(Err(_)) => {}
                None => break,
            },
            changed = interrupt.changed(), if listening => {
                // A dropped sender is not an interrupt; stop listening to it.
                match changed {
                    Ok(()) => interrupted = *interrupt.borrow(),
                    Err(_) => listening = false,
                }
            }
        }
    }
    if interrupted {
        tasks.abort_all();
        // Dropping each scenario kills its adapter's process group, waits for
        // it to die and removes its store directory: done before the report,
        // so an interrupted run leaves nothing behind. A scenario that had
        // already finished (its result reported) still counts.
        while let Some(next) = tasks.join_next().await {
            if let Ok(Some(result)) = next {
                results.push(result);
            }
        }
    }
    drop(job_runtimes);
    let gave_up = gave_up.borrow().clone();
    let host_unreachable = gave_up.is_some()
        || (started.load(Ordering::SeqCst) == 0 && start_failures.load(Ordering::SeqCst) > 0);
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
        gave_up,
        host_unreachable,
    }
}

/// The final verdict: the raw outcome, then the control, then the expectations file.
pub fn judge(
    scenario: &Scenario,
    execution: Execution,
    control: Option<(String, Option<Verdict>)>,
    expectations: &HostExpectations,
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
        RawOutcome::HarnessError(message) => Verdict::HarnessError {
            message: message.clone(),
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
                "the host's reason `{}` is mapped to `{}` by the expectations file, but this host layer decoded the reply before the runner could translate it: apply `HostExpectations::translate_reply` to raw replies in the host layer",
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
            | (Expected::Inconclusive, Verdict::Inconclusive { .. })
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
                // Nor is a check that cannot be verified on this host, or
                // a negative that passed with no control to back it.
                security: scenario.tier == Tier::Must
                    && !matches!(
                        entry.expect,
                        Expected::Unsupported | Expected::Unverified | Expected::Inconclusive
                    ),
            };
        }
    }

    let secrets = execution.transcript.secrets.clone();
    let transcript = snapshot::normalise(execution.transcript);
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
            snapshot::redact_secrets(v, &secrets);
        }
    }
    let mut result = ScenarioResult {
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
        snapshot: None,
    };
    result.redact(&secrets);
    result
}

/// The worlds one scenario starts, with their observers' fault records kept
/// past the scenario's end.
struct FaultWatch {
    inner: Arc<dyn ObserverSetFactory>,
    seen: std::sync::Mutex<Vec<delegation_observers::Faults>>,
}

impl FaultWatch {
    fn new(inner: Arc<dyn ObserverSetFactory>) -> FaultWatch {
        FaultWatch {
            inner,
            seen: Default::default(),
        }
    }

    fn first_fault(&self) -> Option<String> {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .find_map(|f| f.first())
    }
}

#[async_trait::async_trait]
impl ObserverSetFactory for FaultWatch {
    async fn start(
        &self,
        setup: &crate::scenario::Setup,
    ) -> Result<Box<dyn crate::observer_set::ObserverSet>, crate::observer_set::ObserverSetError>
    {
        let world = self.inner.start(setup).await?;
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend(world.faults());
        Ok(world)
    }
}
