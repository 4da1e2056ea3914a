//! Differential host fuzzing's library half: an operation sequence as a scenario, and one run of it against a host.
//!
//! The CLI's `fuzz` command (generation, shrinking, findings) and the
//! cargo-fuzz target `reference_host` both call this, so the translation
//! and the single-case runner build and are tested on stable.

pub mod translate;

use delegation_host::HostLauncher;
use delegation_model::fuzzing::Op;

use crate::ObserverWorlds;
use crate::Scenario;
use crate::execute::{ExecOptions, Execution, RawOutcome, execute};
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
}

/// One scenario run against one host.
pub async fn run_scenario(
    scenario: &Scenario,
    launcher: &dyn HostLauncher,
    exec: &ExecOptions,
) -> (CaseResult, Execution) {
    // The runner's events are for reporters; fuzzing reads the execution itself.
    let (events, _) = tokio::sync::mpsc::unbounded_channel();
    let execution = execute(scenario, launcher, &ObserverWorlds, exec, &events).await;
    let result = match &execution.outcome {
        RawOutcome::Unsupported(missing) => CaseResult::Unsupported(missing.clone()),
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

/// The operation a failing scenario step came from.
pub fn failing_op(translation: &Translation, step: usize) -> usize {
    let last = translation.origin.len().saturating_sub(1);
    translation.origin.get(step.min(last)).copied().unwrap_or(0)
}
