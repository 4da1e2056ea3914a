//! Random operation sequences against the model's world: every invariant checker stays silent on every step.
//!
//! proptest-state-machine generates abstract operations (indexes into what
//! exists so far, resolved when applied, so that every sequence stays
//! meaningful after shrinking); the system under test is the simulated world
//! around the reference state machine.

use delegation_model::state::AuthorizerAnswer;
use delegation_model::world::{SimChange, SimReply, World, sample_tool};
use delegation_model::*;
use proptest::prelude::*;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};
use serde_json::json;

/// An operation with its references left as indexes.
#[derive(Clone, Debug)]
pub enum Op {
    Start {
        sandbox: u8,
        policy: u8,
        tools: u8,
    },
    Delegate {
        parent: u8,
        sandbox: Option<u8>,
        tools: Option<u8>,
        role: u8,
    },
    Turn {
        instance: u8,
        marker: u8,
    },
    ToolCall {
        instance: u8,
        tool: u8,
    },
    End {
        instance: u8,
        how: u8,
    },
    Resume {
        instance: u8,
    },
    Fork {
        instance: u8,
    },
    Answer {
        approval: u8,
        decision: u8,
    },
    Auto {
        enabled: bool,
    },
    Prepare {
        parent: u8,
    },
    Consume {
        receipt: u8,
        tamper: bool,
        other_parent: bool,
    },
    Clock {
        advance: u32,
    },
    Fault {
        point: u8,
        times: u8,
    },
    Restart,
    ChangeTool {
        tool: u8,
        announce: bool,
    },
    RemoveTool {
        tool: u8,
        announce: bool,
    },
    Authorizer {
        allow: bool,
    },
    Event {
        event: u8,
        instance: u8,
    },
    Wait {
        instance: u8,
    },
}

const TOOLS: [&str; 3] = ["probe.read", "probe.write", "probe.spawn"];

fn sandbox(i: u8) -> Sandbox {
    match i % 4 {
        0 => Sandbox::ReadOnly,
        1 => Sandbox::WorkspaceWrite {
            writable_roots: [NormalPath::parse("/w/repo").unwrap()].into(),
            network: false,
        },
        2 => Sandbox::WorkspaceWrite {
            writable_roots: [NormalPath::parse("/w/repo").unwrap()].into(),
            network: true,
        },
        _ => Sandbox::FullAccess,
    }
}

fn policy(i: u8) -> ApprovalPolicy {
    [
        ApprovalPolicy::Never,
        ApprovalPolicy::Untrusted,
        ApprovalPolicy::OnRequest,
    ][i as usize % 3]
        .clone()
}

fn tool_subset(mask: u8) -> Vec<String> {
    TOOLS
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, t)| t.to_string())
        .collect()
}

fn spawn_request(sandbox_choice: Option<u8>, tools: Option<u8>, role: u8) -> SpawnRequest {
    SpawnRequest {
        role: ["worker", "reviewer"][role as usize % 2].into(),
        task: "CHILD_TASK".into(),
        authority: AuthorityRequest {
            sandbox: sandbox_choice.map(sandbox),
            tools: tools.map(tool_subset),
            ..AuthorityRequest::default()
        },
        model: None,
        target: None,
        worktree: false,
    }
}

