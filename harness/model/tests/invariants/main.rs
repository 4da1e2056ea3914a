//! The invariant checkers against hand-made histories: for every id, one history that breaks it and its correct twin.
//!
//! Each scenario is a function of `bad`: the two histories differ only in
//! the host behaviour the invariant forbids, so a checker that fires on both
//! (or on neither) fails here.

mod builders;

use builders::*;
use delegation_model::invariants::{check, check_all};
use delegation_model::*;
use serde_json::json;

type Scenario = fn(bool) -> Vec<HistoryEntry>;

/// Every invariant id with the scenario that exercises it.
const SCENARIOS: &[(InvariantId, Scenario)] = &[
    (InvariantId::ZC1, zc1),
    (InvariantId::ZC2, zc2),
    (InvariantId::ZC3, zc3),
    (InvariantId::TR1, tr1),
    (InvariantId::TR2, tr2),
    (InvariantId::TR3, tr3),
    (InvariantId::TR4, tr4),
    (InvariantId::SD1, sd1),
    (InvariantId::SD2, sd2),
    (InvariantId::SD3, sd3),
    (InvariantId::SD4, sd4),
    (InvariantId::SD5, sd5),
    (InvariantId::PG1, pg1),
    (InvariantId::PG2, pg2),
    (InvariantId::PG3, pg3),
    (InvariantId::PG4, pg4),
    (InvariantId::PG5, pg5),
    (InvariantId::PG6, pg6),
    (InvariantId::CE1, ce1),
    (InvariantId::CE2, ce2),
    (InvariantId::CE3, ce3),
    (InvariantId::CE4, ce4),
    (InvariantId::CE5, ce5),
    (InvariantId::CE6, ce6),
    (InvariantId::RC1, rc1),
    (InvariantId::RC2, rc2),
    (InvariantId::RC3, rc3),
    (InvariantId::RC4, rc4),
    (InvariantId::EA1, ea1),
    (InvariantId::EA2, ea2),
    (InvariantId::EA3, ea3),
    (InvariantId::EA4, ea4),
    (InvariantId::EA5, ea5),
    (InvariantId::LW1, lw1),
    (InvariantId::LW2, lw2),
    (InvariantId::TC1, tc1),
    (InvariantId::TC2, tc2),
    (InvariantId::TC3, tc3),
    (InvariantId::TC4, tc4),
    (InvariantId::TC5, tc5),
    (InvariantId::RS1, rs1),
    (InvariantId::RS2, rs2),
    (InvariantId::RS3, rs3),
    (InvariantId::AR1, ar1),
    (InvariantId::AR2, ar2),
];

#[test]
fn every_invariant_id_has_a_violating_and_a_correct_history() {
    let covered: Vec<InvariantId> = SCENARIOS.iter().map(|(id, _)| *id).collect();
    let missing: Vec<&InvariantId> = InvariantId::ALL
        .iter()
        .filter(|id| !covered.contains(id))
        .collect();
    assert!(missing.is_empty(), "no scenario for {missing:?}");
    assert_eq!(
        covered.len(),
        InvariantId::ALL.len(),
        "an id is listed twice"
    );
}

#[test]
fn each_checker_fires_on_its_violating_history_naming_its_id() {
    let mut silent = Vec::new();
    for (id, scenario) in SCENARIOS {
        let found = check(*id, &scenario(true));
        if found.is_empty() {
            silent.push(*id);
        }
        for v in &found {
            assert_eq!(v.id, *id, "{id}'s checker reported {v:?}");
            assert!(!v.message.is_empty(), "{id}: empty message");
        }
    }
    assert!(
        silent.is_empty(),
        "checkers silent on a violation: {silent:?}"
    );
}

#[test]
fn each_checker_stays_silent_on_the_correct_twin() {
    let mut noisy = Vec::new();
    for (id, scenario) in SCENARIOS {
        let found = check(*id, &scenario(false));
        if !found.is_empty() {
            noisy.push(found);
        }
    }
    assert!(noisy.is_empty(), "false positives: {noisy:#?}");
}

#[test]
fn a_well_behaved_run_passes_every_checker() {
    let history = H::new()
        .act(
            Action::Configure(Configuration {
                auto_approve: true,
                ..Configuration::default()
            }),
            ActionResult::ok(),
        )
        .then(start_root)
        .act(delegate("root"), created("c1", child_authority()))
        .act(
            Action::Turn {
                instance: "c1".into(),
                input: "go".into(),
            },
            ActionResult {
                turn: Some(TurnReport::Message {
                    text: "done".into(),
                }),
                ..ActionResult::ok()
            },
        )
        .requests("c1", 1)
        .observe(observed(vec![
            inst("root", None, LifecycleState::Running, root_authority()),
            inst(
                "c1",
                Some("root"),
                LifecycleState::Completed,
                child_authority(),
            ),
        ]))
        .act(close("c1"), ActionResult::ok())
        .act(
            turn("c1"),
            ActionResult::denied(DenyReason::InstanceTerminal, "closed"),
        )
        .restart()
        .observe(observed(vec![
            inst("root", None, LifecycleState::Running, root_authority()),
            inst(
                "c1",
                Some("root"),
                LifecycleState::Closed,
                child_authority(),
            ),
        ]))
        .build();
    assert_eq!(check_all(&history), vec![]);
}

#[test]
fn a_violation_carries_the_step_and_the_evidence_it_rests_on() {
    let history = tr1(true);
    let found = check(InvariantId::TR1, &history);
    let last_step = history.last().unwrap().step;
    assert!(found.iter().all(|v| v.step == last_step), "{found:?}");
    assert!(
        found
            .iter()
            .any(|v| v.evidence.get("model_requests").is_some()),
        "the model-request counts should be in the evidence: {found:?}"
    );
}

// ---------------------------------------------------------------------------
// ZC
// ---------------------------------------------------------------------------

fn zc1(bad: bool) -> Vec<HistoryEntry> {
    let mut after = vec![inst(
        "root",
        None,
        LifecycleState::Running,
        root_authority(),
    )];
    if bad {
        after.push(inst(
            "c1",
            Some("root"),
            LifecycleState::Preregistered,
            child_authority(),
        ));
    }
    H::new()
        .then(start_root)
        .act(
            delegate("root"),
            ActionResult::denied(DenyReason::CeilingExceeded, "network"),
        )
        .restart()
        .observe(observed(after))
        .build()
}

