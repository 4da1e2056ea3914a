//! Fuzzing entry points for the model: operation sequences over the simulated world, and digest round trips.
//!
//! The logic lives here rather than in `fuzz/` so that it builds and is
//! tested on stable, and so the proptest state machine, the libFuzzer targets
//! and later differential host fuzzing all drive the world through the same
//! [`Op`] and [`Driver`]. Operations carry indexes, not ids: an index is
//! resolved against what exists when it is applied, so every byte string is a
//! meaningful sequence and a mutated or shrunk one stays meaningful.

mod corpus;
mod driver;
mod ops;
mod reindex;
mod targets;
#[cfg(test)]
mod tests;
mod written;

pub use corpus::*;
pub use driver::*;
pub use ops::*;
pub use reindex::*;
pub use targets::*;
pub use written::*;
