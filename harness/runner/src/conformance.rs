//! The library entry point: run the scenario catalogue against a host from Rust, as one call or as one named `cargo test` per scenario (libtest-mimic, feature `libtest`).
//!
//! A Rust host (codex is one) keeps a `tests/conformance.rs` of a few lines
//! (see `examples/rust-host-conformance`): the builder loads the catalogue,
//! selects, orders, starts the host per scenario and reports, as
//! `delegation-harness run` does, and [`Outcome::exit_code`] is the CLI's
//! exit code.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use delegation_host::reference::EMBEDDED_AUTHORIZER_TIMEOUT;
use delegation_host::{HostLauncher, ProcessLauncher, ReferenceLauncher};
use delegation_model::InvariantId;
use delegation_protocol::exit_code;

use crate::catalogue::{Catalogue, Filter, order};
use crate::execute::ExecOptions;
use crate::host_expectations::HostExpectations;
use crate::live_observers::LiveObservers;
use crate::report::{self, Format, Reporter};
use crate::run::{RunOptions, RunReport};

/// Why a run could not start: the message names the file, flag or command to fix.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConformanceError(String);

impl ConformanceError {
    fn new(context: &str, error: impl std::fmt::Display) -> ConformanceError {
        ConformanceError(format!("{context}: {error}"))
    }
}

enum HostSpec {
    Reference,
    Command(String),
    Launcher(Arc<dyn HostLauncher>),
}

/// A run of the catalogue against one host, configured step by step.
pub struct Conformance {
    host: HostSpec,
    catalogue: Option<PathBuf>,
    /// Scenarios already loaded (a selftest's subset), in place of `catalogue`.
    loaded: Option<Catalogue>,
    filters: Vec<String>,
    invariants: Vec<InvariantId>,
    expectations: Option<PathBuf>,
    jobs: usize,
    seed: u64,
    step_deadline: Duration,
    reports: Vec<(Format, PathBuf)>,
    reporters: Vec<Box<dyn Reporter>>,
    snapshots: Option<PathBuf>,
    interrupt: Option<tokio::sync::watch::Receiver<bool>>,
    rerun_host: Option<String>,
    /// `None`: the host's default (no hold for the embedded reference host,
    /// every hold as scripted for any other).
    max_model_hold: Option<Option<Duration>>,
    /// Whether each result keeps its transcript even where no report or
    /// snapshot reads it.
    every_transcript: bool,
}

impl Conformance {
    fn with(host: HostSpec) -> Conformance {
        Conformance {
            host,
            catalogue: None,
            loaded: None,
            filters: Vec::new(),
            invariants: Vec::new(),
            expectations: None,
            jobs: 2,
            seed: 1,
            step_deadline: ExecOptions::default().step_deadline,
            reports: Vec::new(),
            reporters: Vec::new(),
            snapshots: None,
            interrupt: None,
            rerun_host: None,
            max_model_hold: None,
            every_transcript: true,
        }
    }

    /// The embedded reference host (in-process): passes everything.
    pub fn reference_host() -> Conformance {
        Conformance::with(HostSpec::Reference)
    }

    /// A host adapter speaking host protocol v1 on stdio, as a command line
    /// (split like a POSIX shell, no shell run), e.g. the path of a test binary.
    pub fn command(command_line: impl Into<String>) -> Conformance {
        Conformance::with(HostSpec::Command(command_line.into()))
    }

    /// Any [`HostLauncher`], e.g. an in-process host of your own.
    pub fn launcher(launcher: Arc<dyn HostLauncher>) -> Conformance {
        Conformance::with(HostSpec::Launcher(launcher))
    }

    /// The scenario catalogue (a `scenarios/` folder). Required, unless [`Conformance::scenarios`] gives them.
    pub fn catalogue(mut self, dir: impl Into<PathBuf>) -> Conformance {
        self.catalogue = Some(dir.into());
        self
    }

    /// Runs these scenarios, already loaded (a subset a tool chose, such as
    /// selftest's focused one), instead of a catalogue folder; filters still
    /// select among them, with the controls they name.
    pub fn scenarios(mut self, scenarios: Vec<crate::Scenario>) -> Conformance {
        self.loaded = Some(Catalogue {
            root: PathBuf::from("(scenarios given to the builder)"),
            scenarios,
        });
        self
    }