fn zc2(bad: bool) -> Vec<HistoryEntry> {
    H::new()
        .then(start_root)
        .act(
            delegate("root"),
            ActionResult::denied(DenyReason::CeilingExceeded, "network"),
        )
        .requests("c1", u64::from(bad))
        .build()
}

fn zc3(bad: bool) -> Vec<HistoryEntry> {
    let mut refusal = ActionResult::denied(DenyReason::CeilingExceeded, "network");
    if bad {
        refusal.reason = None;
    }
    H::new()
        .then(start_root)
        .act(delegate("root"), refusal)
        .build()
}

// ---------------------------------------------------------------------------
// TR
// ---------------------------------------------------------------------------

fn tr1(bad: bool) -> Vec<HistoryEntry> {
    let answer = if bad {
        ActionResult::ok()
    } else {
        ActionResult::denied(DenyReason::InstanceTerminal, "closed")
    };
    H::new()
        .then(start_root)
        .act(close("root"), ActionResult::ok())
        .act(turn("root"), answer)
        .requests("root", u64::from(bad))
        .build()
}

fn tr2(bad: bool) -> Vec<HistoryEntry> {
    let resumed = if bad {
        root_authority()
    } else {
        child_authority()
    };
    H::new()
        .then(start_root)
        .act(delegate("root"), created("c1", child_authority()))
        .act(
            Action::Resume {
                instance: "c1".into(),
            },
            ActionResult {
                effective: Some(resumed),
                ..ActionResult::ok()
            },
        )
        .build()
}

fn tr3(bad: bool) -> Vec<HistoryEntry> {
    H::new()
        .then(start_root)
        .act(delegate("root"), created("c1", child_authority()))
        .act(close("c1"), ActionResult::ok())
        .act(
            delegate("root"),
            created(if bad { "c1" } else { "c2" }, child_authority()),
        )
        .build()
}

fn tr4(bad: bool) -> Vec<HistoryEntry> {
    H::new()
        .then(start_root)
        .act(delegate("root"), created("c1", child_authority()))
        .act(close("c1"), ActionResult::ok())
        .act(Action::Observe, ActionResult::ok())
        .requests("c1", u64::from(bad))
        .build()
}

// ---------------------------------------------------------------------------
// SD
// ---------------------------------------------------------------------------

fn sd1(bad: bool) -> Vec<HistoryEntry> {
    let mut authority = root_authority();
    if bad {
        authority.tools.insert("fs.write".into(), "fs.write".into());
    }
    H::new()
        .act(start_action(), created("root", authority))
        .build()
}

/// A tool call of `fs.write` by the root after `change`: executed with a
/// handler call when `bad`, refused with `reason` otherwise.
fn call_after_change(change: WorldChange, reason: DenyReason, bad: bool) -> Vec<HistoryEntry> {
    H::new()
        .then(start_root)
        .world(change)
        .then(|h| call_fs_write(h, "root", bad, reason))
        .build()
}

fn sd2(bad: bool) -> Vec<HistoryEntry> {
    let change = WorldChange::ToolRedefined {
        tool: "fs.write".into(),
        digest: digest_of("fs.write v2"),
        previous_digest: None,
        description_only: false,
    };
    call_after_change(change, DenyReason::ToolDrift, bad)
}

fn sd3(bad: bool) -> Vec<HistoryEntry> {
    call_after_change(
        WorldChange::ToolListChanged,
        DenyReason::ToolListChanged,
        bad,
    )
}

fn sd4(bad: bool) -> Vec<HistoryEntry> {
    let change = WorldChange::ToolRedefined {
        tool: "fs.write".into(),
        digest: digest_of("fs.write, friendlier description"),
        previous_digest: None,
        description_only: true,
    };
    call_after_change(change, DenyReason::ToolDrift, bad)
}

fn sd5(bad: bool) -> Vec<HistoryEntry> {
    let mut request = spawn_request();
    request.authority.tools = Some(vec!["fs.unsealed".into()]);
    let answer = if bad {
        created("c1", child_authority())
    } else {
        ActionResult::denied(DenyReason::ProjectionMissing, "fs.unsealed")
    };
    H::new()
        .then(start_root)
        .act(
            Action::Delegate {
                parent: "root".into(),
                request,
            },
            answer,
        )
        .build()
}

// ---------------------------------------------------------------------------
// PG
// ---------------------------------------------------------------------------

/// Automatic approval on, a root, and one failure of the decision write armed.
fn auto_approval_with_one_decision_write_failure() -> H {
    H::new()
        .act(
            Action::Configure(Configuration {
                auto_approve: true,
                ..Configuration::default()
            }),
            ActionResult::ok(),
        )
        .then(start_root)
        .act(
            Action::ArmFault {
                point: FaultPoint::StoreWriteDecision,
                times: Some(1),
            },
            ActionResult::ok(),
        )
}

fn pg1(bad: bool) -> Vec<HistoryEntry> {
    auto_approval_with_one_decision_write_failure()
        .act(
            tool_call("root", "fs.write"),
            if bad {
                tool_result(ToolCallOutcome::Executed, None, Some("a1"))
            } else {
                tool_result(
                    ToolCallOutcome::Denied,
                    Some(DenyReason::StoreWriteFailed),
                    Some("a1"),
                )
            },
        )
        .handler_calls(if bad { &["fs.write"] } else { &[] })
        .build()
}

fn pg2(bad: bool) -> Vec<HistoryEntry> {
    H::new()
        .then(start_root)
        .act(
            tool_call("root", "fs.write"),
            tool_result(ToolCallOutcome::PendingApproval, None, Some("a1")),
        )
        .act(answer("a1", Decision::Allow), ActionResult::ok())
        .act(
            answer("a1", Decision::Deny),
            if bad {
                ActionResult::ok()
            } else {
                ActionResult::denied(DenyReason::PolicyDenied, "already answered")
            },
        )
        .build()
}

fn pg3(bad: bool) -> Vec<HistoryEntry> {
    let mut authority = root_authority();
    authority.sandbox = Sandbox::ReadOnly;
    // Under a read-only sandbox shell is refused outright; an MCP call stays approvable.
    let class = if bad {
        ActionClass::Shell
    } else {
        ActionClass::Mcp
    };
    H::new()
        .act(start_action(), created("root", authority.clone()))
        .observe(Observed {
            instances: vec![inst("root", None, LifecycleState::Running, authority)],
            approvals: vec![approval(
                "a1",
                class,
                ApprovalState::Dispatched,
                Some((Decision::Allow, DecidedBy::Policy)),
            )],
            ..Observed::default()
        })
        .build()
}