fn op_strategy() -> BoxedStrategy<Op> {
    prop_oneof![
        (any::<u8>(), any::<u8>(), any::<u8>()).prop_map(|(sandbox, policy, tools)| Op::Start {
            sandbox,
            policy,
            tools
        }),
        (
            any::<u8>(),
            proptest::option::of(any::<u8>()),
            proptest::option::of(any::<u8>()),
            any::<u8>()
        )
            .prop_map(|(parent, sandbox, tools, role)| Op::Delegate {
                parent,
                sandbox,
                tools,
                role
            }),
        (any::<u8>(), any::<u8>()).prop_map(|(instance, marker)| Op::Turn { instance, marker }),
        (any::<u8>(), any::<u8>()).prop_map(|(instance, tool)| Op::ToolCall { instance, tool }),
        (any::<u8>(), any::<u8>()).prop_map(|(instance, how)| Op::End { instance, how }),
        any::<u8>().prop_map(|instance| Op::Resume { instance }),
        any::<u8>().prop_map(|instance| Op::Fork { instance }),
        (any::<u8>(), any::<u8>())
            .prop_map(|(approval, decision)| Op::Answer { approval, decision }),
        any::<bool>().prop_map(|enabled| Op::Auto { enabled }),
        any::<u8>().prop_map(|parent| Op::Prepare { parent }),
        (any::<u8>(), any::<bool>(), any::<bool>()).prop_map(|(receipt, tamper, other_parent)| {
            Op::Consume {
                receipt,
                tamper,
                other_parent,
            }
        }),
        (0u32..120_000).prop_map(|advance| Op::Clock { advance }),
        (any::<u8>(), 0u8..3).prop_map(|(point, times)| Op::Fault { point, times }),
        Just(Op::Restart),
        (any::<u8>(), any::<bool>()).prop_map(|(tool, announce)| Op::ChangeTool { tool, announce }),
        (any::<u8>(), any::<bool>()).prop_map(|(tool, announce)| Op::RemoveTool { tool, announce }),
        any::<bool>().prop_map(|allow| Op::Authorizer { allow }),
        (0u8..4, any::<u8>()).prop_map(|(event, instance)| Op::Event { event, instance }),
        any::<u8>().prop_map(|instance| Op::Wait { instance }),
    ]
    .boxed()
}

/// The generator needs no knowledge of the world: references are resolved at apply time.
pub struct Generator;

impl ReferenceStateMachine for Generator {
    type State = ();
    type Transition = Op;

    fn init_state() -> BoxedStrategy<()> {
        Just(()).boxed()
    }
    fn transitions(_: &()) -> BoxedStrategy<Op> {
        op_strategy()
    }
    fn apply(state: (), _: &Op) {
        state
    }
}

/// The world plus what it has handed out so far, to resolve indexes.
pub struct Subject {
    world: World,
    instances: Vec<String>,
    receipts: Vec<(serde_json::Value, SpawnRequest, String)>,
    authorizer_on: bool,
}

fn pick<T: Clone>(items: &[T], i: u8) -> Option<T> {
    (!items.is_empty()).then(|| items[i as usize % items.len()].clone())
}

impl Subject {
    fn new() -> Subject {
        let tools = vec![
            sample_tool("probe.read", "read"),
            sample_tool("probe.write", "file-write"),
            sample_tool("probe.spawn", "mcp"),
        ];
        let replies = vec![
            (
                "SPAWN".to_string(),
                SimReply::Spawn(spawn_request(Some(0), None, 0)),
            ),
            (
                "CALL".to_string(),
                SimReply::ToolCall {
                    tool: "probe.spawn".into(),
                    arguments: json!({"x": 1}),
                },
            ),
            ("BREAK".to_string(), SimReply::Fail),
        ];
        let mut world = World::new(tools, replies);
        world.apply(&Action::Configure(Configuration {
            receipt_ttl_ms: 60_000,
            ..Configuration::default()
        }));
        Subject {
            world,
            instances: vec![],
            receipts: vec![],
            authorizer_on: false,
        }
    }

    fn note(&mut self, result: Option<&ActionResult>) {
        let Some(r) = result else { return };
        if let Some(id) = &r.instance
            && !self.instances.contains(id)
        {
            self.instances.push(id.clone());
        }
        if let Some(TurnReport::Spawn { spawn }) = &r.turn
            && let Some(id) = &spawn.instance
        {
            self.instances.push(id.clone());
        }
    }

