//! The README's invariant table is generated from the code and the catalogue, and every id is covered.
//!
//! One row per invariant id: its tier and meaning (from the model's
//! vocabulary), where it is checked, and the scenarios that name it with
//! their snapshots. The test fails when the committed table is stale
//! (`UPDATE_README=1` rewrites it) and when an id of MODEL.md section 3 is
//! named by no scenario, so a gap in the catalogue cannot go unnoticed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use delegation_model::InvariantId;
use delegation_runner::Catalogue;

const BEGIN: &str = "<!-- invariant-table:begin (generated: UPDATE_README=1 cargo test -p delegation-harness --test readme_invariants) -->";
const END: &str = "<!-- invariant-table:end -->";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Scenario ids naming each invariant, in catalogue order.
fn coverage(catalogue: &Catalogue) -> BTreeMap<InvariantId, Vec<String>> {
    InvariantId::ALL
        .iter()
        .map(|id| (*id, catalogue.checking(*id).map(|s| s.id.clone()).collect()))
        .collect()
}

fn table(coverage: &BTreeMap<InvariantId, Vec<String>>) -> String {
    let mut out = String::from(
        "| id | tier | what must hold | checked by | scenarios (snapshots in `snapshots/<id>.snap`) |\n|---|---|---|---|---|\n",
    );
    for id in InvariantId::ALL {
        let scenarios = &coverage[id];
        let shown: Vec<String> = scenarios.iter().take(4).map(|s| format!("`{s}`")).collect();
        let more = scenarios.len().saturating_sub(shown.len());
        let list = if more > 0 {
            format!("{} and {more} more", shown.join(", "))
        } else {
            shown.join(", ")
        };
        out.push_str(&format!(
            "| {id} | {} | {} | `invariants/{}.rs` `fn {}` | {} ({}) |\n",
            id.tier(),
            id.meaning(),
            id.as_str()[..2].to_lowercase(),
            id.as_str().to_lowercase(),
            scenarios.len(),
            list
        ));
    }
    out
}

#[test]
fn every_invariant_is_named_by_a_scenario() {
    let catalogue = Catalogue::load(&workspace().join("scenarios")).expect("the catalogue loads");
    let uncovered: Vec<&str> = coverage(&catalogue)
        .iter()
        .filter(|(_, scenarios)| scenarios.is_empty())
        .map(|(id, _)| id.as_str())
        .collect();
    assert!(
        uncovered.is_empty(),
        "no scenario names these invariant ids: {uncovered:?}; add scenarios under scenarios/<area>/ that check them"
    );
}

#[test]
fn the_readme_invariant_table_is_current() {
    let catalogue = Catalogue::load(&workspace().join("scenarios")).expect("the catalogue loads");
    let generated = table(&coverage(&catalogue));
    let path = workspace().join("README.md");
    let readme = std::fs::read_to_string(&path).expect("README.md is readable");
    let (Some(begin), Some(end)) = (readme.find(BEGIN), readme.find(END)) else {
        panic!("README.md lacks the markers {BEGIN:?} and {END:?} around the invariant table");
    };
    let current = &readme[begin + BEGIN.len()..end];
    let wanted = format!("\n{generated}");
    if current == wanted {
        return;
    }
    if std::env::var_os("UPDATE_README").is_some() {
        let updated = format!("{}{BEGIN}{wanted}{}", &readme[..begin], &readme[end..]);
        std::fs::write(&path, updated).expect("README.md is writable");
        return;
    }
    panic!(
        "the invariant table in README.md is stale; run `UPDATE_README=1 cargo test -p delegation-harness --test readme_invariants` and commit README.md"
    );
}