fn pg4(bad: bool) -> Vec<HistoryEntry> {
    let mut authority = root_authority();
    authority.approval_policy = ApprovalPolicy::Never;
    let approvals = if bad {
        vec![approval(
            "a1",
            ActionClass::Mcp,
            ApprovalState::Pending,
            None,
        )]
    } else {
        vec![]
    };
    H::new()
        .act(start_action(), created("root", authority.clone()))
        .observe(Observed {
            instances: vec![inst("root", None, LifecycleState::Running, authority)],
            approvals,
            ..Observed::default()
        })
        .build()
}

fn pg5(bad: bool) -> Vec<HistoryEntry> {
    let decided = if bad {
        approval(
            "a1",
            ActionClass::Mcp,
            ApprovalState::Dispatched,
            Some((Decision::Allow, DecidedBy::Policy)),
        )
    } else {
        approval("a1", ActionClass::Mcp, ApprovalState::Pending, None)
    };
    H::new()
        .act(
            Action::Configure(Configuration {
                auto_approve: true,
                ..Configuration::default()
            }),
            ActionResult::ok(),
        )
        .then(start_root)
        .act(
            Action::SetAutoApprove { enabled: false },
            ActionResult::ok(),
        )
        .act(
            tool_call("root", "fs.write"),
            tool_result(ToolCallOutcome::PendingApproval, None, Some("a1")),
        )
        .observe(Observed {
            approvals: vec![decided],
            ..observed(vec![inst(
                "root",
                None,
                LifecycleState::Running,
                root_authority(),
            )])
        })
        .build()
}

fn pg6(bad: bool) -> Vec<HistoryEntry> {
    let with_grant = Observed {
        grants: vec![grant("g1")],
        ..observed(vec![inst(
            "root",
            None,
            LifecycleState::Running,
            root_authority(),
        )])
    };
    let after = if bad {
        with_grant.clone()
    } else {
        observed(vec![inst(
            "root",
            None,
            LifecycleState::Running,
            root_authority(),
        )])
    };
    H::new()
        .then(start_root)
        .observe(with_grant)
        .restart()
        .observe(after)
        .build()
}

// ---------------------------------------------------------------------------
// CE
// ---------------------------------------------------------------------------

fn ce1(bad: bool) -> Vec<HistoryEntry> {
    let mut child = child_authority();
    if bad {
        child.sandbox = Sandbox::FullAccess;
    }
    H::new()
        .then(start_root)
        .observe(observed(vec![
            inst("root", None, LifecycleState::Running, root_authority()),
            inst("c1", Some("root"), LifecycleState::Running, child),
        ]))
        .build()
}

fn ce2(bad: bool) -> Vec<HistoryEntry> {
    let mut later = child_authority();
    if bad {
        later.delegation_depth = 0;
    }
    H::new()
        .then(start_root)
        .act(delegate("root"), created("c1", child_authority()))
        .observe(observed(vec![
            inst("root", None, LifecycleState::Running, root_authority()),
            inst("c1", Some("root"), LifecycleState::Running, later),
        ]))
        .build()
}

fn ce3(bad: bool) -> Vec<HistoryEntry> {
    let mut child = inst(
        "c1",
        Some("root"),
        LifecycleState::Running,
        child_authority(),
    );
    child.requested = Some(AuthorityRequest {
        sandbox: Some(Sandbox::ReadOnly.into()),
        ..AuthorityRequest::default()
    });
    if !bad {
        child.ceiling.sandbox = Sandbox::ReadOnly;
    }
    H::new()
        .then(start_root)
        .observe(observed(vec![
            inst("root", None, LifecycleState::Running, root_authority()),
            child,
        ]))
        .build()
}

fn ce4(bad: bool) -> Vec<HistoryEntry> {
    let mut root = root_authority();
    root.sandbox = Sandbox::FullAccess;
    let mut child = root.child_ceiling();
    if !bad {
        child.sandbox = workspace_write(&["/w/repo"], false);
    }
    H::new()
        .act(
            Action::Configure(Configuration {
                strict_mode: true,
                ..Configuration::default()
            }),
            ActionResult::ok(),
        )
        .act(start_action(), created("root", root))
        .act(delegate("root"), created("c1", child))
        .build()
}

fn ce5(bad: bool) -> Vec<HistoryEntry> {
    H::new()
        .then(issue_canary)
        .then(|h| capability_call_step(h, "t1", "root", "fs.write", bad))
        .build()
}

fn ce6(bad: bool) -> Vec<HistoryEntry> {
    let record = DecisionRecord {
        seq: 1,
        transition: "delegate".into(),
        parent: Some("root".into()),
        child: Some("c1".into()),
        requested_role: Some("worker".into()),
        requested: if bad {
            None
        } else {
            Some(AuthorityRequest::default())
        },
        effective: Some(child_authority()),
        allowed: true,
        deny_reasons: vec![],
        receipt_ids: vec![],
        decided_by: None,
        approval: None,
        created_instances_delta: 1,
    };
    H::new()
        .then(start_root)
        .observe(Observed {
            records: vec![record.into()],
            ..Observed::default()
        })
        .build()
}

// ---------------------------------------------------------------------------
// RC
// ---------------------------------------------------------------------------

fn rc1(bad: bool) -> Vec<HistoryEntry> {
    H::new()
        .then(start_root)
        .then(prepare_r1)
        .act(
            consume(receipt_r1(), "root"),
            created("c1", child_authority()),
        )
        .act(
            consume(receipt_r1(), "root"),
            if bad {
                created("c2", child_authority())
            } else {
                ActionResult::denied(DenyReason::ReceiptConsumed, "r1")
            },
        )
        .build()
}

fn rc2(bad: bool) -> Vec<HistoryEntry> {
    H::new()
        .then(start_root)
        .then(prepare_r1)
        .act(
            Action::SetClock {
                now: if bad {
                    R1_EXPIRES_AT
                } else {
                    R1_EXPIRES_AT - 1
                },
            },
            ActionResult::ok(),
        )
        .act(
            consume(receipt_r1(), "root"),
            created("c1", child_authority()),
        )
        .build()
}

