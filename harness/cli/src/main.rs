//! The `delegation-harness` command line: clap at the edge, everything else in `delegation_runner`.
//!
//! Exit codes are `delegation_protocol::exit_code`: 0 all passed, 1
//! violations (fail, error, stale, changed snapshot), 2 harness or usage
//! error (also an interrupted run without violations: nothing was proven),
//! 3 inconclusive only.

mod fuzz;
mod matrix;
mod selftest;
mod shipped_hosts;
mod stop_signals;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use delegation_host::{HostLauncher, ReferenceLauncher};
use delegation_model::InvariantId;
use delegation_runner::catalogue::Catalogue;
use delegation_runner::report::{Format, human::HumanReporter};
use delegation_runner::{Conformance, HostExpectations, Scenario, exit_code};

#[derive(Parser)]
#[command(
    name = "delegation-harness",
    version,
    about = "Conformance harness for agent hosts that delegate work to subagents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run scenarios against a host and report invariant by invariant.
    Run(RunArgs),
    /// List scenarios (or, with --invariants, the invariant ids).
    List(ListArgs),
    /// Explain an invariant: what must hold, its family and tier, and the scenarios that check it.
    Explain {
        /// An invariant id such as ZC1.
        id: InvariantId,
        #[command(flatten)]
        catalogue: CatalogueArgs,
    },
    /// Measure the catalogue: run it against the correct reference host and
    /// against deliberately broken ones, and print which mutants it kills.
    Selftest(selftest::SelftestArgs),
    /// Differential fuzzing: generated operation sequences run against the
    /// model and the host; a divergence is shrunk and written as a scenario.
    Fuzz(fuzz::FuzzArgs),
    /// Compare hosts: JSON reports side by side as one static HTML page
    /// (invariant by host, each scenario's evidence and rerun command) and a
    /// badge per host.
    Report(matrix::ReportArgs),
}

#[derive(Args)]
struct CatalogueArgs {
    /// The scenario catalogue. Default: the nearest `scenarios/` directory
    /// from the current directory upwards.
    #[arg(long, value_name = "DIR")]
    scenarios: Option<PathBuf>,
}

#[derive(Args)]
struct RunArgs {
    /// The host adapter to run, as a command line (split like a POSIX shell,
    /// no shell run), or the name of an adapter shipped in `harness/adapters/`
    /// (`opencode`, `codex`, `claude-code`, `copilot`, `gemini-cli`, `qwen-code`), which also selects its committed expectations
    /// file unless --expectations is given. Default: the embedded reference host.
    #[arg(long, value_name = "CMD|NAME")]
    host: Option<String>,
    #[command(flatten)]
    catalogue: CatalogueArgs,
    /// Run scenarios whose id contains this text, or matches this glob (`zc/*`). Repeatable.
    #[arg(long, value_name = "PATTERN")]
    filter: Vec<String>,
    /// Run scenarios that check this invariant id. Repeatable.
    #[arg(long, value_name = "ID")]
    invariant: Vec<InvariantId>,
    /// Scenarios run at the same time, each with its own host, store and observers (1 to 4096).
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = parse_jobs)]
    jobs: usize,
    /// Seed of the run order. Default: random, printed at the start so a run can be repeated.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Write a report: FORMAT is json, junit, markdown or human. Repeatable.
    #[arg(long, value_name = "FORMAT=FILE", value_parser = parse_report)]
    report: Vec<(Format, PathBuf)>,
    /// Known failures of this host (JSON: {"known": [{"scenario", "expect", "reason"}]}).
    #[arg(long, value_name = "FILE")]
    expectations: Option<PathBuf>,
    /// Compare each scenario's normalised transcript with `DIR/<area>/<NNN-name>.snap`
    /// (insta; `INSTA_UPDATE=always` records, `no` only compares).
    #[arg(long, value_name = "DIR")]
    snapshots: Option<PathBuf>,
    /// Wall-time budget of one step, in milliseconds (1 to 86400000, a day).
    #[arg(long, default_value_t = 30_000, value_name = "MS", value_parser = parse_step_timeout_ms)]
    step_timeout_ms: u64,
    /// Hold no scripted model reply longer than this (milliseconds; 0 holds
    /// none). A hold gives a host that works on after it answered the time
    /// to show it; a host that answers only when an action's work is done
    /// does not need it. Default: none for the embedded reference host,
    /// every hold as scripted for `--host`.
    #[arg(long, value_name = "MS")]
    max_model_hold_ms: Option<u64>,
    /// Fail the run (exit 2) unless at least N scenarios really ran (pass,
    /// fail, error, unverified or inconclusive; not unsupported): a CI gate
    /// against an adapter that quietly stops declaring what it can do.
    #[arg(long, value_name = "N")]
    require_ran: Option<usize>,
}

