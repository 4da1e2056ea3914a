//! The concurrent step: a valid one parses and round-trips; each malformed one is refused naming the step, the field and what is right.

use serde_json::{Value, json};

use super::{err_text, parse_edited};
use delegation_runner::scenario::StepAction;

fn race() -> Value {
    json!({
        "concurrently": [
            {"turn": {"instance": "root", "input": "follow-up"}},
            {"close": {"instance": "root"}}
        ],
        "expect": {"state": {"root": "closed"}, "set": {"denied": {"instance_terminal": 1}}}
    })
}

/// The fixture with `race` as its last step and `concurrent-requests` needed.
fn with_race(race: Value) -> impl FnOnce(&mut Value) {
    move |v| {
        v["steps"].as_array_mut().unwrap().push(race);
        v["needs"]
            .as_array_mut()
            .unwrap()
            .push("concurrent-requests".into());
    }
}

#[test]
fn a_concurrent_step_parses_with_its_actions_in_order_and_round_trips() {
    let s = parse_edited(with_race(race())).unwrap();
    let last = s.steps.last().unwrap();
    let StepAction::Concurrently(actions) = &last.action else {
        panic!("expected a concurrent step, got {:?}", last.action.key());
    };
    let keys: Vec<&str> = actions.0.iter().map(|a| a.action.key()).collect();
    assert_eq!(keys, ["turn", "close"]);
    let written = serde_json::to_value(last).unwrap();
    assert_eq!(written, race());
    // The aliases it reads are checked like any step's.
    let text = err_text(parse_edited(with_race(json!({
        "concurrently": [{"close": {"instance": "nobody"}}, {"close": {"instance": "root"}}]
    }))));
    assert!(text.contains("alias `nobody`"), "{text}");
}

#[test]
fn a_concurrent_step_without_the_capability_in_needs_says_which_to_add() {
    let text = err_text(parse_edited(|v| {
        v["steps"].as_array_mut().unwrap().push(race());
    }));
    assert!(text.contains("at `needs`"), "{text}");
    assert!(text.contains("\"concurrent-requests\""), "{text}");
}

#[test]
fn an_action_that_cannot_be_raced_is_refused_with_the_ones_that_can() {
    let text = err_text(parse_edited(with_race(json!({
        "concurrently": [{"observe": {}}, {"close": {"instance": "root"}}]
    }))));
    assert!(text.contains("steps[4].concurrently[0].observe"), "{text}");
    assert!(
        text.contains("consume_receipt, revoke_receipt, turn, close, cancel"),
        "{text}"
    );
}

#[test]
fn one_action_or_too_many_is_refused_with_the_bounds() {
    let text = err_text(parse_edited(with_race(json!({
        "concurrently": [{"close": {"instance": "root"}}]
    }))));
    assert!(text.contains("steps[4].concurrently"), "{text}");
    assert!(
        text.contains("races 1 action(s); a concurrent step races 2 to 6"),
        "{text}"
    );
    let seven: Vec<Value> = (0..7)
        .map(|_| json!({"close": {"instance": "root"}}))
        .collect();
    let text = err_text(parse_edited(with_race(json!({ "concurrently": seven }))));
    assert!(text.contains("races 7 action(s)"), "{text}");
}

#[test]
fn an_inner_expect_or_binding_is_refused_pointing_to_the_step() {
    let text = err_text(parse_edited(with_race(json!({
        "concurrently": [
            {"close": {"instance": "root"}, "expect": {"outcome": "ok"}},
            {"close": {"instance": "root"}}
        ]
    }))));
    assert!(text.contains("steps[4].concurrently[0]"), "{text}");
    assert!(text.contains("`expect.set`"), "{text}");
    let text = err_text(parse_edited(with_race(json!({
        "concurrently": [
            {"turn": {"instance": "root", "input": "x", "as": "grandchild"}},
            {"close": {"instance": "root"}}
        ]
    }))));
    assert!(text.contains("steps[4].concurrently[0].turn.as"), "{text}");
    assert!(text.contains("binds no alias"), "{text}");
}

#[test]
fn a_single_answer_expectation_on_a_concurrent_step_points_to_set() {
    let mut bad = race();
    bad["expect"]["reason"] = "instance_terminal".into();
    let text = err_text(parse_edited(with_race(bad)));
    assert!(text.contains("steps[4].expect.reason"), "{text}");
    assert!(text.contains("use `expect.set`"), "{text}");
}

#[test]
fn set_on_a_step_of_one_action_is_refused() {
    let text = err_text(parse_edited(|v| {
        v["steps"][1]["expect"]["set"] = json!({"ok": 1});
    }));
    assert!(text.contains("steps[1].expect.set"), "{text}");
    assert!(
        text.contains("expect its `outcome` and `reason` instead"),
        "{text}"
    );
}

#[test]
fn a_raced_capability_call_presents_an_issued_capabilitys_own_secret() {
    let issue = json!({"issue_capability": {"as": "cap", "task": "t", "agent": "root", "tools": ["x"], "expires_at": 10}});
    let raced = |call: Value| {
        let issue = issue.clone();
        move |v: &mut Value| {
            v["steps"].as_array_mut().unwrap().push(issue);
            v["steps"].as_array_mut().unwrap().push(json!({
                "concurrently": [{"capability_call": call}, {"revoke_capability": {"capability": "cap"}}]
            }));
            let needs = v["needs"].as_array_mut().unwrap();
            needs.push("concurrent-requests".into());
            needs.push("task-capabilities".into());
        }
    };
    let call = |extra: Value| {
        let mut c = json!({"capability": "cap", "task": "t", "agent": "root", "tool": "x"});
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        c
    };
    // Positive control: the issued capability's own secret may be raced.
    parse_edited(raced(call(json!({})))).unwrap();
    for wrong in [
        json!({"wrong_secret": true}),
        json!({"capability": "@unknown"}),
    ] {
        let text = err_text(parse_edited(raced(call(wrong.clone()))));
        assert!(
            text.contains("concurrently[0].capability_call") && text.contains("revocation"),
            "{wrong}: {text}"
        );
    }
}

#[test]
fn a_question_step_needs_the_clarification_questions_capability() {
    let ask = json!({"ask": {"instance": "root", "question": "which branch?", "as": "q"}});
    let text = err_text(parse_edited(|v| {
        v["steps"].as_array_mut().unwrap().push(ask.clone());
    }));
    assert!(text.contains("\"clarification-questions\""), "{text}");
    // Positive control: with the capability named, the step and its answer parse.
    parse_edited(|v| {
        v["steps"].as_array_mut().unwrap().push(ask);
        v["steps"]
            .as_array_mut()
            .unwrap()
            .push(json!({"answer_question": {"question": "q", "answer": "main"}, "expect": {"questions": {"answered": 1}}}));
        v["needs"]
            .as_array_mut()
            .unwrap()
            .push("clarification-questions".into());
    })
    .unwrap();
}