fn rc3(bad: bool) -> Vec<HistoryEntry> {
    let (parent, answer) = if bad {
        ("intruder", created("c1", child_authority()))
    } else {
        ("root", created("c1", child_authority()))
    };
    H::new()
        .then(start_root)
        .then(prepare_r1)
        .act(consume(receipt_r1(), parent), answer)
        .build()
}

fn rc4(bad: bool) -> Vec<HistoryEntry> {
    let mut presented = serde_json::to_value(receipt_r1()).unwrap();
    if bad {
        presented["expires_at"] = json!(R1_EXPIRES_AT * 10);
    }
    H::new()
        .then(start_root)
        .then(prepare_r1)
        .act(
            Action::ConsumeReceipt {
                receipt: presented,
                parent: "root".into(),
                request: spawn_request(),
            },
            created("c1", child_authority()),
        )
        .build()
}

// ---------------------------------------------------------------------------
// EA
// ---------------------------------------------------------------------------

fn authorizer_required() -> Action {
    Action::Configure(Configuration {
        authorizer_required: true,
        ..Configuration::default()
    })
}

fn ea1(bad: bool) -> Vec<HistoryEntry> {
    H::new()
        .act(authorizer_required(), ActionResult::ok())
        .then(start_root)
        .act(delegate("root"), created("c1", child_authority()))
        .authorizer_calls(u64::from(!bad))
        .build()
}

/// A delegation after the authorizer was scripted with `behaviour`: a child
/// when `bad`, a refusal with `reason` otherwise.
fn delegation_under(
    behaviour: AuthorizerBehaviour,
    reason: DenyReason,
    bad: bool,
) -> Vec<HistoryEntry> {
    H::new()
        .act(authorizer_required(), ActionResult::ok())
        .then(start_root)
        .world(WorldChange::AuthorizerScripted { behaviour })
        .act(
            delegate("root"),
            if bad {
                created("c1", child_authority())
            } else {
                ActionResult::denied(reason, "authorizer")
            },
        )
        .authorizer_calls(1)
        .build()
}

fn ea2(bad: bool) -> Vec<HistoryEntry> {
    delegation_under(
        AuthorizerBehaviour::Timeout,
        DenyReason::AuthorizerUnavailable,
        bad,
    )
}

fn ea3(bad: bool) -> Vec<HistoryEntry> {
    delegation_under(
        AuthorizerBehaviour::AllowWidening,
        DenyReason::AuthorizerMalformed,
        bad,
    )
}

fn ea4(bad: bool) -> Vec<HistoryEntry> {
    delegation_under(
        AuthorizerBehaviour::LateAllow,
        DenyReason::AuthorizerReplay,
        bad,
    )
}

fn ea5(bad: bool) -> Vec<HistoryEntry> {
    let mut h = H::new().then(start_root);
    if !bad {
        h = h.act(answer("a1", Decision::Allow), ActionResult::ok());
    }
    h.observe(Observed {
        approvals: vec![approval(
            "a1",
            ActionClass::Delegation,
            ApprovalState::Dispatched,
            Some((Decision::Allow, DecidedBy::Person)),
        )],
        ..observed(vec![inst(
            "root",
            None,
            LifecycleState::Running,
            root_authority(),
        )])
    })
    .build()
}

// ---------------------------------------------------------------------------
// LW
// ---------------------------------------------------------------------------

fn lw1(bad: bool) -> Vec<HistoryEntry> {
    H::new()
        .then(start_root)
        .act(delegate("root"), created("c1", child_authority()))
        .act(
            Action::SetClock {
                now: if bad { 4_999 } else { 5_000 },
            },
            ActionResult::ok(),
        )
        .act(
            Action::Wait {
                instance: "c1".into(),
                deadline: 5_000,
            },
            ActionResult {
                woke: Some(WakeReason::Deadline),
                ..ActionResult::ok()
            },
        )
        .build()
}

fn lw2(bad: bool) -> Vec<HistoryEntry> {
    let deliver = || Action::DeliverEvent {
        event: "e1".into(),
        instance: "root".into(),
        kind: "child_completed".into(),
    };
    H::new()
        .then(start_root)
        .act(deliver(), ActionResult::ok())
        .act(
            deliver(),
            if bad {
                ActionResult::ok()
            } else {
                ActionResult::denied(DenyReason::EventReplayed, "e1")
            },
        )
        .build()
}

// ---------------------------------------------------------------------------
// TC
// ---------------------------------------------------------------------------

fn tc1(bad: bool) -> Vec<HistoryEntry> {
    H::new()
        .then(issue_canary)
        .then(|h| capability_call_step(h, "t2", "root", "task.status", bad))
        .build()
}

fn tc2(bad: bool) -> Vec<HistoryEntry> {
    H::new()
        .then(issue_canary)
        .act(
            Action::RevokeCapability {
                capability: "cap1".into(),
            },
            ActionResult::ok(),
        )
        .then(|h| capability_call_step(h, "t1", "root", "task.status", bad))
        .build()
}

fn tc3(bad: bool) -> Vec<HistoryEntry> {
    H::new()
        .then(issue_canary)
        .act(
            Action::SetClock {
                now: CAP_EXPIRES_AT,
            },
            ActionResult::ok(),
        )
        .then(|h| capability_call_step(h, "t1", "root", "task.status", bad))
        .build()
}

fn tc4(bad: bool) -> Vec<HistoryEntry> {
    let detail = if bad {
        format!("called task.status with {CANARY}")
    } else {
        "called task.status".to_string()
    };
    H::new()
        .then(issue_canary)
        .act(
            Action::Observe,
            ActionResult {
                detail: Some(detail),
                ..ActionResult::ok()
            },
        )
        .build()
}

fn tc5(bad: bool) -> Vec<HistoryEntry> {
    let redeliver = Action::DeliverEvent {
        event: "e1".into(),
        instance: "root".into(),
        kind: "task_result".into(),
    };
    H::new()
        .then(issue_canary)
        .act(
            Action::ArmFault {
                point: FaultPoint::EventDeliver,
                times: Some(1),
            },
            ActionResult::ok(),
        )
        .then(|h| capability_call_step(h, "t1", "root", "task.status", true))
        .act(redeliver, ActionResult::ok())
        .handler_calls(if bad { &["task.status"] } else { &[] })
        .build()
}

// ---------------------------------------------------------------------------
// RS
// ---------------------------------------------------------------------------

