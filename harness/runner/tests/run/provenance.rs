//! The provenance rule end to end: checks resting on what an adapter declared
//! inferred make a scenario `unverified`, never a pass and never the host's failure.

use delegation_runner::RunOptions;
use delegation_runner::verdict::Verdict;

use crate::fake::{Behaviour, FakeLauncher};
use crate::{FIXTURE, fixture_catalogue, run_with};

async fn verdict_for(behaviour: Behaviour) -> (Verdict, delegation_runner::verdict::Summary) {
    let dir = fixture_catalogue();
    let out = run_with(
        dir.path(),
        FakeLauncher::new(behaviour),
        RunOptions::default(),
        vec![],
        None,
    )
    .await;
    let result = out.report.results.iter().find(|r| r.id == FIXTURE).unwrap();
    (result.verdict.clone(), out.report.summary.clone())
}

fn rests_on(verdict: &Verdict) -> Vec<String> {
    match verdict {
        Verdict::Unverified { rests_on } => rests_on.clone(),
        other => panic!("expected unverified, got {other:?}"),
    }
}

#[tokio::test]
async fn the_same_host_passes_when_its_adapter_declares_nothing_inferred() {
    // Positive control for every test below: the behaviour is identical.
    assert_eq!(verdict_for(Behaviour::Correct).await.0, Verdict::Pass);
}

#[tokio::test]
async fn a_deny_reason_the_adapter_inferred_is_not_a_pass() {
    let (verdict, summary) = verdict_for(Behaviour::InfersReason).await;
    let rests = rests_on(&verdict);
    assert!(
        rests
            .iter()
            .any(|r| r.starts_with("steps[1].expect.reason (reason")),
        "{rests:?}"
    );
    // ZC3 reads the reason and no observer: it rests on inference too.
    assert!(rests.iter().any(|r| r.starts_with("ZC3 ")), "{rests:?}");
    // ZC2 counts model requests at the harness's endpoint: never inferred.
    assert!(!rests.iter().any(|r| r.starts_with("ZC2")), "{rests:?}");
    assert_eq!((summary.pass, summary.unverified, summary.fail), (0, 1, 0));
}

#[tokio::test]
async fn a_wrong_reason_the_adapter_inferred_is_not_blamed_on_the_host() {
    let (verdict, summary) = verdict_for(Behaviour::InfersWrongReason).await;
    let rests = rests_on(&verdict);
    assert!(
        rests
            .iter()
            .any(|r| r.starts_with("steps[1].expect.reason (failed)")),
        "{rests:?}"
    );
    assert_eq!(summary.fail, 0);
}

#[tokio::test]
async fn ceilings_the_adapter_inferred_leave_the_ceiling_invariant_unverified() {
    let rests = rests_on(&verdict_for(Behaviour::InfersCeilings).await.0);
    assert_eq!(
        rests,
        vec!["CE1 (ceiling inferred by the adapter)".to_string()]
    );
}

#[tokio::test]
async fn what_the_harness_observed_still_fails_a_host_whatever_its_adapter_inferred() {
    let (verdict, summary) = verdict_for(Behaviour::AdmitsEverythingInferringOutcome).await;
    assert_eq!(verdict, Verdict::Fail);
    assert_eq!(summary.fail, 1);
}
