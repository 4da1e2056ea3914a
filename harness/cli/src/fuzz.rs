//! `delegation-harness fuzz`: differential fuzzing of any host against the model, shrunk to a scenario file.
//!
//! Each case is a proptest-generated [`Op`] sequence. The model's world
//! applies it and predicts every decision and observation; the sequence
//! becomes a scenario whose expectations are those predictions
//! ([`delegation_runner::differential::translate`], shared with the cargo-fuzz
//! target); the runner executes it against the host with the real
//! observers and every invariant checker over the host's own history. A
//! case that fails is shrunk ([`sequence::shrink`]), confirmed against the
//! host again and against the reference host, and written where
//! `delegation-harness run --scenarios DIR` replays it.

pub mod kill_matrix;
pub mod search;
pub mod sequence;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use delegation_host::mutants::Defect;
use delegation_host::{HostLauncher, ReferenceLauncher};
use delegation_model::fuzzing::Op;
use delegation_runner::differential::summary::{FuzzFinding, FuzzSummary};
use delegation_runner::differential::{CaseResult, failing_op, run_ops, run_scenario, translate};
use delegation_runner::execute::ExecOptions;
use delegation_runner::{Scenario, exit_code};
use futures_util::FutureExt;

pub use search::search;
use sequence::{Sequence, ShrinkStats, Verdict};

#[derive(Args, Clone, Debug)]
pub struct FuzzArgs {
    /// The host adapter to fuzz, as a command line (split like a POSIX shell,
    /// no shell run), or a shipped adapter's name (`opencode`, `codex`, `claude-code`, `copilot`, `gemini-cli`, `qwen-code`).
    /// Default: the embedded reference host.
    #[arg(long, value_name = "CMD|NAME")]
    pub host: Option<String>,
    /// Fuzz the embedded reference host with this deliberate defect (a mutant; see `selftest`).
    #[arg(long, value_name = "NAME", conflicts_with = "host")]
    pub defect: Option<Defect>,
    /// Seed of the generated cases. Default: from the clock, printed so a run can be repeated.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Cases to run at most.
    #[arg(long, default_value_t = 200, value_name = "N")]
    pub cases: u64,
    /// Longest operation sequence of one case.
    #[arg(long, default_value_t = 48, value_name = "N")]
    pub max_ops: usize,
    /// Shortest operation sequence of one case (the benchmark sets it to `--max-ops`).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub min_ops: usize,
    /// Stop starting new cases after this many seconds (shrinking a finding may take longer).
    #[arg(long, value_name = "SECONDS")]
    pub time: Option<f64>,
    /// Cases run at the same time, each with its own host, store and observers on a thread of
    /// its own (1 to 4096). Results are read in the order the cases were generated, so a seed
    /// finds the same first failing case whatever the jobs.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = crate::parse_jobs)]
    pub jobs: usize,
    /// Where findings are written, as `<DIR>/fuzz/NNN-name.json` (a scenario catalogue).
    #[arg(long, default_value = "fuzz-findings", value_name = "DIR")]
    pub out: PathBuf,
    /// Wall-time budget of one step, in milliseconds (1 to 86400000): a host slower than this is a finding.
    #[arg(long, default_value_t = 10_000, value_name = "MS", value_parser = crate::parse_step_timeout_ms)]
    pub step_timeout_ms: u64,
    /// Upper bound on the time spent shrinking one finding, in seconds.
    #[arg(long, default_value_t = 120, value_name = "SECONDS")]
    pub shrink_time: u64,
    /// Also write the run's summary (counts, the generator's reach, findings)
    /// as JSON, which `--merge` reads.
    #[arg(long, value_name = "FILE")]
    pub summary: Option<PathBuf>,
    /// Fuzz nothing: merge these runs' `--summary` files (a CI matrix's seed
    /// partitions) into one report, printed, and written as JSON by
    /// `--summary` and as markdown by `--report`. Repeatable.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["host", "defect", "seed"])]
    pub merge: Vec<PathBuf>,
    /// With `--merge`: the merged report as markdown.
    #[arg(long, value_name = "FILE", requires = "merge")]
    pub report: Option<PathBuf>,
}

/// Running totals for the progress line and the summary.
#[derive(Clone, Debug, Default)]
pub struct Totals {
    pub cases: u64,
    pub ops: u64,
    pub steps: u64,
    /// Cases the host could not run (a capability it lacks).
    pub unsupported: u64,
    /// Cases cut short because an operation has no faithful scenario step.
    pub shortened: u64,
    pub findings: u64,
    pub elapsed: Duration,
}