fn rs1(bad: bool) -> Vec<HistoryEntry> {
    let root = inst("root", None, LifecycleState::Running, root_authority());
    let after = if bad { vec![] } else { vec![root.clone()] };
    H::new()
        .then(start_root)
        .observe(observed(vec![root]))
        .restart()
        .observe(observed(after))
        .build()
}

fn rs2(bad: bool) -> Vec<HistoryEntry> {
    let pending = approval("a1", ActionClass::Mcp, ApprovalState::Pending, None);
    let after = if bad {
        approval(
            "a1",
            ActionClass::Mcp,
            ApprovalState::Decided,
            Some((Decision::Allow, DecidedBy::Policy)),
        )
    } else {
        pending.clone()
    };
    let with = |a: ObservedApproval| Observed {
        approvals: vec![a],
        ..observed(vec![inst(
            "root",
            None,
            LifecycleState::Running,
            root_authority(),
        )])
    };
    H::new()
        .then(start_root)
        .observe(with(pending))
        .restart()
        .observe(with(after))
        .build()
}

fn rs3(bad: bool) -> Vec<HistoryEntry> {
    let decided = approval(
        "a1",
        ActionClass::Mcp,
        ApprovalState::Decided,
        Some((Decision::Allow, DecidedBy::Policy)),
    );
    let mut after = decided.clone();
    if bad {
        after.state = ApprovalState::Dispatched;
    }
    let with = |a: ObservedApproval| Observed {
        approvals: vec![a],
        ..observed(vec![inst(
            "root",
            None,
            LifecycleState::Running,
            root_authority(),
        )])
    };
    H::new()
        .then(start_root)
        .act(
            Action::ArmFault {
                point: FaultPoint::CrashAfterDecisionCommit,
                times: Some(1),
            },
            ActionResult::ok(),
        )
        .observe(with(decided))
        .restart()
        .observe(with(after))
        .build()
}

// ---------------------------------------------------------------------------
// AR
// ---------------------------------------------------------------------------

fn ar1(bad: bool) -> Vec<HistoryEntry> {
    let mut root = inst("root", None, LifecycleState::Running, root_authority());
    root.risk = Some(if bad { "elevated" } else { "low" }.into());
    H::new()
        .then(start_root)
        .observe(Observed {
            instances: vec![root],
            approvals: vec![approval(
                "a1",
                ActionClass::Mcp,
                ApprovalState::Dispatched,
                Some((Decision::Allow, DecidedBy::Policy)),
            )],
            ..Observed::default()
        })
        .build()
}

fn ar2(bad: bool) -> Vec<HistoryEntry> {
    let mut root = inst("root", None, LifecycleState::Running, root_authority());
    root.risk = Some("elevated".into());
    let mut fork = inst("f1", None, LifecycleState::Running, root_authority());
    fork.risk = Some(if bad { "low" } else { "elevated" }.into());
    H::new()
        .then(start_root)
        .observe(observed(vec![root.clone()]))
        .act(
            Action::Fork {
                instance: "root".into(),
            },
            created("f1", root_authority()),
        )
        .observe(observed(vec![root, fork]))
        .build()
}

/// EA5's record half: a creation the external authorizer allowed must not be
/// credited to a person, while the same child's own tool approval, which a
/// person did answer, is recorded about that child without being a creation.
#[test]
fn ea5_tells_a_creation_credited_to_a_person_from_the_childs_own_approval() {
    let record = |transition: &str, delta: u32, approval: Option<&str>| DecisionRecord {
        seq: 7,
        transition: transition.into(),
        parent: Some("root".into()),
        child: Some("c1".into()),
        requested_role: None,
        requested: None,
        effective: None,
        allowed: true,
        deny_reasons: vec![],
        receipt_ids: vec![],
        decided_by: Some(DecidedBy::Person),
        approval: approval.map(Into::into),
        created_instances_delta: delta,
    };
    let history = |r: DecisionRecord| {
        H::new()
            .then(start_root)
            .act(delegate("root"), created("c1", child_authority()))
            .authorizer_calls(1)
            .act(answer("a1", Decision::Allow), ActionResult::ok())
            .observe(Observed {
                records: vec![r.into()],
                ..observed(vec![
                    inst("root", None, LifecycleState::Running, root_authority()),
                    inst(
                        "c1",
                        Some("root"),
                        LifecycleState::Running,
                        child_authority(),
                    ),
                ])
            })
            .build()
    };
    let credited = check(InvariantId::EA5, &history(record("delegate", 1, None)));
    assert_eq!(credited.len(), 1, "{credited:#?}");
    assert!(
        credited[0]
            .message
            .contains("credits a person with the creation of `c1`")
    );
    let own_approval = check(
        InvariantId::EA5,
        &history(record("approval", 0, Some("a1"))),
    );
    assert!(own_approval.is_empty(), "{own_approval:#?}");
}

/// RS2 compares a restart with the last observation before it. An answer
/// whose step killed the host is observed nowhere, and RS3 wants its decision
/// committed before the crash: "pending before, decided after" is then the
/// store telling the truth. The same history without that answer still fires.
#[test]
fn rs2_does_not_count_an_answer_the_crash_left_unobserved() {
    let with = |state: ApprovalState, decision: Option<(Decision, DecidedBy)>| Observed {
        approvals: vec![approval("a1", ActionClass::Mcp, state, decision)],
        ..observed(vec![inst(
            "root",
            None,
            LifecycleState::Running,
            root_authority(),
        )])
    };
    let history = |answered: bool| {
        let mut h = H::new()
            .then(start_root)
            .observe(with(ApprovalState::Pending, None));
        if answered {
            h = h.act_failed(answer("a1", Decision::Allow), "the host exited");
        }
        h.restart()
            .observe(with(
                ApprovalState::Decided,
                Some((Decision::Allow, DecidedBy::Person)),
            ))
            .build()
    };
    let crashed_answer = check(InvariantId::RS2, &history(true));
    assert!(crashed_answer.is_empty(), "{crashed_answer:#?}");
    let decided_by_restart = check(InvariantId::RS2, &history(false));
    assert_eq!(decided_by_restart.len(), 1, "{decided_by_restart:#?}");
}

#[test]
fn tc4_finds_a_secret_in_what_the_host_logged() {
    // The correct twin, with the canary in the host's log (stderr or a `log`
    // notification) of its last step and nowhere else.
    let mut history = tc4(false);
    assert!(check(InvariantId::TC4, &history).is_empty());
    let last = history.last_mut().unwrap();
    last.evidence.host_log = format!("debug: capability issued, secret {CANARY}\n");
    let found = check(InvariantId::TC4, &history);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].message.contains("host's log"),
        "{}",
        found[0].message
    );
    // A log that says other things is no violation.
    history.last_mut().unwrap().evidence.host_log = "debug: capability issued\n".into();
    assert!(check(InvariantId::TC4, &history).is_empty());
}

