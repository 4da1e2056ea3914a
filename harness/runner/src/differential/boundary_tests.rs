//! Tests of the byte-level, drift, race and question operations against the reference host: each catches the mutant it was built for, and the correct host passes the same sequence.

use delegation_host::ReferenceLauncher;
use delegation_host::mutants::Defect;
use delegation_model::fuzzing::{Op, WRITTEN_FORMS};

use super::{CaseResult, failing_op, run_ops};
use crate::execute::ExecOptions;

fn exec() -> ExecOptions {
    ExecOptions {
        step_deadline: std::time::Duration::from_secs(10),
        ..ExecOptions::default()
    }
}

/// `ops` is translated whole, the correct host passes it, and the mutant
/// `defect` fails it at its last operation.
async fn catches(defect: Defect, ops: &[Op]) {
    let (t, result) = run_ops(ops, &ReferenceLauncher::default(), &exec()).await;
    assert_eq!(t.stopped, None, "translated whole: {ops:?}");
    assert!(
        matches!(result, CaseResult::Pass),
        "the correct host passes {ops:?}: {result:?}\n{}",
        serde_json::to_string_pretty(&t.scenario).unwrap()
    );
    let mutant = ReferenceLauncher {
        defect: Some(defect),
        ..Default::default()
    };
    let (t, result) = run_ops(ops, &mutant, &exec()).await;
    let CaseResult::Fail { step, message } = result else {
        panic!("{defect} is caught by {ops:?}: {result:?}");
    };
    assert_eq!(
        failing_op(&t, step),
        ops.len() - 1,
        "{defect} at the last operation: {message}"
    );
}

