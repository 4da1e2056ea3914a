//! The fuzz kill matrix (`selftest --fuzz SECONDS`): differential fuzzing against every deliberate mutant with one seed and one time budget each, beside the catalogue's kill matrix.
//!
//! For each defect: how long the fuzzer took to find a divergence, after how
//! many cases, and how short the finding shrank; the shrunk sequence must
//! still fail the mutant and pass the correct reference host, or the row
//! says why not. The correct host is fuzzed first with the same budget and
//! must yield nothing: a finding there is the model and the reference host
//! disagreeing, and every row below would mean nothing.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use delegation_host::ReferenceLauncher;
use delegation_host::mutants::Defect;
use delegation_runner::differential::{CaseResult, run_ops};
use delegation_runner::execute::ExecOptions;
use serde_json::json;

use super::{Totals, search, shrink_failure};
use delegation_runner::differential::reach::Reach;

/// A finding this short or shorter reads at a glance (the matrix's goal).
pub const SHORT: usize = 5;

/// The budgets of one matrix run.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub seed: u64,
    /// Time to find a divergence, per mutant.
    pub find: Duration,
    /// Cases to find one in, per mutant, if bounded: unlike the time, a
    /// budget the machine's load does not change, so matrices compare.
    pub cases: Option<u64>,
    /// Time to shrink one, per mutant.
    pub shrink: Duration,
    pub max_ops: usize,
}

/// How the fuzzer fared against one host.
#[derive(Clone, Debug)]
pub struct FuzzRow {
    /// `None` for the correct reference host (the control).
    pub defect: Option<Defect>,
    pub totals: Totals,
    /// What the row's cases reached in the model.
    pub reach: Reach,
    pub found: Option<FoundRow>,
    /// The harness itself failed on a case: the row says nothing about the host.
    pub harness_error: Option<String>,
}

#[derive(Clone, Debug)]
pub struct FoundRow {
    pub after: Duration,
    pub from_ops: usize,
    pub shrunk_ops: usize,
    /// The shrunk sequence fails the mutant and passes the correct host.
    pub replays: Result<(), String>,
    pub message: String,
}

impl FuzzRow {
    pub fn name(&self) -> &'static str {
        self.defect.map_or("(correct reference host)", Defect::name)
    }

    /// A mutant is caught when the fuzzer found it and the finding replays;
    /// the control is right when nothing was found.
    pub fn as_it_should_be(&self) -> bool {
        if self.harness_error.is_some() {
            return false;
        }
        match (&self.defect, &self.found) {
            (None, found) => found.is_none(),
            (Some(_), Some(found)) => found.replays.is_ok(),
            (Some(_), None) => false,
        }
    }
}

/// Fuzzes one host for the budget; a finding is shrunk and replayed.
pub async fn fuzz_one(defect: Option<Defect>, budget: Budget) -> FuzzRow {
    let exec = ExecOptions::default();
    let launcher = ReferenceLauncher {
        defect,
        ..Default::default()
    };
    let shared: std::sync::Arc<dyn delegation_host::HostLauncher> =
        std::sync::Arc::new(launcher.clone());
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let outcome = search(
        budget.seed,
        (1, budget.max_ops),
        budget.cases.unwrap_or(u64::MAX),
        Some(started + budget.find),
        1,
        &shared,
        &exec,
        &stop,
        |_| {},
    )
    .await;
    let after = started.elapsed();
    let Some(finding) = outcome.finding else {
        return FuzzRow {
            defect,
            totals: outcome.totals,
            reach: outcome.reach,
            found: None,
            harness_error: outcome.harness_error,
        };
    };
    let from_ops = finding.seq.len();
    let unshrunk = finding.seq.ops();
    let (ops, replays) = match shrink_failure(
        finding.seq,
        finding.at,
        &launcher,
        &exec,
        budget.shrink,
        &stop,
    )
    .await
    {
        Ok((ops, _)) => (ops, Ok(())),
        // The finding stands unshrunk; the row says the shrinker failed.
        Err(panic) => (unshrunk, Err(panic)),
    };
    let (_, on_mutant) = run_ops(&ops, &launcher, &exec).await;
    let (_, on_correct) = run_ops(&ops, &ReferenceLauncher::default(), &exec).await;
    let replays = match (on_mutant, on_correct) {
        _ if replays.is_err() => replays,
        (CaseResult::Fail { .. }, CaseResult::Pass) => Ok(()),
        (CaseResult::Fail { .. }, other) => Err(format!(
            "the correct reference host does not pass the shrunk sequence either: {other:?}"
        )),
        (other, _) => Err(format!(
            "the shrunk sequence no longer fails the host: {other:?}"
        )),
    };
    FuzzRow {
        defect,
        totals: outcome.totals.clone(),
        reach: outcome.reach,
        found: Some(FoundRow {
            after,
            from_ops,
            shrunk_ops: ops.len(),
            replays,
            message: finding.message,
        }),
        harness_error: None,
    }
}

