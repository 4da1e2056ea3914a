//! The built `delegation-harness` binary: listing, explaining, exit codes and usage errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use delegation_model::InvariantId;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../runner/tests/fixtures/catalogue")
}

fn harness(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_delegation-harness"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn list_shows_scenarios_with_tier_and_checks() {
    let o = harness(&["list", "--scenarios", fixtures().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("zc/001-network-above-ceiling"), "{text}");
    assert!(
        text.contains("MUST") && text.contains("ZC1,ZC2,ZC3,CE1"),
        "{text}"
    );

    let o = harness(&[
        "list",
        "--scenarios",
        fixtures().to_str().unwrap(),
        "--invariant",
        "TR1",
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o), "", "no fixture checks TR1");
}

#[test]
fn list_invariants_shows_every_id_with_tier_and_family() {
    let o = harness(&["list", "--invariants"]);
    assert_eq!(o.status.code(), Some(0));
    let text = stdout(&o);
    assert_eq!(text.lines().count(), InvariantId::ALL.len());
    for id in InvariantId::ALL {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("{id} missing"));
        assert!(
            line.contains(&id.tier().to_string()) && line.contains(id.family()),
            "{line}"
        );
    }
}

#[test]
fn explain_gives_meaning_family_tier_and_scenarios() {
    let o = harness(&[
        "explain",
        "ZC2",
        "--scenarios",
        fixtures().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.starts_with("ZC2 (zero child on deny, MUST)"), "{text}");
    assert!(text.contains(InvariantId::ZC2.meaning()), "{text}");
    assert!(
        text.contains("Checked by:\n  zc/001-network-above-ceiling"),
        "{text}"
    );
}

#[test]
fn an_unknown_invariant_id_is_a_usage_error() {
    let o = harness(&["explain", "ZC9"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("`ZC9` is not an invariant id"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_malformed_report_option_is_a_usage_error() {
    let o = harness(&["run", "--report", "xml=out.xml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("`xml` is not a report format"),
        "{}",
        stderr(&o)
    );
    let o = harness(&["run", "--report", "junit"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("expected FORMAT=FILE"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_broken_catalogue_is_a_harness_error_naming_file_and_path() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("zc")).unwrap();
    std::fs::write(
        dir.path().join("zc/001-x.json"),
        r#"{"id": "zc/001-x", "title": "t", "checks": ["ZC1"], "tier": "MAY", "steps": []}"#,
    )
    .unwrap();
    let o = harness(&["run", "--scenarios", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("zc/001-x.json: at `tier`"), "{err}");
    assert!(err.contains("unknown variant `MAY`"), "{err}");
}

#[test]
fn a_filter_matching_nothing_is_a_harness_error() {
    let o = harness(&[
        "run",
        "--scenarios",
        fixtures().to_str().unwrap(),
        "--filter",
        "no-such-scenario",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no scenario in"), "{}", stderr(&o));
}

#[test]
fn the_reference_host_passes_the_fixture_and_a_stale_expectation_exits_1() {
    let files = tempfile::tempdir().unwrap();
    let junit = files.path().join("junit.xml");
    let o = harness(&[
        "run",
        "--scenarios",
        fixtures().to_str().unwrap(),
        "--seed",
        "3",
        "--report",
        &format!("junit={}", junit.display()),
    ]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}\n{}", stderr(&o));
    assert!(text.contains("seed 3"), "{text}");
    assert!(text.contains("PASS zc/001-network-above-ceiling"), "{text}");
    assert!(
        std::fs::read_to_string(&junit)
            .unwrap()
            .contains("testcase name=\"zc/001-network-above-ceiling\"")
    );

    let expectations = files.path().join("expectations.json");
    std::fs::write(
        &expectations,
        r#"{"known": [{"scenario": "zc/*", "expect": "fail", "reason": "issue 1"}]}"#,
    )
    .unwrap();
    let o = harness(&[
        "run",
        "--scenarios",
        fixtures().to_str().unwrap(),
        "--expectations",
        expectations.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("STALE zc/001-network-above-ceiling"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn a_run_in_which_nothing_ran_is_not_a_pass() {
    // The echo adapter declares only `clock`; the fixture needs `restart`.
    // Its positive control is the reference host passing the same fixture above.
    let echo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/tests/adapters/echo_adapter.py");
    let o = harness(&[
        "run",
        "--scenarios",
        fixtures().to_str().unwrap(),
        "--host",
        &format!("python3 {}", echo.display()),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}\n{}", stdout(&o), stderr(&o));
    assert!(
        stderr(&o).contains("nothing ran: all 1 selected scenarios are unsupported"),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).contains("0 really ran"), "{}", stdout(&o));
}

#[test]
fn a_model_rule_naming_an_alias_matches_once_the_alias_is_bound() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ce")).unwrap();
    let scenario = serde_json::json!({
        "id": "ce/001-rule-by-alias",
        "title": "A model rule written for `root` answers root's turn",
        "checks": ["CE1"],
        "tier": "MUST",
        "setup": { "model": [
            { "when": { "instance": "root" },
              "reply": { "spawn": { "role": "worker", "task": "sub" } } }
        ] },
        "steps": [
            { "start": { "as": "root", "role": "lead", "sandbox": "read-only",
                         "approval_policy": "never", "cwd": "/w/repo" } },
            { "turn": { "instance": "root", "input": "GO", "as": "child" },
              "expect": { "spawn": { "outcome": "ok" }, "delta": { "model_requests_for": { "root": 1 } } } }
        ]
    });
    std::fs::write(
        dir.path().join("ce/001-rule-by-alias.json"),
        scenario.to_string(),
    )
    .unwrap();
    let o = harness(&["run", "--scenarios", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("PASS ce/001-rule-by-alias"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn explain_takes_an_id_in_any_case_and_refuses_a_non_id() {
    let o = harness(&["explain", "zc1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("ZC1 ("), "{}", stdout(&o));
    let o = harness(&["explain", "zc99"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("is not an invariant id"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn report_writes_the_matrix_and_badges_and_names_a_bad_report() {
    let dir = tempfile::tempdir().unwrap();
    let run_json = dir.path().join("reference.json");
    let o = harness(&[
        "run",
        "--scenarios",
        fixtures().to_str().unwrap(),
        "--report",
        &format!("json={}", run_json.display()),
    ]);
    assert!(run_json.is_file(), "{}", stderr(&o));
    let out = dir.path().join("site");
    let o = harness(&[
        "report",
        "--html",
        out.to_str().unwrap(),
        run_json.to_str().unwrap(),
        &format!("again={}", run_json.display()),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let page = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(page.contains("<th>reference</th>") && page.contains("<th>again</th>"));
    assert!(
        page.contains("zc/001-network-above-ceiling"),
        "every scenario has a row"
    );
    assert!(out.join("badges/reference.svg").is_file() && out.join("badges/again.svg").is_file());

    // Not a report: refused before anything is written, naming the file.
    let bogus = dir.path().join("bogus.json");
    std::fs::write(&bogus, "{\"scenarios\": 3}").unwrap();
    let o = harness(&[
        "report",
        "--html",
        dir.path().join("other").to_str().unwrap(),
        bogus.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("bogus.json is not a JSON report"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.path().join("other").exists());
}
