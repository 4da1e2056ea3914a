//! Every cargo-fuzz target is built, smoke-run, fuzzed nightly, shipped to ClusterFuzzLite and documented: the lists agree.
//!
//! The targets are declared in `fuzz/Cargo.toml`; four other files name them
//! by hand. A target added to one and forgotten in another would silently
//! never run in CI, at night or on ClusterFuzzLite, so this compares them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(relative: &str) -> String {
    let path = workspace().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `[[bin]]` names of the fuzz workspace: the targets that exist.
fn declared() -> BTreeSet<String> {
    let manifest: toml_edit::DocumentMut = read("fuzz/Cargo.toml")
        .parse()
        .expect("fuzz/Cargo.toml parses");
    manifest["bin"]
        .as_array_of_tables()
        .expect("fuzz/Cargo.toml has [[bin]] entries")
        .iter()
        .map(|bin| {
            bin["name"]
                .as_str()
                .expect("a [[bin]] has a name")
                .to_string()
        })
        .collect()
}

/// The words of the one line of `text` that starts with `prefix`, up to `end`.
fn listed_after(file: &str, text: &str, prefix: &str, end: &str) -> BTreeSet<String> {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("{file}: no line starting with `{prefix}`"));
    let inner = &line[prefix.len()..];
    let inner = &inner[..inner.find(end).unwrap_or(inner.len())];
    inner
        .split([' ', ','])
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn every_declared_target_is_smoked_fuzzed_nightly_shipped_and_documented() {
    let declared = declared();
    assert!(
        declared.contains("model_sequence") && declared.len() >= 5,
        "fuzz/Cargo.toml declares {declared:?}"
    );
    let smoke = read(".ci/fuzz-smoke");
    let nightly = read(".github/workflows/nightly-fuzz.yml");
    let cluster = read(".clusterfuzzlite/build.sh");
    let readme = read("fuzz/README.md");
    let lists = [
        (
            ".ci/fuzz-smoke",
            listed_after(".ci/fuzz-smoke", &smoke, "TARGETS=(", ")"),
        ),
        (
            ".github/workflows/nightly-fuzz.yml",
            listed_after("nightly", &nightly, "target: [", "]"),
        ),
        (
            ".clusterfuzzlite/build.sh",
            listed_after("build.sh", &cluster, "for target in", ";"),
        ),
        (
            "fuzz/README.md",
            readme
                .lines()
                .filter_map(|l| l.strip_prefix("| `"))
                .filter_map(|l| l.split_once('`').map(|(name, _)| name.to_string()))
                .filter(|name| !name.contains(' '))
                .collect::<BTreeSet<_>>(),
        ),
    ];
    for (file, listed) in lists {
        let missing: Vec<_> = declared.difference(&listed).collect();
        let unknown: Vec<_> = listed.difference(&declared).collect();
        assert!(
            missing.is_empty() && unknown.is_empty(),
            "{file} lists the fuzz targets {listed:?}; fuzz/Cargo.toml declares {declared:?} \
             (missing: {missing:?}, not declared: {unknown:?})"
        );
    }
}

/// The comparison can fail: a list short of one target is told apart.
#[test]
fn a_list_missing_a_target_is_noticed() {
    let listed = listed_after("x", "TARGETS=(digest model_sequence)", "TARGETS=(", ")");
    assert_eq!(
        listed,
        BTreeSet::from(["digest".to_string(), "model_sequence".to_string()])
    );
    assert_ne!(listed, declared());
}

/// The smoke run leaves out exactly the targets that need the runner
/// feature: one more would go unbuilt in CI, one fewer would fail to build
/// without the feature.
#[test]
fn the_smoke_run_leaves_out_exactly_the_runner_targets() {
    let manifest: toml_edit::DocumentMut = read("fuzz/Cargo.toml")
        .parse()
        .expect("fuzz/Cargo.toml parses");
    let needing_runner: BTreeSet<String> = manifest["bin"]
        .as_array_of_tables()
        .expect("fuzz/Cargo.toml has [[bin]] entries")
        .iter()
        .filter(|bin| {
            bin.get("required-features")
                .and_then(|f| f.as_array())
                .is_some_and(|f| f.iter().any(|v| v.as_str() == Some("runner")))
        })
        .map(|bin| bin["name"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        !needing_runner.is_empty(),
        "no fuzz target declares required-features = [\"runner\"]"
    );
    let smoke = read(".ci/fuzz-smoke");
    let left_out = listed_after(".ci/fuzz-smoke", &smoke, "RUNNER_TARGETS=(", ")");
    assert_eq!(
        left_out, needing_runner,
        ".ci/fuzz-smoke's RUNNER_TARGETS must be the targets fuzz/Cargo.toml builds only with the runner feature"
    );
}

/// OSS-Fuzz and ClusterFuzzLite build the same targets: OSS-Fuzz's build
/// script runs ClusterFuzzLite's, and both projects are Rust under
/// AddressSanitizer.
#[test]
fn the_oss_fuzz_project_builds_with_the_clusterfuzzlite_script() {
    let build = read("fuzz/oss-fuzz/build.sh");
    let runs: Vec<&str> = build
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(
        runs,
        ["exec \"$SRC/delegation-harness/.clusterfuzzlite/build.sh\""],
        "fuzz/oss-fuzz/build.sh must only run the ClusterFuzzLite build"
    );
    for project in [
        "fuzz/oss-fuzz/project.yaml",
        ".clusterfuzzlite/project.yaml",
    ] {
        let text = read(project);
        assert!(
            text.lines().any(|l| l.trim() == "language: rust")
                && text.lines().any(|l| l.trim() == "- address"),
            "{project}: expected `language: rust` and the address sanitizer"
        );
    }
    let dockerfile = read("fuzz/oss-fuzz/Dockerfile");
    assert!(
        dockerfile.contains("base-builder-rust") && dockerfile.contains("COPY build.sh $SRC/"),
        "fuzz/oss-fuzz/Dockerfile: expected the Rust base builder and build.sh copied to $SRC"
    );
}
