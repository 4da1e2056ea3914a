//! `delegation-harness selftest`: measures the catalogue's strength by running it against deliberately broken reference hosts.
//!
//! The correct reference host must pass every scenario (or be `unsupported`
//! where it lacks a capability). Then each [`Defect`] runs the same
//! catalogue in-process. A mutant is *killed for the right reason* when a
//! scenario that failed on it names the defect's invariant, in a violation
//! or in its `checks`; killed only by unrelated scenarios is a wrong-reason
//! kill, which hides a missing check; no failure at all is a survivor.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use delegation_host::ReferenceLauncher;
use delegation_host::mutants::Defect;
use delegation_model::InvariantId;
use delegation_runner::catalogue::{Filter, order};
use delegation_runner::{
    Conformance, RunReport, Scenario, ScenarioResult, Verdict, exit_code, report,
};
use serde_json::json;

use crate::CatalogueArgs;

#[derive(Args)]
pub struct SelftestArgs {
    #[command(flatten)]
    pub catalogue: CatalogueArgs,
    /// Only these defects (kebab-case names, see `delegation_host::mutants`). Repeatable. Default: all.
    #[arg(long, value_name = "NAME")]
    pub defect: Vec<Defect>,
    /// Only scenarios whose id contains this text or matches this glob. Repeatable.
    #[arg(long, value_name = "PATTERN")]
    pub filter: Vec<String>,
    /// Scenarios run at the same time within one host's run (1 to 4096). Default: the number of CPUs.
    #[arg(long, value_name = "N", value_parser = crate::parse_jobs)]
    pub jobs: Option<usize>,
    /// Run each mutant only on the scenarios that name its invariant (and
    /// their controls): the same verdict on "killed for the right reason" at a
    /// fraction of the cost. The correct host still runs every scenario.
    #[arg(long)]
    pub focused: bool,
    /// Write the kill matrix: FORMAT is markdown or json. Repeatable.
    #[arg(long, value_name = "FORMAT=FILE", value_parser = parse_report)]
    pub report: Vec<(ReportFormat, PathBuf)>,
    /// The fuzz kill matrix instead of the catalogue's: differential fuzzing
    /// against every mutant (in-process), this many seconds each to find a
    /// divergence, after the same budget against the correct host (which must
    /// yield nothing).
    #[arg(long, value_name = "SECONDS", conflicts_with_all = ["focused", "filter"])]
    pub fuzz: Option<f64>,
    /// Seed of the fuzz kill matrix's cases (one seed for every host, so rows compare).
    #[arg(long, default_value_t = 7, value_name = "N", requires = "fuzz")]
    pub seed: u64,
    /// Also stop each host of the fuzz kill matrix after this many cases,
    /// whichever of time and cases runs out first: a budget the machine's
    /// load does not change, so matrices from different machines compare.
    #[arg(long, value_name = "N", requires = "fuzz")]
    pub fuzz_cases: Option<u64>,
    /// Upper bound on shrinking one finding of the fuzz kill matrix, in seconds.
    #[arg(
        long,
        default_value_t = 20.0,
        value_name = "SECONDS",
        requires = "fuzz"
    )]
    pub shrink_seconds: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportFormat {
    Markdown,
    Json,
}

fn parse_report(s: &str) -> Result<(ReportFormat, PathBuf), String> {
    let (format, file) = s
        .split_once('=')
        .filter(|(_, f)| !f.is_empty())
        .ok_or_else(|| format!("`{s}`: expected FORMAT=FILE, such as markdown=target/kills.md"))?;
    let format = match format {
        "markdown" | "md" => ReportFormat::Markdown,
        "json" => ReportFormat::Json,
        other => {
            return Err(format!(
                "`{other}` is not a selftest report format; expected markdown or json"
            ));
        }
    };
    Ok((format, PathBuf::from(file)))
}

/// How one mutant fared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kill {
    /// A failed scenario names the defect's invariant.
    RightReason,
    /// Only scenarios about other invariants failed: the defect's own check is missing.
    WrongReason,
    Survived,
}

/// One row of the kill matrix.
struct Row {
    defect: Defect,
    kill: Kill,
    /// Ids of the failed scenarios that name the defect's invariant.
    killers: Vec<String>,
    /// Every failed (or errored) scenario.
    failed: Vec<String>,
    /// Invariant ids named by the failed scenarios' violations and checks.
    failed_invariants: BTreeSet<InvariantId>,
    /// Whether any selected scenario checks the defect's invariant at all.
    covered: bool,
}

