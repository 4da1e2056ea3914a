//! Spawn-based twins (`twin_of`): every twin asks its original's question with each child created by the model's spawn, and the catalogue refuses a twin that drifts from its original.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use delegation_model::{AuthorityRequest, Outcome, SpawnRequest};
use delegation_observers::model_endpoint::ModelReply;
use delegation_runner::catalogue::Catalogue;
use delegation_runner::scenario::{Scenario, StepAction};

fn catalogue_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

/// The spawn a twin's model answers a turn's input with: the reply of the
/// first rule that matches on the input alone, as the endpoint picks it for
/// the parent's first request of that turn.
fn spawn_answering<'a>(twin: &'a Scenario, input: &str) -> Option<&'a SpawnRequest> {
    let rule = twin.setup.model.iter().find(|r| {
        r.when.instance.is_none()
            && r.when.role.is_none()
            && r.when.tool_result_contains.is_none()
            && r.when
                .input_contains
                .as_deref()
                .is_none_or(|marker| input.contains(marker))
    })?;
    match &rule.reply {
        ModelReply::Spawn(spawn) => Some(spawn),
        _ => None,
    }
}

/// Whether any spawn the twin's model answers with asks for an authority.
fn spawns_ask_authority(twin: &Scenario) -> bool {
    twin.setup.model.iter().any(|r| match &r.reply {
        ModelReply::Spawn(spawn) => spawn.authority != AuthorityRequest::default(),
        _ => false,
    })
}

