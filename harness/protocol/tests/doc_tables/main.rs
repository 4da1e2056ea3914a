//! The tables of PROTOCOL.md, ENDPOINTS.md and WRITING-AN-ADAPTER.md agree with the harness's model and catalogue.
//!
//! Generated tables (eligibility, policy verdicts, lifecycle, the adapter
//! guide's capability ladder) are rendered here from the model and the
//! catalogue and compared with the committed text; `UPDATE_DOCS=1` rewrites
//! them. Hand-written tables are checked row by row: a check table against
//! probes of the model (`probes.rs`), the deny-reason table against the
//! catalogue step or probe each row cites, name tables against the
//! protocol's own lists. Each checker also runs on a deliberately wrong copy
//! of its table and must fail there, so none of them can pass vacuously.

mod markdown;
mod probes;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use delegation_model::{
    ActionClass, ApprovalPolicy, DenyReason, Eligibility, FaultPoint, LifecycleState, Sandbox,
    eligibility,
};
use delegation_protocol::capability;
use markdown::{Row, generated_block, strip, table};
use serde_json::Value;

const PROTOCOL: &str = include_str!("../../PROTOCOL.md");
const ENDPOINTS: &str = include_str!("../../ENDPOINTS.md");
const GUIDE: &str = include_str!("../../WRITING-AN-ADAPTER.md");

fn protocol_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn scenarios_dir() -> PathBuf {
    protocol_dir().join("../../scenarios")
}

// ------------------------------------------------------------ generated

fn sandbox_columns() -> Vec<(&'static str, Sandbox)> {
    let workspace = |network| Sandbox::WorkspaceWrite {
        writable_roots: BTreeSet::new(),
        network,
    };
    vec![
        ("`read-only`", Sandbox::ReadOnly),
        ("`workspace-write`, no network", workspace(false)),
        ("`workspace-write` with network", workspace(true)),
        ("`full-access`", Sandbox::FullAccess),
    ]
}

fn named_policies() -> Vec<ApprovalPolicy> {
    vec![
        ApprovalPolicy::Never,
        ApprovalPolicy::Untrusted,
        ApprovalPolicy::OnRequest,
    ]
}

fn name_of<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value).expect("serialises") {
        Value::String(s) => s,
        other => panic!("not a plain name: {other}"),
    }
}

fn eligibility_table() -> String {
    let columns = sandbox_columns();
    let mut out = String::from("| class | policy |");
    for (name, _) in &columns {
        out.push_str(&format!(" {name} |"));
    }
    out.push_str(&format!("\n|---|---|{}\n", "---|".repeat(columns.len())));
    for class in ActionClass::ALL {
        for policy in named_policies() {
            out.push_str(&format!(
                "| `{}` | `{}` |",
                name_of(&class),
                name_of(&policy)
            ));
            for (_, sandbox) in &columns {
                let cell = match eligibility(&policy, sandbox, class) {
                    Eligibility::Runs => "runs".to_string(),
                    Eligibility::Approvable => "ask".to_string(),
                    Eligibility::Denied(reason) => format!("`{reason}`"),
                };
                out.push_str(&format!(" {cell} |"));
            }
            out.push('\n');
        }
    }
    out
}

fn policies_table() -> String {
    let policies = named_policies();
    let mut out = String::from("| class |");
    for p in &policies {
        out.push_str(&format!(" `{}` |", name_of(p)));
    }
    out.push_str(&format!("\n|---|{}\n", "---|".repeat(policies.len())));
    for class in ActionClass::ALL {
        out.push_str(&format!("| `{}` |", name_of(&class)));
        for p in &policies {
            out.push_str(&format!(" {} |", name_of(&p.verdict(class))));
        }
        out.push('\n');
    }
    // The named policies are totally ordered; the doc states the chain.
    let mut ordered = policies.clone();
    ordered.sort_by(|a, b| match (a.leq(b), b.leq(a)) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        (false, false) => panic!("{a:?} and {b:?} are not comparable"),
    });
    let chain: Vec<String> = ordered
        .iter()
        .map(|p| format!("`{}`", name_of(p)))
        .collect();
    out.push_str(&format!(
        "\nFrom narrowest to widest: {}.\n",
        chain.join(" < ")
    ));
    out
}