impl Totals {
    pub fn ops_per_second(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// The text of a caught panic.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Shrinks a failing sequence against `launcher`, until the budget runs out
/// or `stop` is set. A panic anywhere in it (the shrinker, the model, the
/// host in-process, the runner) is caught and returned as an error: the
/// finding it was shrinking is never lost to it.
pub async fn shrink_failure(
    seq: Sequence,
    fail_at: usize,
    launcher: &dyn HostLauncher,
    exec: &ExecOptions,
    max_time: Duration,
    stop: &AtomicBool,
) -> Result<(Vec<Op>, ShrinkStats), String> {
    std::panic::AssertUnwindSafe(shrink_unguarded(
        seq, fail_at, launcher, exec, max_time, stop,
    ))
    .catch_unwind()
    .await
    .map_err(|panic| format!("the shrinker panicked: {}", panic_message(&*panic)))
}

async fn shrink_unguarded(
    seq: Sequence,
    fail_at: usize,
    launcher: &dyn HostLauncher,
    exec: &ExecOptions,
    max_time: Duration,
    stop: &AtomicBool,
) -> (Vec<Op>, ShrinkStats) {
    sequence::shrink(
        seq,
        fail_at,
        10_000,
        max_time,
        stop,
        |candidate| async move {
            let (translation, result) = run_ops(&candidate, launcher, exec).await;
            match result {
                CaseResult::Fail { step, .. } => Verdict::FailAt(failing_op(&translation, step)),
                _ => Verdict::Pass,
            }
        },
    )
    .await
}

fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').chars().take(40).collect::<String>()
}

/// The next free `NNN` in `dir`.
fn next_number(dir: &Path) -> u32 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.get(..3)?.parse::<u32>().ok()
        })
        .max()
        .map_or(1, |n| n + 1)
}

/// The finding as a catalogue scenario at `<out>/fuzz/NNN-name.json`; `replaces`
/// is an earlier file of the same finding (written before shrinking), whose
/// number is kept and which is removed once the new file is written.
pub fn write_finding(
    out: &Path,
    ops: &[Op],
    message: &str,
    step: usize,
    provenance: &str,
    replaces: Option<&Path>,
) -> anyhow::Result<(PathBuf, Scenario)> {
    let dir = out.join("fuzz");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let probe = translate(ops, "fuzz/000-case", "");
    let key = probe
        .scenario
        .steps
        .get(step)
        .map(|s| s.action.key())
        .unwrap_or("step");
    let what = message.split(':').next().unwrap_or("divergence");
    let name = format!(
        "{:03}-{}",
        replaces
            .and_then(|f| f.file_name()?.to_str()?.get(..3)?.parse::<u32>().ok())
            .unwrap_or_else(|| next_number(&dir)),
        slug(&format!(
            "{key} {}",
            what.replace("steps[", "").replace(']', "")
        ))
    );
    let id = format!("fuzz/{name}");
    let title = format!(
        "The host agrees with the model on a sequence {provenance} shrank to {} operations (it diverged at step {step}: {})",
        ops.len(),
        message.chars().take(160).collect::<String>()
    );
    let mut scenario = translate(ops, &id, &title).scenario;
    if let Some(s) = scenario.steps.get_mut(step) {
        s.note = Some(format!(
            "the fuzzed host diverged from the model here: {}",
            message.chars().take(300).collect::<String>()
        ));
    }
    let file = dir.join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(&scenario)? + "\n";
    // Written only if it loads back as the runner will load it.
    Scenario::parse(&text, &file)?.validate(&file)?;
    std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
    if let Some(earlier) = replaces.filter(|earlier| *earlier != file) {
        std::fs::remove_file(earlier)
            .with_context(|| format!("removing the unshrunk {}", earlier.display()))?;
    }
    Ok((file, scenario))
}

fn launcher_for(args: &FuzzArgs, exec: &ExecOptions) -> anyhow::Result<Arc<dyn HostLauncher>> {
    Ok(match (&args.host, args.defect) {
        (Some(host), _) => {
            // A shipped adapter's name brings its deny-reason names along,
            // read from its expectations file as `run` reads them.
            let host = crate::shipped_hosts::resolve_here(host)?;
            let expectations = match &host.expectations {
                Some(file) => delegation_runner::HostExpectations::load(file)?,
                None => delegation_runner::HostExpectations::default(),
            };
            crate::launcher(Some(&host.command), exec.step_deadline, &expectations)?
        }
        (None, defect) => Arc::new(ReferenceLauncher {
            defect,
            ..Default::default()
        }),
    })
}

