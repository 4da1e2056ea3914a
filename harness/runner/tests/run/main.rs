//! The runner against scripted hosts: verdicts, evidence, controls,
//! expectations, interruption, and every reporter's output.

mod expectations;
mod fake;
mod provenance;
mod races;
mod reference;
mod timing;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use delegation_model::InvariantId;
use delegation_runner::catalogue::{Catalogue, Filter, order};
use delegation_runner::report::{self, Format, human::HumanReporter};
use delegation_runner::verdict::{FailureKind, Verdict};
use delegation_runner::{HostExpectations, RunEvent, RunOptions, RunReport, Scenario, run};
use fake::{Behaviour, FakeLauncher, FakeWorlds};
use serde_json::Value;

pub(crate) const FIXTURE: &str = "zc/001-network-above-ceiling";

fn fixture_text() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/catalogue");
    std::fs::read_to_string(dir.join(format!("{FIXTURE}.json"))).unwrap()
}

/// A catalogue in a temp dir: the fixture as a control, plus a negative twin naming it.
fn control_and_negative() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("zc")).unwrap();
    let fixture: Value = serde_json::from_str(&fixture_text()).unwrap();
    // The allowed twin: the same child without network spawns, one more instance.
    let mut control = fixture.clone();
    control["id"] = "zc/002-control".into();
    control["kind"] = "control".into();
    let delegate = &mut control["steps"][1];
    delegate["delegate"]["request"]["authority"]["sandbox"]["workspace-write"]["network"] =
        false.into();
    delegate["expect"] = serde_json::json!({"outcome": "ok", "delta": {"instances": 1}});
    control["steps"][3]["expect"] = serde_json::json!({"instances": {"count": 2}});
    let mut negative = fixture;
    negative["id"] = "zc/003-negative".into();
    negative["kind"] = "negative".into();
    negative["control"] = "zc/002-control".into();
    for (name, value) in [("002-control", control), ("003-negative", negative)] {
        std::fs::write(
            dir.path().join(format!("zc/{name}.json")),
            value.to_string(),
        )
        .unwrap();
    }
    dir
}

pub(crate) fn fixture_catalogue() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("zc")).unwrap();
    std::fs::write(dir.path().join(format!("{FIXTURE}.json")), fixture_text()).unwrap();
    dir
}

pub(crate) struct Outcome {
    pub(crate) report: RunReport,
    pub(crate) events: Vec<RunEvent>,
}

pub(crate) async fn run_with(
    catalogue: &Path,
    launcher: FakeLauncher,
    options: RunOptions,
    reporters: Vec<Box<dyn report::Reporter>>,
    interrupt_after: Option<Duration>,
) -> Outcome {
    let catalogue = Catalogue::load(catalogue).unwrap();
    let selected = catalogue.select(&Filter::default());
    let scenarios: Vec<Scenario> = order(&selected, options.seed)
        .into_iter()
        .cloned()
        .collect();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let (events_tx, mut events_rx) = tokio::sync::mpsc::unbounded_channel();
    // Fan out: one copy for the test, one for the reporters.
    let fan = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some(e) = rx_recv(&mut events_rx).await {
            let _ = tx.send(e.clone());
            seen.push(e);
        }
        seen
    });
    let reporting = tokio::spawn(report::drain(rx, reporters));
    let (stop, interrupt) = tokio::sync::watch::channel(false);
    if let Some(after) = interrupt_after {
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            let _ = stop.send(true);
        });
    } else {
        std::mem::forget(stop);
    }
    let report = run(
        scenarios,
        Arc::new(launcher),
        Arc::new(FakeWorlds),
        options,
        events_tx,
        interrupt,
    )
    .await;
    let events = fan.await.unwrap();
    reporting.await.unwrap().unwrap();
    Outcome { report, events }
}

async fn rx_recv(rx: &mut tokio::sync::mpsc::UnboundedReceiver<RunEvent>) -> Option<RunEvent> {
    rx.recv().await
}

pub(crate) fn verdict_of<'a>(report: &'a RunReport, id: &str) -> &'a Verdict {
    &report
        .results
        .iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("no result for {id}"))
        .verdict
}