    fn act(&mut self, action: Action) {
        let entry = self.world.apply(&action);
        let result = match &entry.kind {
            StepKind::Action { result: Ok(r), .. } => Some(r.clone()),
            _ => None,
        };
        if let (
            Action::PrepareReceipt {
                parent, request, ..
            },
            Some(r),
        ) = (&action, &result)
            && let Some(receipt) = &r.receipt
        {
            self.receipts.push((
                serde_json::to_value(receipt).unwrap(),
                request.clone(),
                parent.clone(),
            ));
        }
        self.note(result.as_ref());
    }

    fn apply_op(&mut self, op: &Op) {
        let inst =
            |s: &Subject, i: u8| pick(&s.instances, i).unwrap_or_else(|| "inst-missing".into());
        match op {
            Op::Start {
                sandbox: s,
                policy: p,
                tools,
            } => self.act(Action::Start(StartRequest {
                role: "root".into(),
                model: default_model(),
                sandbox: sandbox(*s),
                approval_policy: policy(*p),
                tools: tool_subset(*tools | 1),
                cwd: "/w/repo".into(),
                provider: default_provider(),
                delegation_depth: 2,
            })),
            Op::Delegate {
                parent,
                sandbox,
                tools,
                role,
            } => self.act(Action::Delegate {
                parent: inst(self, *parent),
                request: spawn_request(*sandbox, *tools, *role),
            }),
            Op::Turn { instance, marker } => self.act(Action::Turn {
                instance: inst(self, *instance),
                input: ["hello", "SPAWN", "CALL", "BREAK"][*marker as usize % 4].into(),
            }),
            Op::ToolCall { instance, tool } => self.act(Action::ToolCall {
                instance: inst(self, *instance),
                tool: TOOLS[*tool as usize % 3].into(),
                arguments: json!({"n": tool % 2}),
            }),
            Op::End { instance, how } => {
                let instance = inst(self, *instance);
                self.act(match how % 3 {
                    0 => Action::Close { instance },
                    1 => Action::Cancel { instance },
                    _ => Action::Fail { instance },
                })
            }
            Op::Resume { instance } => self.act(Action::Resume {
                instance: inst(self, *instance),
            }),
            Op::Fork { instance } => self.act(Action::Fork {
                instance: inst(self, *instance),
            }),
            Op::Answer { approval, decision } => {
                let ids: Vec<String> = self.world.state.approvals.keys().cloned().collect();
                let request = pick(&ids, *approval).unwrap_or_else(|| "appr-missing".into());
                let decision =
                    [Decision::Allow, Decision::Deny, Decision::AllowExact][*decision as usize % 3];
                self.act(Action::Answer { request, decision })
            }
            Op::Auto { enabled } => self.act(Action::SetAutoApprove { enabled: *enabled }),
            Op::Prepare { parent } => self.act(Action::PrepareReceipt {
                parent: inst(self, *parent),
                call_id: "call".into(),
                request: spawn_request(Some(0), None, 0),
                ttl_ms: None,
            }),
            Op::Consume {
                receipt,
                tamper,
                other_parent,
            } => {
                let Some((mut value, request, parent)) = pick(&self.receipts, *receipt) else {
                    return;
                };
                if *tamper {
                    value["expires_at"] = json!(u64::MAX / 2);
                }
                let parent = if *other_parent {
                    inst(self, receipt.wrapping_add(1))
                } else {
                    parent
                };
                self.act(Action::ConsumeReceipt {
                    receipt: value,
                    parent,
                    request,
                })
            }
            Op::Clock { advance } => {
                let now = self.world.state.now + *advance as u64;
                self.act(Action::SetClock { now })
            }
            Op::Fault { point, times } => {
                let points = [
                    FaultPoint::StoreWriteApprovalRequest,
                    FaultPoint::StoreWriteDecision,
                    FaultPoint::StoreWriteInstance,
                    FaultPoint::AuthorizerCall,
                    FaultPoint::ModelCall,
                    FaultPoint::EventDeliver,
                    FaultPoint::CrashAfterDecisionCommit,
                ];
                self.act(Action::ArmFault {
                    point: points[*point as usize % points.len()],
                    times: Some(*times as u32 + 1),
                })
            }
            Op::Restart => self.world.restart(),
            Op::ChangeTool { tool, announce } => {
                let name = TOOLS[*tool as usize % 3];
                let mut def = sample_tool(name, "mcp");
                def["description"] = json!(format!("{name}, changed"));
                self.world.change(SimChange::ChangeTool {
                    name: name.into(),
                    definition: def,
                    announce: *announce,
                })
            }
            Op::RemoveTool { tool, announce } => self.world.change(SimChange::RemoveTool {
                name: TOOLS[*tool as usize % 3].into(),
                announce: *announce,
            }),
            Op::Authorizer { allow } => {
                if !self.authorizer_on {
                    self.authorizer_on = true;
                    self.act(Action::Configure(Configuration {
                        authorizer_required: true,
                        ..self.world.state.config.clone()
                    }));
                }
                let now = self.world.state.now;
                let answer = if *allow {
                    AuthorizerAnswer::Body(
                        json!({"version": "1", "decision": "allow", "decided_at": now,
                               "receipt": {"id": format!("authz-{now}-{}", self.world.history.len()),
                                           "binding": "unknown", "expires_at": now + 1000}})
                        .to_string(),
                    )
                } else {
                    AuthorizerAnswer::Body(json!({"version": "1", "decision": "deny"}).to_string())
                };
                self.world.change(SimChange::Authorizer(answer))
            }
            Op::Event { event, instance } => self.act(Action::DeliverEvent {
                event: format!("evt-{event}"),
                instance: inst(self, *instance),
                kind: "completed".into(),
            }),
            Op::Wait { instance } => {
                let deadline = self.world.state.now + 1000;
                self.act(Action::Wait {
                    instance: inst(self, *instance),
                    deadline,
                })
            }
        }
    }
}

