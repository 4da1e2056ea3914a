//! The per-host expectations file: known failures, unsupported and error
//! entries, stale entries, the MUST-tier rule in every report, and the
//! host's own deny-reason names.

use std::path::Path;

use delegation_model::DenyReason;
use delegation_runner::report::{self, Format};
use delegation_runner::verdict::Verdict;
use delegation_runner::{HostExpectations, RunOptions};
use serde_json::{Value, json};

use crate::fake::{Behaviour, FakeLauncher};
use crate::{FIXTURE, fixture_catalogue, run_with, verdict_of};

fn expectations(text: &str) -> HostExpectations {
    HostExpectations::parse(text, Path::new("host.expectations.json"))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn options(text: &str) -> RunOptions {
    RunOptions {
        expectations: expectations(text),
        ..RunOptions::default()
    }
}

#[tokio::test]
async fn a_must_known_failure_is_a_security_violation_in_every_report_and_never_a_pass() {
    let dir = fixture_catalogue();
    let files = tempfile::tempdir().unwrap();
    let path = |n: &str| files.path().join(n);
    let reporters = vec![
        report::file_reporter(Format::Human, path("run.txt")),
        report::file_reporter(Format::Json, path("run.json")),
        report::file_reporter(Format::Junit, path("run.xml")),
        report::file_reporter(Format::Markdown, path("run.md")),
    ];
    let out = run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::AdmitsEverything),
        options(
            r#"{"known": [{"scenario": "zc/001-*", "expect": "fail", "reason": "admits above the ceiling",
                           "issue": "https://example.org/host/issues/7"}]}"#,
        ),
        reporters,
        None,
    )
    .await;
    let s = &out.report.summary;
    assert_eq!(
        (s.pass, s.known_failure, s.known_security_violations),
        (0, 1, 1)
    );
    assert!(!s.failed(), "a listed failure does not fail the run");

    let label = "KNOWN SECURITY VIOLATION (MUST): known fail: admits above the ceiling (https://example.org/host/issues/7)";
    let human = std::fs::read_to_string(path("run.txt")).unwrap();
    assert!(human.contains(label), "{human}");
    assert!(human.contains("0 passed"), "{human}");
    assert!(
        human.contains("1 known failures (1 known security violations), 0 known unsupported"),
        "{human}"
    );
    let md = std::fs::read_to_string(path("run.md")).unwrap();
    assert!(md.contains(&format!("**{label}**")), "{md}");
    let xml = std::fs::read_to_string(path("run.xml")).unwrap();
    assert!(xml.contains(label), "{xml}");
    assert!(
        xml.contains(r#"name="known-security-violation" value="zc/001-network-above-ceiling""#),
        "{xml}"
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(path("run.json")).unwrap()).unwrap();
    assert_eq!(json["summary"]["known_security_violations"], 1);
    assert_eq!(json["summary"]["pass"], 0);
    let scenario = &json["scenarios"][0];
    assert_eq!(scenario["verdict"], "known_failure");
    assert_eq!(scenario["security"], true);
    assert_eq!(scenario["issue"], "https://example.org/host/issues/7");
    assert_eq!(scenario["raw_verdict"], "fail");
    assert!(
        !scenario["failures"].as_array().unwrap().is_empty(),
        "the evidence stays"
    );
}

#[tokio::test]
async fn a_listed_unsupported_scenario_is_known_but_not_a_security_violation() {
    let dir = fixture_catalogue();
    let mut launcher = FakeLauncher::new(Behaviour::Correct);
    launcher.capabilities.clear();
    let out = run_with(
        dir.path(),
        launcher,
        options(r#"{"known": [{"scenario": "zc/*", "expect": "unsupported", "reason": "no restart yet"}]}"#),
        vec![],
        None,
    )
    .await;
    assert_eq!(
        verdict_of(&out.report, FIXTURE),
        &Verdict::KnownFailure {
            reason: "no restart yet".into(),
            issue: None,
            expected: "unsupported".into(),
            security: false,
        }
    );
    let s = &out.report.summary;
    assert_eq!(
        (
            s.known_unsupported,
            s.known_failure,
            s.known_security_violations
        ),
        (1, 0, 0),
        "counted as known unsupported, apart from known failures"
    );
    assert_eq!(
        verdict_of(&out.report, FIXTURE).name(),
        "known-unsupported",
        "labelled as what it is in the human and Markdown reports"
    );
}

#[tokio::test]
async fn a_listed_error_is_known_and_on_a_must_scenario_a_security_violation() {
    let dir = fixture_catalogue();
    let out = run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::CrashesOnDelegate),
        options(r#"{"known": [{"scenario": "zc/001-network-above-ceiling", "expect": "error", "reason": "delegate crashes"}]}"#),
        vec![],
        None,
    )
    .await;
    assert!(
        matches!(verdict_of(&out.report, FIXTURE), Verdict::KnownFailure { expected, security: true, .. } if expected == "error"),
        "{:?}",
        verdict_of(&out.report, FIXTURE)
    );
    assert!(!out.report.summary.failed());
}