/// TC4 searches each observation's JSON text as written: a secret is found
/// where it spans JSON punctuation between fields, where it matches the
/// written form of an escape and not where it holds a character JSON
/// escapes; and in every observation it appears in, whether that
/// observation's parts are new or the same as the observation's before.
#[test]
fn tc4_searches_each_observations_written_text() {
    let with_secret = |secret: &str, roles: &[&str]| {
        let mut h = H::new().act(
            Action::IssueCapability {
                task: "t1".into(),
                agent: "root".into(),
                tools: vec!["task.status".into()],
                expires_at: CAP_EXPIRES_AT,
                secret: Some(secret.into()),
            },
            ActionResult {
                capability: Some(CapabilityToken {
                    id: "cap1".into(),
                    secret: None,
                }),
                ..ActionResult::ok()
            },
        );
        for role in roles {
            let mut root = inst("root", None, LifecycleState::Running, root_authority());
            root.role = (*role).into();
            h = h
                .act(Action::Observe, ActionResult::ok())
                .observe(observed(vec![root]));
        }
        check(InvariantId::TC4, &h.build())
    };
    let steps = |found: &[delegation_model::invariants::Violation]| {
        found.iter().map(|v| v.step).collect::<Vec<_>>()
    };
    // Found in the observation it is in, not in the same-looking ones around it.
    assert_eq!(
        steps(&with_secret("xq-secret", &["lead", "xq-secret", "lead"])),
        [2]
    );
    // Found in each of consecutive observations that hold it unchanged.
    assert_eq!(
        steps(&with_secret("xq-secret", &["xq-secret", "xq-secret"])),
        [1, 2]
    );
    // Across the punctuation between a field's value and the next field's name.
    let spanning = format!("lead\",\"model\":\"{}", default_model());
    assert_eq!(steps(&with_secret(&spanning, &["lead"])), [1]);
    assert!(with_secret(&spanning, &["worker"]).is_empty());
    // A newline is written `\\n`: the raw secret is not in the text, but the
    // letters after the backslash are.
    assert!(with_secret("a\nb", &["a\nb"]).is_empty());
    assert_eq!(steps(&with_secret("nb", &["a\nb"])), [1]);
    assert!(with_secret("nb", &["a b"]).is_empty());
}

/// An allowed delegation's decision record, shared as an observation holds it.
fn allowed_record(
    seq: u64,
    effective: Authority,
    requested: Option<AuthorityRequest>,
) -> std::sync::Arc<DecisionRecord> {
    std::sync::Arc::new(DecisionRecord {
        seq,
        transition: "delegate".into(),
        parent: Some("root".into()),
        child: Some(format!("c{seq}")),
        requested_role: Some("worker".into()),
        requested,
        effective: Some(effective),
        allowed: true,
        deny_reasons: vec![],
        receipt_ids: vec![],
        decided_by: None,
        approval: None,
        created_instances_delta: 0,
    })
}

/// An observation that lists these records and nothing else.
fn with_records(records: Vec<std::sync::Arc<DecisionRecord>>) -> Observed {
    Observed {
        records,
        ..Observed::default()
    }
}

/// SD1 looks at a decision record shared between observations once it was
/// well formed, and at a malformed one in every observation that lists it.
#[test]
fn sd1_reports_a_malformed_record_in_every_observation_that_lists_it() {
    let record = |seq: u64, digest: &str| {
        let mut effective = root_authority();
        effective.tools.insert("fs.write".into(), digest.into());
        allowed_record(seq, effective, None)
    };
    let good = record(1, &digest_of("fs.write"));
    let bad = record(2, "fs.write");
    let history = H::new()
        .act(Action::Observe, ActionResult::ok())
        .observe(with_records(vec![good.clone()]))
        .act(Action::Observe, ActionResult::ok())
        .observe(with_records(vec![good.clone(), bad.clone()]))
        .act(Action::Observe, ActionResult::ok())
        .observe(with_records(vec![good.clone(), bad.clone()]))
        // The same record at another index, and a malformed one where a well-formed one was.
        .act(Action::Observe, ActionResult::ok())
        .observe(with_records(vec![bad.clone(), good.clone()]))
        .build();
    let found = check(InvariantId::SD1, &history);
    let seen: Vec<(usize, bool)> = found
        .iter()
        .map(|v| (v.step, v.message.contains("record 2")))
        .collect();
    assert_eq!(seen, [(1, true), (2, true), (3, true)], "{found:#?}");
}

/// CE3 skips a decision record shared with the observation before, but a
/// record that exceeds its request is reported wherever it first shows,
/// also at an index where a shared, conforming record stood.
#[test]
fn ce3_looks_at_each_record_where_it_first_shows_and_reports_it_once() {
    let record = |seq: u64, sandbox: Sandbox| {
        let mut effective = root_authority();
        effective.sandbox = sandbox;
        let requested = AuthorityRequest {
            sandbox: Some(Sandbox::ReadOnly.into()),
            ..AuthorityRequest::default()
        };
        allowed_record(seq, effective, Some(requested))
    };
    let within = record(1, Sandbox::ReadOnly);
    let beyond = record(2, workspace_write(&["/w/repo"], false));
    let history = H::new()
        .act(Action::Observe, ActionResult::ok())
        .observe(with_records(vec![within.clone()]))
        .act(Action::Observe, ActionResult::ok())
        .observe(with_records(vec![within.clone()]))
        // The record beyond its request where the conforming one stood.
        .act(Action::Observe, ActionResult::ok())
        .observe(with_records(vec![beyond.clone(), within.clone()]))
        .act(Action::Observe, ActionResult::ok())
        .observe(with_records(vec![beyond.clone(), within.clone()]))
        .build();
    let found = check(InvariantId::CE3, &history);
    let seen: Vec<(usize, bool)> = found
        .iter()
        .map(|v| (v.step, v.message.starts_with("record 2 ")))
        .collect();
    assert_eq!(seen, [(2, true)], "{found:#?}");
}