    /// Only scenarios whose id contains this text or matches this glob; repeatable.
    pub fn filter(mut self, pattern: impl Into<String>) -> Conformance {
        self.filters.push(pattern.into());
        self
    }

    /// Only scenarios that check this invariant; repeatable.
    pub fn invariant(mut self, id: InvariantId) -> Conformance {
        self.invariants.push(id);
        self
    }

    /// Your expectations file: known failures, each with its reason.
    pub fn expectations(mut self, file: impl Into<PathBuf>) -> Conformance {
        self.expectations = Some(file.into());
        self
    }

    /// Scenarios at the same time, each with its own host, store and observers (at least 1).
    pub fn jobs(mut self, jobs: usize) -> Conformance {
        self.jobs = jobs.max(1);
        self
    }

    /// The run order's seed (default 1, so a run repeats).
    pub fn seed(mut self, seed: u64) -> Conformance {
        self.seed = seed;
        self
    }

    /// How the reports' rerun commands name the host (`--host NAME`), when
    /// it was chosen by a name rather than the command line it resolves to.
    pub fn rerun_host_as(mut self, name: impl Into<String>) -> Conformance {
        self.rerun_host = Some(name.into());
        self
    }

    /// The longest a scripted model reply is held (`--max-model-hold-ms`);
    /// `None` holds each as written. See [`RunOptions::max_model_hold`]: the
    /// embedded reference host holds none unless told otherwise, any other
    /// host every one.
    pub fn max_model_hold(mut self, longest: Option<Duration>) -> Conformance {
        self.max_model_hold = Some(longest);
        self
    }

    /// Per-step deadline for the host.
    pub fn step_deadline(mut self, deadline: Duration) -> Conformance {
        self.step_deadline = deadline;
        self
    }

    /// Also write a report file (`Format::Json`, `Junit`, `Markdown`, `Human`).
    pub fn report(mut self, format: Format, file: impl Into<PathBuf>) -> Conformance {
        self.reports.push((format, file.into()));
        self
    }

    /// Compare each scenario's normalised transcript with its snapshot under
    /// `dir` (`<area>/<NNN-name>.snap`, insta's format; `INSTA_UPDATE` as in
    /// insta); a changed one is a violation shown by every reporter.
    pub fn snapshots(mut self, dir: impl Into<PathBuf>) -> Conformance {
        self.snapshots = Some(dir.into());
        self
    }

    /// Records a scenario's transcript only when a JSON report or a snapshot
    /// check (`snapshots`) will read it; otherwise each result's transcript
    /// is empty. The CLI's `run` does this: recording, normalising and
    /// redacting transcripts that nothing reads is work on every step. A
    /// caller that reads `results[i].transcript` itself keeps the default.
    /// Without a transcript a result's `transcript` is an empty list.
    pub fn transcripts_only_where_read(mut self) -> Conformance {
        self.every_transcript = false;
        self
    }

    /// Stop the run when this turns `true` (a signal handler's doing): the
    /// adapters are killed, and the reports say what finished, marked
    /// interrupted.
    pub fn interrupt(mut self, stop: tokio::sync::watch::Receiver<bool>) -> Conformance {
        self.interrupt = Some(stop);
        self
    }

    /// Also feed the run's events to this reporter (e.g. the human one on stdout).
    pub fn reporter(mut self, reporter: Box<dyn Reporter>) -> Conformance {
        self.reporters.push(reporter);
        self
    }