/// `fuzz --merge`: several runs' summaries as one report.
fn merge(args: &FuzzArgs) -> anyhow::Result<i32> {
    let mut merged = FuzzSummary::default();
    for file in &args.merge {
        merged.merge(&FuzzSummary::load(file).map_err(anyhow::Error::msg)?);
    }
    let markdown = merged.markdown();
    anstream::println!("{markdown}");
    if let Some(file) = &args.report {
        std::fs::write(file, &markdown)
            .with_context(|| format!("cannot write the merged report {}", file.display()))?;
    }
    if let Some(file) = &args.summary {
        std::fs::write(file, serde_json::to_string_pretty(&merged)? + "\n")
            .with_context(|| format!("cannot write the merged summary {}", file.display()))?;
    }
    Ok(if merged.findings.is_empty() {
        exit_code::SUCCESS
    } else {
        exit_code::VIOLATIONS
    })
}

/// The `fuzz` subcommand; the exit code says whether anything was found.
pub fn fuzz(args: FuzzArgs) -> anyhow::Result<i32> {
    if !args.merge.is_empty() {
        return merge(&args);
    }
    if args.max_ops == 0 {
        bail!("--max-ops must be at least 1");
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    });
    let exec = ExecOptions {
        step_deadline: Duration::from_millis(args.step_timeout_ms),
        ..ExecOptions::default()
    };
    let launcher = launcher_for(&args, &exec)?;
    // One thread: a case's host, observers and checks hand work to each
    // other all the time, and on a multi-threaded runtime each hand-off
    // wakes another worker. In-process fuzzing went from 900 to 1,430
    // operations a second this way (load 1.2 to 1.9).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(fuzz_async(args, seed, exec, launcher))
}

async fn fuzz_async(
    args: FuzzArgs,
    seed: u64,
    exec: ExecOptions,
    launcher: Arc<dyn HostLauncher>,
) -> anyhow::Result<i32> {
    anstream::println!(
        "fuzzing {} with seed {seed}: up to {} cases of up to {} operations{}",
        launcher.describe(),
        args.cases,
        args.max_ops,
        args.time
            .map(|t| format!(", for {t} s"))
            .unwrap_or_default()
    );
    let started = Instant::now();
    let deadline = args
        .time
        .map(|t| started + Duration::from_secs_f64(t.max(0.0)));
    // Ctrl-C, SIGTERM (a nightly job cancelled) or SIGHUP ends the run
    // between cases, or a shrink where it stands, and the summary (and any
    // finding, shrunk so far) is still written; a second signal quits at once.
    let stop = Arc::new(AtomicBool::new(false));
    let mut signals = crate::stop_signals::StopSignals::install()?;
    tokio::spawn({
        let stop = stop.clone();
        async move {
            let signal = signals.next().await;
            stop.store(true, Ordering::SeqCst);
            anstream::println!(
                "{signal}: finishing the current case (a second signal quits at once)"
            );
            signals.next().await;
            std::process::exit(exit_code::HARNESS_ERROR);
        }
    });
    let mut last_progress = Instant::now();
    let mut found = None;
    let search = search(
        seed,
        (args.min_ops, args.max_ops),
        args.cases,
        deadline,
        args.jobs,
        &launcher,
        &exec,
        &stop,
        |totals| {
            if last_progress.elapsed() >= Duration::from_secs(2) {
                last_progress = Instant::now();
                anstream::println!(
                    "  {} cases, {} operations, {:.0} operations/s",
                    totals.cases,
                    totals.ops,
                    totals.ops_per_second()
                );
            }
        },
    )
    .await;
    if let Some(message) = search.harness_error {
        bail!("the harness failed, not the host: {message}")
    }
    let mut totals = search.totals;
    let mut summary = FuzzSummary {
        host: launcher.describe(),
        seeds: vec![seed],
        reach: search.reach,
        ..FuzzSummary::default()
    };
    if let Some(finding) = search.finding {
        anstream::println!(
            "case {} failed at operation {} of {} (step {}): {}",
            totals.cases,
            finding.at,
            finding.seq.len(),
            finding.step,
            finding.message
        );
        // The finding is on disk before anything risky is done with
        // it: a shrink that crashes, hangs or is killed leaves the
        // unshrunk case behind.
        let provenance = format!("`delegation-harness fuzz --seed {seed}` found (not shrunk yet)");
        let (file, _) = write_finding(
            &args.out,
            &finding.seq.ops(),
            &finding.message,
            finding.step,
            &provenance,
            None,
        )?;
        anstream::println!("written before shrinking: {}", file.display());
        found = Some((finding.seq, finding.at, file, finding.message));
    }
    let failure = found;
    let fuzz_time = totals.elapsed;

    let mut code = exit_code::SUCCESS;
    if let Some((seq, at, unshrunk, finding_message)) = failure {
        totals.findings = 1;
        code = exit_code::VIOLATIONS;
        let from = seq.len();
        let unshrunk_message = finding_message.clone();
        summary.findings.push(FuzzFinding {
            seed,
            file: unshrunk.display().to_string(),
            message: unshrunk_message,
            operations: from,
            shrunk_operations: None,
        });
        anstream::println!("shrinking {from} operations ...");
        let shrunk = shrink_failure(
            seq,
            at,
            launcher.as_ref(),
            &exec,
            Duration::from_secs(args.shrink_time),
            &stop,
        )
        .await;
        let (ops, stats) = match shrunk {
            Ok(shrunk) => shrunk,
            Err(panic) => {
                anstream::println!(
                    "{panic}; the unshrunk finding is kept in {}",
                    unshrunk.display()
                );
                return finish(&args, totals, fuzz_time, summary, &stop, code);
            }
        };
        anstream::println!(
            "shrunk {} -> {} operations in {} runs, {:.2} s{}: {ops:?}",
            stats.from,
            stats.to,
            stats.runs,
            stats.elapsed.as_secs_f64(),
            if stats.interrupted {
                " (interrupted: the shortest failing sequence so far)"
            } else {
                ""
            }
        );
        // Confirm on the shrunk sequence: it fails the host and passes the reference.
        let (translation, result) = run_ops(&ops, launcher.as_ref(), &exec).await;
        let (step, message) = match result {
            CaseResult::Fail { step, message } => (step, message),
            other => bail!(
                "the shrunk sequence no longer fails the host ({other:?}); the host is not deterministic. The unshrunk finding is kept in {}. Shrunk sequence: {ops:?}",
                unshrunk.display()
            ),
        };
        let provenance = format!("`delegation-harness fuzz --seed {seed}` found and");
        let (file, _) = write_finding(
            &args.out,
            &ops,
            &message,
            step,
            &provenance,
            Some(&unshrunk),
        )?;
        let (reference, _) =
            run_scenario(&translation.scenario, &ReferenceLauncher::default(), &exec).await;
        anstream::println!("finding: {message}");
        anstream::println!("written: {}", file.display());
        if let Some(f) = summary.findings.last_mut() {
            f.file = file.display().to_string();
            f.message = message.clone();
            f.shrunk_operations = Some(ops.len());
        }
        match reference {
            CaseResult::Pass => anstream::println!("the correct reference host passes it"),
            other => anstream::println!(
                "warning: the correct reference host does not pass it either ({other:?}): the model and the reference host disagree"
            ),
        }
        let host = match (&args.host, args.defect) {
            (Some(host), _) => format!(" --host {}", shell_words::quote(host)),
            (None, Some(defect)) => format!(
                " --host 'delegation-reference-host --defect {}'",
                defect.name()
            ),
            (None, None) => String::new(),
        };
        anstream::println!(
            "replay: delegation-harness run --scenarios {}{host}",
            args.out.display()
        );
    }
    finish(&args, totals, fuzz_time, summary, &stop, code)
}

