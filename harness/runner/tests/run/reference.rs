//! The runner's scenario features against the real reference host and the
//! real observers: a step that kills the host (`host_exits`), the reserved
//! `@unknown` alias, and the absolute-count, records and `model_saw`
//! expectations, in process and (for the crash) as a subprocess.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use delegation_host::process::ProcessOptions;
use delegation_host::{HostLauncher, ProcessLauncher, ReferenceLauncher};
use delegation_model::{Evidence, WorldChange};
use delegation_runner::catalogue::{Catalogue, Filter, order};
use delegation_runner::observer_set::{
    Endpoints, ObserverMark, ObserverSet, ObserverSetError, ObserverSetFactory, ShownTools,
    WorldStep,
};
use delegation_runner::scenario::Setup;
use delegation_runner::verdict::{ScenarioResult, Verdict};
use delegation_runner::{LiveObservers, RunOptions, RunReport, Scenario, report, run};
use serde_json::Value;

fn features() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/features")
}

const CRASH: &str = "rs/001-crash-between-commit-and-dispatch";
const UNKNOWN: &str = "tr/001-unknown-instance";
const RECORDS: &str = "ce/001-records-requested-and-effective";

/// A one-scenario catalogue in a temp dir: the feature fixture `id`, edited.
fn edited(id: &str, edit: impl FnOnce(&mut Value)) -> tempfile::TempDir {
    let text = std::fs::read_to_string(features().join(format!("{id}.json"))).unwrap();
    let mut value: Value = serde_json::from_str(&text).unwrap();
    edit(&mut value);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(format!("{id}.json"));
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, value.to_string()).unwrap();
    dir
}

pub(crate) async fn run_catalogue(
    dir: &Path,
    filter: &[String],
    launcher: Arc<dyn HostLauncher>,
    worlds: Arc<dyn ObserverSetFactory>,
    jobs: usize,
) -> RunReport {
    let catalogue = Catalogue::load(dir).unwrap_or_else(|e| panic!("{e}"));
    let selected = catalogue.select(&Filter::new(filter, &[]).unwrap());
    assert!(
        !selected.is_empty(),
        "the filter {filter:?} selects nothing"
    );
    let scenarios: Vec<Scenario> = order(&selected, 0).into_iter().cloned().collect();
    let (events, rx) = tokio::sync::mpsc::unbounded_channel();
    let drained = tokio::spawn(report::drain(rx, vec![]));
    let (_keep, interrupt) = tokio::sync::watch::channel(false);
    let options = RunOptions {
        jobs,
        ..RunOptions::default()
    };
    let report = run(scenarios, launcher, worlds, options, events, interrupt).await;
    drained.await.unwrap().unwrap();
    report
}

async fn in_process(dir: &Path) -> RunReport {
    run_catalogue(
        dir,
        &[],
        Arc::new(ReferenceLauncher::default()),
        Arc::new(LiveObservers),
        1,
    )
    .await
}

pub(crate) fn result<'a>(report: &'a RunReport, id: &str) -> &'a ScenarioResult {
    report
        .results
        .iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("no result for {id}"))
}

pub(crate) fn assert_pass(r: &ScenarioResult) {
    assert_eq!(
        r.verdict,
        Verdict::Pass,
        "{}: {:#?}",
        r.id,
        r.failures
            .iter()
            .map(report::failure_line)
            .collect::<Vec<_>>()
    );
    assert_eq!(r.steps_run, r.steps_total, "{}: every step ran", r.id);
}

/// Failure locations (`steps[2].expect.host_exits`) of a result.
fn failed_at(r: &ScenarioResult) -> Vec<&str> {
    r.failures.iter().map(|f| f.at.as_str()).collect()
}

