//! Runs scenarios against any host and reports verdicts.
//!
//! The flow: [`catalogue`] loads and selects scenario files ([`scenario`]
//! defines their format), [`run`] schedules them, [`execute`] drives one
//! host through one scenario with fresh observers ([`observer_set`], live ones in [`live_observers`]) and checks
//! expectations and invariants ([`checks`]), emitting [`events`] that the
//! [`report`] reporters consume. [`snapshot`] records normalised transcripts.
//! [`differential`] runs a generated operation sequence (the model's
//! `fuzzing` alphabet) against a host and judges it by the model: the
//! library half of the CLI's `fuzz` command.

pub mod catalogue;
pub mod checks;
pub mod conformance;
pub mod differential;
pub mod events;
pub mod execute;
pub mod expect_check;
pub mod host_expectations;
pub mod job_runtimes;
pub mod live_observers;
pub mod observer_set;
pub mod provenance;
pub mod report;
pub mod resources;
pub mod run;
pub mod scenario;
pub mod snapshot;
pub mod verdict;

pub use catalogue::{Catalogue, CatalogueError, Filter};
pub use conformance::{Conformance, ConformanceError, Outcome, exit_code_for, process_launcher};
pub use events::{EventSink, RunEvent};
pub use execute::ExecOptions;
pub use host_expectations::HostExpectations;
pub use live_observers::{BrokenLiveObservers, LiveObservers, Observer};
pub use observer_set::{ObserverSet, ObserverSetFactory};
pub use run::{RunOptions, RunReport, run};
pub use scenario::{Scenario, ScenarioError};
pub use verdict::{Failure, ScenarioResult, SnapshotCheck, Summary, Verdict};

/// The documented exit codes, from the protocol crate so hosts' authors find them in one place.
pub use delegation_protocol::exit_code;