/// The values of a unit-only enum's schema (`enum`, or `oneOf` of `enum`s
/// and `const`s where variants carry doc comments).
fn enum_names(schema: &Value) -> Vec<String> {
    let values: Vec<Value> = match (schema["enum"].as_array(), schema["oneOf"].as_array()) {
        (Some(values), _) => values.clone(),
        (None, Some(variants)) => variants
            .iter()
            .flat_map(|v| {
                v["enum"]
                    .as_array()
                    .cloned()
                    .unwrap_or_else(|| vec![v["const"].clone()])
            })
            .collect(),
        (None, None) => panic!("not an enum schema: {schema}"),
    };
    values
        .iter()
        .map(|v| {
            v.as_str()
                .unwrap_or_else(|| panic!("not a name: {v}"))
                .to_string()
        })
        .collect()
}

/// Every lifecycle state, read from the schema so a new state is caught.
fn lifecycle_states() -> Vec<LifecycleState> {
    let schema = serde_json::to_value(schemars::schema_for!(LifecycleState)).expect("schema");
    let mut states: Vec<LifecycleState> = enum_names(&schema)
        .into_iter()
        .map(|name| serde_json::from_value(Value::String(name)).expect("a state"))
        .collect();
    // Declaration order: the lifecycle's own order, whatever the schema's grouping.
    states.sort();
    states
}

fn lifecycle_table() -> String {
    let states = lifecycle_states();
    let mut out = String::from("| from \\ to |");
    for s in &states {
        out.push_str(&format!(" `{}` |", name_of(s)));
    }
    out.push_str(&format!(
        " terminal |\n|---|{}---|\n",
        "---|".repeat(states.len())
    ));
    for from in &states {
        out.push_str(&format!("| `{}` |", name_of(from)));
        for to in &states {
            let cell = if from == to {
                "stays"
            } else if from.may_become(*to) {
                "yes"
            } else {
                "no"
            };
            out.push_str(&format!(" {cell} |"));
        }
        out.push_str(if from.is_terminal() {
            " yes |\n"
        } else {
            " no |\n"
        });
    }
    out
}

/// One scenario as far as the guide needs it.
struct ScenarioNeeds {
    needs: Vec<String>,
    unless: Vec<String>,
    methods: BTreeSet<String>,
}

/// The protocol method a scenario step sends, or `None` for steps the harness does itself.
fn step_method(key: &str) -> Result<Option<&'static str>, String> {
    Ok(Some(match key {
        "start" => "instance/start",
        "delegate" => "instance/delegate",
        "prepare_receipt" => "receipt/prepare",
        "consume_receipt" => "receipt/consume",
        "revoke_receipt" => "receipt/revoke",
        "turn" => "instance/turn",
        "tool_call" => "instance/tool_call",
        "close" => "instance/close",
        "cancel" => "instance/cancel",
        "fail" => "instance/fail",
        "resume" => "instance/resume",
        "fork" => "instance/fork",
        "wait" => "instance/wait",
        "deliver_event" => "event/deliver",
        "answer" => "approval/answer",
        "ask" => "instance/ask",
        "answer_question" => "question/answer",
        "auto" => "approval/auto",
        "score_risk" => "review/score",
        "revoke_grant" => "grant/revoke",
        "issue_capability" => "capability/issue",
        "capability_call" => "capability/call",
        "revoke_capability" => "capability/revoke",
        "clock" => "clock/set",
        "fault" => "fault/arm",
        "clear_fault" => "fault/clear",
        "observe" => "state/observe",
        "restart" | "tool_server" | "authorizer" | "model_endpoint" => return Ok(None),
        other => return Err(format!("step kind `{other}` has no method in step_method")),
    }))
}

fn step_kind(step: &Value) -> String {
    step.as_object()
        .expect("a step is an object")
        .keys()
        .find(|k| !matches!(k.as_str(), "expect" | "note"))
        .expect("a step has an action")
        .clone()
}