/// A refusal that gives the harness's injected store fault as its reason is
/// not a wrong reason (the host could not persist, so it refused before
/// deciding; fuzzing found the checker flagging it); any other wrong reason
/// still is.
#[test]
fn a_store_fault_refusal_satisfies_a_reason_check_and_another_reason_does_not() {
    let call = |reason| {
        H::new()
            .then(issue_canary)
            .act(
                Action::CapabilityCall {
                    secret: CANARY.into(),
                    task: "t1".into(),
                    agent: "root".into(),
                    tool: "fs.write".into(),
                    arguments: serde_json::json!({}),
                    call_id: None,
                },
                ActionResult::denied(reason, "refused"),
            )
            .build()
    };
    assert!(check(InvariantId::CE5, &call(DenyReason::StoreWriteFailed)).is_empty());
    let wrong = check(InvariantId::CE5, &call(DenyReason::ToolDrift));
    assert_eq!(wrong.len(), 1, "{wrong:?}");
    assert!(wrong[0].message.contains("expected capability_denied"));
}

/// A person's answer whose decision write failed uses up the armed firing,
/// so the automatic allow after it may run (fuzzing found PG1 still
/// counting the fault armed); with the firing unspent it may not.
#[test]
fn a_failed_answer_uses_up_an_armed_decision_write_failure() {
    let history = |answered: bool| {
        let mut h = auto_approval_with_one_decision_write_failure();
        if answered {
            h = h.act(
                Action::Answer {
                    request: "a0".into(),
                    decision: Decision::Allow,
                },
                ActionResult::denied(DenyReason::StoreWriteFailed, "decision not written"),
            );
        }
        h.act(
            tool_call("root", "fs.write"),
            tool_result(ToolCallOutcome::Executed, None, Some("a1")),
        )
        .handler_calls(&["fs.write"])
        .build()
    };
    assert!(check(InvariantId::PG1, &history(true)).is_empty());
    assert_eq!(check(InvariantId::PG1, &history(false)).len(), 1);
}

/// A call refused because its approval write failed uses up the armed
/// firing even when no approval has shown the tool's class yet, so the call
/// a person allows after it may run (fuzzing found PG1 still counting the
/// fault armed); without that refusal the firing is unspent and it may not.
#[test]
fn a_call_refused_for_a_failed_approval_write_uses_up_the_armed_firing() {
    let history = |refused_first: bool| {
        let mut h = auto_approval_with_one_decision_write_failure();
        if refused_first {
            h = h.act(
                tool_call("root", "fs.write"),
                tool_result(
                    ToolCallOutcome::Denied,
                    Some(DenyReason::StoreWriteFailed),
                    None,
                ),
            );
        }
        h.act(
            tool_call("root", "fs.write"),
            tool_result(ToolCallOutcome::Executed, None, Some("a1")),
        )
        .handler_calls(&["fs.write"])
        .build()
    };
    assert_eq!(check(InvariantId::PG1, &history(true)), vec![]);
    let unspent = check(InvariantId::PG1, &history(false));
    assert_eq!(unspent.len(), 1, "{unspent:#?}");
    assert!(unspent[0].message.contains("could not be committed"));
}

/// A call that a listed exact-call grant covers writes no approval, so an
/// armed approval write cannot refuse it and it may run (fuzzing found PG1
/// refusing it); the same call with no grant listed must not run.
#[test]
fn a_call_covered_by_a_listed_grant_runs_while_an_approval_write_is_armed() {
    let history = |granted: bool| {
        let root = || inst("root", None, LifecycleState::Running, root_authority());
        let grants = if granted { vec![grant("g1")] } else { vec![] };
        auto_approval_with_one_decision_write_failure()
            .observe(Observed {
                grants,
                approvals: vec![approval(
                    "a0",
                    ActionClass::Mcp,
                    ApprovalState::Dispatched,
                    Some((Decision::AllowExact, DecidedBy::Person)),
                )],
                ..observed(vec![root()])
            })
            .act(
                tool_call("root", "fs.write"),
                tool_result(ToolCallOutcome::Executed, None, None),
            )
            .handler_calls(&["fs.write"])
            .build()
    };
    assert_eq!(check(InvariantId::PG1, &history(true)), vec![]);
    let ungranted = check(InvariantId::PG1, &history(false));
    assert_eq!(ungranted.len(), 1, "{ungranted:#?}");
    assert!(ungranted[0].message.contains("could not be committed"));
}

/// A call id is scoped to the capability presented: the same id through
/// another capability is a new call whose handler runs (fuzzing found TC5
/// flagging it while the model and the reference host key outcomes by
/// capability); through the same capability it is a retry that must not.
#[test]
fn tc5_scopes_a_call_id_to_the_capability_presented() {
    let call = |secret: &str| Action::CapabilityCall {
        secret: secret.into(),
        task: "t1".into(),
        agent: "root".into(),
        tool: "fs.read".into(),
        arguments: serde_json::json!({}),
        call_id: Some("c0".into()),
    };
    let history = |second: &str| {
        H::new()
            .then(issue_canary)
            .act(call(CANARY), ActionResult::ok())
            .handler_calls(&["fs.read"])
            .act(call(second), ActionResult::ok())
            .handler_calls(&["fs.read"])
            .build()
    };
    assert!(check(InvariantId::TC5, &history("CANARY-other-capability")).is_empty());
    let rerun = check(InvariantId::TC5, &history(CANARY));
    assert_eq!(rerun.len(), 1, "{rerun:#?}");
    assert!(rerun[0].message.contains("retry of capability call `c0`"));
}

/// A root whose host reports no sealed tools (its ceiling names none), then
/// `fs.write` redefined from `previous` to `fs.write v2`, then a call of it
/// that runs its handler.
fn unsealed_root_calls_after_redefinition_from(previous: &str) -> Vec<HistoryEntry> {
    let mut authority = root_authority();
    authority.tools.clear();
    H::new()
        .act(start_action(), created("root", authority))
        .world(WorldChange::ToolRedefined {
            tool: "fs.write".into(),
            digest: digest_of("fs.write v2"),
            previous_digest: Some(digest_of(previous)),
            description_only: false,
        })
        .then(|h| call_fs_write(h, "root", true, DenyReason::ToolDrift))
        .build()
}

#[test]
fn sd2_without_a_ceiling_counts_only_a_change_of_the_canonical_form_as_drift() {
    // Served again in another key order or number form: the same canonical
    // digest, so nothing the host could have sealed changed.
    let same = unsealed_root_calls_after_redefinition_from("fs.write v2");
    assert_eq!(check(InvariantId::SD2, &same), vec![]);
    // The control: a real change, run anyway, is drift.
    let changed = unsealed_root_calls_after_redefinition_from("fs.write v1");
    let found = check(InvariantId::SD2, &changed);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].id, InvariantId::SD2);
}

