//! `delegation-harness selftest`: the correct host passes, and mutants whose families have scenarios are killed for the right reason.
//!
//! Small selections keep the suite quick; the full kill matrix is
//! `delegation-harness selftest --jobs 8` on the whole catalogue.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use delegation_host::mutants::Defect;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn harness(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_delegation-harness"))
        .arg("selftest")
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

/// The line of `defect` in the live progress output.
fn verdict_of(out: &str, defect: Defect) -> &str {
    out.lines()
        .find(|l| l.starts_with(defect.name()))
        .unwrap_or_else(|| panic!("no line for {defect} in:\n{out}"))
}

#[test]
fn zc_mutants_are_killed_on_the_fixture_catalogue() {
    let fixtures = workspace().join("harness/runner/tests/fixtures/catalogue");
    let report = tempfile::NamedTempFile::new().unwrap();
    let json_arg = format!("json={}", report.path().display());
    let o = harness(&[
        "--scenarios",
        fixtures.to_str().unwrap(),
        "--defect",
        "child-before-policy-check",
        "--defect",
        "model-request-before-admission",
        "--report",
        &json_arg,
    ]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("correct host: 1 passed"), "{out}");
    for d in [
        Defect::ChildBeforePolicyCheck,
        Defect::ModelRequestBeforeAdmission,
    ] {
        assert!(
            verdict_of(&out, d).ends_with("killed for the right reason"),
            "{out}"
        );
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.path()).unwrap()).unwrap();
    assert_eq!(json["correct_host"]["passes"], true);
    let mutants = json["mutants"].as_array().unwrap();
    assert_eq!(mutants.len(), 2);
    for m in mutants {
        assert_eq!(m["status"], "killed", "{m}");
        assert_eq!(m["killed_by"][0], "zc/001-network-above-ceiling", "{m}");
    }
}