#[derive(Args)]
struct ListArgs {
    #[command(flatten)]
    catalogue: CatalogueArgs,
    /// Only scenarios that check this invariant id.
    #[arg(long, value_name = "ID")]
    invariant: Option<InvariantId>,
    /// List invariant ids with their tiers and families instead of scenarios.
    #[arg(long)]
    invariants: bool,
}

fn parse_report(s: &str) -> Result<(Format, PathBuf), String> {
    let (format, file) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: expected FORMAT=FILE, such as junit=target/harness.xml"))?;
    if file.is_empty() {
        return Err(format!("`{s}`: the file name after `=` is empty"));
    }
    Ok((format.parse()?, PathBuf::from(file)))
}

/// The most scenarios run at once. Each holds a host process, a store and
/// three observers; beyond a few thousand the machine runs out of processes
/// and descriptors long before the scheduler's own limits (tokio's semaphore
/// panics above about 2^61 permits).
pub(crate) const MAX_JOBS: usize = 4096;

/// The longest step budget: a day. A deadline is added to the clock, and an
/// unbounded one would overflow it; no host step needs longer.
pub(crate) const MAX_STEP_TIMEOUT_MS: u64 = 86_400_000;

/// `--jobs`: 1 to [`MAX_JOBS`]. Zero is refused rather than read as one, so a
/// script computing it wrongly is told so.
pub(crate) fn parse_jobs(s: &str) -> Result<usize, String> {
    parse_in_range(s, 1, MAX_JOBS as u64, "scenarios at a time").map(|n| n as usize)
}

/// `--step-timeout-ms`: 1 to [`MAX_STEP_TIMEOUT_MS`]. Zero would time out
/// every step before the host could answer and blame the host for it.
pub(crate) fn parse_step_timeout_ms(s: &str) -> Result<u64, String> {
    parse_in_range(s, 1, MAX_STEP_TIMEOUT_MS, "milliseconds")
}

fn parse_in_range(s: &str, min: u64, max: u64, unit: &str) -> Result<u64, String> {
    let n: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a whole number; expected {min} to {max} {unit}"))?;
    if !(min..=max).contains(&n) {
        return Err(format!(
            "{n} is out of range; expected {min} to {max} {unit}"
        ));
    }
    Ok(n)
}

fn main() -> ExitCode {
    quiet_insta();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run(args),
        Command::List(args) => list(args).map(|()| exit_code::SUCCESS),
        Command::Explain { id, catalogue } => explain(id, catalogue).map(|()| exit_code::SUCCESS),
        Command::Selftest(args) => selftest::selftest(args),
        Command::Fuzz(args) => fuzz::fuzz(args),
        Command::Report(args) => matrix::report(args),
    };
    match result {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            anstream::eprintln!("error: {e:#}");
            ExitCode::from(exit_code::HARNESS_ERROR as u8)
        }
    }
}

/// The nearest `scenarios/` directory from the current directory upwards.
fn find_scenarios(args: &CatalogueArgs) -> anyhow::Result<PathBuf> {
    if let Some(dir) = &args.scenarios {
        return Ok(dir.clone());
    }
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    cwd.ancestors()
        .map(|d| d.join("scenarios"))
        .find(|d| d.is_dir())
        .with_context(|| {
            format!(
                "no `scenarios/` directory in {} or above it; pass --scenarios DIR",
                cwd.display()
            )
        })
}

