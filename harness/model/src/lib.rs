//! The reference delegation model: the one place the delegation rules of MODEL.md are written down as code.
//!
//! Pure: no I/O, no async, no clock of its own (time is an input), no hidden
//! randomness. The reference host is built on it and the harness judges
//! every other host against it.

pub mod authority;
pub mod decisions;
pub mod digest;
pub mod eligibility;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod invariants;
pub mod linearizability;
pub mod names;
pub mod path;
pub mod sequence;
pub mod side_channels;
pub mod state;
pub mod vocabulary;
pub mod wire;
pub mod world;

pub use authority::{
    ActionClass, AdmissionError, ApprovalPolicy, Authority, AuthorityRequest, Axis, PolicyVerdict,
    RequestedSandbox, Sandbox, admit,
};
pub use digest::{DefinitionError, ToolDefinition};
pub use eligibility::{Eligibility, class_of, eligibility};
pub use path::{NormalPath, PathError};
pub use vocabulary::{DenyReason, InvariantId, Tier};
pub use wire::*;
