//! The whole scenario catalogue against the in-process reference host: every
//! scenario must pass, and its normalised transcript must equal
//! `snapshots/<area>/<NNN-name>.snap` (insta; `INSTA_UPDATE=no` in CI makes a
//! missing or changed snapshot fail, `cargo insta review` accepts changes).
//!
//! Nothing is skipped silently: an empty catalogue, a scenario that is not
//! `pass`, or a snapshot without a scenario all fail this test.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use delegation_host::ReferenceLauncher;
use delegation_runner::catalogue::{Catalogue, Filter, order};
use delegation_runner::{LiveObservers, RunOptions, Scenario, Verdict, report, snapshot};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_passes_on_the_reference_host_with_one_snapshot_each() {
    let root = workspace().join("scenarios");
    let catalogue = Catalogue::load(&root).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !catalogue.scenarios.is_empty(),
        "the scenario catalogue at {} is empty: this test checks every scenario and its snapshot, so it refuses to pass on nothing",
        root.display()
    );
    let selected = catalogue.select(&Filter::default());
    let scenarios: Vec<Scenario> = order(&selected, 0).into_iter().cloned().collect();
    let (events, rx) = tokio::sync::mpsc::unbounded_channel();
    let drained = tokio::spawn(report::drain(rx, vec![]));
    let (_keep, interrupt) = tokio::sync::watch::channel(false);
    let report = delegation_runner::run(
        scenarios,
        Arc::new(ReferenceLauncher::default()),
        Arc::new(LiveObservers),
        RunOptions {
            jobs: 2,
            ..RunOptions::default()
        },
        events,
        interrupt,
    )
    .await;
    drained.await.unwrap().unwrap();
    assert_eq!(report.results.len(), catalogue.scenarios.len());

    let mut problems = Vec::new();
    let snapshots = workspace().join("snapshots");
    for result in &report.results {
        if result.verdict != Verdict::Pass {
            let failures: Vec<String> = result.failures.iter().map(report::failure_line).collect();
            problems.push(format!(
                "{}: {:?}\n    {}",
                result.id,
                result.verdict,
                failures.join("\n    ")
            ));
        }
        if let delegation_runner::SnapshotCheck::Changed { message } =
            snapshot::check(&snapshots, result)
        {
            problems.push(format!("snapshot of {}: {message}", result.id));
        }
    }

    // A snapshot whose scenario is gone is stale evidence: remove it.
    let ids: BTreeSet<String> = catalogue.scenarios.iter().map(|s| s.id.clone()).collect();
    for area in std::fs::read_dir(&snapshots)
        .into_iter()
        .flatten()
        .flatten()
    {
        for file in std::fs::read_dir(area.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let path = file.path();
            if path.extension().is_some_and(|e| e == "snap") {
                let id = format!(
                    "{}/{}",
                    area.file_name().to_string_lossy(),
                    path.file_stem().unwrap_or_default().to_string_lossy()
                );
                if !ids.contains(&id) {
                    problems.push(format!("{}: no scenario `{id}` any more", path.display()));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
