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

#[test]
fn out_of_range_jobs_and_step_timeout_are_usage_errors_naming_flag_and_range() {
    let catalogue = fixtures();
    let catalogue = catalogue.to_str().unwrap();
    for (flag, value, range) in [
        ("--jobs", "0", "expected 1 to 4096"),
        ("--jobs", "5000000000", "expected 1 to 4096"),
        ("--jobs", "-3", "expected 1 to 4096"),
        ("--step-timeout-ms", "0", "expected 1 to 86400000"),
        (
            "--step-timeout-ms",
            "18446744073709551615",
            "expected 1 to 86400000",
        ),
    ] {
        let o = harness(&["run", "--scenarios", catalogue, &format!("{flag}={value}")]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(
            err.contains(flag) && err.contains(range),
            "{flag} {value}: {err}"
        );
        assert!(!err.contains("panicked"), "{flag} {value}: {err}");
    }
    // Positive control: the bounds themselves are accepted and the run passes.
    let o = harness(&[
        "run",
        "--scenarios",
        catalogue,
        "--jobs",
        "4096",
        "--step-timeout-ms",
        "86400000",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("PASS zc/001-network-above-ceiling"),
        "{}",
        stdout(&o)
    );
}

/// The capability scenarios against the reference host, 16 at a time, with
/// the descriptor limit given (soft and hard, so the harness cannot raise it).
fn tc_run_with_descriptor_limit(limit: Option<u32>) -> Output {
    let bin = env!("CARGO_BIN_EXE_delegation-harness");
    let scenarios = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let ulimit = limit
        .map(|n| format!("ulimit -n {n}; "))
        .unwrap_or_default();
    Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{ulimit}exec '{bin}' run --scenarios '{}' --filter 'tc/*' --jobs 16 --seed 1 --step-timeout-ms 10000",
            scenarios.display()
        ))
        .env("NO_COLOR", "1")
        .output()
        .expect("sh runs")
}

#[test]
fn a_run_starved_of_descriptors_blames_the_harness_never_the_host() {
    let o = tc_run_with_descriptor_limit(Some(60));
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(2), "{text}\n{}", stderr(&o));
    let verdicts: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| ["PASS", "FAIL", "ERROR", "HARNESS-ERROR"].contains(w))
        .collect();
    assert!(
        verdicts.contains(&"HARNESS-ERROR"),
        "not starved at all:\n{text}"
    );
    assert!(
        !verdicts.contains(&"FAIL") && !verdicts.contains(&"ERROR"),
        "a starved harness blamed the host:\n{text}"
    );
    assert!(
        text.contains("Raise the limit (`ulimit -n`) or lower --jobs"),
        "{text}"
    );
    assert!(
        stderr(&o).contains("the harness itself failed in"),
        "{}",
        stderr(&o)
    );
    // Said up front too, with the --jobs that fits.
    assert!(
        stderr(&o).contains("warning: --jobs 16 needs about")
            && stderr(&o).contains("Lower --jobs to 2 or raise the limit"),
        "{}",
        stderr(&o)
    );

    // Positive control: the same run with the descriptors it needs passes.
    let o = tc_run_with_descriptor_limit(None);
    assert!(!stderr(&o).contains("warning: --jobs"), "{}", stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains(" 0 failed, 0 errors,") && stdout(&o).contains(" 0 harness errors;"),
        "{}",
        stdout(&o)
    );
}

/// An adapter that answers `initialize` (declaring no capabilities) and then
/// hangs on its first request, after starting a grandchild that leaves its
/// process group (`setsid`). It writes its pid and the grandchild's into
/// `$SLOW_ADAPTER_PIDS` so the test can check that both are gone.
const SLOW_ADAPTER: &str = r#"
import json, os, subprocess, sys, time
pids = os.environ["SLOW_ADAPTER_PIDS"]
for line in sys.stdin:
    request = json.loads(line)
    if request["method"] == "initialize":
        result = {"host": {"name": "slow", "version": "0"}, "protocol_version": "1.0", "capabilities": []}
        print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}), flush=True)
        continue
    escaped = subprocess.Popen(["sleep", "300"], start_new_session=True)
    open(os.path.join(pids, "grandchild-%d" % escaped.pid), "w").close()
    open(os.path.join(pids, "adapter-%d" % os.getpid()), "w").close()
    time.sleep(300)