impl StateMachineTest for Subject {
    type SystemUnderTest = Subject;
    type Reference = Generator;

    fn init_test(_: &()) -> Subject {
        Subject::new()
    }

    fn apply(mut subject: Subject, _: &(), op: Op) -> Subject {
        subject.apply_op(&op);
        subject
    }

    fn check_invariants(subject: &Subject, _: &()) {
        let violations = invariants::check_all(&subject.world.history);
        assert!(
            violations.is_empty(),
            "the model violated its own invariants: {violations:#?}\nlast step: {:#?}",
            subject.world.history.last()
        );
    }
}

prop_state_machine! {
    #![proptest_config(ProptestConfig {
        cases: 96,
        max_shrink_iters: 2_000,
        .. ProptestConfig::default()
    })]

    #[test]
    fn the_model_never_violates_an_invariant(sequential 1..40 => Subject);
}

/// The test above must be able to fail: a world whose host hides a denied
/// delegation's child would be caught. Here a history is doctored the way a
/// broken host would behave, and the checkers must fire on it.
#[test]
fn the_property_can_fail_on_a_doctored_history() {
    let mut s = Subject::new();
    s.apply_op(&Op::Start {
        sandbox: 1,
        policy: 2,
        tools: 1,
    });
    s.apply_op(&Op::Delegate {
        parent: 0,
        sandbox: Some(3),
        tools: None,
        role: 0,
    });
    let mut history = s.world.history.clone();
    let last = history.last_mut().unwrap();
    let StepKind::Action { result: Ok(r), .. } = &last.kind else {
        panic!("the delegation answered")
    };
    assert_eq!(
        r.reason,
        Some(DenyReason::CeilingExceeded),
        "full access above a workspace-write parent is refused"
    );
    // The broken host still made a model request for a child it never admitted.
    last.evidence.model_requests.insert("inst-99".into(), 1);
    let violations = invariants::check_all(&history);
    assert!(
        violations.iter().any(|v| v.id == InvariantId::ZC2),
        "ZC2 must fire: {violations:#?}"
    );
}
