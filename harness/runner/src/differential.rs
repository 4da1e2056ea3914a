//! Differential fuzzing's library half: an operation sequence as a scenario, one run of it against a host, and the scenario parser's target body.
//!
//! The CLI's `fuzz` command (generation, shrinking, findings) and the
//! cargo-fuzz targets `reference_host` and `scenario_parser` all call this,
//! so the translation, the single-case runner and the parser checks build
//! and are tested on stable.

#[cfg(test)]
mod boundary_tests;
pub mod reach;
pub mod scenario;
pub mod summary;
pub mod translate;

use delegation_host::HostLauncher;
use delegation_model::fuzzing::Op;

use crate::LiveObservers;
use crate::Scenario;
use crate::execute::{ExecOptions, Execution, RawOutcome, execute};
pub use scenario::fuzz_scenario;
pub use translate::{Translation, translate};

/// How one scenario run went, reduced to what fuzzing needs.
#[derive(Clone, Debug)]
pub enum CaseResult {
    Pass,
    /// The host lacks a capability the case needs (the missing names).
    Unsupported(Vec<String>),
    /// Failed at scenario step `step`, for the reason given.
    Fail {
        step: usize,
        message: String,
    },
    /// The harness itself failed (its observers, its resources): no finding.
    HarnessError(String),
}

/// One scenario run against one host.
pub async fn run_scenario(
    scenario: &Scenario,
    launcher: &dyn HostLauncher,
    exec: &ExecOptions,
) -> (CaseResult, Execution) {
    // The runner's events are for reporters; fuzzing reads the execution itself.
    let (events, _) = tokio::sync::mpsc::unbounded_channel();
    let exec = &ExecOptions {
        transcript: false,
        ..exec.clone()
    };
    // Outside tokio's cooperative budget: an in-process case is one long
    // poll of ready futures that spends the budget, and the model endpoint's
    // mock server, dropped at the end of it, takes a tokio lock through a
    // nested `block_on`, which then sees `Pending` forever and spins (a
    // fuzz kill matrix hung there, in `MockServer::drop`).
    let execution =
        tokio::task::unconstrained(execute(scenario, launcher, &LiveObservers, exec, &events))
            .await;
    let result = match &execution.outcome {
        RawOutcome::Unsupported(missing) => CaseResult::Unsupported(missing.clone()),
        RawOutcome::HarnessError(message) => CaseResult::HarnessError(message.clone()),
        RawOutcome::Error { message, .. } => CaseResult::Fail {
            step: execution.steps_run,
            message: format!("error: {message}"),
        },
        RawOutcome::Completed | RawOutcome::Stopped => {
            match execution.failures.iter().min_by_key(|f| f.step) {
                None => CaseResult::Pass,
                Some(f) => CaseResult::Fail {
                    step: f.step,
                    message: format!("{}: {}", f.at, f.message),
                },
            }
        }
    };
    (result, execution)
}

/// Translates and runs one sequence.
pub async fn run_ops(
    ops: &[Op],
    launcher: &dyn HostLauncher,
    exec: &ExecOptions,
) -> (Translation, CaseResult) {
    let translation = translate(ops, "fuzz/000-case", "a generated case");
    let (result, _) = run_scenario(&translation.scenario, launcher, exec).await;
    (translation, result)
}

/// Fuzz target body (`reference_host`): bytes decode into operations
/// ([`delegation_model::fuzzing::decode_ops`]), the operations become the
/// model's scenario, and the correct in-process reference host must pass it,
/// store faults and crashes included, with every invariant checker silent.
///
/// Panics with the operations and the first failure otherwise. A shortened
/// translation is not a failure: its prefix is still a complete test.
pub fn fuzz_reference_host(data: &[u8]) {
    fuzz_host(data, &delegation_host::ReferenceLauncher::default());
}

/// [`fuzz_reference_host`] against any host.
pub fn fuzz_host(data: &[u8], launcher: &dyn HostLauncher) {
    let ops = delegation_model::fuzzing::decode_ops(data);
    if ops.is_empty() {
        return;
    }
    let exec = ExecOptions {
        step_deadline: std::time::Duration::from_secs(10),
        ..ExecOptions::default()
    };
    let (translation, result) = runtime().block_on(run_ops(&ops, launcher, &exec));
    match result {
        CaseResult::Pass => {}
        CaseResult::Unsupported(missing) => {
            panic!("the host lacks {missing:?}")
        }
        CaseResult::HarnessError(message) => panic!("the harness failed on {ops:?}: {message}"),
        CaseResult::Fail { step, message } => panic!(
            "the host diverged from the model on {ops:?} at operation {} (step {step}): {message}",
            failing_op(&translation, step)
        ),
    }
}