fn load(args: &CatalogueArgs) -> anyhow::Result<Catalogue> {
    let dir = find_scenarios(args)?;
    Ok(Catalogue::load(&dir)?)
}

pub(crate) fn launcher(
    host: Option<&str>,
    step_timeout: Duration,
    expectations: &HostExpectations,
) -> anyhow::Result<Arc<dyn HostLauncher>> {
    Ok(match host {
        None => Arc::new(ReferenceLauncher::default()),
        Some(cmd) => delegation_runner::process_launcher(cmd, step_timeout, expectations)?,
    })
}

fn run(args: RunArgs) -> anyhow::Result<i32> {
    let root = find_scenarios(&args.catalogue)?;
    let host = args
        .host
        .as_deref()
        .map(shipped_hosts::resolve_here)
        .transpose()?;
    let expectations_file = args
        .expectations
        .clone()
        .or_else(|| host.as_ref().and_then(|h| h.expectations.clone()));
    if let (None, Some(file)) = (&args.expectations, &expectations_file) {
        anstream::eprintln!(
            "note: using the shipped adapter's expectations file {}",
            file.display()
        );
    }
    // The same engine as a Rust host's `tests/conformance.rs`: the library's
    // builder, with the terminal's reporter and the signals on top.
    let mut conformance = match &host {
        None => Conformance::reference_host(),
        Some(h) => Conformance::command(h.command.clone()),
    }
    .catalogue(root)
    .jobs(args.jobs)
    .seed(args.seed.unwrap_or_else(random_seed))
    .step_deadline(Duration::from_millis(args.step_timeout_ms))
    .reporter(Box::new(HumanReporter::stdout()))
    .transcripts_only_where_read();
    for pattern in &args.filter {
        conformance = conformance.filter(pattern.clone());
    }
    for id in &args.invariant {
        conformance = conformance.invariant(*id);
    }
    if let Some(file) = expectations_file {
        conformance = conformance.expectations(file);
    }
    if let Some(ms) = args.max_model_hold_ms {
        conformance = conformance.max_model_hold(Some(Duration::from_millis(ms)));
    }
    if let Some(name) = args
        .host
        .as_deref()
        .filter(|h| shipped_hosts::shipped(h).is_some())
    {
        conformance = conformance.rerun_host_as(name);
    }
    for (format, file) in &args.report {
        conformance = conformance.report(*format, file.clone());
    }
    if let Some(dir) = &args.snapshots {
        conformance = conformance.snapshots(dir.clone());
    }

    // Every job costs descriptors (a host, three observers, their
    // connections); a run starved of them is reported as the harness's own
    // failure, but better not starved at all.
    delegation_runner::resources::raise_descriptor_limit(args.jobs);
    if let Some(warning) = delegation_runner::resources::shortage_ahead(args.jobs) {
        anstream::eprintln!("warning: {warning}");
    }
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let report = runtime.block_on(async move {
        let (stop, interrupt) = tokio::sync::watch::channel(false);
        // SIGTERM (CI cancelling a job, `timeout`) and SIGHUP (a closed
        // terminal) stop the run as Ctrl-C does.
        let mut signals = stop_signals::StopSignals::install()?;
        tokio::spawn(async move {
            let signal = signals.next().await;
            anstream::eprintln!(
                "{signal}: stopping the run, killing the adapters and reporting what finished (a second signal quits at once)"
            );
            let _ = stop.send(true);
            // An adapter stuck where even SIGKILL takes time must not hold
            // a user who insists: the second signal quits without cleaning up.
            signals.next().await;
            std::process::exit(exit_code::HARNESS_ERROR);
        });
        anyhow::Ok(conformance.interrupt(interrupt).run().await?.report)
    })?;
    // The runtime's tasks are gone with it: any adapter, or anything an
    // adapter started, still alive now outlived its scenario.
    drop(runtime);
    leave_nothing_behind();

    let s = &report.summary;
    if let Some(reason) = &report.gave_up {
        anstream::eprintln!("stopped trying the host: {reason}");
    }
    if s.harness_error > 0 {
        anstream::eprintln!(
            "the harness itself failed in {} scenario(s) (`harness-error`): nothing is concluded about the host there",
            s.harness_error
        );
    }
    if s.ran == 0 && s.total > 0 && !report.interrupted && !report.host_unreachable {
        // A host that declares nothing must not get a green run.
        anstream::eprintln!(
            "nothing ran: all {} selected scenarios are unsupported by this host (it declared capabilities that none of them can run with); this says nothing about the host. Declare the capabilities your adapter really has (PROTOCOL.md, Capabilities), or select scenarios it can run",
            s.total
        );
    }
    let code = delegation_runner::exit_code_for(&report);
    if let Some(required) = args.require_ran
        && s.ran < required
        && code != exit_code::VIOLATIONS
    {
        // A violation found says more than the coverage it ran with.
        anstream::eprintln!(
            "coverage below --require-ran {required}: {} of {} selected scenarios really ran ({} unsupported)",
            s.ran,
            s.total,
            s.unsupported + s.known_unsupported
        );
        return Ok(exit_code::HARNESS_ERROR);
    }
    Ok(code)
}