#[test]
fn tr_pg_sd_mutants_are_killed_for_the_right_reason_on_the_catalogue() {
    let scenarios = workspace().join("scenarios");
    let md = tempfile::NamedTempFile::new().unwrap();
    let md_arg = format!("markdown={}", md.path().display());
    let defects = [
        Defect::FollowupAfterClose,
        Defect::TerminalNotPersisted,
        Defect::AutoSkipsReadOnly,
        Defect::AnswerTwice,
        Defect::ToolsBoundByName,
    ];
    let mut args = vec![
        "--scenarios".to_string(),
        scenarios.to_str().unwrap().to_string(),
        "--jobs".into(),
        "4".into(),
        "--report".into(),
        md_arg,
    ];
    for f in [
        "tr/002-*", "tr/022-*", "pg/007-*", "pg/011-*", "sd/001-*", "sd/008-*",
    ] {
        args.extend(["--filter".to_string(), f.to_string()]);
    }
    for d in defects {
        args.extend(["--defect".to_string(), d.name().to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = harness(&args);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    // Globs may match more than one file each as the catalogue grows; what matters is that all pass.
    assert!(
        out.contains("unsupported, 0 not passing") && !out.contains("correct host: 0 passed"),
        "{out}"
    );
    for d in defects {
        assert!(
            verdict_of(&out, d).ends_with("killed for the right reason"),
            "{d} should be killed by a scenario checking {}:\n{out}",
            d.invariant()
        );
    }
    let md = std::fs::read_to_string(md.path()).unwrap();
    assert!(md.contains("| `answer-twice` | PG2 |"), "{md}");
    assert!(
        md.contains("`pg/007-second-answer-refused`"),
        "the killer is named: {md}"
    );
}

/// The checkers' other sides: a clarification question denied as if it
/// were an approval (PG4), a constraint clipped to the child instead of
/// refused (EA3), a look-alike tool name run as the sealed tool (SD2).
#[test]
fn question_constraint_and_dispatch_name_mutants_are_killed_for_the_right_reason() {
    let scenarios = workspace().join("scenarios");
    let defects = [
        Defect::QuestionDeniedAsApproval,
        Defect::ConstraintClippedToChild,
        Defect::DispatchNameNormalised,
    ];
    let mut args = vec![
        "--scenarios".to_string(),
        scenarios.to_str().unwrap().to_string(),
        "--jobs".into(),
        "2".into(),
    ];
    for f in [
        "pg/240-*", "pg/241-*", "ea/009-*", "ea/011-*", "ea/250-*", "ce/250-*", "sd/001-*",
        "sd/245-*",
    ] {
        args.extend(["--filter".to_string(), f.to_string()]);
    }
    for d in defects {
        args.extend(["--defect".to_string(), d.name().to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = harness(&args);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    for d in defects {
        assert!(
            verdict_of(&out, d).ends_with("killed for the right reason"),
            "{d} should be killed by a scenario checking {}:\n{out}",
            d.invariant()
        );
    }
}

#[test]
fn a_surviving_mutant_fails_the_selftest() {
    let fixtures = workspace().join("harness/runner/tests/fixtures/catalogue");
    let o = harness(&[
        "--scenarios",
        fixtures.to_str().unwrap(),
        "--defect",
        "secret-in-audit",
    ]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        verdict_of(&out, Defect::SecretInAudit)
            .contains("SURVIVED (no selected scenario checks TC4)"),
        "{out}"
    );
}

#[test]
fn an_unknown_defect_is_a_usage_error_listing_valid_names() {
    let o = harness(&["--defect", "no-such-bug"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains("no-such-bug") && out.contains("followup-after-close"),
        "{out}"
    );
}

/// The spawn-based twins alone (every child from the model's spawn) kill the
/// mutants that kill their originals through a turn, a close, a resume, a
/// fork, a restart or a drifted tool. The admission mutants that kill
/// tr/010 and tr/011 do not apply to their twins: a closed child's turn is
/// refused before its model can ask for a spawn, so no admission runs.
#[test]
fn the_spawned_twins_kill_the_mutants_of_their_originals() {
    let scenarios = workspace().join("scenarios");
    let report = tempfile::NamedTempFile::new().unwrap();
    let json_arg = format!("json={}", report.path().display());
    let defects = [
        Defect::FollowupAfterClose,
        Defect::TerminalNotPersisted,
        Defect::QueuedFollowupAfterClose,
        Defect::ResumeRederivesCeiling,
        Defect::ForkTakesParentCeiling,
        Defect::ToolsBoundByName,
        Defect::DescriptionNotDigested,
    ];
    let mut args = vec![
        "--scenarios".to_string(),
        scenarios.to_str().unwrap().to_string(),
        "--filter".into(),
        "*-spawned".into(),
        "--jobs".into(),
        "2".into(),
        "--report".into(),
        json_arg,
    ];
    for d in defects {
        args.extend(["--defect".to_string(), d.name().to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = harness(&args);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.path()).unwrap()).unwrap();
    assert_eq!(json["correct_host"]["passes"], true, "{out}");
    for m in json["mutants"].as_array().unwrap() {
        assert_eq!(m["status"], "killed", "{m}");
        let killers = m["killed_by"].as_array().unwrap();
        assert!(
            !killers.is_empty()
                && killers
                    .iter()
                    .all(|k| k.as_str().is_some_and(|k| k.ends_with("-spawned"))),
            "only twins were selected, so only twins kill: {m}"
        );
    }
}

/// A host whose model's resume tool reopens a closed child (codex's
/// `resume_agent`) is caught by the lifecycle negatives, which count the
/// child's requests at the harness's endpoint, while the correct host passes them.
#[test]
fn lifecycle_resume_reopens_is_killed_by_the_lifecycle_negatives() {
    let scenarios = workspace().join("scenarios");
    let defect = Defect::LifecycleResumeReopens;
    let md = tempfile::NamedTempFile::new().unwrap();
    let md_arg = format!("markdown={}", md.path().display());
    let o = harness(&[
        "--scenarios",
        scenarios.to_str().unwrap(),
        "--filter",
        "tr/05[678]-*",
        "--defect",
        defect.name(),
        "--report",
        &md_arg,
    ]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("correct host: 3 passed"),
        "the control and both negatives pass on the correct host:\n{out}"
    );
    let verdict = verdict_of(&out, defect);
    assert!(verdict.ends_with("killed for the right reason"), "{out}");
    let matrix = std::fs::read_to_string(md.path()).unwrap();
    assert!(
        matrix.contains("tr/057-closed-child-not-reopened-by-parent-model")
            && matrix.contains("tr/058-child-closed-by-parent-model-stays-closed"),
        "both negatives kill it:\n{matrix}"
    );
}