#[tokio::test]
async fn a_correct_host_passes_with_events_for_every_step() {
    let dir = fixture_catalogue();
    let out = run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::Correct),
        RunOptions::default(),
        vec![],
        None,
    )
    .await;
    let result = &out.report.results[0];
    assert_eq!(
        result.verdict,
        Verdict::Pass,
        "failures: {:#?}",
        result.failures
    );
    assert_eq!(result.steps_run, 4);
    let steps = out
        .events
        .iter()
        .filter(|e| matches!(e, RunEvent::StepFinished(_)))
        .count();
    assert_eq!(steps, 4);
    assert!(matches!(
        out.events.first(),
        Some(RunEvent::RunStarted { total: 1, .. })
    ));
    assert!(matches!(
        out.events.last(),
        Some(RunEvent::RunFinished { .. })
    ));
    assert!(!out.report.summary.failed());
}

#[tokio::test]
async fn a_wrong_host_is_reported_with_invariant_step_expected_observed_and_evidence() {
    let dir = fixture_catalogue();
    let human = tempfile::NamedTempFile::new().unwrap();
    let reporters = vec![report::file_reporter(
        Format::Human,
        human.path().to_path_buf(),
    )];
    let out = run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::AdmitsEverything),
        RunOptions::default(),
        reporters,
        None,
    )
    .await;
    let result = &out.report.results[0];
    assert_eq!(result.verdict, Verdict::Fail);
    assert!(out.report.summary.failed());

    let outcome = result
        .failures
        .iter()
        .find(|f| f.at == "steps[1].expect.outcome")
        .expect("the admitted delegation fails its outcome expectation");
    assert_eq!(outcome.kind, FailureKind::Expectation);
    assert_eq!(outcome.step, 1);
    assert_eq!(outcome.expected, "denied");
    assert_eq!(outcome.observed, "ok");
    assert!(outcome.invariants.contains(&InvariantId::ZC1));

    let requests = result
        .failures
        .iter()
        .find(|f| f.at == "steps[1].expect.delta.model_requests_new_instances")
        .expect("the child's model request is counted by the harness's own observer");
    assert_eq!(
        (requests.expected.as_u64(), requests.observed.as_u64()),
        (Some(0), Some(1))
    );
    // The evidence is the observer's count for the child, not the host's word.
    assert_eq!(
        requests.evidence["observers"]["model_requests"]["inst-2"],
        1
    );
    assert_eq!(requests.evidence["host_reply"]["instance"], "inst-2");
    assert_eq!(requests.evidence["stderr_tail"], "fake host log line");

    // The model's checkers see the admitted child above its parent's ceiling.
    let ce1 = result
        .failures
        .iter()
        .find(|f| f.kind == FailureKind::Invariant && f.invariants == [InvariantId::CE1])
        .unwrap_or_else(|| panic!("a CE1 violation; failures: {:#?}", result.failures));
    assert_eq!(ce1.step, 1);

    let text = std::fs::read_to_string(human.path()).unwrap();
    assert!(
        text.contains("FAIL zc/001-network-above-ceiling [MUST]"),
        "{text}"
    );
    assert!(
        text.contains("step 1 at steps[1].expect.outcome: expected \"denied\", observed \"ok\""),
        "{text}"
    );
    assert!(text.contains("[CE1] step 1 at CE1"), "{text}");
    assert!(text.contains("\"model_requests\":{\"inst-2\":1}"), "{text}");
    assert!(text.contains("FAILED: 1 scenarios"), "{text}");
    assert!(!text.contains('\x1b'), "file reports carry no colour codes");
}