fn load_scenarios() -> Vec<ScenarioNeeds> {
    let mut files = Vec::new();
    for area in std::fs::read_dir(scenarios_dir()).expect("scenarios/") {
        let area = area.expect("a directory entry").path();
        if !area.is_dir() || area.ends_with("schema") {
            continue;
        }
        for file in std::fs::read_dir(&area).expect("an area") {
            let file = file.expect("a directory entry").path();
            if file.extension().is_some_and(|e| e == "json") {
                files.push(file);
            }
        }
    }
    files.sort();
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    files
        .iter()
        .map(|file| {
            let text = std::fs::read_to_string(file).expect("readable");
            let s: Value = serde_json::from_str(&text).expect("a scenario is JSON");
            // Every run configures, observes, and the setup's clock is set with `clock/set`.
            let mut methods: BTreeSet<String> = ["host/configure", "state/observe"]
                .into_iter()
                .map(String::from)
                .collect();
            if !s["setup"]["clock"].is_null() {
                methods.insert("clock/set".into());
            }
            // A concurrent step sends its actions' methods.
            let steps = s["steps"]
                .as_array()
                .expect("steps")
                .iter()
                .flat_map(
                    |step| match step.get("concurrently").and_then(Value::as_array) {
                        Some(inner) => inner.iter().collect::<Vec<_>>(),
                        None => vec![step],
                    },
                );
            for step in steps {
                let kind = step_kind(step);
                if let Some(m) =
                    step_method(&kind).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
                {
                    methods.insert(m.into());
                }
            }
            ScenarioNeeds {
                needs: strings(&s["needs"]),
                unless: strings(&s["unless"]),
                methods,
            }
        })
        .collect()
}

fn runs(s: &ScenarioNeeds, declared: &[String]) -> bool {
    capability::unmet(&s.needs, &s.unless, declared).is_empty()
}

/// The capability ladder: from declaring nothing, each step adds the
/// capability that lets the most further scenarios run (ties: the earlier
/// in the protocol's list), with the methods those scenarios send that no
/// earlier step needed.
fn ladder_table(scenarios: &[ScenarioNeeds]) -> String {
    let declarable: Vec<&str> = capability::ALL
        .iter()
        .copied()
        .filter(|c| {
            !capability::AUTHORITY_WIDENING.contains(c)
                && scenarios.iter().any(|s| s.needs.iter().any(|n| n == c))
        })
        .collect();
    let mut declared: Vec<String> = Vec::new();
    let mut methods_so_far: BTreeSet<String> = BTreeSet::new();
    let mut out = String::from(
        "| step | declare also | scenarios that run | unlocked by this step | methods these need that no earlier step did |\n|---|---|---|---|---|\n",
    );
    let mut step = 0;
    let mut row = |label: String, declared: &[String], before: usize| {
        let running: Vec<&ScenarioNeeds> = scenarios.iter().filter(|s| runs(s, declared)).collect();
        let new_methods: BTreeSet<String> = running
            .iter()
            .flat_map(|s| s.methods.iter().cloned())
            .filter(|m| !methods_so_far.contains(m))
            .collect();
        methods_so_far.extend(new_methods.iter().cloned());
        let list: Vec<String> = new_methods.iter().map(|m| format!("`{m}`")).collect();
        let list = if list.is_empty() {
            "none".to_string()
        } else {
            list.join(", ")
        };
        out.push_str(&format!(
            "| {step} | {label} | {} | {} | {list} |\n",
            running.len(),
            running.len() - before
        ));
        step += 1;
        running.len()
    };
    let mut count = row("nothing".into(), &declared, 0);
    let mut left: Vec<&str> = declarable.clone();
    while !left.is_empty() {
        let best = left
            .iter()
            .enumerate()
            .max_by_key(|(i, c)| {
                let mut with = declared.clone();
                with.push(c.to_string());
                let n = scenarios.iter().filter(|s| runs(s, &with)).count();
                (n, std::cmp::Reverse(*i))
            })
            .map(|(i, _)| i)
            .expect("a capability is left");
        let chosen = left.remove(best);
        declared.push(chosen.to_string());
        count = row(format!("`{chosen}`"), &declared, count);
    }
    let total = scenarios.len();
    out.push_str(&if count == total {
        format!("\nWith every capability above declared, all {total} scenarios of the catalogue run.\n")
    } else {
        format!(
            "\nWith every capability above declared, {count} of the catalogue's {total} scenarios run; the rest ask about a property (`unless`) such a host declares.\n"
        )
    });
    out
}

