//! The scenario file format: parse errors name the file, the JSON path and
//! what would be right; semantic checks; the committed JSON Schema is current.

use std::path::{Path, PathBuf};

use delegation_runner::catalogue::Catalogue;
use delegation_runner::scenario::{Scenario, ScenarioError, StepAction, schema};

mod concurrent;
mod twins;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/catalogue")
}

fn fixture_text() -> String {
    std::fs::read_to_string(fixtures().join("zc/001-network-above-ceiling.json")).unwrap()
}

/// Applies `edit` to the fixture's JSON and parses the result.
fn parse_edited(edit: impl FnOnce(&mut serde_json::Value)) -> Result<Scenario, ScenarioError> {
    let mut value: serde_json::Value = serde_json::from_str(&fixture_text()).unwrap();
    edit(&mut value);
    let file = Path::new("scenarios/zc/001-network-above-ceiling.json");
    let scenario = Scenario::parse(&value.to_string(), file)?;
    scenario.validate(file)?;
    Ok(scenario)
}

fn err_text(r: Result<Scenario, ScenarioError>) -> String {
    r.expect_err("the edited scenario must be refused")
        .to_string()
}

#[test]
fn the_fixture_loads_with_its_steps_in_order() {
    let catalogue = Catalogue::load(&fixtures()).unwrap();
    assert_eq!(catalogue.scenarios.len(), 1);
    let s = &catalogue.scenarios[0];
    assert_eq!(s.area(), "zc");
    assert_eq!(s.name(), "001-network-above-ceiling");
    let keys: Vec<&str> = s.steps.iter().map(|st| st.action.key()).collect();
    assert_eq!(keys, ["start", "delegate", "restart", "observe"]);
    assert!(matches!(&s.steps[1].action, StepAction::Delegate(d) if d.parent == "root"));
}

#[test]
fn a_wrong_type_names_file_json_path_and_expectation() {
    let text = err_text(parse_edited(|v| {
        v["steps"][1]["expect"]["delta"]["instances"] = "none".into();
    }));
    assert!(
        text.contains("scenarios/zc/001-network-above-ceiling.json"),
        "{text}"
    );
    assert!(text.contains("steps[1].expect.delta.instances"), "{text}");
    assert!(text.contains("expected i64"), "{text}");
}

#[test]
fn an_unknown_expectation_field_lists_the_known_ones() {
    let text = err_text(parse_edited(|v| {
        v["steps"][1]["expect"]["delta"]["instance"] = 0.into();
    }));
    assert!(text.contains("steps[1].expect.delta"), "{text}");
    assert!(text.contains("unknown field `instance`"), "{text}");
    assert!(text.contains("`instances`"), "{text}");
}

#[test]
fn an_unknown_step_key_lists_the_actions() {
    let text = err_text(parse_edited(|v| {
        v["steps"][2] = serde_json::json!({ "reboot": {} });
    }));
    assert!(text.contains("steps[2]"), "{text}");
    assert!(text.contains("unknown step key `reboot`"), "{text}");
    assert!(text.contains("restart"), "{text}");
}

#[test]
fn a_step_with_two_actions_is_refused() {
    let text = err_text(parse_edited(|v| {
        v["steps"][2] = serde_json::json!({ "restart": {}, "observe": {} });
    }));
    assert!(text.contains("exactly one action"), "{text}");
    assert!(
        text.contains("`restart`") && text.contains("`observe`"),
        "{text}"
    );
}

#[test]
fn an_unknown_invariant_id_is_refused_at_its_path() {
    let text = err_text(parse_edited(|v| v["checks"][1] = "ZC9".into()));
    assert!(text.contains("checks[1]"), "{text}");
    assert!(text.contains("ZC9"), "{text}");
}

#[test]
fn an_unknown_deny_reason_is_refused() {
    let text = err_text(parse_edited(|v| {
        v["steps"][1]["expect"]["reason"] = "too_wide".into();
    }));
    assert!(text.contains("steps[1].expect.reason"), "{text}");
    assert!(text.contains("ceiling_exceeded"), "{text}");
}

#[test]
fn an_alias_used_before_it_is_bound_is_refused() {
    let text = err_text(parse_edited(|v| {
        v["steps"][1]["delegate"]["parent"] = "lead".into();
    }));
    assert!(text.contains("steps[1].delegate.parent"), "{text}");
    assert!(text.contains("alias `lead` is used before"), "{text}");
    assert!(text.contains("bound so far: root"), "{text}");
}