#[tokio::test]
async fn an_entry_expecting_another_outcome_does_not_hide_the_actual_one() {
    let dir = fixture_catalogue();
    let out = run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::CrashesOnDelegate),
        options(r#"{"known": [{"scenario": "zc/*", "expect": "fail", "reason": "r"}]}"#),
        vec![],
        None,
    )
    .await;
    assert!(matches!(
        verdict_of(&out.report, FIXTURE),
        Verdict::Error { .. }
    ));
    assert!(out.report.summary.failed());
}

#[tokio::test]
async fn a_stale_entry_names_its_pattern_reason_and_issue_and_fails_the_run() {
    let dir = fixture_catalogue();
    let out = run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::Correct),
        options(r#"{"known": [{"scenario": "zc/00?-*", "expect": "error", "reason": "crashes", "issue": "issue-9"}]}"#),
        vec![],
        None,
    )
    .await;
    match verdict_of(&out.report, FIXTURE) {
        Verdict::Stale { reason } => {
            assert!(
                reason.contains("expected error (crashes (issue-9))"),
                "{reason}"
            );
            assert!(
                reason.contains("`zc/00?-*`") && reason.contains("remove the entry"),
                "{reason}"
            );
        }
        other => panic!("expected stale, got {other:?}"),
    }
    assert!(out.report.summary.failed());
}

#[tokio::test]
async fn a_host_reason_name_outside_the_vocabulary_is_named_with_the_fix() {
    let dir = fixture_catalogue();
    let out = run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::ForeignReason),
        RunOptions::default(),
        vec![],
        None,
    )
    .await;
    let Verdict::Error { message, .. } = verdict_of(&out.report, FIXTURE) else {
        panic!("expected an error verdict");
    };
    assert!(
        message.contains("deny reason `quota_exceeded`"),
        "{message}"
    );
    assert!(
        message.contains(r#""deny_reasons": {"quota_exceeded": "policy_denied"}"#),
        "{message}"
    );
}

#[test]
fn deny_reason_names_map_through_the_file_and_unmapped_ones_are_refused() {
    let e = expectations(
        r#"{"deny_reasons": {"quota_exceeded": "policy_denied", "gone": "instance_unknown"}}"#,
    );
    assert!(e.entries.is_empty(), "`known` may be left out");
    assert_eq!(
        e.deny_reason("quota_exceeded", "reason"),
        Ok(DenyReason::PolicyDenied)
    );
    assert_eq!(
        e.deny_reason("tool_drift", "reason"),
        Ok(DenyReason::ToolDrift),
        "harness names mean themselves"
    );

    let mut reply = json!({
        "outcome": "denied", "reason": "quota_exceeded",
        "tool_call": { "tool": "t", "outcome": "denied", "reason": "gone" },
        "turn": { "reply": "spawn", "spawn": { "outcome": "denied", "reason": "ceiling_exceeded" } },
        "observed": { "records": [ { "deny_reasons": ["gone", "tool_drift"] } ] }
    });
    e.translate_reply(&mut reply).unwrap();
    assert_eq!(reply["reason"], "policy_denied");
    assert_eq!(reply["tool_call"]["reason"], "instance_unknown");
    assert_eq!(reply["turn"]["spawn"]["reason"], "ceiling_exceeded");
    assert_eq!(
        reply["observed"]["records"][0]["deny_reasons"],
        json!(["instance_unknown", "tool_drift"])
    );

    let mut reply = json!({ "outcome": "denied", "tool_call": { "reason": "rate_limited" } });
    let err = e.translate_reply(&mut reply).unwrap_err();
    assert_eq!(
        (err.name.as_str(), err.at.as_str()),
        ("rate_limited", "tool_call.reason")
    );
    assert!(
        err.to_string().contains("map it in the expectations file"),
        "{err}"
    );
}