/// Compares each generated block with its rendering, or rewrites it under `UPDATE_DOCS=1`.
fn check_generated(path: &str, doc: &str, blocks: &[(&str, String)]) -> Vec<String> {
    let update = std::env::var_os("UPDATE_DOCS").is_some();
    let mut text = doc.to_string();
    let mut errors = Vec::new();
    for (name, wanted) in blocks {
        match generated_block(&text, name) {
            Err(e) => errors.push(format!("{path}: {e}")),
            Ok((range, current)) => {
                let wanted = format!("\n{wanted}");
                if current != wanted {
                    if update {
                        text.replace_range(range, &wanted);
                    } else {
                        let first = current
                            .lines()
                            .zip(wanted.lines())
                            .find(|(a, b)| a != b)
                            .map(|(a, b)| format!("\n  committed: {a}\n  generated: {b}"))
                            .unwrap_or_else(|| " (a row is missing or extra)".into());
                        errors.push(format!(
                            "{path}: table `{name}` is not what the code says{first}\n  (UPDATE_DOCS=1 cargo test -p delegation-protocol --test doc_tables rewrites it)"
                        ));
                    }
                }
            }
        }
    }
    if update && text != doc {
        std::fs::write(protocol_dir().join(path), text).expect("the doc is writable");
    }
    errors
}

// ---------------------------------------------------------- hand tables

/// Every backticked deny reason in a cell.
fn reasons_in(cell: &str) -> Vec<DenyReason> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|word| word.parse().ok())
        .collect()
}

/// A table of numbered checks whose last column is the reason: each row's
/// reason must be what its probe gets from the model (a `None` probe: the
/// row defers to ENDPOINTS.md's authorizer table and must link it).
fn check_ordered(path: &str, doc: &str, name: &str, probes: &[Option<DenyReason>]) -> Vec<String> {
    let rows = match table(doc, name) {
        Ok(rows) => rows,
        Err(e) => return vec![format!("{path}: {e}")],
    };
    let mut errors = Vec::new();
    if rows.len() != probes.len() {
        errors.push(format!(
            "{path}: table `{name}` has {} rows, the model's checks are {}",
            rows.len(),
            probes.len()
        ));
    }
    for (i, (row, probe)) in rows.iter().zip(probes).enumerate() {
        let cell = row.cells.last().map(String::as_str).unwrap_or_default();
        if strip(&row.cells[0]) != (i + 1).to_string() {
            errors.push(format!(
                "{path}:{}: row {} is numbered `{}`",
                row.line,
                i + 1,
                row.cells[0]
            ));
        }
        match probe {
            Some(reason) if !reasons_in(cell).contains(reason) => errors.push(format!(
                "{path}:{}: table `{name}` row {} says {cell}, the model refuses with `{reason}`",
                row.line,
                i + 1
            )),
            None if !cell.contains("ENDPOINTS.md") && path != "ENDPOINTS.md" => {
                errors.push(format!(
                    "{path}:{}: table `{name}` row {} should link ENDPOINTS.md's table",
                    row.line,
                    i + 1
                ))
            }
            _ => {}
        }
    }
    errors
}

/// A table whose first column lists names (comma-separated, backticked)
/// must list exactly `expected`.
fn check_names(path: &str, doc: &str, name: &str, expected: &BTreeSet<String>) -> Vec<String> {
    let rows = match table(doc, name) {
        Ok(rows) => rows,
        Err(e) => return vec![format!("{path}: {e}")],
    };
    let listed: BTreeSet<String> = rows
        .iter()
        .flat_map(|r: &Row| r.cells[0].split(',').map(strip).collect::<Vec<_>>())
        .collect();
    let mut errors = Vec::new();
    for missing in expected.difference(&listed) {
        errors.push(format!("{path}: table `{name}` lacks `{missing}`"));
    }
    for extra in listed.difference(expected) {
        errors.push(format!(
            "{path}: table `{name}` lists `{extra}`, which the harness does not have"
        ));
    }
    errors
}