#[tokio::test]
async fn junit_json_and_markdown_reports_are_written_and_junit_parses_as_xml() {
    let dir = control_and_negative();
    let files = tempfile::tempdir().unwrap();
    let path = |n: &str| files.path().join(n);
    let reporters = vec![
        report::file_reporter(Format::Junit, path("junit.xml")),
        report::file_reporter(Format::Json, path("report.json")),
        report::file_reporter(Format::Markdown, path("summary.md")),
    ];
    run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::AdmitsEverything),
        RunOptions::default(),
        reporters,
        None,
    )
    .await;

    let xml = std::fs::read_to_string(path("junit.xml")).unwrap();
    let mut reader = quick_xml::Reader::from_str(&xml);
    let (mut suites, mut cases, mut failure_messages) = (Vec::new(), Vec::new(), Vec::new());
    loop {
        match reader
            .read_event()
            .expect("JUnit output is well-formed XML")
        {
            quick_xml::events::Event::Eof => break,
            quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e) => {
                let attr = |name: &str| {
                    e.attributes()
                        .flatten()
                        .find(|a| a.key.as_ref() == name.as_bytes())
                        .map(|a| String::from_utf8_lossy(&a.value).into_owned())
                };
                match e.name().as_ref() {
                    b"testsuite" => suites.push(attr("name").unwrap()),
                    b"testcase" => cases.push(attr("name").unwrap()),
                    b"failure" => failure_messages.push(attr("message").unwrap_or_default()),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    assert_eq!(suites, ["zc"], "one testsuite per area");
    assert_eq!(
        cases,
        ["zc/002-control", "zc/003-negative"],
        "one testcase per scenario"
    );
    // The wrong host admits everything: the control passes and the negative
    // fails on its own evidence.
    assert_eq!(failure_messages.len(), 1, "{xml}");
    assert!(
        failure_messages[0].contains("ZC1") && failure_messages[0].contains("CE1"),
        "{xml}"
    );

    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(path("report.json")).unwrap()).unwrap();
    assert_eq!(json["summary"]["fail"], 1);
    assert_eq!(json["summary"]["inconclusive"], 0);
    assert_eq!(json["scenarios"][1]["verdict"], "fail");
    assert_eq!(json["interrupted"], false);
    assert_eq!(json["summary"]["ran"], 2);
    assert_eq!(json["by_area"]["zc"]["pass"], 1);
    assert_eq!(json["by_area"]["zc"]["fail"], 1);

    let md = std::fs::read_to_string(path("summary.md")).unwrap();
    assert!(md.contains("| `zc/003-negative` | MUST |"), "{md}");
    // The per-area table: ran, pass, fail, known failures, unverified (known), unsupported (known), error, stale.
    assert!(
        md.contains("| zc | 2 | 1 | 1 | 0 | 0 (0) | 0 (0) | 0 | 0 |"),
        "{md}"
    );
    // Failures first: the failed negative, its evidence once, and how to rerun it alone.
    let look = md
        .find("### Needs a look (1)")
        .expect("a needs-a-look section");
    let table = md.find("### All scenarios").expect("the full table");
    assert!(look < table, "{md}");
    let section = &md[look..table];
    assert!(
        section.contains("zc/003-negative") && !section.contains("zc/002-control"),
        "{md}"
    );
    // Evidence once per failed step, not once per failed check.
    let failed_steps: std::collections::BTreeSet<u64> = json["scenarios"][1]["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["step"].as_u64().unwrap())
        .collect();
    let failed_checks = json["scenarios"][1]["failures"].as_array().unwrap().len();
    assert!(
        failed_checks > failed_steps.len(),
        "the fixture fails several checks in one step"
    );
    assert_eq!(
        section.matches("  evidence: ").count(),
        failed_steps.len(),
        "{md}"
    );
    assert!(
        section.contains("rerun: <code>delegation-harness run --host"),
        "{md}"
    );
    // JUnit carries the failure's evidence, not only its message.
    assert!(xml.contains("evidence: "), "{xml}");
}

#[test]
fn host_text_in_reports_is_made_printable_and_bounded() {
    use delegation_runner::report::{bounded, printable};
    assert_eq!(
        printable("a\x1b[31mred\x00\nnext\tcol"),
        "a\\u{1b}[31mred\\u{0}\nnext\tcol"
    );
    assert_eq!(printable("plain"), "plain");
    let long = "x".repeat(50);
    assert_eq!(bounded(&long, 100), long);
    let cut = bounded(&long, 10);
    assert!(
        cut.starts_with("xxxxxxxxxx…") && cut.contains("JSON report"),
        "{cut}"
    );
}

#[tokio::test]
async fn a_passing_negative_whose_control_fails_is_inconclusive_not_pass() {
    let dir = control_and_negative();
    let out = run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::NeverSpawns),
        RunOptions::default(),
        vec![],
        None,
    )
    .await;
    // A host that never spawns refuses the negative's child as it should, but
    // its control cannot spawn either: the negative proves nothing.
    assert!(matches!(
        verdict_of(&out.report, "zc/002-control"),
        Verdict::Fail
    ));
    match verdict_of(&out.report, "zc/003-negative") {
        Verdict::Inconclusive {
            control,
            control_verdict,
        } => {
            assert_eq!(control, "zc/002-control");
            assert_eq!(control_verdict, "fail");
        }
        other => panic!("expected inconclusive, got {other:?}"),
    }
}