    /// Loads and selects; fails on a bad catalogue, filter or expectations file.
    fn prepare(
        &self,
    ) -> Result<
        (
            Vec<crate::Scenario>,
            Arc<dyn HostLauncher>,
            HostExpectations,
        ),
        ConformanceError,
    > {
        let loaded_from_disk;
        let catalogue = match (&self.loaded, self.catalogue.as_deref()) {
            (Some(given), _) => given,
            (None, Some(root)) => {
                loaded_from_disk =
                    Catalogue::load(root).map_err(|e| ConformanceError(e.to_string()))?;
                &loaded_from_disk
            }
            (None, None) => {
                return Err(ConformanceError(
                    "no catalogue: call .catalogue(\"path/to/scenarios\")".into(),
                ));
            }
        };
        let root = &catalogue.root;
        let filter = Filter::new(&self.filters, &self.invariants)
            .map_err(|e| ConformanceError(e.to_string()))?;
        let selected = catalogue.select(&filter);
        if selected.is_empty() {
            return Err(ConformanceError(format!(
                "no scenario in {} matches the filters ({} in the catalogue)",
                root.display(),
                catalogue.scenarios.len()
            )));
        }
        for (_, file) in &self.reports {
            report::check_writable(file).map_err(|e| ConformanceError(e.to_string()))?;
        }
        let scenarios = order(&selected, self.seed).into_iter().cloned().collect();
        let expectations = match &self.expectations {
            Some(file) => {
                HostExpectations::load(file).map_err(|e| ConformanceError(e.to_string()))?
            }
            None => HostExpectations::default(),
        };
        let launcher: Arc<dyn HostLauncher> = match &self.host {
            HostSpec::Reference => Arc::new(ReferenceLauncher {
                authorizer_timeout: EMBEDDED_AUTHORIZER_TIMEOUT,
                ..ReferenceLauncher::default()
            }),
            HostSpec::Launcher(l) => l.clone(),
            HostSpec::Command(command) => {
                process_launcher(command, self.step_deadline, &expectations)
                    .map_err(|e| ConformanceError::new(&format!("host `{command}`"), e))?
            }
        };
        Ok((scenarios, launcher, expectations))
    }

    /// Runs the selection and writes the reports.
    pub async fn run(mut self) -> Result<Outcome, ConformanceError> {
        let (scenarios, launcher, expectations) = self.prepare()?;
        let options = RunOptions {
            jobs: self.jobs,
            seed: self.seed,
            exec: ExecOptions {
                step_deadline: self.step_deadline,
                transcript: self.every_transcript
                    || self.snapshots.is_some()
                    || self
                        .reports
                        .iter()
                        .any(|(format, _)| format.reads_transcripts()),
                ..ExecOptions::default()
            },
            // The embedded host does all of an action's work before it
            // answers: a hold would only be waited out.
            max_model_hold: self.max_model_hold.unwrap_or(match self.host {
                HostSpec::Reference => Some(Duration::ZERO),
                _ => None,
            }),
            expectations,
            snapshots: self.snapshots.clone(),
            rerun: crate::report::Rerun {
                host: self.rerun_host.clone(),
                expectations: self.expectations.clone(),
                ..crate::report::Rerun::default()
            },
        };
        let mut reporters = std::mem::take(&mut self.reporters);
        for (format, file) in &self.reports {
            reporters.push(report::file_reporter(*format, file.clone()));
        }
        let (events, rx) = tokio::sync::mpsc::unbounded_channel();
        let reporting = tokio::spawn(report::drain(rx, reporters));
        // Without an interrupt of the caller's, one that never fires: its
        // sender lives until the run ends.
        let (_keep, never) = tokio::sync::watch::channel(false);
        let interrupt = self.interrupt.take().unwrap_or(never);
        let report = crate::run(
            scenarios,
            launcher,
            Arc::new(LiveObservers),
            options,
            events,
            interrupt,
        )
        .await;
        reporting
            .await
            .map_err(|e| ConformanceError::new("a reporter panicked", e))?
            .map_err(|e| ConformanceError::new("cannot write a report", e))?;
        Ok(Outcome { report })
    }

    /// [`Conformance::run`] on a runtime of its own, for code that is not async.
    pub fn run_blocking(self) -> Result<Outcome, ConformanceError> {
        tokio::runtime::Runtime::new()
            .map_err(|e| ConformanceError::new("cannot start the async runtime", e))?
            .block_on(self.run())
    }