#[test]
fn an_expectation_on_an_unbound_alias_is_refused() {
    let text = err_text(parse_edited(|v| {
        v["steps"][3]["expect"]["state"] = serde_json::json!({ "ghost": "closed" });
    }));
    assert!(text.contains("steps[3].expect.state"), "{text}");
    assert!(text.contains("`ghost`"), "{text}");
}

#[test]
fn a_negative_without_control_is_refused() {
    let text = err_text(parse_edited(|v| v["kind"] = "negative".into()));
    assert!(text.contains("at `control`"), "{text}");
    assert!(text.contains("positive control"), "{text}");
}

#[test]
fn an_unknown_capability_is_refused() {
    let text = err_text(parse_edited(|v| v["needs"][0] = "time-travel".into()));
    assert!(text.contains("needs[0]"), "{text}");
    assert!(text.contains("nested-delegation"), "{text}");
}

#[test]
fn catalogue_checks_id_against_path_unknown_controls_and_reports_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let zc = dir.path().join("zc");
    std::fs::create_dir_all(&zc).unwrap();
    // Right content, wrong place: the id must follow the path.
    std::fs::write(zc.join("002-moved.json"), fixture_text()).unwrap();
    let mut negative: serde_json::Value = serde_json::from_str(&fixture_text()).unwrap();
    negative["id"] = "zc/003-negative".into();
    negative["kind"] = "negative".into();
    negative["control"] = "zc/000-missing".into();
    std::fs::write(zc.join("003-negative.json"), negative.to_string()).unwrap();

    let text = Catalogue::load(dir.path()).unwrap_err().to_string();
    assert!(text.contains("2 scenario file(s) are invalid"), "{text}");
    assert!(text.contains("002-moved.json: at `id`"), "{text}");
    assert!(text.contains("expected `zc/002-moved`"), "{text}");
    assert!(
        text.contains("control `zc/000-missing` is not a scenario"),
        "{text}"
    );
}

#[test]
fn the_committed_json_schema_is_current() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/schema/scenario.schema.json");
    let fresh = serde_json::to_string_pretty(&schema()).unwrap() + "\n";
    if std::env::var_os("DELEGATION_UPDATE_SCHEMA").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &fresh).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "{} is stale or missing: regenerate it with `DELEGATION_UPDATE_SCHEMA=1 cargo test -p delegation-runner --test scenario_format` and commit it",
        path.display()
    );
    // The schema describes steps one action at a time and refuses strangers.
    let steps = &schema()["$defs"]["Step"]["oneOf"];
    assert!(steps.as_array().is_some_and(|a| a.len() > 20), "{steps}");
}

#[test]
fn the_reserved_unknown_alias_is_accepted_where_an_alias_is_read() {
    let s = parse_edited(|v| {
        v["steps"][1]["delegate"]["parent"] = "@unknown".into();
        v["steps"][1]["delegate"]
            .as_object_mut()
            .unwrap()
            .remove("as");
    })
    .unwrap();
    assert!(matches!(&s.steps[1].action, StepAction::Delegate(d) if d.parent == "@unknown"));
}

#[test]
fn other_reserved_aliases_and_binding_or_expecting_one_are_refused() {
    let text = err_text(parse_edited(|v| {
        v["steps"][1]["delegate"]["parent"] = "@nobody".into();
    }));
    assert!(text.contains("steps[1].delegate.parent"), "{text}");
    assert!(
        text.contains("reserved") && text.contains("@unknown"),
        "{text}"
    );

    let text = err_text(parse_edited(|v| {
        v["steps"][0]["start"]["as"] = "@root".into()
    }));
    assert!(text.contains("steps[0].start"), "{text}");
    assert!(text.contains("cannot be bound"), "{text}");

    let text = err_text(parse_edited(|v| {
        v["steps"][3]["expect"]["state"] = serde_json::json!({ "@unknown": "closed" });
    }));
    assert!(text.contains("steps[3].expect.state"), "{text}");
    assert!(text.contains("never issued has no state"), "{text}");
}

#[test]
fn host_exits_needs_a_restart_before_the_next_host_action() {
    let text = err_text(parse_edited(|v| {
        v["steps"][1]["expect"] = serde_json::json!({ "host_exits": true });
        v["steps"][2] = serde_json::json!({ "observe": {} });
    }));
    assert!(text.contains("steps[2].observe"), "{text}");
    assert!(text.contains("insert {\"restart\": {}}"), "{text}");

    // Observer-side changes may come between the crash and the restart.
    parse_edited(|v| {
        v["steps"][1]["expect"] =
            serde_json::json!({ "host_exits": true, "delta": { "handler_calls": 0 } });
        v["steps"].as_array_mut().unwrap().insert(
            2,
            serde_json::json!({ "model_endpoint": { "failing": null } }),
        );
    })
    .unwrap();
}