impl Row {
    fn status(&self) -> String {
        match self.kill {
            Kill::RightReason => "killed for the right reason".into(),
            Kill::WrongReason => "killed for the wrong reason".into(),
            Kill::Survived if !self.covered => format!(
                "SURVIVED (no selected scenario checks {})",
                self.defect.invariant()
            ),
            Kill::Survived => "SURVIVED".into(),
        }
    }
}

pub fn selftest(args: SelftestArgs) -> anyhow::Result<i32> {
    if let Some(seconds) = args.fuzz {
        return fuzz_matrix(&args, seconds);
    }
    let catalogue = crate::load(&args.catalogue)?;
    let filter = Filter::new(&args.filter, &[])?;
    let selected = catalogue.select(&filter);
    if selected.is_empty() {
        bail!(
            "no scenario in {} matches the filters ({} in the catalogue): a selftest on nothing proves nothing",
            catalogue.root.display(),
            catalogue.scenarios.len()
        );
    }
    // A fixed order: the kill matrix must not depend on a random seed.
    let scenarios: Vec<Scenario> = order(&selected, 0).into_iter().cloned().collect();
    let defects: Vec<Defect> = if args.defect.is_empty() {
        Defect::ALL.to_vec()
    } else {
        args.defect.clone()
    };
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);

    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    anstream::println!(
        "selftest: {} scenarios from {}, {} defects, --jobs {jobs}",
        scenarios.len(),
        catalogue.root.display(),
        defects.len()
    );

    let correct = runtime.block_on(run_once(&scenarios, None, jobs))?;
    let correct_failures: Vec<&ScenarioResult> = correct
        .results
        .iter()
        .filter(|r| !matches!(r.verdict, Verdict::Pass | Verdict::Unsupported { .. }))
        .collect();
    anstream::println!(
        "correct host: {} passed, {} unsupported, {} not passing",
        correct.summary.pass,
        correct.summary.unsupported,
        correct_failures.len()
    );
    for r in &correct_failures {
        anstream::println!("  {} {}", r.id, r.verdict.name());
        for f in &r.failures {
            anstream::println!("      {}", report::failure_line(f));
        }
    }

    let mut rows = Vec::new();
    for defect in defects {
        let subset = if args.focused {
            focus(&scenarios, defect)
        } else {
            scenarios.clone()
        };
        let report = runtime.block_on(run_once(&subset, Some(defect), jobs))?;
        let row = judge(defect, &subset, &report);
        anstream::println!(
            "{:<32} {:<5} {}",
            defect.name(),
            defect.invariant().as_str(),
            row.status()
        );
        rows.push(row);
    }

    print_matrix(&rows);
    for (format, file) in &args.report {
        let text = match format {
            ReportFormat::Markdown => markdown(&rows, &correct_failures),
            ReportFormat::Json => json_report(&rows, &correct_failures),
        };
        std::fs::write(file, text)
            .with_context(|| format!("cannot write the selftest report {}", file.display()))?;
    }

    let weak = rows.iter().filter(|r| r.kill != Kill::RightReason).count();
    if !correct_failures.is_empty() || weak > 0 {
        anstream::println!(
            "selftest failed: {} scenario(s) do not pass on the correct host, {weak} mutant(s) survived or were killed for the wrong reason",
            correct_failures.len()
        );
        return Ok(exit_code::VIOLATIONS);
    }
    anstream::println!("selftest passed: every mutant was killed for the right reason");
    Ok(exit_code::SUCCESS)
}

/// The scenarios naming the defect's invariant, with the controls they need, in run order.
fn focus(scenarios: &[Scenario], defect: Defect) -> Vec<Scenario> {
    let naming: Vec<&Scenario> = scenarios
        .iter()
        .filter(|s| s.checks.contains(&defect.invariant()))
        .collect();
    let controls: BTreeSet<&str> = naming.iter().filter_map(|s| s.control.as_deref()).collect();
    let chosen: Vec<&Scenario> = scenarios
        .iter()
        .filter(|s| s.checks.contains(&defect.invariant()) || controls.contains(s.id.as_str()))
        .collect();
    order(&chosen, 0).into_iter().cloned().collect()
}