    /// A `cargo test` harness (`[[test]] harness = false`): runs the selection
    /// once, then reports each scenario as a named test: a pass passes, a
    /// failure, error, stale expectation, inconclusive or unverified result
    /// fails with its evidence, an unsupported or known result is ignored
    /// (with its reason in the test name's listing). libtest's own filter
    /// (`cargo test --test conformance -- zc/`) selects scenarios before
    /// anything runs.
    #[cfg(feature = "libtest")]
    pub fn libtest_main(mut self) -> std::process::ExitCode {
        let args = libtest_mimic::Arguments::from_args();
        if let Some(filter) = &args.filter {
            self.filters.push(filter.clone());
        }
        let outcome = match self.run_blocking() {
            Ok(outcome) => outcome,
            Err(e) => {
                eprintln!("conformance: {e}");
                return std::process::ExitCode::from(exit_code::HARNESS_ERROR as u8);
            }
        };
        let s = &outcome.report.summary;
        let nothing_ran = s.ran == 0 && s.total > 0;
        let mut trials: Vec<libtest_mimic::Trial> =
            outcome.report.results.iter().map(trial).collect();
        if nothing_ran {
            trials.push(libtest_mimic::Trial::test("nothing ran", || {
                Err("every selected scenario is unsupported by this host: declare the capabilities it really has".into())
            }));
        }
        // The run already applied the filter; libtest must not drop the results again.
        let args = libtest_mimic::Arguments {
            filter: None,
            ..args
        };
        libtest_mimic::run(&args, trials).exit_code()
    }
}

/// What one scenario's result is as a test: pass, ignored (unsupported or
/// listed in the expectations file), or failed with its evidence.
#[derive(Debug, PartialEq, Eq)]
pub enum TestOutcome {
    Passed,
    Ignored,
    Failed(String),
}

/// A failure, error, stale expectation, inconclusive or unverified result
/// fails: none of them is a pass, and the run's exit code says the same. So
/// does a changed snapshot, whatever the verdict.
pub fn test_outcome(result: &crate::ScenarioResult) -> TestOutcome {
    use crate::Verdict;
    if let Some(change) = report::snapshot_change(result) {
        return TestOutcome::Failed(format!(
            "{}: snapshot changed ({}): {change}",
            result.id,
            result.verdict.name()
        ));
    }
    match &result.verdict {
        Verdict::Pass => TestOutcome::Passed,
        Verdict::Unsupported { .. } | Verdict::KnownFailure { .. } => TestOutcome::Ignored,
        other => {
            let mut text = format!("{}: {}", result.id, other.name());
            for failure in &result.failures {
                text.push_str("\n  ");
                text.push_str(&report::failure_line(failure));
            }
            TestOutcome::Failed(text)
        }
    }
}

#[cfg(feature = "libtest")]
fn trial(result: &crate::ScenarioResult) -> libtest_mimic::Trial {
    let kind = format!("{} {}", result.tier, result.area);
    let outcome = test_outcome(result);
    let ignored = outcome == TestOutcome::Ignored;
    libtest_mimic::Trial::test(result.id.clone(), move || match outcome {
        TestOutcome::Failed(text) => Err(text.into()),
        TestOutcome::Passed | TestOutcome::Ignored => Ok(()),
    })
    .with_kind(kind)
    .with_ignored_flag(ignored)
}

/// The subprocess host for an adapter command line, as every entry point
/// runs one: the step deadline as its request timeout, and the host's own
/// deny-reason names translated through its expectations file before its
/// results are decoded.
pub fn process_launcher(
    command: &str,
    step_deadline: Duration,
    expectations: &HostExpectations,
) -> Result<Arc<dyn HostLauncher>, delegation_host::HostError> {
    let map = expectations.clone();
    let translate = delegation_host::process::ResultTranslator(Arc::new(move |raw| {
        map.translate_reply(raw)
            .map_err(|unmapped| unmapped.to_string())
    }));
    let options = delegation_host::process::ProcessOptions {
        request_timeout: step_deadline,
        translate_result: Some(translate),
        ..Default::default()
    };
    Ok(Arc::new(ProcessLauncher::new(command, options)?))
}

/// A finished run.
pub struct Outcome {
    pub report: RunReport,
}

impl Outcome {
    /// The exit code `delegation-harness run` gives the same results ([`exit_code_for`]).
    pub fn exit_code(&self) -> i32 {
        exit_code_for(&self.report)
    }
}

