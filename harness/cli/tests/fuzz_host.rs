//! `delegation-harness fuzz`: mutant hosts are found, shrunk to a few steps, and the written scenario fails the mutant and passes the correct host.
//!
//! Each run is bounded (fixed seed, few cases, short sequences) so the suite
//! stays within seconds per mutant; longer runs are `fuzz --time N`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use delegation_host::ReferenceLauncher;
use delegation_host::mutants::Defect;
use delegation_runner::catalogue::Catalogue;
use delegation_runner::{LiveObservers, RunOptions, Scenario};

fn harness(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_delegation-harness"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("the binary runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn findings(out: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(out.join("fuzz"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

/// Replays a catalogue in-process against a host with `defect`; the number of failed scenarios.
fn failures_on_mutant(dir: &Path, defect: Defect) -> usize {
    let catalogue = Catalogue::load(dir).expect("the findings load as a catalogue");
    let scenarios: Vec<Scenario> = catalogue.scenarios.clone();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let report = runtime.block_on(async {
        let (events, _rx) = tokio::sync::mpsc::unbounded_channel();
        let (_stop, interrupt) = tokio::sync::watch::channel(false);
        delegation_runner::run(
            scenarios,
            Arc::new(ReferenceLauncher {
                defect: Some(defect),
                ..Default::default()
            }),
            Arc::new(LiveObservers),
            RunOptions::default(),
            events,
            interrupt,
        )
        .await
    });
    report.summary.fail
}

/// Fuzzes the mutant with `seed` (one whose first 60 cases find it with
/// the generator as it is now), then checks the finding end to end.
fn mutant_is_found_shrunk_and_replayed(defect: Defect, seed: &str) {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().to_str().unwrap();
    let o = harness(&[
        "fuzz",
        "--defect",
        defect.name(),
        "--seed",
        seed,
        "--cases",
        "60",
        "--max-ops",
        "24",
        "--shrink-time",
        "60",
        "--out",
        dir,
    ]);
    let log = text(&o);
    assert_eq!(o.status.code(), Some(1), "a finding exits 1:\n{log}");
    assert!(log.contains("1 finding(s)"), "{log}");
    assert!(
        log.contains("the correct reference host passes it"),
        "{log}"
    );
    let files = findings(out.path());
    assert_eq!(files.len(), 1, "one scenario written: {files:?}\n{log}");
    let scenario = Scenario::load(out.path(), &files[0]).expect("the finding is a valid scenario");
    assert!(
        scenario.steps.len() <= 5,
        "shrunk to a few steps, got {}:\n{}",
        scenario.steps.len(),
        std::fs::read_to_string(&files[0]).unwrap()
    );

    // The correct host passes it through the real `run` command ...
    let replay = harness(&["run", "--scenarios", dir, "--seed", "1"]);
    assert_eq!(
        replay.status.code(),
        Some(0),
        "the correct host passes the finding:\n{}",
        text(&replay)
    );
    // ... and the mutant fails it.
    assert_eq!(
        failures_on_mutant(out.path(), defect),
        1,
        "the mutant fails the finding"
    );
}

#[test]
fn followup_after_close_is_found() {
    mutant_is_found_shrunk_and_replayed(Defect::FollowupAfterClose, "7");
}

#[test]
fn tools_bound_by_name_is_found() {
    // Which seeds' first 60 cases of up to 24 operations meet it moves
    // with the generator: with the race and byte-level operations every
    // seed from 1 to 8 but 4 does.
    mutant_is_found_shrunk_and_replayed(Defect::ToolsBoundByName, "1");
}

#[test]
fn child_before_policy_check_is_found() {
    mutant_is_found_shrunk_and_replayed(Defect::ChildBeforePolicyCheck, "7");
}

#[test]
fn the_correct_host_gives_no_finding_on_a_bounded_run() {
    let out = tempfile::tempdir().unwrap();
    let o = harness(&[
        "fuzz",
        "--seed",
        "7",
        "--cases",
        "30",
        "--max-ops",
        "24",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    let log = text(&o);
    assert_eq!(o.status.code(), Some(0), "{log}");
    assert!(log.contains("summary: 30 cases"), "{log}");
    assert!(log.contains("0 finding(s)"), "{log}");
    assert!(findings(out.path()).is_empty());
}

/// Ctrl-C (SIGINT), SIGTERM or SIGHUP on an open-ended run: it stops after the
/// current case, prints the summary of what it ran, and exits 2 (the cases
/// asked for did not all run), well before `--time` would have ended it.
#[cfg(unix)]
#[test]
fn an_interrupted_run_reports_the_cases_it_ran() {
    for signal in ["INT", "TERM", "HUP"] {
        interrupted_by(signal);
    }
}

#[cfg(unix)]
fn interrupted_by(signal: &str) {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    let out = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_delegation-harness"))
        .args(["fuzz", "--seed", "7", "--cases", "1000000", "--time", "600"])
        .args(["--max-ops", "12", "--out", out.path().to_str().unwrap()])
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut log = String::new();
    // The progress line (every 2 s) shows cases have run and the handler is in place.
    while !log.contains("operations/s") {
        let mut line = String::new();
        assert_ne!(
            stdout.read_line(&mut line).unwrap(),
            0,
            "ended early: {log}"
        );
        log.push_str(&line);
    }
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("still running 60 s after SIG{signal}: {log}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    log.push_str(&rest);
    assert_eq!(code, Some(2), "{log}");
    assert!(
        log.contains(&format!("SIG{signal}: finishing the current case")),
        "{log}"
    );
    let summary = log
        .lines()
        .find(|l| l.starts_with("summary (interrupted): "))
        .unwrap_or_else(|| panic!("no interrupted summary: {log}"));
    let cases: u64 = summary["summary (interrupted): ".len()..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(cases > 0 && cases < 1_000_000, "{summary}");
    assert!(findings(out.path()).is_empty());
}

/// Regression: shrinking this mutant's finding once panicked in the model
/// (a receipt's tool looked up in a ceiling that does not hold it), the
/// process exited 101 and the finding was lost. The seed is one whose cases
/// find it within 100 with the generator as it is now (case 16 of seed 4;
/// seed 7, which found it at case 42, no longer does within 100 since the
/// question, look-alike and grant-drift operations).
#[test]
fn receipt_parent_not_checked_is_found_and_shrunk_without_a_panic() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().to_str().unwrap();
    let o = harness(&[
        "fuzz",
        "--defect",
        Defect::ReceiptParentNotChecked.name(),
        "--seed",
        "4",
        "--cases",
        "100",
        "--shrink-time",
        "60",
        "--out",
        dir,
    ]);
    let log = text(&o);
    assert!(!log.contains("panicked"), "no panic:\n{log}");
    assert_eq!(o.status.code(), Some(1), "a finding exits 1:\n{log}");
    assert!(log.contains("written before shrinking:"), "{log}");
    let files = findings(out.path());
    assert_eq!(
        files.len(),
        1,
        "the shrunk finding replaced the unshrunk one: {files:?}\n{log}"
    );
    Scenario::load(out.path(), &files[0]).expect("the finding is a valid scenario");
}