#[test]
fn the_file_refuses_remapping_a_harness_name_unknown_targets_and_empty_reasons() {
    let err = |text: &str| {
        HostExpectations::parse(text, Path::new("host.json"))
            .unwrap_err()
            .to_string()
    };
    let text = err(r#"{"deny_reasons": {"policy_denied": "tool_drift"}}"#);
    assert!(
        text.contains("host.json: at `deny_reasons.policy_denied`"),
        "{text}"
    );
    assert!(text.contains("already a harness deny reason"), "{text}");

    let text = err(r#"{"deny_reasons": {"quota": "too_much"}}"#);
    assert!(text.contains("at `deny_reasons.quota`"), "{text}");
    assert!(
        text.contains("unknown variant `too_much`") && text.contains("policy_denied"),
        "{text}"
    );

    let text = err(r#"{"known": [{"scenario": "zc/*", "expect": "fail", "reason": " "}]}"#);
    assert!(text.contains("at `known[0].reason`"), "{text}");

    let text =
        err(r#"{"known": [{"scenario": "zc/*", "expect": "fail", "reason": "r", "link": "x"}]}"#);
    assert!(
        text.contains("unknown field `link`") && text.contains("`issue`"),
        "{text}"
    );
}

#[tokio::test]
async fn a_known_failure_that_lists_its_checks_is_known_only_while_it_fails_at_them() {
    // What the host fails at, unlisted: the checks to write into `failed`.
    let dir = fixture_catalogue();
    let out = run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::AdmitsEverything),
        RunOptions::default(),
        vec![],
        None,
    )
    .await;
    let failing: Vec<String> = out.report.results[0]
        .failures
        .iter()
        .map(|f| f.at.clone())
        .collect();
    assert!(!failing.is_empty());

    // The same checks listed: the known failure.
    let listed = json!({"known": [{"scenario": "zc/001-*", "expect": "fail", "reason": "admits above the ceiling",
                                   "failed": failing}]});
    let out = run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::AdmitsEverything),
        options(&listed.to_string()),
        vec![],
        None,
    )
    .await;
    assert!(matches!(
        verdict_of(&out.report, FIXTURE),
        Verdict::KnownFailure { .. }
    ));
    assert!(!out.report.summary.failed());

    // Other checks listed: the failure changed, so it is a failure again, saying how.
    let other = json!({"known": [{"scenario": "zc/001-*", "expect": "fail", "reason": "admits above the ceiling",
                                  "failed": ["steps[9].expect.outcome"]}]});
    let out = run_with(
        dir.path(),
        FakeLauncher::new(Behaviour::AdmitsEverything),
        options(&other.to_string()),
        vec![],
        None,
    )
    .await;
    assert!(matches!(verdict_of(&out.report, FIXTURE), Verdict::Fail));
    assert!(out.report.summary.failed());
    let change = out.report.results[0]
        .failures
        .iter()
        .find(|f| f.at == "expectations.failed")
        .expect("the change is a failure of its own");
    assert!(
        change.message.contains("fails differently")
            && change.message.contains("steps[9].expect.outcome"),
        "{}",
        change.message
    );
}

#[test]
fn failed_is_refused_on_an_entry_that_does_not_expect_fail() {
    let e = HostExpectations::parse(
        r#"{"known": [{"scenario": "x", "expect": "unsupported", "reason": "r", "failed": ["ZC1"]}]}"#,
        Path::new("host.json"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("known[0].failed"), "{e}");
}

#[test]
fn a_host_layers_decoding_error_names_the_hosts_reason_and_the_harness_names() {
    let e = expectations(r#"{"deny_reasons": {"quota_exceeded": "policy_denied"}}"#);
    // The error a host layer that decodes a raw reply itself reports.
    let decode = |reply: Value| {
        let error = serde_json::from_value::<delegation_model::ActionResult>(reply).unwrap_err();
        delegation_host::HostError::Protocol {
            method: "instance/turn".into(),
            detail: format!("result does not match ActionResult: {error}"),
        }
        .to_string()
    };

    let message = decode(json!({"outcome": "denied", "reason": "rate_limited"}));
    let unmapped = e
        .unmapped_in_error(&message)
        .unwrap_or_else(|| panic!("a reason-shaped error: {message}"));
    assert_eq!(unmapped.name, "rate_limited");
    let text = unmapped.to_string();
    assert!(
        text.contains("rate_limited") && text.contains("map it in the expectations file"),
        "{text}"
    );
    for name in DenyReason::names() {
        assert!(text.contains(name), "lists `{name}`: {text}");
    }
    // A mapped name is found too: the runner then says the layer skipped the translation.
    let message = decode(json!({"outcome": "denied", "reason": "quota_exceeded"}));
    assert_eq!(
        e.unmapped_in_error(&message).map(|u| u.name),
        Some("quota_exceeded".to_string())
    );

    // Controls: an error about another field, and one that is not about names at all.
    let message = decode(json!({"outcome": "exploded"}));
    assert_eq!(e.unmapped_in_error(&message), None, "{message}");
    let message = decode(json!({"outcome": "denied", "reason": 7}));
    assert_eq!(e.unmapped_in_error(&message), None, "{message}");
}
