//! The reference host, the subprocess host and the mutants; the `Host` trait itself lives in `delegation-host-api` and is re-exported here.

pub mod mcp_client;
pub mod mutants;
pub mod process;
pub mod reference;

pub use delegation_host_api::{
    Host, HostError, HostLauncher, is_resource_exhaustion, note_if_resource_exhaustion,
    resource_exhaustion_met,
};
pub use process::{ProcessHost, ProcessLauncher};
pub use reference::{ReferenceHost, ReferenceLauncher};