fn scenario_file(area: &str, number: &str) -> Result<PathBuf, String> {
    let dir = scenarios_dir().join(area);
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let prefix = format!("{number}-");
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".json"))
        })
        .ok_or_else(|| format!("no scenario {area}/{number}"))
}

/// Checks one deny-reason row's evidence: a catalogue step `area/NNN#k`
/// that sends `method` and expects `reason`, or a named probe.
fn check_evidence(reason: DenyReason, method: &str, evidence: &str) -> Result<(), String> {
    if let Some(name) = evidence.strip_prefix("probe ") {
        return match probes::named(name) {
            None => Err(format!("no probe named `{name}`")),
            Some(got) if got == reason => Ok(()),
            Some(got) => Err(format!("probe `{name}` gets `{got}`, not `{reason}`")),
        };
    }
    if evidence == "reserved" {
        return Ok(());
    }
    let (path, step) = evidence.split_once('#').ok_or_else(|| {
        format!("evidence `{evidence}` is not `area/NNN#step`, `probe NAME` or `reserved`")
    })?;
    let (area, number) = path
        .split_once('/')
        .ok_or_else(|| format!("evidence `{evidence}` has no area"))?;
    let step: usize = step
        .parse()
        .map_err(|_| format!("step `{step}` is not a number"))?;
    let file = scenario_file(area, number)?;
    let scenario: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).map_err(|e| e.to_string())?)
            .map_err(|e| format!("{}: {e}", file.display()))?;
    let s = scenario["steps"]
        .get(step.wrapping_sub(1))
        .ok_or_else(|| format!("{evidence}: no step {step}"))?;
    let kind = step_kind(s);
    let sent = step_method(&kind)?.unwrap_or("(a harness step)");
    if sent != method {
        return Err(format!(
            "{evidence} is a `{kind}` step ({sent}), not `{method}`"
        ));
    }
    let expect = &s["expect"];
    let expected: Vec<&str> = [
        &expect["reason"],
        &expect["tool_call"]["reason"],
        &expect["spawn"]["reason"],
    ]
    .into_iter()
    .filter_map(Value::as_str)
    .collect();
    if expected.contains(&reason.to_string().as_str()) {
        Ok(())
    } else {
        Err(format!("{evidence} expects {expected:?}, not `{reason}`"))
    }
}

fn check_deny_reasons(doc: &str) -> Vec<String> {
    let rows = match table(doc, "deny-reasons") {
        Ok(rows) => rows,
        Err(e) => return vec![format!("PROTOCOL.md: {e}")],
    };
    let methods = all_methods();
    let mut errors = Vec::new();
    let mut covered = BTreeSet::new();
    for row in &rows {
        let at = format!("PROTOCOL.md:{}", row.line);
        let [reason, method, _, evidence] = &row.cells[..] else {
            errors.push(format!("{at}: a row has reason, method, when, evidence"));
            continue;
        };
        let reason: DenyReason = match strip(reason).parse() {
            Ok(r) => r,
            Err(e) => {
                errors.push(format!("{at}: {e}"));
                continue;
            }
        };
        covered.insert(reason);
        let method = strip(method);
        if method != "any" && !methods.contains(&method) {
            errors.push(format!("{at}: `{method}` is not a method"));
        }
        if let Err(e) = check_evidence(reason, &method, strip(evidence).as_str()) {
            errors.push(format!("{at}: {e}"));
        }
    }
    for reason in DenyReason::ALL {
        if !covered.contains(&reason) {
            errors.push(format!(
                "PROTOCOL.md: table `deny-reasons` has no row for `{reason}`"
            ));
        }
    }
    errors
}