/// A maintainer may list a negative that stays inconclusive on their host
/// (its control cannot pass there): it is then known, not a security
/// violation, and the run exits 0; the same entry on a host where the
/// negative's control passes is stale, so the listing cannot outlive its cause.
#[tokio::test]
async fn a_listed_inconclusive_negative_is_known_and_goes_stale_once_its_control_passes() {
    let dir = control_and_negative();
    let negative_entry = r#"{"scenario": "zc/003-negative", "expect": "inconclusive",
                             "reason": "its control cannot spawn on this host"}"#;
    let control_entry = r#"{"scenario": "zc/002-control", "expect": "fail",
                            "reason": "this host never spawns"}"#;
    let listed = |entries: &[&str]| RunOptions {
        expectations: expectations(&format!(r#"{{"known": [{}]}}"#, entries.join(","))),
        ..RunOptions::default()
    };
    let out = run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::NeverSpawns),
        listed(&[negative_entry, control_entry]),
        vec![],
        None,
    )
    .await;
    let negative = verdict_of(&out.report, "zc/003-negative");
    assert_eq!(negative.name(), "known-inconclusive", "{negative:?}");
    assert!(matches!(
        negative,
        Verdict::KnownFailure {
            security: false,
            ..
        }
    ));
    let s = &out.report.summary;
    assert_eq!((s.inconclusive, s.known_inconclusive), (0, 1));
    assert_eq!(delegation_runner::exit_code_for(&out.report), 0);

    let unlisted = run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::NeverSpawns),
        RunOptions::default(),
        vec![],
        None,
    )
    .await;
    assert_eq!(unlisted.report.summary.inconclusive, 1);
    assert_ne!(delegation_runner::exit_code_for(&unlisted.report), 0);

    let out = run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::Correct),
        listed(&[negative_entry]),
        vec![],
        None,
    )
    .await;
    assert!(
        matches!(
            verdict_of(&out.report, "zc/003-negative"),
            Verdict::Stale { .. }
        ),
        "{:?}",
        verdict_of(&out.report, "zc/003-negative")
    );
}

#[tokio::test]
async fn a_negative_waits_for_its_control_and_passes_when_the_control_passes() {
    let dir = control_and_negative();
    // Seeds that would put the negative first must still run the control first.
    for seed in 0..4 {
        let options = RunOptions {
            seed,
            jobs: 2,
            ..RunOptions::default()
        };
        let out = run_with(
            dir.path(),
            FakeLauncher::new(Behaviour::Correct),
            options,
            vec![],
            None,
        )
        .await;
        assert_eq!(verdict_of(&out.report, "zc/002-control"), &Verdict::Pass);
        assert_eq!(verdict_of(&out.report, "zc/003-negative"), &Verdict::Pass);
        let started: Vec<&str> = out
            .events
            .iter()
            .filter_map(|e| match e {
                RunEvent::ScenarioStarted { id } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            started,
            ["zc/002-control", "zc/003-negative"],
            "seed {seed}"
        );
    }
}

#[tokio::test]
async fn a_crashing_host_is_an_error_with_its_stderr_tail() {
    let dir = fixture_catalogue();
    let out = run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::CrashesOnDelegate),
        RunOptions::default(),
        vec![],
        None,
    )
    .await;
    match verdict_of(&out.report, FIXTURE) {
        Verdict::Error {
            message,
            stderr_tail,
        } => {
            assert!(message.contains("step 1 (delegate)"), "{message}");
            assert!(message.contains("panic: delegate exploded"), "{message}");
            assert_eq!(stderr_tail, "fake host log line");
        }
        other => panic!("expected an error verdict, got {other:?}"),
    }
    assert!(out.report.summary.failed());
}

#[tokio::test]
async fn a_missing_capability_is_unsupported_but_authority_widening_ones_still_run() {
    let dir = fixture_catalogue();
    let mut launcher = FakeLauncher::new(Behaviour::Correct);
    launcher.capabilities.clear();
    let out = run_with(dir.path(), launcher, RunOptions::default(), vec![], None).await;
    assert_eq!(
        verdict_of(&out.report, FIXTURE),
        &Verdict::Unsupported {
            missing: vec!["restart".into()]
        }
    );
    assert!(!out.report.summary.failed());

    let widening = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(widening.path().join("zc")).unwrap();
    let mut value: Value = serde_json::from_str(&fixture_text()).unwrap();
    value["needs"] = serde_json::json!(["restart", "remote-targets"]);
    std::fs::write(
        widening.path().join(format!("{FIXTURE}.json")),
        value.to_string(),
    )
    .unwrap();
    let out = run_with(
        widening.path(),
        FakeLauncher::new(Behaviour::Correct),
        RunOptions::default(),
        vec![],
        None,
    )
    .await;
    assert_eq!(
        verdict_of(&out.report, FIXTURE),
        &Verdict::Pass,
        "remote-targets is a way to more authority: it runs"
    );
}