/// Workspace-write under `/w/repo`, every probe tool sealed.
fn start(policy: u8) -> Op {
    Op::Start {
        sandbox: 1,
        policy,
        tools: 7,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drifted_tool_the_role_default_drops_is_caught_in_two_operations() {
    // Role 0 is the read-probe role (three role values in four are).
    let drift = Op::DriftDelegate {
        parent: 0,
        tool: 0,
        role: 0,
    };
    catches(Defect::DriftCheckedOnChildToolsOnly, &[start(1), drift]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sealed_tool_written_otherwise_runs_and_catches_a_digest_over_received_bytes() {
    for form in 0..WRITTEN_FORMS {
        let rewrite = Op::RewriteTool {
            instance: 0,
            tool: 2,
            form,
        };
        catches(Defect::DigestOverReceivedBytes, &[start(0), rewrite]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn written_roots_and_names_catch_the_textual_and_the_normalising_comparison() {
    let written = |root, name| Op::WrittenDelegate {
        parent: 0,
        root,
        name,
    };
    // Outside `/w/repo` once normalised, though the text starts with it.
    for root in [1, 2, 3, 5] {
        catches(Defect::RootCheckedAsWritten, &[start(2), written(root, 7)]).await;
    }
    // Fullwidth, zero-width, soft hyphen, fullwidth full stop.
    for name in 1..=4 {
        catches(
            Defect::NamesNormalisedBeforeComparing,
            &[start(2), written(6, name)],
        )
        .await;
    }
    // Positive controls: inside once normalised, the exact name; and a
    // look-alike no normalisation joins, which neither host admits.
    for (root, name) in [(0, 0), (4, 7), (6, 5), (6, 6)] {
        let ops = [start(2), written(root, name)];
        for defect in [
            None,
            Some(Defect::RootCheckedAsWritten),
            Some(Defect::NamesNormalisedBeforeComparing),
        ] {
            let host = ReferenceLauncher {
                defect,
                ..Default::default()
            };
            let (_, result) = run_ops(&ops, &host, &exec()).await;
            assert!(
                matches!(result, CaseResult::Pass),
                "{defect:?} passes {ops:?}: {result:?}"
            );
        }
    }
}

/// Two to four consumes of one receipt at once, and follow-ups racing a
/// close or a cancel: the check-then-act mutants lose their race (their
/// window between check and act is wide on purpose), the correct host
/// wins it. Three follow-ups, not one: the in-process host takes the
/// requests in the order sent only as far as the runtime starts their
/// tasks in that order, and a close that reaches the lock before a lone
/// follow-up's check leaves nothing to catch (2 of 84 one-follow-up races
/// missed so, none of 63 consume races).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn races_catch_the_check_then_act_mutants() {
    let race = |what, count| Op::Race {
        what,
        instance: 0,
        count,
    };
    for count in 0..3 {
        catches(
            Defect::ReceiptConsumeCheckThenAct,
            &[start(2), race(0, count)],
        )
        .await;
    }
    // Close, then cancel.
    for count in [2, 5] {
        catches(Defect::FollowupRacesClose, &[start(2), race(1, count)]).await;
    }
}

/// A race is one `concurrently` step, needing `concurrent-requests`, with
/// the answers as a set when the actions are alike; under an external
/// authorizer (which the race rules leave out) nothing is raced.
#[test]
fn a_race_is_one_concurrent_step_and_only_where_the_rules_decide_it() {
    use crate::scenario::StepAction;
    let ops = [
        start(2),
        Op::Race {
            what: 0,
            instance: 0,
            count: 1,
        },
    ];
    let t = super::translate(&ops, "fuzz/000-race", "");
    assert_eq!(t.stopped, None);
    let last = t.scenario.steps.last().unwrap();
    let StepAction::Concurrently(inner) = &last.action else {
        panic!("{:?}", last.action);
    };
    assert_eq!(inner.0.len(), 3);
    let set = last.expect.as_ref().unwrap().set.as_ref().unwrap();
    assert_eq!(set.ok, Some(1));
    assert_eq!(
        set.denied
            .get(&delegation_model::DenyReason::ReceiptConsumed),
        Some(&2)
    );
    assert!(t.scenario.needs.iter().any(|n| n == "concurrent-requests"));
    let mut with_authorizer = vec![Op::Authorizer { mode: 0 }];
    with_authorizer.extend(ops);
    let t = super::translate(&with_authorizer, "fuzz/000-race", "");
    assert!(
        t.scenario
            .steps
            .iter()
            .all(|s| !matches!(s.action, StepAction::Concurrently(_))),
        "no race under the authorizer"
    );
    assert!(!t.scenario.needs.iter().any(|n| n == "concurrent-requests"));
}

/// The deny reasons generated on purpose: a receipt nobody issued is sent
/// as the scenario's `@unknown` and refused as missing, a remote target as
/// unsupported, by model and host alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_never_issued_and_a_remote_target_are_refused_alike() {
    use delegation_model::DenyReason;
    for (op, reason) in [
        (
            Op::ReceiptUse {
                parent: 0,
                then: 6,
                tool: 0,
            },
            DenyReason::ReceiptMissing,
        ),
        (
            Op::WrittenDelegate {
                parent: 0,
                root: 7,
                name: 7,
            },
            DenyReason::UnsupportedTarget,
        ),
    ] {
        let ops = [start(2), op];
        let (t, result) = run_ops(&ops, &ReferenceLauncher::default(), &exec()).await;
        assert!(matches!(result, CaseResult::Pass), "{ops:?}: {result:?}");
        let expect = t.scenario.steps.last().unwrap().expect.as_ref().unwrap();
        assert_eq!(expect.reason, Some(reason), "{ops:?}");
    }
}

/// The operations for the four newest mutants, each in two operations:
/// a capability call racing its revoke (TC2), a direct call naming a
/// look-alike of a sealed tool (SD2), a clarification question under
/// `never` (PG4), an exact-call grant, a silent redefinition and the same
/// call (SD2 before PG). The race is sent three times, and each must catch
/// the mutant: the in-process host takes racing requests in the order sent
/// (`lock_in_turn`), whatever order the runtime starts their tasks in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_newest_operations_catch_their_mutants() {
    let race_revoke = Op::CapabilityUse {
        agent: 0,
        task: 0,
        tools: 0,
        then: 5,
    };
    for _ in 0..3 {
        catches(
            Defect::CapabilityCallCheckThenAct,
            &[start(1), race_revoke.clone()],
        )
        .await;
    }
    // A fullwidth `p`, a zero-width space, a soft hyphen, a fullwidth full stop.
    for name in 1..=4 {
        let call = Op::LookAlikeCall { instance: 0, name };
        catches(Defect::DispatchNameNormalised, &[start(1), call]).await;
    }
    for answer in 0..3 {
        let question = Op::Question {
            instance: 0,
            answer,
        };
        catches(Defect::QuestionDeniedAsApproval, &[start(0), question]).await;
    }
    // The MCP probe, which asks a person under `untrusted`.
    let grant_drift = Op::GrantDrift {
        instance: 0,
        tool: 2,
        arguments: 1,
    };
    catches(Defect::GrantBeforeDriftCheck, &[start(1), grant_drift]).await;
}

/// The look-alikes no normalisation joins, and the exact name: refused
/// alike by the mutant and the correct host, and the exact name runs, so
/// the look-alikes above are refused for their bytes alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_look_alike_nothing_joins_is_refused_and_the_exact_name_runs() {
    let mutant = ReferenceLauncher {
        defect: Some(Defect::DispatchNameNormalised),
        ..Default::default()
    };
    for (name, executed) in [(5, false), (6, false), (0, true)] {
        let ops = [start(0), Op::LookAlikeCall { instance: 0, name }];
        for host in [&ReferenceLauncher::default(), &mutant] {
            let (t, result) = run_ops(&ops, host, &exec()).await;
            assert!(matches!(result, CaseResult::Pass), "{ops:?}: {result:?}");
            let expect = t.scenario.steps.last().unwrap().expect.as_ref().unwrap();
            assert_eq!(
                expect.outcome == Some(delegation_model::Outcome::Ok),
                executed,
                "{ops:?}: {expect:?}"
            );
        }
    }
}