/// One runtime for every input: building one per input would cost more than
/// the run. A single thread, as for `delegation-harness fuzz`: a case's host,
/// observers and checks hand work to each other all the time, and on a
/// multi-threaded runtime each hand-off wakes another worker.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime starts")
    })
}

/// The operation a failing scenario step came from.
pub fn failing_op(translation: &Translation, step: usize) -> usize {
    let last = translation.origin.len().saturating_sub(1);
    translation.origin.get(step.min(last)).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use delegation_host::ReferenceLauncher;
    use delegation_model::{DenyReason, Outcome};

    fn exec() -> ExecOptions {
        ExecOptions {
            step_deadline: std::time::Duration::from_secs(10),
            ..ExecOptions::default()
        }
    }

    /// Runs `ops` against the correct reference host; the translation must be whole and pass.
    async fn passes(ops: &[Op]) -> Translation {
        let (t, result) = run_ops(ops, &ReferenceLauncher::default(), &exec()).await;
        assert_eq!(t.stopped, None, "translated whole: {ops:?}");
        assert!(
            matches!(result, CaseResult::Pass),
            "{result:?} for {ops:?}\n{}",
            serde_json::to_string_pretty(&t.scenario).unwrap()
        );
        t
    }

    #[tokio::test]
    async fn a_model_failure_whose_failed_write_fails_is_refused_alike_by_model_and_host() {
        // Start leaves the root running, so the turn's only instance write is `failed`.
        let ops = [
            Op::Start {
                sandbox: 0,
                policy: 0,
                tools: 1,
            },
            Op::Fault { point: 2, times: 0 },
            Op::Turn {
                instance: 0,
                marker: 3,
            },
        ];
        let t = passes(&ops).await;
        let turn = t.scenario.steps.last().unwrap().expect.as_ref().unwrap();
        assert_eq!(turn.outcome, Some(Outcome::Denied));
        assert_eq!(turn.reason, Some(DenyReason::StoreWriteFailed));
    }

    #[tokio::test]
    async fn a_tool_removed_then_served_again_is_called_without_a_drift_finding() {
        let ops = [
            Op::Start {
                sandbox: 0,
                policy: 1,
                tools: 4,
            },
            Op::RemoveTool {
                tool: 2,
                announce: false,
            },
            Op::ChangeTool {
                tool: 2,
                announce: false,
            },
            Op::ToolCall {
                instance: 0,
                tool: 2,
                arguments: 0,
            },
        ];
        let t = passes(&ops).await;
        assert_eq!(t.scenario.steps.len(), 5);
    }

    #[tokio::test]
    async fn ids_nobody_issued_are_sent_as_unknown() {
        let ops = [
            Op::Turn {
                instance: 0,
                marker: 0,
            },
            Op::Answer {
                approval: 0,
                decision: 0,
            },
        ];
        let t = passes(&ops).await;
        let text = serde_json::to_string(&t.scenario.steps).unwrap();
        assert_eq!(
            text.matches(crate::scenario::UNKNOWN_ALIAS).count(),
            2,
            "{text}"
        );
        let turn = t.scenario.steps[0].expect.as_ref().unwrap();
        assert_eq!(turn.reason, Some(DenyReason::InstanceUnknown));
    }

    #[tokio::test]
    async fn the_crash_fault_kills_the_host_and_the_restart_shows_what_was_committed() {
        // Automatic approval decides the model's tool call and the host dies before dispatch.
        let ops = [
            Op::Start {
                sandbox: 0,
                policy: 1,
                tools: 4,
            },
            Op::Auto { enabled: true },
            Op::Fault { point: 6, times: 0 },
            Op::Turn {
                instance: 0,
                marker: 2,
            },
            Op::Turn {
                instance: 0,
                marker: 0,
            },
            Op::Restart,
        ];
        let t = passes(&ops).await;
        let keys: Vec<&str> = t.scenario.steps.iter().map(|s| s.action.key()).collect();
        // The turn while the host is down is the model's too: it answers nothing, so no step.
        assert_eq!(keys, ["start", "auto", "fault", "turn", "restart"]);
        let crash = t.scenario.steps[3].expect.as_ref().unwrap();
        assert!(crash.host_exits);
        assert_eq!(crash.delta.as_ref().unwrap().handler_calls, Some(0));
    }

    #[tokio::test]
    async fn an_announced_change_is_taken_in_before_the_next_step_every_time() {
        // Right after a restart, the new session must hear it too.
        let ops = [
            Op::Start {
                sandbox: 0,
                policy: 0,
                tools: 7,
            },
            Op::Restart,
            Op::ChangeTool {
                tool: 2,
                announce: true,
            },
            Op::ToolCall {
                instance: 0,
                tool: 2,
                arguments: 0,
            },
        ];
        for _ in 0..3 {
            let t = passes(&ops).await;
            let call = t.scenario.steps.last().unwrap().expect.as_ref().unwrap();
            assert_eq!(
                call.tool_call.as_ref().and_then(|c| c.reason),
                Some(DenyReason::ToolListChanged)
            );
        }
    }

    #[tokio::test]
    async fn an_announcement_whose_invalidation_cannot_be_written_stays_pending() {
        // Three store faults: the observations after the announcement and
        // after the clock fail to commit it (and still answer), then the tool
        // call is refused for it.
        let ops = [
            Op::Start {
                sandbox: 0,
                policy: 0,
                tools: 7,
            },
            Op::Fault { point: 2, times: 2 },
            Op::ChangeTool {
                tool: 0,
                announce: true,
            },
            // Writes no instance, so it neither takes the invalidation in nor uses the fault.
            Op::Clock { advance: 10 },
            Op::ToolCall {
                instance: 0,
                tool: 2,
                arguments: 0,
            },
        ];
        let t = passes(&ops).await;
        let call = t.scenario.steps.last().unwrap().expect.as_ref().unwrap();
        assert_eq!(call.reason, Some(DenyReason::StoreWriteFailed));
    }

    #[tokio::test]
    async fn an_external_allow_admits_the_child_it_was_asked_about() {
        let ops = [
            Op::Start {
                sandbox: 1,
                policy: 2,
                tools: 1,
            },
            Op::Authorizer { mode: 0 },
            Op::Delegate {
                parent: 0,
                sandbox: None,
                tools: None,
                role: 0,
            },
            Op::Authorizer { mode: 1 },
            Op::Delegate {
                parent: 0,
                sandbox: None,
                tools: None,
                role: 0,
            },
        ];
        let t = passes(&ops).await;
        let expect = |i: usize| t.scenario.steps[i].expect.as_ref().unwrap();
        let admitted = expect(2).delta.as_ref().unwrap();
        assert_eq!(admitted.instances, Some(1), "the allow admits a child");
        assert_eq!(admitted.authorizer_calls, Some(1));
        assert_eq!(expect(4).reason, Some(DenyReason::AuthorizerDenied));
        assert!(
            t.scenario.setup.configuration.authorizer_required,
            "the host is told the authorizer is required"
        );
    }

    /// The committed `reference_host` seeds and the sequences they encode.
    /// With `DELEGATION_WRITE_SEEDS=1` the files are (re)written from here.
    fn reference_host_seeds() -> Vec<(&'static str, Vec<Op>)> {
        vec![
            (
                "delegate_turn_tool_call",
                vec![
                    Op::Start {
                        sandbox: 1,
                        policy: 2,
                        tools: 7,
                    },
                    Op::Delegate {
                        parent: 0,
                        sandbox: None,
                        tools: None,
                        role: 0,
                    },
                    Op::Turn {
                        instance: 1,
                        marker: 2,
                    },
                    Op::ToolCall {
                        instance: 0,
                        tool: 1,
                        arguments: 1,
                    },
                    Op::Answer {
                        approval: 0,
                        decision: 2,
                    },
                ],
            ),
            (
                "crash_after_decision_then_restart",
                vec![
                    Op::Start {
                        sandbox: 0,
                        policy: 1,
                        tools: 4,
                    },
                    Op::Auto { enabled: true },
                    Op::Fault { point: 6, times: 0 },
                    Op::Turn {
                        instance: 0,
                        marker: 2,
                    },
                    Op::Restart,
                    Op::Turn {
                        instance: 0,
                        marker: 0,
                    },
                ],
            ),
            (
                "announced_change_with_store_faults",
                vec![
                    Op::Start {
                        sandbox: 0,
                        policy: 0,
                        tools: 7,
                    },
                    Op::Fault { point: 2, times: 2 },
                    Op::ChangeTool {
                        tool: 0,
                        announce: true,
                    },
                    Op::Clock { advance: 10 },
                    Op::ToolCall {
                        instance: 0,
                        tool: 2,
                        arguments: 0,
                    },
                    Op::RemoveTool {
                        tool: 2,
                        announce: false,
                    },
                    Op::ChangeTool {
                        tool: 2,
                        announce: false,
                    },
                ],
            ),
            (
                "external_authorizer_and_receipts",
                vec![
                    Op::Start {
                        sandbox: 1,
                        policy: 2,
                        tools: 1,
                    },
                    Op::Authorizer { mode: 0 },
                    Op::Prepare { parent: 0 },
                    Op::Consume {
                        receipt: 0,
                        tamper: false,
                        other_parent: false,
                    },
                    Op::Consume {
                        receipt: 0,
                        tamper: false,
                        other_parent: false,
                    },
                    Op::Authorizer { mode: 1 },
                    Op::Delegate {
                        parent: 0,
                        sandbox: None,
                        tools: None,
                        role: 1,
                    },
                    Op::Clock { advance: 61_000 },
                    Op::Wait { instance: 1 },
                ],
            ),
            (
                // Found by the target: a pending invalidation whose write
                // fails is retried at every observation, one per step, not
                // one per operation (an announced change is two steps).
                "regression-observation-per-step",
                vec![
                    Op::Start {
                        sandbox: 0,
                        policy: 0,
                        tools: 7,
                    },
                    Op::Fault { point: 2, times: 2 },
                    Op::ChangeTool {
                        tool: 0,
                        announce: true,
                    },
                    Op::Start {
                        sandbox: 0,
                        policy: 0,
                        tools: 7,
                    },
                    Op::Fault { point: 2, times: 2 },
                    Op::ChangeTool {
                        tool: 0,
                        announce: true,
                    },
                    Op::Prepare { parent: 10 },
                    Op::Start {
                        sandbox: 0,
                        policy: 41,
                        tools: 175,
                    },
                    Op::Start {
                        sandbox: 0,
                        policy: 0,
                        tools: 0,
                    },
                ],
            ),
            (
                "unknown_ids_and_model_failure",
                vec![
                    Op::Turn {
                        instance: 0,
                        marker: 0,
                    },
                    Op::Start {
                        sandbox: 0,
                        policy: 0,
                        tools: 1,
                    },
                    Op::Fault { point: 2, times: 0 },
                    Op::Turn {
                        instance: 0,
                        marker: 3,
                    },
                    Op::End {
                        instance: 0,
                        how: 0,
                    },
                    Op::Event {
                        event: 1,
                        instance: 0,
                    },
                ],
            ),
            (
                // The model's own lifecycle tools on a live and a closed
                // child, an exact-call grant and its near miss, and the
                // automatic path on a decision-write fault.
                "lifecycle_tools_and_composites",
                vec![
                    Op::Start {
                        sandbox: 1,
                        policy: 1,
                        tools: 7,
                    },
                    Op::Turn {
                        instance: 0,
                        marker: 1,
                    },
                    Op::ModelLifecycle {
                        instance: 0,
                        target: 0,
                        call: 0,
                    },
                    Op::ModelLifecycle {
                        instance: 0,
                        target: 0,
                        call: 3,
                    },
                    Op::ModelLifecycle {
                        instance: 0,
                        target: 0,
                        call: 2,
                    },
                    Op::GrantCall {
                        instance: 0,
                        tool: 2,
                        first: 1,
                        second: 2,
                    },
                    Op::AutoCall {
                        instance: 0,
                        tool: 2,
                        arguments: 4,
                        prelude: 2,
                    },
                ],
            ),
            (
                // A receipt's and a capability's life, a drifted
                // delegation, and automatic approval switched off again.
                "receipt_capability_and_drift_composites",
                vec![
                    Op::Authorizer { mode: 0 },
                    Op::Start {
                        sandbox: 1,
                        policy: 1,
                        tools: 7,
                    },
                    Op::ReceiptUse {
                        parent: 0,
                        then: 0,
                        tool: 0,
                    },
                    Op::ReceiptUse {
                        parent: 0,
                        then: 4,
                        tool: 0,
                    },
                    Op::CapabilityUse {
                        agent: 0,
                        task: 1,
                        tools: 3,
                        then: 0,
                    },
                    Op::CapabilityUse {
                        agent: 0,
                        task: 3,
                        tools: 7,
                        then: 2,
                    },
                    Op::AutoCall {
                        instance: 0,
                        tool: 2,
                        arguments: 0,
                        prelude: 4,
                    },
                    Op::ReceiptUse {
                        parent: 0,
                        then: 1,
                        tool: 2,
                    },
                    Op::DriftDelegate {
                        parent: 0,
                        tool: 1,
                        role: 2,
                    },
                ],
            ),
        ]
    }

    #[test]
    fn committed_reference_host_seeds_decode_to_their_sequences_and_pass() {
        use delegation_model::fuzzing::{committed_seed, decode_ops, encode_ops};
        for (name, ops) in reference_host_seeds() {
            let bytes = committed_seed("reference_host", name, &encode_ops(&ops));
            assert_eq!(decode_ops(&bytes), ops, "{name}");
            let t = translate(&ops, "fuzz/000-seed", name);
            assert_eq!(t.stopped, None, "{name} translates whole");
            fuzz_reference_host(&bytes);
        }
    }

    /// Once a crash (issue 23): under `receipt-parent-not-checked` a
    /// receipt sealed for a parent with three tools, consumed by a parent
    /// holding one, made the model index the consumer's ceiling by a tool
    /// it does not hold, and the shrinker died with the finding. The mutant
    /// must be caught, with no panic, and the correct host must pass.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_receipt_of_a_wider_parent_consumed_by_another_is_a_finding_not_a_panic() {
        let ops = [
            Op::Start {
                sandbox: 1,
                policy: 2,
                tools: 7,
            },
            Op::Start {
                sandbox: 1,
                policy: 2,
                tools: 1,
            },
            Op::Prepare { parent: 0 },
            Op::Consume {
                receipt: 0,
                tamper: false,
                other_parent: true,
            },
        ];
        passes(&ops).await;
        let mutant = delegation_host::ReferenceLauncher {
            defect: Some(delegation_host::mutants::Defect::ReceiptParentNotChecked),
            ..Default::default()
        };
        let (t, result) = run_ops(&ops, &mutant, &exec()).await;
        let CaseResult::Fail { step, message } = result else {
            panic!("the mutant is caught: {result:?}");
        };
        assert_eq!(failing_op(&t, step), 3, "at the consume: {message}");
        // The model alone, as the model_sequence target drives it.
        let mut driver = delegation_model::fuzzing::Driver::new();
        for op in &ops {
            driver.step(op);
        }
        assert!(driver.violations().is_empty(), "{:?}", driver.violations());
    }

    /// The operations added for the mutants no separate operations met in
    /// time (the generator's reach, mutant by mutant): each mutant fails its
    /// short sequence at the composite or lifecycle operation, and the
    /// correct host passes it whole.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lifecycle_and_composite_operations_catch_their_mutants() {
        use delegation_host::mutants::Defect;
        // Workspace-write, `untrusted`, every probe tool: the MCP probe asks a person.
        let start = Op::Start {
            sandbox: 1,
            policy: 1,
            tools: 7,
        };
        let auto_call = |prelude| Op::AutoCall {
            instance: 0,
            tool: 2,
            arguments: 0,
            prelude,
        };
        let spawn = Op::Turn {
            instance: 0,
            marker: 1,
        };
        let lifecycle = |call| Op::ModelLifecycle {
            instance: 0,
            target: 0,
            call,
        };
        let receipt_use = |then, tool| Op::ReceiptUse {
            parent: 0,
            then,
            tool,
        };
        let capability_use = |then| Op::CapabilityUse {
            agent: 0,
            task: 0,
            tools: 0,
            then,
        };
        let close_child = Op::End {
            instance: 1,
            how: 0,
        };
        let cases = [
            (Defect::AutoIgnoresRisk, vec![start.clone(), auto_call(0)]),
            (Defect::SwallowStoreError, vec![start.clone(), auto_call(2)]),
            (
                Defect::DispatchBeforeRecord,
                vec![start.clone(), auto_call(3)],
            ),
            (
                Defect::GrantMatchesToolOnly,
                vec![
                    start.clone(),
                    Op::GrantCall {
                        instance: 0,
                        tool: 2,
                        first: 1,
                        second: 3,
                    },
                ],
            ),
            (
                Defect::LifecycleResumeReopens,
                vec![start.clone(), spawn.clone(), close_child, lifecycle(1)],
            ),
            (
                Defect::ModelWaitRunsTurn,
                vec![start.clone(), spawn, lifecycle(4)],
            ),
            (
                Defect::AutoOffDiscardsDecisions,
                vec![start.clone(), auto_call(4)],
            ),
            (
                Defect::ReceiptNotTombstoned,
                vec![start.clone(), receipt_use(0, 0)],
            ),
            (
                Defect::ReceiptBindsNames,
                vec![start.clone(), receipt_use(1, 0)],
            ),
            (
                Defect::ReceiptExpiryOffByOne,
                vec![start.clone(), receipt_use(3, 0)],
            ),
            (
                Defect::AuthorizerSkippedOnReceipt,
                vec![Op::Authorizer { mode: 1 }, start.clone(), receipt_use(5, 0)],
            ),
            (
                Defect::CapabilityRetryReruns,
                vec![start.clone(), capability_use(0)],
            ),
            (
                Defect::CapabilityRevocationIgnored,
                vec![start.clone(), capability_use(1)],
            ),
            (
                Defect::CapabilityExpiryOffByOne,
                vec![start.clone(), capability_use(2)],
            ),
            (
                Defect::CapabilityBindingUnchecked,
                vec![start.clone(), capability_use(3)],
            ),
            (
                Defect::BoundedReachesAnyTool,
                vec![
                    Op::Start {
                        sandbox: 1,
                        policy: 0,
                        tools: 7,
                    },
                    capability_use(0),
                ],
            ),
            (
                Defect::DriftCheckedOnChildToolsOnly,
                vec![
                    start,
                    Op::DriftDelegate {
                        parent: 0,
                        tool: 1,
                        role: 2,
                    },
                ],
            ),
        ];
        for (defect, ops) in cases {
            passes(&ops).await;
            let mutant = delegation_host::ReferenceLauncher {
                defect: Some(defect),
                ..Default::default()
            };
            let (t, result) = run_ops(&ops, &mutant, &exec()).await;
            let CaseResult::Fail { step, message } = result else {
                panic!("{defect} is caught by {ops:?}: {result:?}");
            };
            assert_eq!(
                failing_op(&t, step),
                ops.len() - 1,
                "{defect} at the last operation: {message}"
            );
        }
    }

    /// A lifecycle reply names its target by alias in the setup, with the
    /// capability it needs, so the scenario loads as a catalogue file does.
    #[test]
    fn a_model_lifecycle_call_becomes_a_setup_rule_naming_its_target_by_alias() {
        let ops = [
            Op::Start {
                sandbox: 1,
                policy: 1,
                tools: 7,
            },
            Op::Turn {
                instance: 0,
                marker: 1,
            },
            Op::ModelLifecycle {
                instance: 0,
                target: 0,
                call: 0,
            },
            // No other instance for the lone root: the target is one nobody issued.
            Op::Start {
                sandbox: 1,
                policy: 1,
                tools: 7,
            },
        ];
        let t = translate(&ops, "fuzz/001-x", "x");
        assert_eq!(t.stopped, None);
        let rule = serde_json::to_value(t.scenario.setup.model.last().unwrap()).unwrap();
        assert_eq!(
            rule["reply"]["lifecycle"],
            serde_json::json!({"op": "send_input", "target": "i1", "message": "hello"}),
            "{rule}"
        );
        assert!(
            t.scenario
                .needs
                .contains(&delegation_protocol::capability::MODEL_LIFECYCLE_TOOLS.to_string()),
            "{:?}",
            t.scenario.needs
        );
        let text = serde_json::to_string(&t.scenario).unwrap();
        let back = Scenario::parse(&text, std::path::Path::new("x.json")).unwrap();
        back.validate(std::path::Path::new("x.json")).unwrap();
    }

    #[test]
    fn the_target_body_panics_when_the_host_diverges() {
        // The body's assertion must be reachable: a mutant fails what the correct host passes.
        let bytes = delegation_model::fuzzing::encode_ops(&[
            Op::Start {
                sandbox: 0,
                policy: 0,
                tools: 1,
            },
            Op::End {
                instance: 0,
                how: 0,
            },
            Op::Turn {
                instance: 0,
                marker: 0,
            },
        ]);
        fuzz_reference_host(&bytes);
        let mutant = delegation_host::ReferenceLauncher {
            defect: Some(delegation_host::mutants::Defect::FollowupAfterClose),
            ..Default::default()
        };
        let panic = std::panic::catch_unwind(|| fuzz_host(&bytes, &mutant))
            .expect_err("the mutant host must make the body panic");
        let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(message.contains("the host diverged"), "{message}");
    }
}