/// `delegation-reference-host`, built on demand: it belongs to another
/// package, so cargo does not build it for this test binary.
pub(crate) fn reference_binary() -> PathBuf {
    let status = std::process::Command::new(env!("CARGO"))
        .args([
            "build",
            "--quiet",
            "-p",
            "delegation-host",
            "--bin",
            "delegation-reference-host",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo runs");
    assert!(
        status.success(),
        "building delegation-reference-host failed"
    );
    // The test binary is `<target>/debug/deps/run-<hash>`; binaries sit in `<target>/debug`.
    let exe = std::env::current_exe().unwrap();
    let binary = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("delegation-reference-host");
    assert!(binary.is_file(), "{} was not built", binary.display());
    binary
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_that_kills_the_in_process_host_passes_and_the_scenario_goes_on() {
    let report = in_process(&features()).await;
    let crash = result(&report, CRASH);
    assert_pass(crash);
    // The crash step is recorded with the host's error, not a reply.
    let step = &crash.transcript[2];
    assert!(
        step["reply"]["protocol_error"]
            .as_str()
            .is_some_and(|e| e.contains("crash.after_decision_commit")),
        "{step}"
    );
    assert!(
        step["observed"].is_null(),
        "a dead host is not observed: {step}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_that_kills_the_subprocess_host_passes_on_its_exit_status() {
    let binary = reference_binary();
    let launcher =
        ProcessLauncher::new(&binary.display().to_string(), ProcessOptions::default()).unwrap();
    let report = run_catalogue(
        &features(),
        &[CRASH.into()],
        Arc::new(launcher),
        Arc::new(LiveObservers),
        1,
    )
    .await;
    let crash = result(&report, CRASH);
    assert_pass(crash);
    let error = crash.transcript[2]["reply"]["protocol_error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(error.contains("70"), "the reference host exits 70: {error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_answers_where_it_should_die_fails_there_and_the_run_goes_on() {
    // Without the fault the reference host answers the turn normally.
    let dir = edited(CRASH, |v| {
        v["steps"][1] = serde_json::json!({ "clock": { "set": 1 } });
    });
    let report = in_process(dir.path()).await;
    let crash = result(&report, CRASH);
    assert_eq!(crash.verdict, Verdict::Fail);
    let at = failed_at(crash);
    assert!(at.contains(&"steps[2].expect.host_exits"), "{at:?}");
    let exits = crash
        .failures
        .iter()
        .find(|f| f.at == "steps[2].expect.host_exits")
        .unwrap();
    assert_eq!(
        exits.observed["outcome"], "ok",
        "the normal reply is the evidence"
    );
    // The allow was dispatched, so the counts after the restart differ too: the steps after it ran.
    assert!(
        at.contains(&"steps[3].expect.approvals.dispatched"),
        "{at:?}"
    );
    assert_eq!(crash.steps_run, crash.steps_total);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_ids_are_refused_and_named_by_the_reserved_alias_in_transcripts() {
    let report = in_process(&features()).await;
    let unknown = result(&report, UNKNOWN);
    assert_pass(unknown);
    let step = &unknown.transcript[1];
    assert_eq!(
        step["request"]["params"]["instance"], "<@unknown>",
        "{step}"
    );
    // Stable across runs: a host may quote the id in free text, which snapshots keep.
    let again = in_process(&features()).await;
    assert_eq!(result(&again, UNKNOWN).transcript, unknown.transcript);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_and_absolute_counts_are_checked_against_the_observed_state() {
    let report = in_process(&features()).await;
    assert_pass(result(&report, RECORDS));

    let dir = edited(RECORDS, |v| {
        v["steps"][2]["expect"]["records"] = serde_json::json!({
            "allowed_delegations": 2,
            "denied_delegations": 0,
            "allowed_delegations_with_requested_and_effective": 0
        });
    });
    let report = in_process(dir.path()).await;
    let r = result(&report, RECORDS);
    assert_eq!(
        failed_at(r),
        [
            "steps[2].expect.records.allowed_delegations",
            "steps[2].expect.records.denied_delegations",
            "steps[2].expect.records.allowed_delegations_with_requested_and_effective",
        ]
    );
    let observed: Vec<u64> = r
        .failures
        .iter()
        .filter_map(|f| f.observed.as_u64())
        .collect();
    assert_eq!(observed, [1, 1, 1]);

    let dir = edited(CRASH, |v| {
        v["steps"][3]["expect"]["approvals"] = serde_json::json!({
            "dispatched": 1, "decided_by_person": 1, "decided_by_policy": 0, "decided_by_external": 1
        });
        v["steps"][3]["expect"]["grants"] = serde_json::json!({ "count": 1 });
    });
    let report = in_process(dir.path()).await;
    let crash = result(&report, CRASH);
    assert_eq!(
        failed_at(crash),
        [
            "steps[3].expect.approvals.dispatched",
            "steps[3].expect.approvals.decided_by_person",
            "steps[3].expect.approvals.decided_by_policy",
            "steps[3].expect.approvals.decided_by_external",
            "steps[3].expect.grants.count",
        ]
    );
}

/// The real observers, except that the tool server claims to serve a
/// definition with another description than the one the host received:
/// from the harness's side, the host showed the model an altered definition.
struct AlteredWorlds;

struct AlteredWorld(Box<dyn ObserverSet>);

#[async_trait]
impl ObserverSetFactory for AlteredWorlds {
    async fn start(&self, setup: &Setup) -> Result<Box<dyn ObserverSet>, ObserverSetError> {
        Ok(Box::new(AlteredWorld(LiveObservers.start(setup).await?)))
    }
}

#[async_trait]
impl ObserverSet for AlteredWorld {
    fn endpoints(&self) -> Endpoints {
        self.0.endpoints()
    }
    fn mark(&self) -> ObserverMark {
        self.0.mark()
    }
    fn evidence_since(&self, mark: &ObserverMark) -> Evidence {
        self.0.evidence_since(mark)
    }
    async fn apply(
        &mut self,
        step: &WorldStep,
    ) -> Result<(String, Option<WorldChange>), ObserverSetError> {
        self.0.apply(step).await
    }
    fn recent_since(&self, mark: &ObserverMark) -> Vec<Value> {
        self.0.recent_since(mark)
    }
    fn model_tools_since(&self, mark: &ObserverMark) -> Option<Vec<ShownTools>> {
        self.0.model_tools_since(mark)
    }
    fn tool_definitions(&self) -> Vec<Value> {
        let mut definitions = self.0.tool_definitions();
        for d in &mut definitions {
            d["description"] = "what the tool server really serves".into();
        }
        definitions
    }
    async fn shutdown(&mut self) {
        self.0.shutdown().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_saw_fails_on_a_definition_other_than_the_served_one_and_on_other_names() {
    let report = run_catalogue(
        &features(),
        &[CRASH.into()],
        Arc::new(ReferenceLauncher::default()),
        Arc::new(AlteredWorlds),
        1,
    )
    .await;
    let crash = result(&report, CRASH);
    let saw = crash
        .failures
        .iter()
        .find(|f| f.at == "steps[2].expect.model_saw.root")
        .unwrap_or_else(|| panic!("{:#?}", failed_at(crash)));
    assert_eq!(saw.expected, serde_json::json!(["probe_note"]));
    assert_eq!(
        saw.observed,
        serde_json::json!([{ "altered": "probe_note" }])
    );

    let dir = edited(CRASH, |v| {
        v["steps"][2]["expect"]["model_saw"] =
            serde_json::json!({ "root": ["probe_note", "other"] });
    });
    let report = in_process(dir.path()).await;
    let crash = result(&report, CRASH);
    let saw = crash
        .failures
        .iter()
        .find(|f| f.at == "steps[2].expect.model_saw.root")
        .unwrap();
    assert_eq!(saw.observed, serde_json::json!(["probe_note"]));
}

/// Records the order of scenario starts and finishes, to see two run at once.
struct Order(Arc<std::sync::Mutex<Vec<String>>>);

impl report::Reporter for Order {
    fn event(&mut self, event: &delegation_runner::RunEvent) -> std::io::Result<()> {
        use delegation_runner::RunEvent as E;
        let line = match event {
            E::ScenarioStarted { id } => format!("start {id}"),
            E::ScenarioFinished(r) => format!("end {}", r.id),
            _ => return Ok(()),
        };
        self.0.lock().unwrap().push(line);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_tr_area_passes_on_the_reference_host_with_two_jobs_and_real_observers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let catalogue = Catalogue::load(&root).unwrap_or_else(|e| panic!("{e}"));
    let selected = catalogue.select(&Filter::new(&["tr/*".into()], &[]).unwrap());
    let in_area = catalogue
        .scenarios
        .iter()
        .filter(|s| s.area() == "tr")
        .count();
    assert!(in_area > 0, "no tr scenarios in {}", root.display());
    let scenarios: Vec<Scenario> = order(&selected, 7).into_iter().cloned().collect();
    let total = scenarios.len();

    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (events, rx) = tokio::sync::mpsc::unbounded_channel();
    let drained = tokio::spawn(report::drain(rx, vec![Box::new(Order(seen.clone()))]));
    let (_keep, interrupt) = tokio::sync::watch::channel(false);
    let report = run(
        scenarios,
        Arc::new(ReferenceLauncher::default()),
        Arc::new(LiveObservers),
        RunOptions {
            jobs: 2,
            seed: 7,
            ..RunOptions::default()
        },
        events,
        interrupt,
    )
    .await;
    drained.await.unwrap().unwrap();

    assert!(!report.interrupted);
    assert_eq!(report.results.len(), total);
    assert!(
        total >= in_area,
        "controls outside the area are pulled in, never dropped"
    );
    for r in &report.results {
        assert_pass(r);
    }
    assert_eq!(report.summary.pass, total);
    assert!(!report.summary.failed());

    // Two jobs: at some point a second scenario starts before the first ends.
    let seen = seen.lock().unwrap();
    let mut running = 0usize;
    let mut most = 0usize;
    for line in seen.iter() {
        running = if line.starts_with("start ") {
            running + 1
        } else {
            running - 1
        };
        most = most.max(running);
    }
    assert_eq!(
        most, 2,
        "never more than --jobs, and both slots used: {seen:?}"
    );
}

/// A tamper that cannot do what it says (add a field the receipt already
/// has, remove one it lacks) fails at its step with what went wrong, never
/// a silent replace that would test something else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_tamper_that_cannot_apply_fails_at_its_step_saying_why() {
    const ID: &str = "rc/015-receipt-fields-added-or-removed";
    let catalogue = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let text = std::fs::read_to_string(catalogue.join(format!("{ID}.json"))).unwrap();
    for (step, tamper, says) in [
        (
            2,
            serde_json::json!({"op": "add", "pointer": "/seal", "value": "x"}),
            "tamper `add` at `/seal`: the receipt the host issued already has that field; use `replace`",
        ),
        (
            6,
            serde_json::json!({"op": "remove", "pointer": "/authorization"}),
            "tamper `remove` at `/authorization`: the receipt the host issued has no such field",
        ),
    ] {
        let mut value: Value = serde_json::from_str(&text).unwrap();
        value["steps"][step]["consume_receipt"]["tamper"] = tamper;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(format!("{ID}.json"));
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, value.to_string()).unwrap();
        // A negative scenario's control must be in the catalogue too.
        let control = "rc/001-receipt-admits-one-child.json";
        std::fs::copy(catalogue.join(control), dir.path().join(control)).unwrap();
        let report = in_process(dir.path()).await;
        let r = result(&report, ID);
        // The runner's convention for a step it cannot build: a failure at that step.
        assert_eq!(r.verdict, Verdict::Fail);
        let lines: Vec<String> = r.failures.iter().map(report::failure_line).collect();
        let at = format!("steps[{step}].consume_receipt");
        assert!(
            lines.iter().any(|l| l.contains(&at) && l.contains(says)),
            "expected `{says}` at {at} in {lines:#?}"
        );
        assert_eq!(r.steps_run, step, "the steps before the tamper ran");
    }
}

/// Relays between the harness and the reference host, and on every
/// `capability/issue` carrying a harness-chosen secret (a canary) leaks it
/// as MODE says: `none` (the control), `stderr`, or `log` (a `log`
/// notification). Each leaked secret is also appended to LEAKED, so the
/// test knows what to look for.
const LEAKING_RELAY: &str = r#"
import json, subprocess, sys, threading
mode, binary, leaked = sys.argv[1:4]
host = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
out = threading.Lock()
def write(line):
    with out:
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
def relay():
    for line in host.stdout:
        write(line)
threading.Thread(target=relay, daemon=True).start()
for line in sys.stdin.buffer:
    request = json.loads(line)
    secret = (request.get("params") or {}).get("secret")
    if request["method"] == "capability/issue" and secret:
        with open(leaked, "a") as f:
            f.write(secret + "\n")
        if mode == "stderr":
            sys.stderr.write("issuing a capability, secret %s\n" % secret)
            sys.stderr.flush()
        elif mode == "log":
            note = {"jsonrpc": "2.0", "method": "log",
                    "params": {"level": "debug", "message": "secret=%s" % secret}}
            write((json.dumps(note) + "\n").encode())
    host.stdin.write(line)
    host.stdin.flush()
host.stdin.close()
host.wait()
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_in_the_hosts_stderr_or_log_fails_tc4_and_no_report_shows_it() {
    const CANARY_SCENARIO: &str = "tc/007-canary-secret-never-in-replies-or-records";
    const ITS_CONTROL: &str = "tc/001-capability-call-with-its-binding-runs-once";
    let scenarios = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let catalogue = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(catalogue.path().join("tc")).unwrap();
    for id in [CANARY_SCENARIO, ITS_CONTROL] {
        std::fs::copy(
            scenarios.join(format!("{id}.json")),
            catalogue.path().join(format!("{id}.json")),
        )
        .unwrap();
    }
    let binary = reference_binary();
    for mode in ["none", "stderr", "log"] {
        let work = tempfile::tempdir().unwrap();
        let relay = work.path().join("relay.py");
        std::fs::write(&relay, LEAKING_RELAY).unwrap();
        let leaked = work.path().join("leaked");
        let command = format!(
            "python3 {} {mode} {} {}",
            relay.display(),
            binary.display(),
            leaked.display()
        );
        let launcher = ProcessLauncher::new(&command, ProcessOptions::default()).unwrap();
        let files: Vec<(report::Format, PathBuf)> = [
            (report::Format::Human, "report.txt"),
            (report::Format::Json, "report.json"),
            (report::Format::Junit, "report.xml"),
            (report::Format::Markdown, "report.md"),
        ]
        .into_iter()
        .map(|(format, name)| (format, work.path().join(name)))
        .collect();
        let reporters = files
            .iter()
            .map(|(format, file)| report::file_reporter(*format, file.clone()))
            .collect();
        let report = run_reporting(catalogue.path(), Arc::new(launcher), reporters).await;

        // The relay really had the canary to leak: the search had something to find.
        let canaries: Vec<String> = std::fs::read_to_string(&leaked)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        assert!(!canaries.is_empty(), "{mode}: no canary was planted");
        assert_pass(result(&report, ITS_CONTROL));
        let canary_run = result(&report, CANARY_SCENARIO);
        if mode == "none" {
            assert_pass(canary_run);
        } else {
            assert_eq!(canary_run.verdict, Verdict::Fail, "{mode}: {canary_run:#?}");
            let tc4: Vec<&str> = canary_run
                .failures
                .iter()
                .filter(|f| f.invariants == [delegation_model::InvariantId::TC4])
                .map(|f| f.message.as_str())
                .collect();
            assert!(
                tc4.iter().any(|m| m.contains("appears in the host's log")),
                "{mode}: {tc4:?}"
            );
        }
        for (_, file) in &files {
            let text = std::fs::read_to_string(file).unwrap();
            for canary in &canaries {
                assert!(
                    !text.contains(canary.as_str()),
                    "{mode}: {} shows the canary {canary}",
                    file.display()
                );
            }
        }
    }
}

async fn run_reporting(
    dir: &Path,
    launcher: Arc<dyn HostLauncher>,
    reporters: Vec<Box<dyn report::Reporter>>,
) -> RunReport {
    let catalogue = Catalogue::load(dir).unwrap_or_else(|e| panic!("{e}"));
    let selected = catalogue.select(&Filter::default());
    let scenarios: Vec<Scenario> = order(&selected, 0).into_iter().cloned().collect();
    let (events, rx) = tokio::sync::mpsc::unbounded_channel();
    let drained = tokio::spawn(report::drain(rx, reporters));
    let (_keep, interrupt) = tokio::sync::watch::channel(false);
    let report = run(
        scenarios,
        launcher,
        Arc::new(LiveObservers),
        RunOptions::default(),
        events,
        interrupt,
    )
    .await;
    drained.await.unwrap().unwrap();
    report
}

/// Each observer broken on purpose, as a bug in the harness would break it:
/// the scenario that uses it is the harness's failure (`harness-error`,
/// naming the observer), never a fail or an error of the host, although the
/// host saw the broken observer's 500s. The same scenario with every
/// observer whole is the positive control.
#[tokio::test]
async fn a_broken_observer_is_the_harnesss_failure_never_the_hosts() {
    use delegation_runner::{BrokenLiveObservers, Observer};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    for (observer, scenario, named) in [
        (
            Observer::ModelEndpoint,
            "zc/001-delegate-within-ceiling",
            "model endpoint",
        ),
        (
            Observer::ToolServer,
            "sd/001-unchanged-tool-direct-call-runs",
            "tool server",
        ),
        (
            Observer::Authorizer,
            "ea/001-authorizer-called-once-per-delegation",
            "authorizer",
        ),
    ] {
        let whole = run_catalogue(
            &root,
            &[scenario.into()],
            Arc::new(ReferenceLauncher::default()),
            Arc::new(LiveObservers),
            1,
        )
        .await;
        assert_pass(result(&whole, scenario));

        let broken = run_catalogue(
            &root,
            &[scenario.into()],
            Arc::new(ReferenceLauncher::default()),
            Arc::new(BrokenLiveObservers(observer)),
            1,
        )
        .await;
        match &result(&broken, scenario).verdict {
            Verdict::HarnessError { message } => assert!(
                message.contains(&format!("the {named} failed answering"))
                    && message.contains("broken on purpose"),
                "{observer:?}: {message}"
            ),
            other => panic!("{observer:?}: expected a harness error, got {other:?}"),
        }
        let s = &broken.summary;
        assert_eq!(
            s.fail + s.error + s.stale,
            0,
            "{observer:?}: the host was blamed: {s:?}"
        );
        assert_eq!(s.harness_error, 1, "{observer:?}");
    }
}
