//! Concurrent steps against real hosts: the correct reference host passes the race scenarios in process and over stdio, each race mutant fails them for its invariant, and a host without `concurrent-requests` gets `unsupported`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use delegation_host::mutants::Defect;
use delegation_host::process::ProcessOptions;
use delegation_host::{HostLauncher, ProcessLauncher, ReferenceLauncher};
use delegation_model::InvariantId;
use delegation_runner::LiveObservers;
use delegation_runner::verdict::{FailureKind, Verdict};

use super::reference::{assert_pass, reference_binary, result, run_catalogue};

const RACES: &[&str] = &[
    "rc/240-four-concurrent-consumers-one-wins",
    "rc/241-concurrent-consumes-of-two-receipts-both-win",
    "tr/240-follow-ups-racing-a-close",
    "tr/241-follow-ups-in-flight-at-once-both-run",
    "tr/242-follow-ups-racing-a-cancel",
    "tc/240-capability-call-racing-its-revoke",
    "tc/241-capability-calls-in-flight-at-once-both-run",
];

fn catalogue() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

async fn races_against(launcher: Arc<dyn HostLauncher>) -> delegation_runner::RunReport {
    let filter: Vec<String> = RACES.iter().map(|s| s.to_string()).collect();
    run_catalogue(&catalogue(), &filter, launcher, Arc::new(LiveObservers), 2).await
}

/// The invariants of the linearizability failures of one result.
fn race_failures(report: &delegation_runner::RunReport, id: &str) -> Vec<InvariantId> {
    result(report, id)
        .failures
        .iter()
        .filter(|f| f.kind == FailureKind::Invariant && f.at.ends_with(".concurrently"))
        .flat_map(|f| f.invariants.iter().copied())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_correct_host_passes_every_race_in_process_and_over_stdio() {
    let report = races_against(Arc::new(ReferenceLauncher::default())).await;
    for id in RACES {
        assert_pass(result(&report, id));
    }
    let stdio = ProcessLauncher::new(
        &shell_words::quote(&reference_binary().display().to_string()),
        ProcessOptions::default(),
    )
    .unwrap();
    let report = races_against(Arc::new(stdio)).await;
    for id in RACES {
        assert_pass(result(&report, id));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_then_act_consume_lets_several_racers_win_and_fails_rc1() {
    let launcher = ReferenceLauncher::with_defect(Some(Defect::ReceiptConsumeCheckThenAct));
    let report = races_against(Arc::new(launcher)).await;
    let id = "rc/240-four-concurrent-consumers-one-wins";
    assert_eq!(result(&report, id).verdict, Verdict::Fail);
    assert_eq!(race_failures(&report, id), [InvariantId::RC1]);
    // Its control still passes: the host does race, and admits what it may.
    assert_pass(result(
        &report,
        "rc/241-concurrent-consumes-of-two-receipts-both-win",
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followup_sent_after_a_committed_close_fails_tr4() {
    let launcher = ReferenceLauncher::with_defect(Some(Defect::FollowupRacesClose));
    let report = races_against(Arc::new(launcher)).await;
    for id in [
        "tr/240-follow-ups-racing-a-close",
        "tr/242-follow-ups-racing-a-cancel",
    ] {
        assert_eq!(result(&report, id).verdict, Verdict::Fail, "{id}");
        assert_eq!(race_failures(&report, id), [InvariantId::TR4], "{id}");
    }
    assert_pass(result(
        &report,
        "tr/241-follow-ups-in-flight-at-once-both-run",
    ));
}

/// The call's answer and the state after fit the order "call, then
/// revoke"; only the tool server's handler call, seen after the revoke's
/// answer arrived, shows that it ran after the revoke committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capability_call_run_after_a_committed_revoke_fails_tc2_in_process_and_over_stdio() {
    let defect = Defect::CapabilityCallCheckThenAct;
    let stdio = ProcessLauncher::new(
        &format!(
            "{} --defect {defect}",
            shell_words::quote(&reference_binary().display().to_string())
        ),
        ProcessOptions::default(),
    )
    .unwrap();
    let launchers: [Arc<dyn HostLauncher>; 2] = [
        Arc::new(ReferenceLauncher::with_defect(Some(defect))),
        Arc::new(stdio),
    ];
    for launcher in launchers {
        let described = launcher.describe();
        let report = races_against(launcher).await;
        let id = "tc/240-capability-call-racing-its-revoke";
        assert_eq!(result(&report, id).verdict, Verdict::Fail, "{described}");
        assert_eq!(
            race_failures(&report, id),
            [InvariantId::TC2],
            "{described}"
        );
        // Its control still passes: calls in flight at once both run.
        assert_pass(result(
            &report,
            "tc/241-capability-calls-in-flight-at-once-both-run",
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_without_concurrent_requests_gets_unsupported_saying_why() {
    // The echo adapter declares only `clock`.
    let echo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/tests/adapters/echo_adapter.py");
    let launcher = ProcessLauncher::new(
        &format!(
            "python3 {}",
            shell_words::quote(&echo.display().to_string())
        ),
        ProcessOptions::default(),
    )
    .unwrap();
    let report = races_against(Arc::new(launcher)).await;
    for id in RACES {
        match &result(&report, id).verdict {
            Verdict::Unsupported { missing } => assert!(
                missing.iter().any(|m| m == "concurrent-requests"),
                "{id}: {missing:?}"
            ),
            other => panic!("{id}: expected unsupported, got {other:?}"),
        }
    }
}