#[tokio::test]
async fn another_protocol_major_version_is_refused() {
    let dir = fixture_catalogue();
    let mut launcher = FakeLauncher::new(Behaviour::Correct);
    launcher.protocol_version = "2.0".into();
    let out = run_with(dir.path(), launcher, RunOptions::default(), vec![], None).await;
    match verdict_of(&out.report, FIXTURE) {
        Verdict::Error { message, .. } => assert!(
            message.contains("major versions must be equal"),
            "{message}"
        ),
        other => panic!("expected an error verdict, got {other:?}"),
    }
}

fn expectations(text: &str) -> HostExpectations {
    HostExpectations::parse(text, Path::new("expectations.json")).unwrap()
}

#[tokio::test]
async fn a_listed_failure_is_known_and_a_must_one_stays_a_security_violation() {
    let dir = fixture_catalogue();
    let options = RunOptions {
        expectations: expectations(
            r#"{"known": [{"scenario": "zc/*", "expect": "fail", "reason": "issue 7"}]}"#,
        ),
        ..RunOptions::default()
    };
    let out = run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::AdmitsEverything),
        options,
        vec![],
        None,
    )
    .await;
    assert_eq!(
        verdict_of(&out.report, FIXTURE),
        &Verdict::KnownFailure {
            reason: "issue 7".into(),
            issue: None,
            expected: "fail".into(),
            security: true
        }
    );
    assert_eq!(out.report.summary.known_security_violations, 1);
    assert!(!out.report.summary.failed());
    // The failures stay in the result, for the report.
    assert!(!out.report.results[0].failures.is_empty());
}

#[tokio::test]
async fn a_listed_failure_that_passes_is_stale_and_fails_the_run() {
    let dir = fixture_catalogue();
    let options = RunOptions {
        expectations: expectations(
            r#"{"known": [{"scenario": "zc/001-*", "expect": "fail", "reason": "issue 7"}]}"#,
        ),
        ..RunOptions::default()
    };
    let out = run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::Correct),
        options,
        vec![],
        None,
    )
    .await;
    match verdict_of(&out.report, FIXTURE) {
        Verdict::Stale { reason } => assert!(
            reason.contains("remove the entry") && reason.contains("issue 7"),
            "{reason}"
        ),
        other => panic!("expected stale, got {other:?}"),
    }
    assert!(out.report.summary.failed());
}

#[test]
fn an_expectations_file_error_names_the_path() {
    let err = HostExpectations::parse(
        r#"{"known": [{"scenario": "zc/*", "expect": "flaky", "reason": ""}]}"#,
        Path::new("host.json"),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("host.json: at `known[0].expect`"), "{err}");
    assert!(err.contains("unknown variant `flaky`"), "{err}");
}

