//! Runs scenarios against any host and reports verdicts.
//!
//! The flow: [`catalogue`] loads and selects scenario files ([`scenario`]
//! defines their format), [`run`] schedules them, [`execute`] drives one
//! host through one scenario with fresh observers ([`world`]) and checks
//! expectations and invariants ([`checks`]), emitting [`events`] that the
//! [`report`] reporters consume. [`snapshot`] records normalised transcripts.

pub mod catalogue;
pub mod checks;
pub mod conformance;
pub mod events;
pub mod execute;
pub mod expect_check;
pub mod expectations;
pub mod fuzz;
pub mod observers;
pub mod provenance;
pub mod report;
pub mod resources;
pub mod run;
pub mod scenario;
pub mod snapshot;
pub mod verdict;
pub mod world;

pub use catalogue::{Catalogue, CatalogueError, Filter};
pub use conformance::{Conformance, ConformanceError, Outcome, exit_code_for, process_launcher};
pub use events::{EventSink, RunEvent};
pub use execute::ExecOptions;
pub use expectations::Expectations;
pub use observers::{BrokenObserverWorlds, Observer, ObserverWorlds};
pub use run::{RunOptions, RunReport, run};
pub use scenario::{Scenario, ScenarioError};
pub use verdict::{Failure, ScenarioResult, SnapshotCheck, Summary, Verdict};
pub use world::{World, WorldFactory};

/// The documented exit codes, from the protocol crate so hosts' authors find them in one place.
pub use delegation_protocol::exit_code;
