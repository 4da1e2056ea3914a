//! The search of a fuzz run: cases generated from a seed and run against the host, one at a time or several at once, until the first that fails.
//!
//! With several jobs each case runs on a runtime of its own thread (the
//! runner's [`JobRuntimes`], as `run --jobs` does), and the results are read
//! in the order the cases were generated. So a seed finds the same first
//! failing case, with the same totals and reach before it, whatever the
//! number of jobs: the cases generated after it are dropped unread, and
//! their hosts with them.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use delegation_host::HostLauncher;
use delegation_runner::differential::reach::Reach;
use delegation_runner::differential::{CaseResult, failing_op, run_ops};
use delegation_runner::execute::ExecOptions;
use delegation_runner::job_runtimes::JobRuntimes;
use futures_util::FutureExt;
use futures_util::future::LocalBoxFuture;
use futures_util::stream::{FuturesOrdered, StreamExt};

use super::sequence::{Generator, Sequence};
use super::{Totals, panic_message};

/// The first failing case of a search.
pub struct Finding {
    pub seq: Sequence,
    /// The failing operation's index in `seq`.
    pub at: usize,
    /// The failing step of the case's scenario, and what failed there.
    pub step: usize,
    pub message: String,
}

/// What a search ran, and the first case that failed.
pub struct Search {
    pub totals: Totals,
    /// What the generated cases reached in the model.
    pub reach: Reach,
    pub finding: Option<Finding>,
    /// The harness itself failed on a case (never a finding about the host).
    pub harness_error: Option<String>,
}

/// One case's run, or the panic it ended in.
type Ran = Result<
    (
        delegation_runner::differential::translate::Translation,
        CaseResult,
    ),
    Box<dyn Any + Send>,
>;

/// Generates cases from `seed` and runs them against `launcher`, up to
/// `jobs` at a time, until one fails, `cases` ran, `deadline` passed or
/// `stop` was set. `progress` sees the totals after every case.
#[allow(clippy::too_many_arguments)]
pub async fn search(
    seed: u64,
    (min_ops, max_ops): (usize, usize),
    cases: u64,
    deadline: Option<Instant>,
    jobs: usize,
    launcher: &Arc<dyn HostLauncher>,
    exec: &ExecOptions,
    stop: &AtomicBool,
    mut progress: impl FnMut(&Totals),
) -> Search {
    let started = Instant::now();
    let mut generator = Generator::new(seed);
    let mut totals = Totals::default();
    let mut reach = Reach::default();
    let mut finding = None;
    let mut harness_error = None;
    let jobs = jobs.max(1);
    // One job runs on the caller's runtime: a hop to another thread would
    // only add a wake-up to every case.
    let runtimes = if jobs > 1 {
        match JobRuntimes::start(jobs) {
            Ok(runtimes) => Some(Arc::new(runtimes)),
            Err(e) => {
                totals.elapsed = started.elapsed();
                return Search {
                    totals,
                    reach,
                    finding,
                    harness_error: Some(format!("cannot start {jobs} fuzzing jobs: {e}")),
                };
            }
        }
    } else {
        None
    };
    let mut running: FuturesOrdered<LocalBoxFuture<'static, (Sequence, Ran)>> =
        FuturesOrdered::new();
    loop {
        while running.len() < jobs
            && totals.cases + (running.len() as u64) < cases
            && deadline.is_none_or(|d| Instant::now() < d)
            && !stop.load(Ordering::SeqCst)
        {
            let seq = generator.sequence(min_ops, max_ops);
            let ops = seq.ops();
            let launcher = Arc::clone(launcher);
            let exec = exec.clone();
            let case = async move { run_ops(&ops, launcher.as_ref(), &exec).await };
            // A panic in the model, the in-process host or the runner is the
            // harness's failure, reported with the case that caused it.
            let ran: LocalBoxFuture<'static, Ran> = match &runtimes {
                Some(runtimes) => {
                    let runtimes = Arc::clone(runtimes);
                    async move { AssertUnwindSafe(runtimes.run(case)).catch_unwind().await }
                        .boxed_local()
                }
                None => AssertUnwindSafe(case).catch_unwind().boxed_local(),
            };
            running.push_back(ran.map(move |ran| (seq, ran)).boxed_local());
        }
        let Some((seq, ran)) = running.next().await else {
            break;
        };
        let (translation, result) = match ran {
            Ok(ran) => ran,
            Err(panic) => {
                harness_error = Some(format!(
                    "the harness panicked on case {} ({:?}): {}",
                    totals.cases + 1,
                    seq.ops(),
                    panic_message(&*panic)
                ));
                break;
            }
        };
        let ops = seq.ops();
        reach.record(&ops, &translation);
        totals.cases += 1;
        totals.ops += translation.translated_ops as u64;
        totals.steps += translation.scenario.steps.len() as u64;
        totals.shortened += translation.stopped.is_some() as u64;
        totals.elapsed = started.elapsed();
        match result {
            CaseResult::Pass => {}
            CaseResult::Unsupported(_) => totals.unsupported += 1,
            // Never a finding: the harness, not the host, failed.
            CaseResult::HarnessError(message) => {
                harness_error = Some(message);
                break;
            }
            CaseResult::Fail { step, message } => {
                let at = failing_op(&translation, step);
                finding = Some(Finding {
                    seq,
                    at,
                    step,
                    message,
                });
                break;
            }
        }
        progress(&totals);
    }
    // The cases still running were generated after the one that ended the
    // search: dropped here, each on its own runtime, before the totals are
    // final.
    drop(running);
    totals.elapsed = started.elapsed();
    Search {
        totals,
        reach,
        finding,
        harness_error,
    }
}