/// PG4's positive side: a bounded instance's clarification question is
/// neither refused for its policy nor hidden; refusals for a terminal
/// instance stay allowed.
#[test]
fn pg4_requires_a_bounded_instances_question_to_reach_a_person() {
    let mut authority = root_authority();
    authority.approval_policy = ApprovalPolicy::Never;
    let ask = || Action::Ask {
        instance: "root".into(),
        question: "which branch?".into(),
    };
    let accepted = ActionResult {
        question: Some("q-1".into()),
        ..ActionResult::ok()
    };
    let shown = |listed: bool| Observed {
        instances: vec![inst(
            "root",
            None,
            LifecycleState::Running,
            authority.clone(),
        )],
        questions: if listed {
            vec![ObservedQuestion {
                id: "q-1".into(),
                instance: "root".into(),
                text: "which branch?".into(),
                state: QuestionState::Pending,
                answer: None,
            }]
        } else {
            vec![]
        },
        ..Observed::default()
    };
    let history = |result: ActionResult, listed: bool| {
        H::new()
            .act(start_action(), created("root", authority.clone()))
            .act(ask(), result)
            .observe(shown(listed))
            .build()
    };
    // Refused like an approval request.
    let refused = check(
        InvariantId::PG4,
        &history(
            ActionResult::denied(DenyReason::PolicyDenied, "bounded"),
            false,
        ),
    );
    assert_eq!(refused.len(), 1, "{refused:?}");
    // Accepted but never shown to anyone.
    let hidden = check(InvariantId::PG4, &history(accepted.clone(), false));
    assert_eq!(hidden.len(), 1, "{hidden:?}");
    // Controls: accepted and listed; refused because the instance is gone.
    assert!(check(InvariantId::PG4, &history(accepted, true)).is_empty());
    let terminal = ActionResult::denied(DenyReason::InstanceTerminal, "closed");
    assert!(check(InvariantId::PG4, &history(terminal, false)).is_empty());
}

/// EA3 checks the constraint itself against the parent, not only the child against the constraint.
#[test]
fn ea3_refuses_a_child_admitted_under_a_constraint_wider_than_its_parent() {
    let history = |constraint: AuthorityRequest| {
        H::new()
            .act(authorizer_required(), ActionResult::ok())
            .then(start_root)
            .world(WorldChange::AuthorizerScripted {
                behaviour: AuthorizerBehaviour::AllowNarrowed { constraint },
            })
            .act(delegate("root"), created("c1", child_authority()))
            .authorizer_calls(1)
            .build()
    };
    // Full access over a workspace-write parent: the child sits inside it,
    // yet the constraint widens and must have refused the child.
    let widening = AuthorityRequest {
        sandbox: Some(Sandbox::FullAccess.into()),
        ..AuthorityRequest::default()
    };
    let found = check(InvariantId::EA3, &history(widening));
    assert_eq!(found.len(), 1, "{found:?}");
    // Control: a constraint within the parent, which the child meets.
    let within = AuthorityRequest {
        sandbox: Some(workspace_write(&["/w/repo"], false).into()),
        ..AuthorityRequest::default()
    };
    assert!(check(InvariantId::EA3, &history(within)).is_empty());
}

/// SD2: a direct call that ran names a sealed tool byte for byte, and the handler that ran is that tool.
#[test]
fn sd2_requires_an_executed_call_to_name_a_sealed_tool_byte_for_byte() {
    let ran = |name: &str, handler: &str| {
        H::new()
            .then(start_root)
            .act(
                tool_call("root", name),
                tool_result(ToolCallOutcome::Executed, None, None),
            )
            .handler_calls(&[handler])
            .build()
    };
    // A fullwidth look-alike ran the sealed tool.
    let lookalike = "\u{ff46}\u{ff53}.write";
    assert_eq!(
        check(InvariantId::SD2, &ran(lookalike, "fs.write")).len(),
        1
    );
    // The exact name, but another tool's handler ran.
    assert_eq!(
        check(InvariantId::SD2, &ran("fs.write", lookalike)).len(),
        1
    );
    // Control: the exact name and its own handler.
    assert!(check(InvariantId::SD2, &ran("fs.write", "fs.write")).is_empty());
}

/// `fs.write` redefined to each of `versions` in turn, with the root started
/// (sealing `sealed`) before the first change or after the last, then a call
/// of it that runs its handler.
fn root_calls_after_redefinitions(
    sealed: &str,
    versions: &[&str],
    start_first: bool,
) -> Vec<HistoryEntry> {
    let mut authority = root_authority();
    authority.tools.insert("fs.write".into(), digest_of(sealed));
    let start = |h: H| h.act(start_action(), created("root", authority.clone()));
    let mut h = H::new();
    if start_first {
        h = start(h);
    }
    let mut previous = "fs.write v1".to_string();
    for version in versions {
        h = h.world(WorldChange::ToolRedefined {
            tool: "fs.write".into(),
            digest: digest_of(version),
            previous_digest: Some(digest_of(&previous)),
            description_only: false,
        });
        previous = version.to_string();
    }
    if !start_first {
        h = start(h);
    }
    h.then(|h| call_fs_write(h, "root", true, DenyReason::ToolDrift))
        .build()
}

#[test]
fn sd2_judges_a_sealed_call_by_the_definition_live_at_the_call() {
    // Changed twice before the root existed; it sealed the live definition.
    let sealed_after =
        root_calls_after_redefinitions("fs.write v3", &["fs.write v2", "fs.write v3"], false);
    assert_eq!(check(InvariantId::SD2, &sealed_after), vec![]);
    // Changed, then restored to what the root sealed: the live definition is the sealed one.
    let restored =
        root_calls_after_redefinitions("fs.write v1", &["fs.write v2", "fs.write v1"], true);
    assert_eq!(check(InvariantId::SD2, &restored), vec![]);
    // The control: changed twice after the root sealed v1, and run anyway.
    let drifted =
        root_calls_after_redefinitions("fs.write v1", &["fs.write v2", "fs.write v3"], true);
    let found = check(InvariantId::SD2, &drifted);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].message.contains("changed at step"),
        "{}",
        found[0].message
    );
}