/// The matrix as a table for the terminal and the markdown report.
pub fn markdown(rows: &[FuzzRow], budget: Budget) -> String {
    let mutants: Vec<&FuzzRow> = rows.iter().filter(|r| r.defect.is_some()).collect();
    let found = mutants.iter().filter(|r| r.as_it_should_be()).count();
    let short = mutants
        .iter()
        .filter(|r| r.as_it_should_be())
        .filter(|r| r.found.as_ref().is_some_and(|f| f.shrunk_ops <= SHORT))
        .count();
    let mut reach = Reach::default();
    for row in rows {
        reach.merge(&row.reach);
    }
    let mut out = format!(
        "## Fuzz kill matrix\n\nSeed {}, up to {:.0} s{} to find and {:.0} s to shrink per host, sequences of up to {} operations, in-process. \
         {found} of {} mutants found, shrunk and replayed; {short} of them shrunk to at most {SHORT} operations.\n\n\
         Generator {}.\n\n\
         | host | found | after | cases | operations (found -> shrunk) | replays | first divergence |\n|---|---|---|---|---|---|---|\n",
        budget.seed,
        budget.find.as_secs_f64(),
        budget
            .cases
            .map_or(String::new(), |n| format!(" or {n} cases")),
        budget.shrink.as_secs_f64(),
        budget.max_ops,
        mutants.len(),
        reach.summary()
    );
    for row in rows {
        let cells = match &row.found {
            None if row.harness_error.is_some() => format!(
                "no | – | {} | – | – | HARNESS ERROR: {}",
                row.totals.cases,
                row.harness_error
                    .as_deref()
                    .unwrap_or_default()
                    .replace('|', "\\|")
            ),
            None => format!(
                "no | – | {} | – | – | {}",
                row.totals.cases,
                if row.defect.is_none() {
                    "none, as it should be"
                } else {
                    "SURVIVED"
                }
            ),
            Some(f) => format!(
                "yes | {:.1} s | {} | {} -> {} | {} | {}",
                f.after.as_secs_f64(),
                row.totals.cases,
                f.from_ops,
                f.shrunk_ops,
                match &f.replays {
                    Ok(()) => "yes".to_string(),
                    Err(e) => format!("no: {e}"),
                },
                f.message
                    .chars()
                    .take(120)
                    .collect::<String>()
                    .replace('|', "\\|")
            ),
        };
        out.push_str(&format!("| `{}` | {cells} |\n", row.name()));
    }
    out
}

pub fn json_report(rows: &[FuzzRow], budget: Budget) -> String {
    let rows: Vec<_> = rows
        .iter()
        .map(|r| {
            json!({
                "defect": r.defect.map(Defect::name),
                "cases": r.totals.cases,
                "operations": r.totals.ops,
                "reach": r.reach,
                "as_it_should_be": r.as_it_should_be(),
                "harness_error": r.harness_error,
                "found": r.found.as_ref().map(|f| json!({
                    "after_ms": f.after.as_millis() as u64,
                    "operations": f.from_ops,
                    "shrunk_operations": f.shrunk_ops,
                    "replays": f.replays.as_ref().err().map_or(json!(true), |e| json!(e)),
                    "message": f.message,
                })),
            })
        })
        .collect();
    serde_json::to_string_pretty(&json!({
        "seed": budget.seed,
        "find_seconds": budget.find.as_secs_f64(),
        "find_cases": budget.cases,
        "shrink_seconds": budget.shrink.as_secs_f64(),
        "max_ops": budget.max_ops,
        "rows": rows,
    }))
    .unwrap_or_default()
        + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_mutant_the_fuzzer_reaches_is_found_shrunk_and_replayed_and_the_correct_host_is_not()
    {
        let budget = Budget {
            seed: 7,
            find: Duration::from_secs(20),
            cases: None,
            shrink: Duration::from_secs(20),
            max_ops: 48,
        };
        let mutant = fuzz_one(Some(Defect::FollowupAfterClose), budget).await;
        let found = mutant
            .found
            .as_ref()
            .expect("followup-after-close is found");
        assert!(found.replays.is_ok(), "{:?}", found.replays);
        assert!(found.shrunk_ops <= found.from_ops);
        assert!(mutant.as_it_should_be());

        let control = fuzz_one(
            None,
            Budget {
                find: Duration::from_secs(2),
                ..budget
            },
        )
        .await;
        assert!(
            control.found.is_none(),
            "{:?}",
            control.found.map(|f| f.message)
        );
        assert!(control.totals.cases > 0 && control.as_it_should_be());

        let table = markdown(&[control, mutant], budget);
        assert!(table.contains("1 of 1 mutants found"), "{table}");
        assert!(table.contains("`followup-after-close` | yes"), "{table}");
    }
}