"#;

/// Whether `pid` is a live process (a zombie waiting to be reaped is not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// pids recorded by the slow adapter, as (what, pid).
fn recorded_pids(dir: &Path) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some((what, pid)) = name.split_once('-') {
            out.push((what.to_string(), pid.parse().unwrap()));
        }
    }
    out
}

/// Two scenarios: the fixture, which needs `restart` and so ends at once as
/// unsupported (a result to report), and its copy needing nothing, which
/// runs and hangs in the slow adapter until the harness is signalled.
fn unsupported_and_hanging_catalogue() -> tempfile::TempDir {
    let catalogue = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(catalogue.path().join("zc")).unwrap();
    let fixture =
        std::fs::read_to_string(fixtures().join("zc/001-network-above-ceiling.json")).unwrap();
    std::fs::write(
        catalogue.path().join("zc/001-network-above-ceiling.json"),
        &fixture,
    )
    .unwrap();
    let mut hanging: serde_json::Value = serde_json::from_str(&fixture).unwrap();
    hanging["id"] = "zc/002-hangs".into();
    hanging.as_object_mut().unwrap().remove("needs");
    std::fs::write(
        catalogue.path().join("zc/002-hangs.json"),
        hanging.to_string(),
    )
    .unwrap();
    catalogue
}