#[test]
fn host_exits_refuses_expectations_that_need_a_reply_or_a_live_host() {
    let text = err_text(parse_edited(|v| {
        v["steps"][1]["expect"]["host_exits"] = true.into();
    }));
    assert!(text.contains("steps[1].expect"), "{text}");
    assert!(
        text.contains("outcome, reason, delta.instances"),
        "names each offending field: {text}"
    );
    assert!(text.contains("move them to the `restart` step"), "{text}");

    let text = err_text(parse_edited(|v| {
        v["steps"][2] = serde_json::json!({ "restart": {}, "expect": { "host_exits": true } });
    }));
    assert!(text.contains("steps[2].expect.host_exits"), "{text}");
    assert!(text.contains("not on `restart`"), "{text}");
}

#[test]
fn new_expectation_fields_parse_and_model_saw_names_a_bound_instance() {
    let s = parse_edited(|v| {
        v["steps"][3]["expect"] = serde_json::json!({
            "grants": { "count": 0 },
            "approvals": { "dispatched": 0, "decided_by_person": 0, "decided_by_policy": 0, "decided_by_external": 0 },
            "records": { "allowed_delegations": 0, "denied_delegations": 1, "allowed_delegations_with_requested_and_effective": 0 },
            "model_saw": { "root": [] }
        });
    })
    .unwrap();
    let expect = s.steps[3].expect.as_ref().unwrap();
    assert_eq!(expect.grants.as_ref().map(|g| g.count), Some(0));
    assert_eq!(expect.records.as_ref().unwrap().denied_delegations, Some(1));
    assert_eq!(expect.model_saw["root"], Vec::<String>::new());

    let text = err_text(parse_edited(|v| {
        v["steps"][3]["expect"] = serde_json::json!({ "model_saw": { "ghost": ["x"] } });
    }));
    assert!(text.contains("steps[3].expect.model_saw"), "{text}");
    assert!(text.contains("`ghost`"), "{text}");
}

/// The `scenario_parser` fuzz target's body on stable: every catalogue file
/// round trips, and every prefix of one (almost all refused) is answered
/// with an error naming the file, never a panic.
#[test]
fn the_scenario_fuzz_body_accepts_the_catalogue_and_its_truncations() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let catalogue = Catalogue::load(&root).unwrap();
    assert!(
        catalogue.scenarios.len() > 100,
        "the whole catalogue is covered"
    );
    for scenario in &catalogue.scenarios {
        let text = std::fs::read(root.join(format!("{}.json", scenario.id))).unwrap();
        delegation_runner::differential::fuzz_scenario(&text);
    }
    // The target's committed seeds too: CI's smoke run does not build this
    // target (it links the runner), so this is where a seed that panics shows.
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/scenario_parser");
    let mut seeded = 0;
    for entry in std::fs::read_dir(&seeds).unwrap() {
        delegation_runner::differential::fuzz_scenario(
            &std::fs::read(entry.unwrap().path()).unwrap(),
        );
        seeded += 1;
    }
    assert!(seeded > 0, "{} holds the target's seeds", seeds.display());
    let text = fixture_text();
    let mut refused = 0;
    for end in (0..text.len()).step_by(7) {
        if !text.is_char_boundary(end) {
            continue;
        }
        if Scenario::parse(&text[..end], Path::new("x.json")).is_err() {
            refused += 1;
        }
        delegation_runner::differential::fuzz_scenario(&text.as_bytes()[..end]);
    }
    assert!(refused > 10, "truncated scenarios are refused ({refused})");
}

#[test]
fn a_receipt_tamper_says_whether_it_replaces_adds_or_removes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let file = root.join("rc/015-receipt-fields-added-or-removed.json");
    let text = std::fs::read_to_string(&file).unwrap();
    let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let scenario = Scenario::parse(&text, &file).unwrap();
    scenario.validate(&file).unwrap();
    // steps[2] adds a field, steps[6] removes one.
    assert_eq!(value["steps"][2]["consume_receipt"]["tamper"]["op"], "add");
    assert_eq!(
        value["steps"][6]["consume_receipt"]["tamper"]["op"],
        "remove"
    );

    value["steps"][6]["consume_receipt"]["tamper"]["value"] = serde_json::json!(1);
    let with_value = Scenario::parse(&value.to_string(), &file).unwrap();
    let error = with_value.validate(&file).unwrap_err().to_string();
    assert!(
        error.contains("steps[6].consume_receipt.tamper.value") && error.contains("takes no value"),
        "{error}"
    );

    let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
    value["steps"][2]["consume_receipt"]["tamper"]
        .as_object_mut()
        .unwrap()
        .remove("value");
    let without_value = Scenario::parse(&value.to_string(), &file).unwrap();
    let error = without_value.validate(&file).unwrap_err().to_string();
    assert!(
        error.contains("steps[2].consume_receipt.tamper.value")
            && error.contains("`add` tamper needs"),
        "{error}"
    );

    value["steps"][2]["consume_receipt"]["tamper"]["op"] = serde_json::json!("move");
    let error = Scenario::parse(&value.to_string(), &file)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("steps[2].consume_receipt.tamper.op"),
        "{error}"
    );
}

