//! A host written from the documents alone passes every scenario it can run: the documents are the whole contract.
//!
//! `harness/host/tests/adapters/docs_only_adapter.py` was written from
//! PROTOCOL.md, ENDPOINTS.md and MODEL.md without harness source, and
//! declares every capability but the authority-widening ones. Running the
//! catalogue against it shows that what those pages say is enough; a
//! scenario it fails names a gap (or an error) in them.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use delegation_protocol::capability;
use delegation_runner::Catalogue;
use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn adapter() -> PathBuf {
    workspace().join("harness/host/tests/adapters/docs_only_adapter.py")
}

/// The capabilities the adapter declares, asked of it with `initialize`.
fn declared(store: &Path) -> Vec<String> {
    let mut child = Command::new("python3")
        .arg(adapter())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs (the docs-only adapter is Python)");
    let request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocol_version": "1.0",
        "environment": {"model_endpoint": "http://127.0.0.1:9", "mcp_servers": [],
                        "store_dir": store, "clock": "harness"}}});
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{request}").expect("writes");
    drop(stdin);
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("reads");
    child.wait().expect("exits");
    let answer: Value = serde_json::from_str(&line).expect("the answer is JSON");
    serde_json::from_value(answer["result"]["capabilities"].clone()).expect("capabilities")
}

#[test]
fn the_docs_only_adapter_passes_everything_it_runs() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let caps = declared(&dir.path().join("probe-store"));
    let catalogue = Catalogue::load(&workspace().join("scenarios")).expect("the catalogue loads");
    let runnable = catalogue
        .select(&delegation_runner::Filter::default())
        .into_iter()
        .filter(|s| capability::unmet(&s.needs, &s.unless, &caps).is_empty())
        .count();
    assert!(
        runnable > 0,
        "the adapter declares {caps:?}, under which nothing runs"
    );

    let report = dir.path().join("report.json");
    let output = Command::new(env!("CARGO_BIN_EXE_delegation-harness"))
        .args(["run", "--jobs", "2", "--seed", "1", "--host"])
        .arg(format!("python3 {}", adapter().display()))
        .arg("--report")
        .arg(format!("json={}", report.display()))
        .env("NO_COLOR", "1")
        .output()
        .expect("the binary runs");
    let text = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(&report).unwrap_or_else(|e| panic!("no report ({e}):\n{text}")),
    )
    .expect("the report is JSON");
    let summary = &report["summary"];
    let failed: Vec<&str> = report["scenarios"]
        .as_array()
        .expect("scenarios")
        .iter()
        .filter(|s| matches!(s["verdict"].as_str(), Some("fail" | "error")))
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert!(
        failed.is_empty(),
        "a host written from the documents fails {failed:?}: a document leaves out or misstates what these check\n{text}"
    );
    assert_eq!(
        summary["ran"].as_u64(),
        Some(runnable as u64),
        "the scenarios that ran are not those its capabilities allow\n{text}"
    );
    assert!(summary["pass"].as_u64() > Some(0), "{text}");
}
