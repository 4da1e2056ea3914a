//! Benchmark: applying one operation to the model's world and checking every invariant over the history.
//!
//! Fuzzing runs tens of thousands of sequences a second only if both are
//! microseconds; this measures a representative 24-operation sequence and
//! reports the cost per operation. `apply_and_check_every_step` re-checks
//! the whole history after each step (what the checkers did before they
//! were incremental); `apply_and_take_each_step` is what a run does now.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use delegation_model::world::{SimReply, World, sample_tool};
use delegation_model::*;
use serde_json::json;

fn sequence() -> Vec<Action> {
    let start = Action::Start(StartRequest {
        role: "root".into(),
        model: default_model(),
        sandbox: Sandbox::WorkspaceWrite {
            writable_roots: [NormalPath::parse("/w/repo").unwrap()].into(),
            network: false,
        }
        .into(),
        approval_policy: ApprovalPolicy::OnRequest,
        tools: vec!["probe.read".into(), "probe.note".into()],
        cwd: "/w/repo".into(),
        provider: default_provider(),
        delegation_depth: 2,
    });
    let child = SpawnRequest {
        role: "worker".into(),
        task: "CHILD_TASK".into(),
        authority: AuthorityRequest::default(),
        model: None,
        target: None,
        worktree: false,
    };
    let wide = SpawnRequest {
        authority: AuthorityRequest {
            sandbox: Some(Sandbox::FullAccess.into()),
            ..AuthorityRequest::default()
        },
        ..child.clone()
    };
    let mut ops = vec![Action::Configure(Configuration::default()), start];
    for round in 0..3 {
        ops.push(Action::Delegate {
            parent: "inst-1".into(),
            request: child.clone(),
        });
        ops.push(Action::Delegate {
            parent: "inst-1".into(),
            request: wide.clone(),
        });
        ops.push(Action::Turn {
            instance: "inst-1".into(),
            input: "CALL".into(),
        });
        ops.push(Action::ToolCall {
            instance: "inst-1".into(),
            tool: "probe.read".into(),
            arguments: json!({"round": round}),
        });
        ops.push(Action::SetAutoApprove {
            enabled: round % 2 == 0,
        });
        ops.push(Action::Close {
            instance: format!("inst-{}", 2 + round),
        });
        ops.push(Action::Turn {
            instance: format!("inst-{}", 2 + round),
            input: "again".into(),
        });
    }
    ops.push(Action::Observe);
    ops
}

fn world() -> World {
    World::new(
        vec![
            sample_tool("probe.read", "read"),
            sample_tool("probe.note", "mcp"),
        ],
        vec![(
            "CALL".into(),
            SimReply::ToolCall {
                tool: "probe.note".into(),
                arguments: json!({"text": "x"}),
            },
        )],
    )
}

fn bench(c: &mut Criterion) {
    let ops = sequence();
    let mut group = c.benchmark_group("model");
    group.throughput(Throughput::Elements(ops.len() as u64));
    group.bench_function("apply_sequence", |b| {
        b.iter(|| {
            let mut w = world();
            for op in &ops {
                w.apply(op);
            }
            w
        })
    });
    group.bench_function("apply_and_check_every_step", |b| {
        b.iter(|| {
            let mut w = world();
            for op in &ops {
                w.apply(op);
                assert!(invariants::check_all(&w.history).is_empty());
            }
            w
        })
    });
    // What a conformance run does: the checkers take in each new entry once.
    group.bench_function("apply_and_take_each_step", |b| {
        b.iter(|| {
            let mut w = world();
            let mut checking = invariants::Checking::new(InvariantId::ALL);
            for op in &ops {
                w.apply(op);
                assert!(checking.take_new(&w.history).is_empty());
            }
            w
        })
    });
    group.bench_function("apply_then_check_once", |b| {
        b.iter(|| {
            let mut w = world();
            for op in &ops {
                w.apply(op);
            }
            assert!(invariants::check_all(&w.history).is_empty());
            w
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
