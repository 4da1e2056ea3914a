//! The trait crate stays light: neither SQLite nor the MCP library nor an HTTP client is among its dependencies.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// What only the reference host and the subprocess host need.
const HEAVY: [&str; 3] = ["rusqlite", "rmcp", "reqwest"];

/// Every package `root` depends on (normal dependencies, transitively), from cargo's resolved graph.
fn dependencies_of(metadata: &Value, root: &str) -> BTreeSet<String> {
    let name_of: BTreeMap<&str, &str> = metadata["packages"]
        .as_array()
        .expect("cargo metadata lists packages")
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let nodes: BTreeMap<&str, &Value> = metadata["resolve"]["nodes"]
        .as_array()
        .expect("cargo metadata resolves the graph")
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n))
        .collect();
    let start = name_of
        .iter()
        .find(|(_, name)| **name == root)
        .map(|(id, _)| *id)
        .unwrap_or_else(|| panic!("`{root}` is not a package of the workspace"));
    let mut seen = BTreeSet::new();
    let mut todo = vec![start];
    while let Some(id) = todo.pop() {
        for dep in nodes[id]["deps"].as_array().into_iter().flatten() {
            let normal = dep["dep_kinds"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|k| k["kind"].is_null());
            let dep_id = dep["pkg"].as_str().unwrap();
            if normal && seen.insert(name_of[dep_id].to_string()) {
                todo.push(dep_id);
            }
        }
    }
    seen
}

/// The machine's target triple: the graph is resolved for it alone, so no
/// other platform's packages need to have been downloaded.
fn host_triple() -> String {
    let output = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc runs");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .expect("rustc -vV names the host triple")
        .to_string()
}

fn metadata() -> Value {
    let output = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", &host_triple(), "--manifest-path"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml"))
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata writes JSON")
}

#[test]
fn the_trait_crate_links_neither_sqlite_nor_rmcp_nor_an_http_client() {
    let metadata = metadata();
    let light = dependencies_of(&metadata, "delegation-host-api");
    assert!(light.contains("delegation-model"), "{light:?}");
    for heavy in HEAVY {
        assert!(
            !light.contains(heavy),
            "delegation-host-api depends on {heavy}: {light:?}"
        );
    }
    // The positive control: the same walk finds them under the host crate.
    let host = dependencies_of(&metadata, "delegation-host");
    for heavy in HEAVY {
        assert!(
            host.contains(heavy),
            "the walk misses {heavy} under delegation-host: {host:?}"
        );
    }
}
