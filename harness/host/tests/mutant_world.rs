//! Mutants run inside the model's simulated world: the model's checkers see the bug a mutant's decisions put there.
//!
//! The model crate holds no defect, so these tests live beside the mutants:
//! a world whose state carries one mutant's decisions must break the
//! mutant's invariant, and the same sequence on the correct world must not.

use delegation_host::mutants::{self, Defect};
use delegation_model::invariants::check_all;
use delegation_model::world::{SimReply, World};
use delegation_model::{
    Action, ActionResult, InvariantId, LifecycleCall, LifecycleOp, SpawnRequest, StartRequest,
    StepKind, TurnReport,
};
use serde_json::json;

/// A parent and its child from a scripted spawn, with replies that call a
/// lifecycle tool on the child; the world carries `defect`'s decisions.
fn parent_and_child(defect: Option<Defect>) -> (World, String, String) {
    let spawn = SimReply::Spawn(SpawnRequest {
        role: "worker".into(),
        task: "CHILD_TASK".into(),
        authority: Default::default(),
        model: None,
        target: None,
        worktree: false,
    });
    let mut world = World::new(vec![], vec![("SPAWN".to_string(), spawn)]);
    mutants::install(&mut world.state, defect);
    let start: StartRequest = serde_json::from_value(
        json!({"role": "lead", "sandbox": "read-only", "approval_policy": "never", "cwd": "/w"}),
    )
    .unwrap();
    world.apply(&Action::Start(start));
    let root = world.state.instances.keys().next().unwrap().clone();
    let spawned = world.apply(&Action::Turn {
        instance: root.clone(),
        input: "SPAWN".into(),
    });
    let StepKind::Action { result: Ok(r), .. } = &spawned.kind else {
        panic!("{spawned:?}")
    };
    let Some(TurnReport::Spawn { spawn }) = &r.turn else {
        panic!("no spawn: {r:?}")
    };
    let child = spawn.instance.clone().expect("a child");
    let call = |op, message: Option<&str>| {
        SimReply::Lifecycle(LifecycleCall {
            op,
            target: child.clone(),
            message: message.map(str::to_string),
        })
    };
    world.replies.extend([
        (
            "POKE".to_string(),
            call(LifecycleOp::SendInput, Some("MORE")),
        ),
        ("REOPEN".to_string(), call(LifecycleOp::Resume, None)),
    ]);
    (world, root, child)
}

/// A parent turn on `input`: what its lifecycle call came to, and the child's model requests.
fn turn(world: &mut World, root: &str, child: &str, input: &str) -> (ActionResult, u64) {
    let entry = world.apply(&Action::Turn {
        instance: root.into(),
        input: input.into(),
    });
    let StepKind::Action { result: Ok(r), .. } = &entry.kind else {
        panic!("{entry:?}")
    };
    let requests = entry
        .evidence
        .model_requests
        .get(child)
        .copied()
        .unwrap_or(0);
    let Some(TurnReport::Lifecycle { lifecycle, .. }) = &r.turn else {
        panic!("not a lifecycle turn: {r:?}")
    };
    ((**lifecycle).clone(), requests)
}

/// Close the child, then the parent's model resumes it and sends it input.
fn reopen_after_close(defect: Option<Defect>) -> (ActionResult, u64, Vec<InvariantId>) {
    let (mut world, root, child) = parent_and_child(defect);
    world.apply(&Action::Close {
        instance: child.clone(),
    });
    let (resumed, _) = turn(&mut world, &root, &child, "REOPEN");
    let (_, requests) = turn(&mut world, &root, &child, "POKE");
    let violated = check_all(&world.history)
        .into_iter()
        .map(|v| v.id)
        .collect();
    (resumed, requests, violated)
}

#[test]
fn the_reopening_mutant_is_seen_by_tr1_at_the_endpoint() {
    let (reopened, requests, violated) = reopen_after_close(Some(Defect::LifecycleResumeReopens));
    assert!(reopened.is_ok(), "the mutant reopens: {reopened:?}");
    assert_eq!(requests, 1, "the reopened child's turn reached the model");
    assert!(violated.contains(&InvariantId::TR1), "{violated:?}");
    assert!(violated.contains(&InvariantId::TR4), "{violated:?}");
}

/// The positive control: the same sequence on the correct world is refused and clean.
#[test]
fn the_correct_world_refuses_the_resume_and_breaks_nothing() {
    let (refused, requests, violated) = reopen_after_close(None);
    assert!(!refused.is_ok(), "{refused:?}");
    assert_eq!(requests, 0);
    assert!(violated.is_empty(), "{violated:?}");
}
