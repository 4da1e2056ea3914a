//! Random operation sequences against the model's world: every invariant checker stays silent on every step.
//!
//! proptest-state-machine generates abstract operations (indexes into what
//! exists so far, resolved when applied, so that every sequence stays
//! meaningful after shrinking); the system under test is the simulated world
//! around the reference state machine. The operations and their resolution
//! are `delegation_model::fuzzing::{Op, Driver}`, shared with the libFuzzer
//! target `model_sequence`, so a sequence either tool finds replays in both.

use delegation_model::fuzzing::{Driver, Op};
use delegation_model::*;
use proptest::prelude::*;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};

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
        (any::<u8>(), any::<u8>(), any::<u8>()).prop_map(|(instance, tool, arguments)| {
            Op::ToolCall {
                instance,
                tool,
                arguments,
            }
        }),
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
        any::<u8>().prop_map(|mode| Op::Authorizer { mode }),
        (0u8..4, any::<u8>()).prop_map(|(event, instance)| Op::Event { event, instance }),
        any::<u8>().prop_map(|instance| Op::Wait { instance }),
        Just(Op::Strict),
        (any::<u8>(), any::<u8>()).prop_map(|(instance, risk)| Op::Score { instance, risk }),
        (any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>()).prop_map(
            |(agent, task, tools, lifetime)| Op::Issue {
                agent,
                task,
                tools,
                lifetime
            }
        ),
        (any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>()).prop_map(
            |(capability, binding, tool, call_id)| Op::CapabilityCall {
                capability,
                binding,
                tool,
                call_id
            }
        ),
        (any::<u8>(), any::<u8>()).prop_map(|(what, index)| Op::Revoke { what, index }),
        (any::<u8>(), any::<u8>()).prop_map(|(deadline, offset)| Op::ClockTo { deadline, offset }),
    ]
    .boxed()
}

/// The generator needs no knowledge of the world (references are resolved
/// at apply time) beyond how many operations came before: strict mode is a
/// setting a scenario carries from its start (the `model_sequence` target
/// hoists it there), so here it may only come first. Turned on later, CE4
/// would rightly flag a full-access child created before it.
pub struct Generator;

impl ReferenceStateMachine for Generator {
    type State = usize;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<usize> {
        Just(0).boxed()
    }
    fn transitions(_: &usize) -> BoxedStrategy<Op> {
        op_strategy()
    }
    fn preconditions(applied: &usize, op: &Op) -> bool {
        !matches!(op, Op::Strict) || *applied == 0
    }
    fn apply(applied: usize, _: &Op) -> usize {
        applied + 1
    }
}

/// The shared driver, wrapped because the test traits are implemented on a local type.
pub struct Subject(Driver);

impl StateMachineTest for Subject {
    type SystemUnderTest = Subject;
    type Reference = Generator;

    fn init_test(_: &usize) -> Subject {
        Subject(Driver::new())
    }

    fn apply(mut subject: Subject, _: &usize, op: Op) -> Subject {
        subject.0.step(&op);
        subject
    }

    fn check_invariants(subject: &Subject, _: &usize) {
        let violations = subject.0.violations();
        assert!(
            violations.is_empty(),
            "the model violated its own invariants: {violations:#?}\nlast step: {:#?}",
            subject.0.world.history.last()
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
    let mut s = Driver::new();
    s.apply(&Op::Start {
        sandbox: 1,
        policy: 2,
        tools: 1,
    });
    s.apply(&Op::Delegate {
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