/// The exit code of a run, the one definition the CLI and the library
/// share: 2 when nothing ran (every selected scenario unsupported), when the
/// host could not be reached, or when the run was interrupted or the harness
/// itself failed without a violation; 1 on violations (failures, errors,
/// stale expectations, changed snapshots); 3 when only inconclusive or
/// unverified results are left; else 0.
pub fn exit_code_for(report: &RunReport) -> i32 {
    let s = &report.summary;
    if s.ran == 0 && s.total > 0 && !report.interrupted && !report.host_unreachable {
        return exit_code::HARNESS_ERROR;
    }
    let violations = s.fail + s.error + s.stale + s.snapshot_changed;
    let host_violations = s.fail + s.stale + s.snapshot_changed;
    if report.host_unreachable && host_violations == 0 {
        // A host that cannot be started says nothing about itself.
        exit_code::HARNESS_ERROR
    } else if (report.interrupted || s.harness_error > 0) && violations == 0 {
        exit_code::HARNESS_ERROR
    } else {
        // An unverified check could not tell, like an inconclusive negative.
        exit_code::for_run(false, violations, s.inconclusive + s.unverified)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn catalogue() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
    }

    #[test]
    fn the_reference_host_passes_a_selection_through_the_builder() {
        let outcome = Conformance::reference_host()
            .catalogue(catalogue())
            .filter("zc/00*")
            .run_blocking()
            .unwrap();
        assert!(
            outcome.report.summary.ran >= 5,
            "{:?}",
            outcome.report.summary
        );
        assert_eq!(outcome.exit_code(), exit_code::SUCCESS);
    }

    #[test]
    fn scenarios_given_to_the_builder_run_in_place_of_a_catalogue_and_filters_still_select() {
        let loaded = Catalogue::load(&catalogue()).unwrap().scenarios;
        let chosen: Vec<crate::Scenario> = loaded
            .into_iter()
            .filter(|s| s.id.starts_with("tr/00"))
            .collect();
        let given = chosen.len();
        assert!(given >= 4, "{given}");
        let mutant = ReferenceLauncher {
            defect: Some(delegation_host::mutants::Defect::FollowupAfterClose),
            ..Default::default()
        };
        let all = Conformance::launcher(Arc::new(mutant))
            .scenarios(chosen.clone())
            .run_blocking()
            .unwrap();
        assert_eq!(all.report.results.len(), given);
        assert_eq!(all.exit_code(), exit_code::VIOLATIONS);
        let one = Conformance::reference_host()
            .scenarios(chosen)
            .filter("tr/001-*")
            .run_blocking()
            .unwrap();
        assert_eq!(one.report.results.len(), 1, "{:?}", one.report.summary);
        assert_eq!(one.exit_code(), exit_code::SUCCESS);
    }

    /// Transcripts nothing reads are left out; a JSON report or a snapshot
    /// check brings them back, and a library caller gets them by default.
    #[test]
    fn transcripts_are_recorded_only_where_something_reads_them() {
        let steps_of = |run: Conformance| {
            let outcome = run
                .catalogue(catalogue())
                .filter("tr/001-*")
                .run_blocking()
                .unwrap();
            assert_eq!(outcome.exit_code(), exit_code::SUCCESS);
            let [result] = &outcome.report.results[..] else {
                panic!("one scenario: {:?}", outcome.report.summary);
            };
            result.transcript.as_array().map_or(0, Vec::len)
        };
        assert!(
            steps_of(Conformance::reference_host()) > 0,
            "the default keeps them"
        );
        let unread = Conformance::reference_host().transcripts_only_where_read();
        assert_eq!(steps_of(unread), 0, "nothing reads them");

        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("r.json");
        let json = Conformance::reference_host()
            .transcripts_only_where_read()
            .report(Format::Json, report.clone());
        assert!(steps_of(json) > 0, "the JSON report reads them");
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        assert!(
            !written["scenarios"][0]["transcript"]
                .as_array()
                .unwrap()
                .is_empty(),
            "{written}"
        );
        let snapshots = Conformance::reference_host()
            .transcripts_only_where_read()
            .snapshots(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../snapshots"));
        assert!(steps_of(snapshots) > 0, "the snapshot check reads them");
    }

    #[test]
    fn without_a_catalogue_or_scenarios_the_builder_says_what_to_call() {
        let Err(e) = Conformance::reference_host().run_blocking() else {
            panic!("a run with nothing to run started");
        };
        assert!(e.to_string().contains(".catalogue("), "{e}");
    }

    #[test]
    fn a_broken_host_exits_with_violations_and_its_failures_are_failed_tests() {
        let mutant = ReferenceLauncher {
            defect: Some(delegation_host::mutants::Defect::FollowupAfterClose),
            ..Default::default()
        };
        let outcome = Conformance::launcher(Arc::new(mutant))
            .catalogue(catalogue())
            .filter("tr/002-*")
            .filter("tr/001-*")
            .run_blocking()
            .unwrap();
        assert_eq!(outcome.exit_code(), exit_code::VIOLATIONS);
        let tests: Vec<(String, TestOutcome)> = outcome
            .report
            .results
            .iter()
            .map(|r| (r.id.clone(), test_outcome(r)))
            .collect();
        let failed = tests
            .iter()
            .find(|(id, _)| id.starts_with("tr/002-"))
            .map(|(_, t)| t);
        assert!(
            matches!(failed, Some(TestOutcome::Failed(text)) if text.contains("steps[")),
            "{tests:?}"
        );
        let control = tests.iter().find(|(id, _)| id.starts_with("tr/001-"));
        assert_eq!(control.map(|(_, t)| t), Some(&TestOutcome::Passed));
    }

    #[test]
    fn a_changed_snapshot_fails_its_test_whatever_the_verdict() {
        let outcome = Conformance::reference_host()
            .catalogue(catalogue())
            .filter("tr/001-*")
            .run_blocking()
            .unwrap();
        let mut result = outcome.report.results[0].clone();
        assert_eq!(test_outcome(&result), TestOutcome::Passed, "the control");
        result.snapshot = Some(crate::SnapshotCheck::Changed {
            message: "line 3 differs".into(),
        });
        assert!(
            matches!(test_outcome(&result), TestOutcome::Failed(text) if text.contains("snapshot changed (pass): line 3 differs")),
            "{:?}",
            test_outcome(&result)
        );
    }

    #[test]
    fn bad_input_is_named() {
        let e = Conformance::reference_host().run_blocking().err().unwrap();
        assert!(e.to_string().contains(".catalogue("), "{e}");
        let e = Conformance::reference_host()
            .catalogue(catalogue())
            .filter("no-such-scenario")
            .run_blocking()
            .err()
            .unwrap();
        assert!(e.to_string().contains("no scenario in"), "{e}");
        let e = Conformance::reference_host()
            .catalogue(catalogue())
            .expectations("/nonexistent/expectations.json")
            .run_blocking()
            .err()
            .unwrap();
        assert!(
            e.to_string().contains("/nonexistent/expectations.json"),
            "{e}"
        );
    }

    /// The JSON report names what a rerun repeats: the host as it was
    /// chosen (a name, when one was given), the seed and the expectations
    /// file; without a name, the embedded reference host needs no `--host`.
    #[test]
    fn the_report_names_what_a_rerun_repeats() {
        let rerun_of = |named: bool| {
            let dir = tempfile::tempdir().unwrap();
            let expectations = dir.path().join("expectations.json");
            std::fs::write(&expectations, r#"{"known": []}"#).unwrap();
            let report = dir.path().join("r.json");
            let mut run = Conformance::reference_host()
                .catalogue(catalogue())
                .filter("zc/001-*")
                .seed(9)
                .expectations(&expectations)
                .report(Format::Json, report.clone());
            if named {
                run = run.rerun_host_as("my-host");
            }
            run.run_blocking().unwrap();
            let json: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
            (json["rerun"].clone(), expectations)
        };
        let (rerun, expectations) = rerun_of(true);
        assert_eq!(rerun["host"], "my-host");
        assert_eq!(rerun["seed"], 9);
        assert_eq!(rerun["expectations"], expectations.to_str().unwrap());
        assert!(rerun["snapshots"].is_null());
        let (rerun, _) = rerun_of(false);
        assert!(rerun["host"].is_null(), "{rerun}");
    }
}