/// Everything in which `twin` is not the spawn-based form of `original`.
fn differences(original: &Scenario, twin: &Scenario) -> Vec<String> {
    let mut out = Vec::new();
    let set = |v: &[String]| v.iter().cloned().collect::<BTreeSet<String>>();
    let mut twin_needs = set(&twin.needs);
    // The authority a delegation asks for travels on a spawn only where the
    // host takes one there: the same question, a capability more.
    if spawns_ask_authority(twin) && !original.needs.iter().any(|n| n == "spawn-authority") {
        twin_needs.remove("spawn-authority");
    }
    if twin_needs != set(&original.needs) {
        out.push(format!(
            "needs {:?}, the original needs {:?}",
            twin.needs, original.needs
        ));
    }
    let (ts, os) = (&twin.setup, &original.setup);
    if ts.tools != os.tools
        || ts.configuration != os.configuration
        || ts.authorizer != os.authorizer
        || ts.clock != os.clock
        || ts.canaries != os.canaries
    {
        out.push("its setup differs from the original's beyond the model's spawn replies".into());
    }
    // The original's replies stay as they were (children answer the same);
    // the twin only puts its spawn replies before them.
    if !ts.model.ends_with(&os.model) {
        out.push("setup.model does not end with the original's rules, unchanged".into());
    }
    if twin.steps.len() != original.steps.len() {
        out.push(format!(
            "{} steps, the original has {}",
            twin.steps.len(),
            original.steps.len()
        ));
        return out;
    }
    for (i, (o, t)) in original.steps.iter().zip(&twin.steps).enumerate() {
        let (oe, te) = (
            o.expect.clone().unwrap_or_default(),
            t.expect.clone().unwrap_or_default(),
        );
        if (oe.outcome, oe.reason) != (te.outcome, te.reason) {
            out.push(format!(
                "steps[{i}] expects {:?}/{:?}, the original {:?}/{:?}",
                te.outcome, te.reason, oe.outcome, oe.reason
            ));
        }
        match (&o.action, &t.action) {
            (StepAction::Delegate(delegate), StepAction::Turn(turn)) => {
                if turn.instance != delegate.parent || turn.alias != delegate.alias {
                    out.push(format!(
                        "steps[{i}]: the turn is on `{}` binding {:?}; the original delegates from `{}` binding {:?}",
                        turn.instance, turn.alias, delegate.parent, delegate.alias
                    ));
                }
                match spawn_answering(twin, &turn.input) {
                    None => out.push(format!(
                        "steps[{i}]: no rule answers the input `{}` with a spawn",
                        turn.input
                    )),
                    Some(spawn) => {
                        let asked = &delegate.request;
                        if spawn.role != asked.role
                            || spawn.task != asked.task
                            || spawn.model != asked.model
                            || spawn.target != asked.target
                            || spawn.worktree != asked.worktree
                        {
                            out.push(format!(
                                "steps[{i}]: the spawn asks for role `{}` and task `{}`, the delegation for `{}` and `{}` (model, target and worktree must match too)",
                                spawn.role, spawn.task, asked.role, asked.task
                            ));
                        }
                        // A spawn asks for no authority (a host's delegation
                        // tool may carry none) or for exactly the delegation's.
                        if spawn.authority != AuthorityRequest::default()
                            && spawn.authority != asked.authority
                        {
                            out.push(format!(
                                "steps[{i}]: the spawn asks for an authority the delegation did not"
                            ));
                        }
                    }
                }
                let admitted = oe.outcome == Some(Outcome::Ok);
                if admitted != te.spawn.as_ref().is_some_and(|s| s.outcome == Outcome::Ok) {
                    out.push(format!(
                        "steps[{i}]: the delegation is {}, so the turn's spawn must be expected {}",
                        if admitted { "admitted" } else { "refused" },
                        if admitted {
                            "ok"
                        } else {
                            "nowhere (the turn itself is refused)"
                        }
                    ));
                }
                let instances = |e: &delegation_runner::scenario::Expect| {
                    e.delta.as_ref().and_then(|d| d.instances)
                };
                if instances(&oe) != instances(&te) {
                    out.push(format!(
                        "steps[{i}]: delta.instances {:?}, the original {:?}",
                        instances(&te),
                        instances(&oe)
                    ));
                }
            }
            (StepAction::Delegate(_), other) => out.push(format!(
                "steps[{i}]: the original delegates here, the twin does `{}` instead of a spawn turn",
                other.key()
            )),
            (a, b) if a != b => out.push(format!(
                "steps[{i}]: `{}` differs from the original's `{}`",
                b.key(),
                a.key()
            )),
            _ => {
                if oe.spawn != te.spawn || oe.tool_call != te.tool_call {
                    out.push(format!(
                        "steps[{i}]: the expected spawn or tool call outcome differs from the original's"
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn every_twin_asks_its_originals_question_through_the_models_spawn() {
    let catalogue = Catalogue::load(&catalogue_root()).unwrap_or_else(|e| panic!("{e}"));
    let twins: Vec<&Scenario> = catalogue
        .scenarios
        .iter()
        .filter(|s| s.twin_of.is_some())
        .collect();
    assert!(
        !twins.is_empty(),
        "the catalogue has no spawn-based twins: this test refuses to pass on nothing"
    );
    let mut problems = Vec::new();
    for twin in twins {
        let original_id = twin.twin_of.as_deref().unwrap_or_default();
        let original = catalogue
            .get(original_id)
            .expect("the catalogue checks that a twin's original exists");
        for d in differences(original, twin) {
            problems.push(format!("{} (twin of {original_id}): {d}", twin.id));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_consistency_check_sees_a_twin_that_changed_its_question() {
    let catalogue = Catalogue::load(&catalogue_root()).unwrap();
    let twin = catalogue
        .get("tr/037-closed-child-follow-up-turn-spawned")
        .unwrap()
        .clone();
    let original = catalogue.get("tr/002-closed-child-follow-up-turn").unwrap();
    assert!(differences(original, &twin).is_empty());

    let mut accepted = twin.clone();
    accepted.steps[3].expect.as_mut().unwrap().outcome = Some(Outcome::Ok);
    accepted.steps[3].expect.as_mut().unwrap().reason = None;
    let found = differences(original, &accepted).join("\n");
    assert!(found.contains("steps[3] expects Some(Ok)/None"), "{found}");

    let mut other_task = twin.clone();
    for rule in &mut other_task.setup.model {
        if let ModelReply::Spawn(spawn) = &mut rule.reply {
            spawn.task = "SOMETHING_ELSE".into();
        }
    }
    let found = differences(original, &other_task).join("\n");
    assert!(
        found.contains("steps[1]: the spawn asks for role"),
        "{found}"
    );

    let mut widened = twin;
    for rule in &mut widened.setup.model {
        if let ModelReply::Spawn(spawn) = &mut rule.reply {
            spawn.authority.delegation_depth = Some(5);
        }
    }
    let found = differences(original, &widened).join("\n");
    assert!(
        found.contains("asks for an authority the delegation did not"),
        "{found}"
    );
}

/// Writes the named catalogue files into a fresh catalogue, `edit`ing the last one.
fn catalogue_with(ids: &[&str], edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let dir = tempfile::tempdir().unwrap();
    let last = ids.len() - 1;
    let mut edit = Some(edit);
    for (i, id) in ids.iter().enumerate() {
        let text = std::fs::read_to_string(catalogue_root().join(format!("{id}.json"))).unwrap();
        let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
        if i == last {
            (edit.take().unwrap())(&mut value);
        }
        let file = dir.path().join(format!("{id}.json"));
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, value.to_string()).unwrap();
    }
    match Catalogue::load(dir.path()) {
        Ok(_) => String::new(),
        Err(e) => e.to_string(),
    }
}

const PAIR: [&str; 4] = [
    "tr/001-completed-child-follow-up-turn",
    "tr/002-closed-child-follow-up-turn",
    "tr/036-completed-child-follow-up-turn-spawned",
    "tr/037-closed-child-follow-up-turn-spawned",
];

#[test]
fn a_twin_and_its_control_load_beside_their_originals() {
    assert_eq!(catalogue_with(&PAIR, |_| {}), "");
}

#[test]
fn a_twin_of_a_missing_scenario_is_refused() {
    let text = catalogue_with(&PAIR, |v| v["twin_of"] = "tr/000-missing".into());
    assert!(
        text.contains("at `twin_of`: `tr/000-missing` is not a scenario"),
        "{text}"
    );
}

#[test]
fn a_twin_that_checks_other_invariants_is_refused() {
    let text = catalogue_with(&PAIR, |v| v["checks"] = serde_json::json!(["TR1"]));
    assert!(
        text.contains("at `checks`: a twin checks exactly what its original"),
        "{text}"
    );
}

#[test]
fn a_negative_twin_judged_beside_the_originals_control_is_refused() {
    let text = catalogue_with(&PAIR, |v| {
        v["control"] = "tr/001-completed-child-follow-up-turn".into()
    });
    assert!(
        text.contains("at `control`: the original's control is `tr/001-completed-child-follow-up-turn`: a twin's control is the twin of it"),
        "{text}"
    );
}

#[test]
fn a_twin_of_a_twin_and_a_twin_that_delegates_are_refused() {
    let text = catalogue_with(&PAIR, |v| {
        v["twin_of"] = "tr/036-completed-child-follow-up-turn-spawned".into()
    });
    assert!(text.contains("is itself a twin"), "{text}");

    let text = catalogue_with(&PAIR, |v| {
        v["steps"][1] = serde_json::json!({
            "delegate": { "parent": "root", "as": "child", "request": { "role": "worker", "task": "CHILD_TASK" } }
        });
    });
    assert!(
        text.contains("at `steps[1].delegate`: a twin (`twin_of`) creates every child through the model's spawn"),
        "{text}"
    );
}