/// Every method name, read from the schema so a new `Action` variant is caught.
fn all_methods() -> BTreeSet<String> {
    let schema =
        serde_json::to_value(schemars::schema_for!(delegation_model::Action)).expect("schema");
    schema["oneOf"]
        .as_array()
        .expect("Action is a oneOf")
        .iter()
        .map(|variant| {
            let method = &variant["properties"]["method"];
            method["const"]
                .as_str()
                .or_else(|| method["enum"][0].as_str())
                .expect("a method name")
                .to_string()
        })
        .collect()
}

fn fault_points() -> BTreeSet<String> {
    let schema = serde_json::to_value(schemars::schema_for!(FaultPoint)).expect("schema");
    enum_names(&schema).into_iter().collect()
}

// ---------------------------------------------------------------- checks

fn protocol_errors(doc: &str) -> Vec<String> {
    let mut errors = check_generated(
        "PROTOCOL.md",
        doc,
        &[
            ("eligibility", eligibility_table()),
            ("policies", policies_table()),
            ("lifecycle", lifecycle_table()),
        ],
    );
    errors.extend(check_ordered(
        "PROTOCOL.md",
        doc,
        "delegation-checks",
        &probes::delegation_checks(),
    ));
    errors.extend(check_ordered(
        "PROTOCOL.md",
        doc,
        "receipt-checks",
        &probes::receipt_checks(),
    ));
    errors.extend(check_ordered(
        "PROTOCOL.md",
        doc,
        "tool-call-checks",
        &probes::tool_call_checks(),
    ));
    errors.extend(check_ordered(
        "PROTOCOL.md",
        doc,
        "capability-checks",
        &probes::capability_checks(),
    ));
    errors.extend(check_deny_reasons(doc));
    errors.extend(check_names("PROTOCOL.md", doc, "methods", &all_methods()));
    errors.extend(check_names(
        "PROTOCOL.md",
        doc,
        "fault-points",
        &fault_points(),
    ));
    errors.extend(check_names(
        "PROTOCOL.md",
        doc,
        "records",
        &probes::record_transitions(),
    ));
    let capabilities = capability::ALL.iter().map(|c| c.to_string()).collect();
    errors.extend(check_names(
        "PROTOCOL.md",
        doc,
        "capabilities",
        &capabilities,
    ));
    errors
}

fn endpoints_errors(doc: &str) -> Vec<String> {
    let mut errors = check_ordered(
        "ENDPOINTS.md",
        doc,
        "authorizer-checks",
        &probes::authorizer_checks(),
    );
    let deadline = format!("now + {}", delegation_model::state::AUTHORIZER_DEADLINE_MS);
    if !doc.contains(&deadline) {
        errors.push(format!(
            "ENDPOINTS.md: the authorizer's deadline is `{deadline}`, which the page does not say"
        ));
    }
    errors
}

fn guide_errors(doc: &str) -> Vec<String> {
    check_generated(
        "WRITING-AN-ADAPTER.md",
        doc,
        &[("ladder", ladder_table(&load_scenarios()))],
    )
}