/// One run of the selected scenarios against the reference host carrying
/// `defect`, through the library's builder as a host maintainer's run goes.
async fn run_once(
    scenarios: &[Scenario],
    defect: Option<Defect>,
    jobs: usize,
) -> anyhow::Result<RunReport> {
    let outcome = Conformance::launcher(Arc::new(ReferenceLauncher {
        defect,
        ..Default::default()
    }))
    .scenarios(scenarios.to_vec())
    // The order the caller chose (seed 0) is kept: a kill matrix must
    // not depend on a random seed.
    .seed(0)
    .jobs(jobs)
    .run()
    .await?;
    Ok(outcome.report)
}

/// A scenario counts against a mutant when it failed or errored; an
/// `inconclusive` negative is not counted, its failed control is.
fn judge(defect: Defect, scenarios: &[Scenario], report: &RunReport) -> Row {
    let id = defect.invariant();
    let mut row = Row {
        defect,
        kill: Kill::Survived,
        killers: vec![],
        failed: vec![],
        failed_invariants: BTreeSet::new(),
        covered: scenarios.iter().any(|s| s.checks.contains(&id)),
    };
    let mut results: Vec<&ScenarioResult> = report.results.iter().collect();
    results.sort_by(|a, b| a.id.cmp(&b.id));
    for r in results {
        if !matches!(r.verdict, Verdict::Fail | Verdict::Error { .. }) {
            continue;
        }
        row.failed.push(r.id.clone());
        let named: BTreeSet<InvariantId> = r
            .failures
            .iter()
            .flat_map(|f| f.invariants.iter().copied())
            .chain(r.checks.iter().copied())
            .collect();
        if named.contains(&id) {
            row.killers.push(r.id.clone());
        }
        row.failed_invariants.extend(named);
    }
    row.kill = if !row.killers.is_empty() {
        Kill::RightReason
    } else if !row.failed.is_empty() {
        Kill::WrongReason
    } else {
        Kill::Survived
    };
    row
}

fn ids(set: &BTreeSet<InvariantId>) -> String {
    set.iter().map(|i| i.as_str()).collect::<Vec<_>>().join(",")
}

fn print_matrix(rows: &[Row]) {
    anstream::println!("\nkill matrix (mutant x invariant ids of the scenarios that failed):");
    for r in rows {
        anstream::println!(
            "  {:<32} breaks {:<5} failed {:>3}  [{}]  {}",
            r.defect.name(),
            r.defect.invariant().as_str(),
            r.failed.len(),
            ids(&r.failed_invariants),
            r.status()
        );
        if let Some(first) = r.killers.first() {
            anstream::println!(
                "      killed by {first}{}",
                if r.killers.len() > 1 {
                    format!(" and {} more", r.killers.len() - 1)
                } else {
                    String::new()
                }
            );
        }
    }
}

fn markdown(rows: &[Row], correct_failures: &[&ScenarioResult]) -> String {
    let mut out = String::from("# Selftest kill matrix\n\n");
    if correct_failures.is_empty() {
        out.push_str("The correct reference host passes every selected scenario.\n\n");
    } else {
        out.push_str("**The correct reference host does not pass:**\n\n");
        for r in correct_failures {
            out.push_str(&format!("- `{}`: {}\n", r.id, r.verdict.name()));
        }
        out.push('\n');
    }
    out.push_str("| Mutant | Breaks | Failed scenarios | Status | Killed by |\n");
    out.push_str("|---|---|---|---|---|\n");
    for r in rows {
        // A few killers name the evidence; the full list is in the JSON report.
        let shown: Vec<String> = r.killers.iter().take(3).map(|k| format!("`{k}`")).collect();
        let more = r.killers.len().saturating_sub(shown.len());
        let killers = if more > 0 {
            format!("{} and {more} more", shown.join(", "))
        } else {
            shown.join(", ")
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {killers} |\n",
            r.defect.name(),
            r.defect.invariant(),
            r.failed.len(),
            r.status(),
        ));
    }
    out.push_str("\n| Mutant | Models |\n|---|---|\n");
    for r in rows {
        out.push_str(&format!(
            "| `{}` | {} |\n",
            r.defect.name(),
            r.defect.description()
        ));
    }
    out
}