#[cfg(test)]
mod tests {
    use delegation_host::ReferenceLauncher;
    use delegation_host::mutants::Defect;

    use super::*;

    async fn search_with(jobs: usize, cases: u64, launcher: Arc<dyn HostLauncher>) -> Search {
        search(
            3,
            (1, 12),
            cases,
            None,
            jobs,
            &launcher,
            &ExecOptions::default(),
            &AtomicBool::new(false),
            |_| {},
        )
        .await
    }

    #[tokio::test]
    async fn several_jobs_find_the_same_first_case_as_one() {
        let mutant: Arc<dyn HostLauncher> = Arc::new(ReferenceLauncher {
            defect: Some(Defect::ToolsBoundByName),
            ..Default::default()
        });
        let one = search_with(1, 12, Arc::clone(&mutant)).await;
        let three = search_with(3, 12, mutant).await;
        let (Some(first), Some(again)) = (&one.finding, &three.finding) else {
            panic!(
                "seed 3 finds the mutant in its fourth case with one job and with three: {:?} / {:?}",
                one.harness_error, three.harness_error
            );
        };
        assert_eq!(first.seq.ops(), again.seq.ops());
        assert_eq!(
            (first.at, first.step, &first.message),
            (again.at, again.step, &again.message)
        );
        assert_eq!(
            (one.totals.cases, one.totals.ops, one.totals.steps),
            (three.totals.cases, three.totals.ops, three.totals.steps),
            "the cases after the finding are dropped unread"
        );
        assert_eq!(one.totals.cases, 4, "the search stopped at the finding");
    }

    #[tokio::test]
    async fn several_jobs_run_every_case_of_a_clean_search() {
        let correct: Arc<dyn HostLauncher> = Arc::new(ReferenceLauncher::default());
        let one = search_with(1, 12, Arc::clone(&correct)).await;
        let two = search_with(2, 12, correct).await;
        assert!(one.finding.is_none() && two.finding.is_none());
        assert_eq!((one.totals.cases, two.totals.cases), (12, 12));
        assert_eq!(
            (one.totals.ops, one.totals.steps),
            (two.totals.ops, two.totals.steps)
        );
        assert_eq!(
            serde_json::to_value(&one.reach).unwrap(),
            serde_json::to_value(&two.reach).unwrap()
        );
    }
}