/// insta prints a full diff to stdout and panics on every changed snapshot;
/// `--snapshots` reports a change as its scenario's event instead, with a
/// bounded diff, in every reporter. A user's own setting wins.
fn quiet_insta() {
    for (name, value) in [("INSTA_OUTPUT", "none"), ("INSTA_FORCE_PASS", "1")] {
        if std::env::var_os(name).is_none() {
            // SAFETY: called first thing in `main`, before any thread exists.
            unsafe { std::env::set_var(name, value) };
        }
    }
}

/// Kills what the run's adapters left running and removes store
/// directories that scenarios did not remove themselves, saying so.
fn leave_nothing_behind() {
    delegation_host::process::kill_all_adapters(Duration::from_secs(2));
    let survivors = delegation_host::process::surviving_descendants();
    if !survivors.is_empty() {
        for s in &survivors {
            anstream::eprintln!(
                "warning: pid {} (`{}`), started by an adapter, was still alive after its adapter was stopped (it left the adapter's process group, e.g. by `setsid`); killed it",
                s.pid,
                s.command
            );
        }
        delegation_host::process::kill_survivors(&survivors);
    }
    for (path, e) in delegation_runner::execute::remove_leftover_stores() {
        anstream::eprintln!(
            "warning: cannot remove the store directory {}: {e}",
            path.display()
        );
    }
}

/// A seed from the clock: different per run, printed by the human reporter.
fn random_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn list(args: ListArgs) -> anyhow::Result<()> {
    if args.invariants {
        for id in InvariantId::ALL {
            anstream::println!(
                "{:<4} {:<6} {}",
                id.as_str(),
                id.tier().to_string(),
                id.family()
            );
        }
        return Ok(());
    }
    let catalogue = load(&args.catalogue)?;
    for s in &catalogue.scenarios {
        if args.invariant.is_some_and(|id| !s.checks.contains(&id)) {
            continue;
        }
        let checks: Vec<&str> = s.checks.iter().map(|c| c.as_str()).collect();
        anstream::println!(
            "{:<48} {:<6} {:<20} {}",
            s.id,
            s.tier.to_string(),
            checks.join(","),
            s.title
        );
    }
    Ok(())
}

fn explain(id: InvariantId, args: CatalogueArgs) -> anyhow::Result<()> {
    anstream::println!("{id} ({}, {})\n", id.family(), id.tier());
    anstream::println!("{}\n", id.meaning());
    // The explanation stands without a catalogue; the scenario list needs one.
    match load(&args) {
        Ok(catalogue) => {
            let scenarios: Vec<&Scenario> = catalogue.checking(id).collect();
            if scenarios.is_empty() {
                anstream::println!(
                    "No scenario in {} checks {id} yet.",
                    catalogue.root.display()
                );
            } else {
                anstream::println!("Checked by:");
                for s in scenarios {
                    anstream::println!("  {}  {}", s.id, s.title);
                }
            }
        }
        Err(e) => anstream::println!("(scenarios not listed: {e:#})"),
    }
    Ok(())
}