/// The summary line, the reach, and the `--summary` file.
fn finish(
    args: &FuzzArgs,
    totals: Totals,
    fuzz_time: Duration,
    mut summary: FuzzSummary,
    stop: &AtomicBool,
    mut code: i32,
) -> anyhow::Result<i32> {
    let interrupted = stop.load(Ordering::SeqCst);
    if interrupted && totals.findings == 0 {
        // As for an interrupted `run`: the cases asked for did not all run.
        code = exit_code::HARNESS_ERROR;
    }
    anstream::println!(
        "summary{}: {} cases, {} operations ({} steps) in {:.1} s, {:.0} operations/s; {} unsupported, {} shortened; {} finding(s)",
        if interrupted { " (interrupted)" } else { "" },
        totals.cases,
        totals.ops,
        totals.steps,
        fuzz_time.as_secs_f64(),
        totals.ops as f64 / fuzz_time.as_secs_f64().max(1e-9),
        totals.unsupported,
        totals.shortened,
        totals.findings
    );
    anstream::println!("{}", summary.reach.summary());
    summary.cases = totals.cases;
    summary.operations = totals.ops;
    summary.steps = totals.steps;
    summary.unsupported = totals.unsupported;
    summary.shortened = totals.shortened;
    summary.seconds = fuzz_time.as_secs_f64();
    summary.interrupted = interrupted;
    if let Some(file) = &args.summary {
        std::fs::write(file, serde_json::to_string_pretty(&summary)? + "\n")
            .with_context(|| format!("cannot write the fuzz summary {}", file.display()))?;
    }
    Ok(code)
}