fn assert_clean(errors: Vec<String>) {
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn protocol_tables_agree_with_the_model_and_the_catalogue() {
    assert_clean(protocol_errors(PROTOCOL));
}

#[test]
fn endpoint_tables_agree_with_the_model() {
    assert_clean(endpoints_errors(ENDPOINTS));
}

#[test]
fn the_adapter_guide_ladder_is_the_catalogue_s() {
    assert_clean(guide_errors(GUIDE));
}

/// Lines that name a Rust source file (`something.rs`), with their numbers.
fn rust_paths(doc: &str) -> Vec<(usize, &str)> {
    doc.lines()
        .enumerate()
        .filter(|(_, line)| {
            line.split(|c: char| !(c.is_alphanumeric() || "._/-".contains(c)))
                .any(|word| word.ends_with(".rs"))
        })
        .map(|(n, line)| (n + 1, line))
        .collect()
}

#[test]
fn no_document_sends_a_host_author_to_rust_source() {
    for (path, doc) in [
        ("PROTOCOL.md", PROTOCOL),
        ("ENDPOINTS.md", ENDPOINTS),
        ("WRITING-AN-ADAPTER.md", GUIDE),
    ] {
        let named = rust_paths(doc);
        assert!(named.is_empty(), "{path} names Rust source: {named:?}");
    }
}

// -------------------------------------------------------- positive controls

/// `doc` with the first occurrence of `from` after `anchor` replaced by `to`.
fn mutate(doc: &str, anchor: &str, from: &str, to: &str) -> String {
    let at = doc
        .find(anchor)
        .unwrap_or_else(|| panic!("no `{anchor}` in the doc"));
    let offset = doc[at..]
        .find(from)
        .unwrap_or_else(|| panic!("no `{from}` after `{anchor}`"));
    let mut out = doc.to_string();
    out.replace_range(at + offset..at + offset + from.len(), to);
    out
}

fn assert_fails(errors: Vec<String>, mentioning: &str) {
    assert!(
        errors.iter().any(|e| e.contains(mentioning)),
        "a deliberately wrong row went unnoticed (wanted an error mentioning `{mentioning}`, got {errors:?})"
    );
}

#[test]
fn a_wrong_generated_cell_fails() {
    // `never` lets a read run: claim it asks instead.
    let wrong = mutate(PROTOCOL, "| `read` | `never` |", "runs", "ask");
    assert_fails(protocol_errors(&wrong), "table `eligibility`");
    let wrong = mutate(PROTOCOL, "| `closed` |", "| no |", "| yes |");
    assert_fails(protocol_errors(&wrong), "table `lifecycle`");
}

#[test]
fn a_wrong_check_row_fails() {
    let wrong = mutate(
        PROTOCOL,
        "| 5 | the parent's `delegation_depth`",
        "policy_denied",
        "ceiling_exceeded",
    );
    assert_fails(protocol_errors(&wrong), "table `delegation-checks` row 5");
    let wrong = mutate(
        PROTOCOL,
        "| 5 | it was not revoked",
        "receipt_expired",
        "receipt_consumed",
    );
    assert_fails(protocol_errors(&wrong), "table `receipt-checks` row 5");
    let wrong = mutate(
        ENDPOINTS,
        "| 8 | `now < receipt.expires_at`",
        "authorizer_replay",
        "authorizer_denied",
    );
    assert_fails(endpoints_errors(&wrong), "table `authorizer-checks` row 8");
}

#[test]
fn a_wrong_deny_reason_row_fails() {
    // A parent with depth 0 is a policy refusal, not a ceiling one.
    let wrong = mutate(
        PROTOCOL,
        "| `policy_denied` | `instance/delegate` | the parent's `delegation_depth` is 0",
        "`policy_denied`",
        "`ceiling_exceeded`",
    );
    assert_fails(protocol_errors(&wrong), "zc/003#2 expects");
    let wrong = mutate(
        PROTOCOL,
        "| `receipt_expired` | `receipt/consume` | the receipt was revoked",
        "`receipt_expired`",
        "`receipt_consumed`",
    );
    assert_fails(protocol_errors(&wrong), "probe `consume-revoked-receipt`");
}

#[test]
fn a_missing_name_fails() {
    let wrong = PROTOCOL.replacen("| `model.call` |", "| `model.calls` |", 1);
    assert_fails(protocol_errors(&wrong), "lacks `model.call`");
    let wrong = PROTOCOL.replacen("| `strict_review_required` |", "| `strict_review` |", 1);
    assert_fails(protocol_errors(&wrong), "lacks `strict_review_required`");
}

#[test]
fn a_wrong_ladder_count_fails() {
    let wrong = mutate(GUIDE, "| 1 | `", "`", "`x");
    assert_fails(guide_errors(&wrong), "table `ladder`");
}

#[test]
fn a_pointer_to_rust_source_fails() {
    let wrong = PROTOCOL.replacen(
        "## Transport",
        "## Transport (see `harness/host/src/process.rs`)",
        1,
    );
    assert_eq!(
        rust_paths(&wrong).len(),
        1,
        "the `.rs` detector misses a path"
    );
}