/// One run of [`unsupported_and_hanging_catalogue`] against the slow adapter.
struct SignalledRun {
    work: tempfile::TempDir,
    harness: std::process::Child,
    out: String,
    lines: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

impl SignalledRun {
    fn start(catalogue: &Path) -> SignalledRun {
        let work = tempfile::tempdir().unwrap();
        for dir in ["pids", "tmp"] {
            std::fs::create_dir_all(work.path().join(dir)).unwrap();
        }
        let adapter = work.path().join("slow_adapter.py");
        std::fs::write(&adapter, SLOW_ADAPTER).unwrap();
        let report = |name: &str| work.path().join(name).display().to_string();
        let mut harness = Command::new(env!("CARGO_BIN_EXE_delegation-harness"))
            .args([
                "run",
                "--scenarios",
                catalogue.to_str().unwrap(),
                "--jobs",
                "2",
            ])
            .args(["--host", &format!("python3 {}", adapter.display())])
            .args(["--report", &format!("json={}", report("r.json"))])
            .args(["--report", &format!("junit={}", report("r.xml"))])
            .args(["--report", &format!("markdown={}", report("r.md"))])
            .env("NO_COLOR", "1")
            .env("SLOW_ADAPTER_PIDS", work.path().join("pids"))
            // Store directories go here, so the test sees any left behind.
            .env("TMPDIR", work.path().join("tmp"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let lines =
            std::io::BufRead::lines(std::io::BufReader::new(harness.stdout.take().unwrap()));
        SignalledRun {
            work,
            harness,
            out: String::new(),
            lines,
        }
    }

    /// Reads stdout until a line containing `text`.
    fn read_until(&mut self, text: &str) {
        for line in self.lines.by_ref() {
            let line = line.unwrap();
            self.out.push_str(&line);
            self.out.push('\n');
            if line.contains(text) {
                return;
            }
        }
        panic!("the run ended before printing `{text}`:\n{}", self.out);
    }

    /// Waits until the hanging scenario's adapter and its escaped grandchild run.
    fn wait_for_the_hang(&self) -> Vec<(String, u32)> {
        let started = std::time::Instant::now();
        loop {
            let pids = recorded_pids(&self.work.path().join("pids"));
            if pids.len() == 2 {
                return pids;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "the adapter never reached its hanging request:\n{}",
                self.out
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.harness.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the harness to exit: (exit code, stdout, stderr).
    fn finish(mut self) -> (Option<i32>, String, String, tempfile::TempDir) {
        let signalled = std::time::Instant::now();
        for line in self.lines {
            self.out.push_str(&line.unwrap());
            self.out.push('\n');
        }
        let o = self.harness.wait_with_output().unwrap();
        assert!(
            signalled.elapsed() < std::time::Duration::from_secs(20),
            "took {:?} to stop",
            signalled.elapsed()
        );
        (o.status.code(), self.out, stderr(&o), self.work)
    }
}

fn read_json_report(work: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(work.join("r.json")).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn sigint_sigterm_and_sighup_stop_the_run_kill_the_adapters_and_leave_a_partial_report() {
    let catalogue = unsupported_and_hanging_catalogue();
    for signal in ["INT", "TERM", "HUP"] {
        let mut run = SignalledRun::start(catalogue.path());
        run.read_until("UNSUPPORTED zc/001-network-above-ceiling");
        let recorded = run.wait_for_the_hang();
        // Positive controls: what must be gone afterwards exists now.
        for (what, pid) in &recorded {
            assert!(
                alive(*pid),
                "SIG{signal}: the {what} (pid {pid}) is not running yet"
            );
        }
        let tmp = run.work.path().join("tmp");
        let stores = std::fs::read_dir(&tmp).unwrap().flatten().count();
        assert!(stores > 0, "SIG{signal}: no store directory in TMPDIR");
        run.signal(signal);
        let (code, out, err, work) = run.finish();
        // An interrupted run without violations proves nothing: 2, as for Ctrl-C.
        assert_eq!(code, Some(2), "SIG{signal}:\n{out}\n{err}");
        assert!(
            out.contains("INTERRUPTED (1 not run)"),
            "SIG{signal}:\n{out}"
        );

        let json = read_json_report(work.path());
        assert_eq!(json["interrupted"], true, "SIG{signal}");
        assert_eq!(json["summary"]["not_run"], 1, "SIG{signal}");
        assert_eq!(json["scenarios"][0]["id"], "zc/001-network-above-ceiling");
        assert_eq!(json["scenarios"][0]["verdict"], "unsupported");
        let xml = std::fs::read_to_string(work.path().join("r.xml")).unwrap();
        assert!(xml.contains(r#"name="interrupted" value="true""#), "{xml}");
        assert!(xml.contains("zc/001-network-above-ceiling"), "{xml}");
        let md = std::fs::read_to_string(work.path().join("r.md")).unwrap();
        assert!(
            md.contains("**Interrupted**: 1 scenario(s) did not run"),
            "{md}"
        );

        for (what, pid) in &recorded {
            assert!(
                !alive(*pid),
                "SIG{signal}: the {what} (pid {pid}) survived the run"
            );
        }
        let (_, escaped) = recorded.iter().find(|(w, _)| w == "grandchild").unwrap();
        assert!(
            err.contains(&format!("warning: pid {escaped} (`sleep 300`)")),
            "SIG{signal}: no warning names the escaped grandchild:\n{err}"
        );
        let left: Vec<_> = std::fs::read_dir(&tmp)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(left.is_empty(), "SIG{signal}: left behind {left:?}");
    }
}

#[test]
fn a_run_signalled_or_killed_at_any_point_leaves_a_readable_report() {
    let catalogue = unsupported_and_hanging_catalogue();
    // SIGTERM soon after the start, while the first scenarios start, and
    // once one has finished: every time a whole report, marked interrupted.
    for delay_ms in [0, 100, 300, 700] {
        let mut run = SignalledRun::start(catalogue.path());
        run.read_until("scenarios against");
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        run.signal("TERM");
        let (code, out, err, work) = run.finish();
        assert_eq!(code, Some(2), "after {delay_ms} ms:\n{out}\n{err}");
        let json = read_json_report(work.path());
        assert_eq!(json["interrupted"], true, "after {delay_ms} ms");
        let left: Vec<_> = std::fs::read_dir(work.path().join("tmp"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(left.is_empty(), "after {delay_ms} ms: left behind {left:?}");
        for (what, pid) in recorded_pids(&work.path().join("pids")) {
            assert!(
                !alive(pid),
                "after {delay_ms} ms: the {what} (pid {pid}) survived"
            );
        }
    }

    // SIGKILL cannot be handled: what is on disk is the last partial
    // report, written at most a second after a result, whole.
    let mut run = SignalledRun::start(catalogue.path());
    run.read_until("UNSUPPORTED zc/001-network-above-ceiling");
    let recorded = run.wait_for_the_hang();
    std::thread::sleep(std::time::Duration::from_millis(1600));
    run.signal("KILL");
    let (code, _, _, work) = run.finish();
    assert_eq!(code, None, "killed by a signal");
    let json = read_json_report(work.path());
    assert_eq!(json["interrupted"], true);
    assert_eq!(json["scenarios"][0]["id"], "zc/001-network-above-ceiling");
    assert_eq!(json["summary"]["not_run"], 1);
    // Nothing ran to stop the adapter: end what this test started, by pid.
    for (_, pid) in recorded {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
}

#[test]
fn a_host_that_never_answers_gets_a_hint_and_is_given_up_after_three_tries() {
    // Three scenarios needing nothing, and a fourth: a host that starts
    // each time is tried on all four (the control, below); one that never
    // answers is tried three times and the fourth is not run.
    let catalogue = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(catalogue.path().join("zc")).unwrap();
    let fixture =
        std::fs::read_to_string(fixtures().join("zc/001-network-above-ceiling.json")).unwrap();
    for n in 1..=4 {
        let mut scenario: serde_json::Value = serde_json::from_str(&fixture).unwrap();
        scenario["id"] = format!("zc/00{n}-copy").into();
        std::fs::write(
            catalogue.path().join(format!("zc/00{n}-copy.json")),
            scenario.to_string(),
        )
        .unwrap();
    }
    let run = |host: &str, step_timeout_ms: &str| {
        harness(&[
            "run",
            "--scenarios",
            catalogue.path().to_str().unwrap(),
            "--host",
            host,
            "--step-timeout-ms",
            step_timeout_ms,
        ])
    };
    let count = |text: &str, verdict: &str| {
        text.lines()
            .filter(|l| l.split_whitespace().next() == Some(verdict))
            .count()
    };

    // Reads every request and never writes a byte, as an adapter whose
    // stdout is block-buffered into a pipe does.
    let o = run("sh -c 'cat > /dev/null'", "300");
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(out.contains("not one byte on stdout"), "{out}");
    assert!(out.contains("does not flush its stdout"), "{out}");
    assert_eq!(count(&out, "ERROR"), 3, "{out}");
    assert!(err.contains("stopped trying the host"), "{err}");

    // One that cannot be started at all.
    let o = run("/nonexistent/adapter", "300");
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert_eq!(count(&out, "ERROR"), 3, "{out}");
    assert!(err.contains("stopped trying the host"), "{err}");

    // Positive control: a host that starts (and lacks `restart`) is tried on
    // every scenario and never given up.
    let echo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/tests/adapters/echo_adapter.py");
    // Python's start-up on a loaded machine needs more than 300 ms.
    let o = run(&format!("python3 {}", echo.display()), "20000");
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(count(&out, "UNSUPPORTED"), 4, "{out}");
    assert!(!err.contains("stopped trying the host"), "{err}");
}

#[test]
fn require_ran_fails_a_run_that_ran_fewer_scenarios_and_passes_one_that_ran_enough() {
    let catalogue = fixtures();
    let catalogue = catalogue.to_str().unwrap();
    let o = harness(&["run", "--scenarios", catalogue, "--require-ran", "1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = harness(&["run", "--scenarios", catalogue, "--require-ran", "100000"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("coverage below --require-ran 100000"),
        "{}",
        stderr(&o)
    );
}

/// The harness raises its soft descriptor limit when its jobs could come
/// near it, and not otherwise (an adapter then starts by `posix_spawn`, with
/// no step of the harness's own between fork and exec); adapters keep the
/// limit the harness was given either way.
#[test]
fn the_harness_raises_its_descriptor_limit_but_adapters_keep_the_one_it_was_given() {
    let limits_seen = |jobs: &str| {
        let work = tempfile::tempdir().unwrap();
        let (adapter_limit, harness_limits) =
            (work.path().join("adapter"), work.path().join("harness"));
        // The adapter writes its own soft limit and its parent's (the harness's)
        // limits, then reads its input and answers nothing.
        let adapter = format!(
            "sh -c 'ulimit -Sn > {}; grep \"Max open files\" /proc/$PPID/limits > {}; cat > /dev/null'",
            adapter_limit.display(),
            harness_limits.display()
        );
        let bin = env!("CARGO_BIN_EXE_delegation-harness");
        let o = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -Sn 512; exec '{bin}' run --scenarios '{}' --step-timeout-ms 300 --jobs {jobs} --host \"$ADAPTER\"",
                fixtures().display()
            ))
            .env("ADAPTER", &adapter)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}\n{}", stdout(&o), stderr(&o));
        let harness = std::fs::read_to_string(&harness_limits).unwrap();
        let limits: Vec<String> = harness
            .split_whitespace()
            .skip(3)
            .take(2)
            .map(String::from)
            .collect();
        let adapter = std::fs::read_to_string(&adapter_limit)
            .unwrap()
            .trim()
            .to_string();
        (limits, adapter, harness)
    };
    // 16 jobs could need more than 512: raised, soft up to hard (the
    // positive control that there was something to restore).
    let (limits, adapter, harness) = limits_seen("16");
    assert_eq!(limits[0], limits[1], "{harness}");
    assert_ne!(limits[0], "512", "{harness}");
    assert_eq!(adapter, "512");
    // One job fits in 512: left as it was.
    let (limits, adapter, harness) = limits_seen("1");
    assert_eq!(limits[0], "512", "{harness}");
    assert_ne!(limits[1], "512", "the hard limit is above: {harness}");
    assert_eq!(adapter, "512");
}

/// `--snapshots`: a changed transcript is an event of its scenario in every
/// report (a bounded diff, the rerun command, exit 1), never insta's panic
/// and full printout; the same run against the committed snapshot is the
/// positive control. The folder is given relative to the working directory,
/// as a user types it (insta alone would look for it beside its caller's
/// source file, compare nothing and report nothing).
#[test]
fn a_changed_snapshot_is_reported_by_every_reporter_and_fails_the_run() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let id = "zc/001-delegate-within-ceiling";
    let committed = std::fs::read_to_string(root.join(format!("snapshots/{id}.snap"))).unwrap();
    let run = |snapshot: Option<&str>, update: &str| {
        let work = tempfile::tempdir().unwrap();
        let dir = work.path().join("snaps");
        std::fs::create_dir_all(dir.join("zc")).unwrap();
        if let Some(text) = snapshot {
            std::fs::write(dir.join(format!("{id}.snap")), text).unwrap();
        }
        let report = |name: &str| work.path().join(name).to_string_lossy().into_owned();
        let o = Command::new(env!("CARGO_BIN_EXE_delegation-harness"))
            .current_dir(work.path())
            .args(["run", "--filter", id, "--snapshots", "snaps"])
            .args(["--scenarios", root.join("scenarios").to_str().unwrap()])
            .args(["--report", &format!("json={}", report("r.json"))])
            .args(["--report", &format!("junit={}", report("r.xml"))])
            .args(["--report", &format!("markdown={}", report("r.md"))])
            .env("NO_COLOR", "1")
            .env("INSTA_UPDATE", update)
            .env_remove("INSTA_OUTPUT")
            .env_remove("INSTA_FORCE_PASS")
            .output()
            .unwrap();
        let read = |name: &str| std::fs::read_to_string(work.path().join(name)).unwrap();
        let json: serde_json::Value = serde_json::from_str(&read("r.json")).unwrap();
        let written = dir.join(format!("{id}.snap")).exists();
        (o, json, read("r.xml"), read("r.md"), written)
    };

    // Positive control: the committed snapshot, unchanged.
    let (o, json, xml, md, _) = run(Some(&committed), "no");
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(json["scenarios"][0]["snapshot"]["status"], "unchanged");
    assert_eq!(json["summary"]["snapshot_changed"], 0);
    assert!(!stdout(&o).contains("snapshot changed"), "{}", stdout(&o));
    assert!(!xml.contains("snapshot-changed") && !md.contains("snapshot changed"));

    // One line of the committed transcript changed.
    let tampered = committed.replacen("auto_approve: false", "auto_approve: true", 1);
    assert_ne!(tampered, committed, "the control line is in the snapshot");
    let (o, json, xml, md, _) = run(Some(&tampered), "no");
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{}", stderr(&o));
    assert!(out.contains("snapshot changed"), "{out}");
    assert!(
        out.contains("-") && out.contains("auto_approve: true"),
        "{out}"
    );
    assert!(
        out.contains(&format!("snapshot: delegation-harness run")),
        "{out}"
    );
    assert!(out.contains("1 snapshots changed"), "{out}");
    // The rerun compares the snapshot again: it names the same folder.
    let snapshots = json["rerun"]["snapshots"].as_str().unwrap().to_string();
    assert!(snapshots.ends_with("snaps"), "{}", json["rerun"]);
    let rerun_line = format!("--filter {id} --seed");
    assert!(
        out.lines()
            .any(|l| l.contains(&rerun_line) && l.contains(&format!("--snapshots {snapshots}"))),
        "{out}"
    );
    assert!(md.contains(&format!("--snapshots {snapshots}")), "{md}");
    assert!(
        !stderr(&o).contains("panicked") && !out.contains("Snapshot Summary"),
        "insta's own panic or printout leaked: {out}{}",
        stderr(&o)
    );
    assert_eq!(
        json["scenarios"][0]["verdict"], "pass",
        "the host is not blamed"
    );
    assert_eq!(json["scenarios"][0]["snapshot"]["status"], "changed");
    assert!(
        json["scenarios"][0]["snapshot"]["message"]
            .as_str()
            .unwrap()
            .contains("auto_approve")
    );
    assert_eq!(json["summary"]["snapshot_changed"], 1);
    assert!(xml.contains("snapshot-changed"), "{xml}");
    assert!(
        md.contains("snapshot changed") && md.contains("Needs a look (1)"),
        "{md}"
    );

    // None committed: a change too, and INSTA_UPDATE=always records it.
    let (o, json, _, _, written) = run(None, "no");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        json["scenarios"][0]["snapshot"]["message"]
            .as_str()
            .unwrap()
            .contains("no snapshot committed")
    );
    assert!(!written, "INSTA_UPDATE=no writes nothing");
    let (o, json, _, _, written) = run(None, "always");
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert_eq!(json["scenarios"][0]["snapshot"]["status"], "recorded");
    assert!(written);
}

#[test]
fn a_report_that_cannot_be_written_is_refused_before_anything_runs() {
    let started = std::time::Instant::now();
    let o = harness(&[
        "run",
        "--scenarios",
        fixtures().to_str().unwrap(),
        "--report",
        "json=/nonexistent-folder/r.json",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(
        err.contains("report `/nonexistent-folder/r.json` cannot be written"),
        "{err}"
    );
    assert!(!stdout(&o).contains("PASS"), "nothing ran: {}", stdout(&o));
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    // Positive control: a folder that exists takes the report.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    let o = harness(&[
        "run",
        "--scenarios",
        fixtures().to_str().unwrap(),
        "--report",
        &format!("json={}", file.display()),
    ]);
    assert!(file.exists(), "{}{}", stdout(&o), stderr(&o));
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        left.len(),
        1,
        "the write check leaves nothing behind: {left:?}"
    );
}