fn json_report(rows: &[Row], correct_failures: &[&ScenarioResult]) -> String {
    let value = json!({
        "correct_host": {
            "passes": correct_failures.is_empty(),
            "not_passing": correct_failures
                .iter()
                .map(|r| json!({"scenario": r.id, "verdict": r.verdict.name()}))
                .collect::<Vec<_>>(),
        },
        "mutants": rows.iter().map(|r| json!({
            "defect": r.defect.name(),
            "invariant": r.defect.invariant().as_str(),
            "description": r.defect.description(),
            "status": match r.kill {
                Kill::RightReason => "killed",
                Kill::WrongReason => "killed_wrong_reason",
                Kill::Survived => "survived",
            },
            "covered": r.covered,
            "killed_by": r.killers,
            "failed": r.failed,
            "failed_invariants": r.failed_invariants.iter().map(|i| i.as_str()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&value).expect("a JSON value serialises") + "\n"
}

/// Writes the fuzz kill matrix's rows so far to every `--report` file.
fn write_fuzz_matrix(
    reports: &[(ReportFormat, PathBuf)],
    rows: &[crate::fuzz::kill_matrix::FuzzRow],
    budget: crate::fuzz::kill_matrix::Budget,
) -> anyhow::Result<()> {
    use crate::fuzz::kill_matrix::{json_report, markdown};
    for (format, file) in reports {
        let text = match format {
            ReportFormat::Markdown => markdown(rows, budget),
            ReportFormat::Json => json_report(rows, budget),
        };
        std::fs::write(file, text)
            .with_context(|| format!("cannot write the fuzz kill matrix {}", file.display()))?;
    }
    Ok(())
}

/// `selftest --fuzz SECONDS`: the fuzz kill matrix (see `fuzz::kill_matrix`).
fn fuzz_matrix(args: &SelftestArgs, seconds: f64) -> anyhow::Result<i32> {
    use crate::fuzz::kill_matrix::{Budget, fuzz_one};
    if !(seconds > 0.0 && seconds.is_finite()) || !(args.shrink_seconds >= 0.0) {
        bail!("--fuzz and --shrink-seconds take a positive number of seconds, e.g. --fuzz 20");
    }
    if args.fuzz_cases == Some(0) {
        bail!("--fuzz-cases takes a positive number of cases, e.g. --fuzz-cases 400");
    }
    let budget = Budget {
        seed: args.seed,
        find: std::time::Duration::from_secs_f64(seconds),
        cases: args.fuzz_cases,
        shrink: std::time::Duration::from_secs_f64(args.shrink_seconds),
        max_ops: 48,
    };
    let defects: Vec<Defect> = if args.defect.is_empty() {
        Defect::ALL.to_vec()
    } else {
        args.defect.clone()
    };
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    anstream::println!(
        "selftest --fuzz: seed {}, {seconds} s{} to find per host, the correct host then {} mutants",
        budget.seed,
        budget
            .cases
            .map_or(String::new(), |n| format!(" or {n} cases")),
        defects.len()
    );
    let mut rows = Vec::new();
    for defect in std::iter::once(None).chain(defects.into_iter().map(Some)) {
        let row = runtime.block_on(fuzz_one(defect, budget));
        anstream::println!(
            "{:<32} {}",
            row.name(),
            match (&row.found, row.as_it_should_be()) {
                (None, true) => format!(
                    "nothing found in {} cases, as it should be",
                    row.totals.cases
                ),
                (None, false) => format!("SURVIVED {} cases", row.totals.cases),
                (Some(f), _) => format!(
                    "found after {:.1} s ({} cases), shrunk {} -> {} operations{}",
                    f.after.as_secs_f64(),
                    row.totals.cases,
                    f.from_ops,
                    f.shrunk_ops,
                    match &f.replays {
                        Ok(()) => String::new(),
                        Err(e) => format!(", does not replay: {e}"),
                    }
                ),
            }
        );
        rows.push(row);
        // Rewritten after every row, so an interrupted matrix keeps what it found.
        write_fuzz_matrix(&args.report, &rows, budget)?;
    }
    let control_clean = rows.first().is_some_and(|r| r.as_it_should_be());
    let missed = rows.iter().skip(1).filter(|r| !r.as_it_should_be()).count();
    anstream::println!(
        "fuzz kill matrix: {} of {} mutants found, shrunk and replayed{}",
        rows.len() - 1 - missed,
        rows.len() - 1,
        if control_clean {
            ""
        } else {
            "; the CORRECT host diverged from the model"
        }
    );
    Ok(if control_clean && missed == 0 {
        exit_code::SUCCESS
    } else {
        exit_code::VIOLATIONS
    })
}
