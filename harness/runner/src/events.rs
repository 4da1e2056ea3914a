//! What the runner tells the world while it runs. Reporters consume these
//! events and nothing else, so no reporter logic lives in the runner
//! (the shape of cargo-nextest's reporter).

use serde::Serialize;

use crate::verdict::{ScenarioResult, Summary};

/// One step ended.
#[derive(Clone, Debug, Serialize)]
pub struct StepSummary {
    pub scenario: String,
    pub step: usize,
    /// The step's action key (`turn`, `restart`, ...).
    pub action: String,
    /// Failures this step added.
    pub failures: usize,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case", tag = "event")]
pub enum RunEvent {
    RunStarted {
        host: String,
        /// Scenarios selected (controls pulled in by a selected negative included).
        total: usize,
        seed: u64,
        jobs: usize,
        /// Whether the model's invariant checkers ran (see `checks::MODEL_CHECKERS_WIRED`).
        model_checkers: bool,
        /// What a command rerunning one of its scenarios alone repeats.
        rerun: crate::report::Rerun,
    },
    ScenarioStarted {
        id: String,
    },
    StepFinished(StepSummary),
    /// Shared: every reporter that keeps results keeps this one, not a copy
    /// of its transcript each.
    ScenarioFinished(std::sync::Arc<ScenarioResult>),
    RunFinished {
        summary: Summary,
    },
    /// Ctrl-C (or another interrupt) stopped the run; the results so far are final.
    RunInterrupted {
        summary: Summary,
    },
    /// Time passed: sent to reporters by [`crate::report::drain`], never by
    /// the runner, so file reports can rewrite a partial report that is due.
    Tick,
}

/// Where the runner sends events. Unbounded so a slow reporter never stalls a host's deadline.
pub type EventSink = tokio::sync::mpsc::UnboundedSender<RunEvent>;