#[tokio::test]
async fn an_interrupted_run_still_writes_its_reports() {
    let dir = control_and_negative();
    let files = tempfile::tempdir().unwrap();
    let json_path: PathBuf = files.path().join("report.json");
    let junit_path: PathBuf = files.path().join("junit.xml");
    let reporters = vec![
        report::file_reporter(Format::Json, json_path.clone()),
        report::file_reporter(Format::Junit, junit_path.clone()),
    ];
    let started = std::time::Instant::now();
    let out = run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::Slow),
        RunOptions::default(),
        reporters,
        Some(Duration::from_millis(300)),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the interrupt stopped the 30 s step"
    );
    assert!(out.report.interrupted);
    assert_eq!(out.report.summary.not_run, 2);
    assert!(matches!(
        out.events.last(),
        Some(RunEvent::RunInterrupted { .. })
    ));
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(json["interrupted"], true);
    assert_eq!(json["summary"]["not_run"], 2);
    let xml = std::fs::read_to_string(&junit_path).unwrap();
    assert!(xml.contains(r#"name="interrupted" value="true""#), "{xml}");
}

#[test]
fn filters_select_by_substring_glob_and_invariant_and_pull_in_controls() {
    let dir = control_and_negative();
    let catalogue = Catalogue::load(dir.path()).unwrap();
    let ids = |f: Filter| {
        catalogue
            .select(&f)
            .iter()
            .map(|s| s.id.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(Filter::new(&["003".into()], &[]).unwrap()),
        ["zc/002-control", "zc/003-negative"]
    );
    assert_eq!(
        ids(Filter::new(&["zc/00[2]-*".into()], &[]).unwrap()),
        ["zc/002-control"]
    );
    assert_eq!(
        ids(Filter::new(&[], &[InvariantId::TR1]).unwrap()),
        Vec::<String>::new()
    );
    assert_eq!(ids(Filter::new(&[], &[InvariantId::ZC2]).unwrap()).len(), 2);
    assert!(
        Filter::new(&["zc/[".into()], &[])
            .unwrap_err()
            .to_string()
            .contains("not a valid --filter glob")
    );
}

#[test]
fn the_human_reporter_writes_plain_lines_when_not_a_terminal() {
    let buffer = tempfile::NamedTempFile::new().unwrap();
    let mut reporter = HumanReporter::plain(buffer.reopen().unwrap());
    use delegation_runner::report::Reporter;
    reporter
        .event(&RunEvent::RunStarted {
            host: "h".into(),
            total: 0,
            seed: 7,
            jobs: 1,
            model_checkers: true,
            rerun: Default::default(),
        })
        .unwrap();
    reporter
        .event(&RunEvent::RunFinished {
            summary: Default::default(),
        })
        .unwrap();
    let text = std::fs::read_to_string(buffer.path()).unwrap();
    assert!(
        text.starts_with("delegation-harness: 0 scenarios against h (seed 7, 1 job)\n"),
        "{text}"
    );
    assert!(text.contains("PASSED: 0 scenarios"), "{text}");
    assert!(!text.contains('\x1b'), "{text:?}");
}

#[tokio::test]
async fn transcripts_name_instances_by_alias_and_unaliased_ids_by_placeholder() {
    let dir = fixture_catalogue();
    let out = run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::AdmitsEverything),
        RunOptions::default(),
        vec![],
        None,
    )
    .await;
    let transcript = out.report.results[0].transcript.to_string();
    assert!(
        transcript.contains("\"<root>\"") && transcript.contains("\"<child>\""),
        "{transcript}"
    );
    assert!(
        !transcript.contains("inst-"),
        "host ids leak into the transcript: {transcript}"
    );

    let raw = delegation_runner::execute::Transcript {
        steps: vec![serde_json::json!({
            "reply": { "instance": "h-9", "receipt": { "id": "r-1", "seal": "s3cr3t", "expires_at": 5 } },
            "evidence": { "model_requests": { "h-9": 1 } },
        })],
        aliases: vec![],
        secrets: vec![],
    };
    let normal = delegation_runner::snapshot::normalise(raw);
    assert_eq!(normal[0]["reply"]["instance"], "<id:1>");
    assert_eq!(normal[0]["reply"]["receipt"]["id"], "<id:2>");
    assert_eq!(normal[0]["reply"]["receipt"]["seal"], "<secret>");
    assert_eq!(normal[0]["reply"]["receipt"]["expires_at"], "<time>");
    assert_eq!(
        normal[0]["evidence"]["model_requests"]["<id:1>"], 1,
        "ids as map keys too"
    );
}

#[tokio::test]
async fn a_failing_observer_is_a_harness_error_not_the_hosts() {
    // The fixture with one observer-side step; the fake world cannot apply
    // any, as an observer the harness failed to reach would not.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("zc")).unwrap();
    let mut scenario: Value = serde_json::from_str(&fixture_text()).unwrap();
    scenario["steps"].as_array_mut().unwrap().insert(
        1,
        serde_json::json!({"tool_server": {"remove": "notes.read"}}),
    );
    std::fs::write(
        dir.path().join(format!("{FIXTURE}.json")),
        scenario.to_string(),
    )
    .unwrap();
    let out = run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::Correct),
        RunOptions::default(),
        vec![],
        None,
    )
    .await;
    match verdict_of(&out.report, FIXTURE) {
        Verdict::HarnessError { message } => {
            assert!(
                message.contains("the harness's own observer failed"),
                "{message}"
            )
        }
        other => panic!("expected a harness error, got {other:?}"),
    }
    assert_eq!(out.report.summary.harness_error, 1);
    assert_eq!(out.report.summary.error + out.report.summary.fail, 0);
    assert!(
        !out.report.summary.failed(),
        "a harness error is no violation"
    );
    // Positive control: `a_correct_host_passes_with_events_for_every_step`,
    // the same host on the fixture without the observer step.
}
