//! What a run may shorten and what it must not: scripted model holds capped
//! for a host that does all of an action's work before it answers, and the
//! embedded reference host's short authorizer timeout, each with the
//! verdicts of the catalogue's scenarios that use them, mutants included.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use delegation_host::mutants::Defect;
use delegation_host::reference::EMBEDDED_AUTHORIZER_TIMEOUT;
use delegation_host::{HostLauncher, ReferenceLauncher};
use delegation_runner::catalogue::{Catalogue, Filter, order};
use delegation_runner::run::with_model_holds_capped;
use delegation_runner::scenario::{ModelEndpointStep, StepAction};
use delegation_runner::verdict::Verdict;
use delegation_runner::{LiveObservers, RunOptions, RunReport, Scenario, report, run};

fn catalogue_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

fn scenarios(filter: &[&str]) -> Vec<Scenario> {
    let catalogue = Catalogue::load(&catalogue_dir()).unwrap_or_else(|e| panic!("{e}"));
    let filter: Vec<String> = filter.iter().map(|f| f.to_string()).collect();
    let selected = catalogue.select(&Filter::new(&filter, &[]).unwrap());
    assert!(!selected.is_empty(), "{filter:?} selects nothing");
    order(&selected, 0).into_iter().cloned().collect()
}

async fn run_held(
    scenarios: Vec<Scenario>,
    launcher: ReferenceLauncher,
    max_model_hold: Option<Duration>,
) -> RunReport {
    let (events, rx) = tokio::sync::mpsc::unbounded_channel();
    let drained = tokio::spawn(report::drain(rx, vec![]));
    let (_keep, interrupt) = tokio::sync::watch::channel(false);
    let launcher: Arc<dyn HostLauncher> = Arc::new(launcher);
    let options = RunOptions {
        jobs: 2,
        max_model_hold,
        ..RunOptions::default()
    };
    let report = run(
        scenarios,
        launcher,
        Arc::new(LiveObservers),
        options,
        events,
        interrupt,
    )
    .await;
    drained.await.unwrap().unwrap();
    report
}

fn verdict<'a>(report: &'a RunReport, prefix: &str) -> &'a Verdict {
    &report
        .results
        .iter()
        .find(|r| r.id.starts_with(prefix))
        .unwrap_or_else(|| panic!("no result for {prefix}"))
        .verdict
}

fn held_rules(scenario: &Scenario) -> Vec<u64> {
    let mut holds: Vec<u64> = scenario.setup.model.iter().map(|r| r.delay_ms).collect();
    for step in &scenario.steps {
        if let StepAction::ModelEndpoint(ModelEndpointStep::Rules(rules)) = &step.action {
            holds.extend(rules.iter().map(|r| r.delay_ms));
        }
    }
    holds
}

#[test]
fn capping_holds_shortens_only_the_holds_longer_than_the_cap() {
    let all = scenarios(&[]);
    let held: Vec<&Scenario> = all
        .iter()
        .filter(|s| held_rules(s).iter().any(|&ms| ms > 0))
        .collect();
    assert!(
        held.len() >= 10,
        "the catalogue holds replies in several scenarios, found {}",
        held.len()
    );
    for scenario in held {
        let capped = with_model_holds_capped(scenario, Duration::from_millis(700));
        let expected: Vec<u64> = held_rules(scenario).iter().map(|&ms| ms.min(700)).collect();
        assert_eq!(held_rules(&capped), expected, "{}", scenario.id);
        // Everything but the holds is the scenario as written.
        let mut restored = capped.clone();
        for (rule, original) in restored.setup.model.iter_mut().zip(&scenario.setup.model) {
            rule.delay_ms = original.delay_ms;
        }
        for (step, original) in restored.steps.iter_mut().zip(&scenario.steps) {
            if let (
                StepAction::ModelEndpoint(ModelEndpointStep::Rules(rules)),
                StepAction::ModelEndpoint(ModelEndpointStep::Rules(originals)),
            ) = (&mut step.action, &original.action)
            {
                for (rule, original) in rules.iter_mut().zip(originals) {
                    rule.delay_ms = original.delay_ms;
                }
            }
        }
        assert_eq!(&restored, scenario, "{}", scenario.id);
    }
}

/// Without holds the lifecycle negatives still pass on the correct host and
/// still catch the host whose model's resume reopens a closed child: the
/// reference host makes every request of an action before it answers, so a
/// hold gives it no window it does not already have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_holds_the_lifecycle_negatives_pass_the_correct_host_and_kill_the_mutant() {
    let selected = || scenarios(&["tr/05[678]-*", "lw/*"]);
    let correct = run_held(
        selected(),
        ReferenceLauncher::default(),
        Some(Duration::ZERO),
    )
    .await;
    assert!(correct.results.len() >= 8, "{:?}", correct.results.len());
    for r in &correct.results {
        assert_eq!(r.verdict, Verdict::Pass, "{}: {:?}", r.id, r.failures);
    }
    let mutant = ReferenceLauncher {
        defect: Some(Defect::LifecycleResumeReopens),
        ..ReferenceLauncher::default()
    };
    let broken = run_held(selected(), mutant, Some(Duration::ZERO)).await;
    assert_eq!(
        verdict(&broken, "tr/056-"),
        &Verdict::Pass,
        "the control passes"
    );
    for negative in ["tr/057-", "tr/058-"] {
        assert_eq!(verdict(&broken, negative), &Verdict::Fail, "{negative}");
    }
}

/// The embedded host's short authorizer timeout still refuses on a timeout
/// (the negatives pass, fail-closed) and still admits on a prompt allow
/// (every other authorizer scenario passes); the mutant that fails open on
/// a timeout is caught with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_authorizer_timeout_refuses_a_timeout_and_admits_an_allow() {
    let short = || ReferenceLauncher {
        authorizer_timeout: EMBEDDED_AUTHORIZER_TIMEOUT,
        ..ReferenceLauncher::default()
    };
    let selected = || scenarios(&["ea/*", "zc/034-*"]);
    let correct = run_held(selected(), short(), Some(Duration::ZERO)).await;
    assert!(correct.results.len() >= 10);
    for r in &correct.results {
        assert_eq!(r.verdict, Verdict::Pass, "{}: {:?}", r.id, r.failures);
    }
    let fails_open = ReferenceLauncher {
        defect: Some(Defect::AuthorizerTimeoutAllows),
        ..short()
    };
    let broken = run_held(selected(), fails_open, Some(Duration::ZERO)).await;
    for timed_out in ["ea/003-", "zc/034-"] {
        assert_eq!(verdict(&broken, timed_out), &Verdict::Fail, "{timed_out}");
    }
}