#[test]
fn a_spawn_refused_for_its_requested_authority_needs_spawn_authority() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let file = root.join("zc/015-spawn-network-above-ceiling.json");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let needs = value["needs"].as_array_mut().unwrap();
    needs.retain(|n| n != "spawn-authority");
    let scenario = Scenario::parse(&value.to_string(), &file).unwrap();
    let error = scenario.validate(&file).unwrap_err().to_string();
    assert!(
        error.contains("steps[1].expect.spawn.reason") && error.contains("add \"spawn-authority\""),
        "{error}"
    );
}

#[test]
fn an_instance_started_with_tools_needs_mcp() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let file = root.join("pg/005-manual-allow-dispatches-once.json");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    value["needs"]
        .as_array_mut()
        .unwrap()
        .retain(|n| n != "mcp");
    let scenario = Scenario::parse(&value.to_string(), &file).unwrap();
    let error = scenario.validate(&file).unwrap_err().to_string();
    assert!(
        error.contains(".start.tools") && error.contains("add \"mcp\""),
        "{error}"
    );
}

/// A scripted lifecycle call needs the capability for its tool, names a
/// bound instance alias, and a `send_input` carries input; a property both
/// needed and excluded is refused.
#[test]
fn lifecycle_replies_need_their_capability_and_a_bound_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let file = root.join("tr/057-closed-child-not-reopened-by-parent-model.json");
    let original: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let error_of = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut value = original.clone();
        edit(&mut value);
        let scenario = Scenario::parse(&value.to_string(), &file).unwrap();
        scenario.validate(&file).unwrap_err().to_string()
    };
    let rule_of = |value: &mut serde_json::Value, marker: &str| -> usize {
        value["setup"]["model"]
            .as_array()
            .unwrap()
            .iter()
            .position(|r| r["when"]["input_contains"] == marker)
            .unwrap()
    };

    let error = error_of(&|v| {
        v["needs"]
            .as_array_mut()
            .unwrap()
            .retain(|n| n != "model-close-tools")
    });
    assert!(
        error.contains("reply.lifecycle") && error.contains("add \"model-close-tools\""),
        "a bare resume needs model-close-tools: {error}"
    );
    let error = error_of(&|v| {
        v["needs"]
            .as_array_mut()
            .unwrap()
            .retain(|n| n != "model-lifecycle-tools")
    });
    assert!(error.contains("add \"model-lifecycle-tools\""), "{error}");

    let error = error_of(&|v| {
        let r = rule_of(v, "POKE_CHILD");
        v["setup"]["model"][r]["reply"]["lifecycle"]["target"] = "nobody".into();
    });
    assert!(
        error.contains(".target") && error.contains("`nobody` is not an instance alias"),
        "{error}"
    );
    // `@unknown` is the one target no step binds that loads: an id the host never issued.
    let mut unknown = original.clone();
    let r = rule_of(&mut unknown, "POKE_CHILD");
    unknown["setup"]["model"][r]["reply"]["lifecycle"]["target"] = "@unknown".into();
    Scenario::parse(&unknown.to_string(), &file)
        .unwrap()
        .validate(&file)
        .unwrap();
    let error = error_of(&|v| {
        let r = rule_of(v, "POKE_CHILD");
        v["setup"]["model"][r]["reply"]["lifecycle"]
            .as_object_mut()
            .unwrap()
            .remove("message");
    });
    assert!(
        error.contains(".message") && error.contains("add `message`"),
        "{error}"
    );

    let error = error_of(&|v| v["unless"] = serde_json::json!(["nested-delegation"]));
    assert!(error.contains("both needed and excluded"), "{error}");

    let scenario = Scenario::parse(&original.to_string(), &file).unwrap();
    scenario.validate(&file).unwrap();
}
