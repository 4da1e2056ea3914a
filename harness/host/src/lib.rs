//! The Host trait the runner drives, the reference host, and the subprocess host.

pub mod mcp_client;
pub mod process;
pub mod reference;

use std::path::Path;

use async_trait::async_trait;
use delegation_model::{Action, ActionResult};
use delegation_protocol::{InitializeParams, InitializeResult};

pub use process::{ProcessHost, ProcessLauncher};
pub use reference::{ReferenceHost, ReferenceLauncher};

/// Why a host could not answer. Each is a verdict about the host, never a panic of the harness.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HostError {
    #[error("no answer to `{method}` within {after_ms} ms")]
    Timeout { method: String, after_ms: u64 },
    #[error("host process exited ({status}) during `{method}`; stderr tail:\n{stderr_tail}")]
    Exited {
        method: String,
        status: String,
        stderr_tail: String,
    },
    #[error("protocol violation during `{method}`: {detail}")]
    Protocol { method: String, detail: String },
    #[error("host answered `{method}` with error {code}: {message}")]
    Rpc {
        method: String,
        code: i64,
        message: String,
    },
    #[error("host does not implement `{method}`")]
    Unsupported { method: String },
    #[error("could not start or reach the host: {0}")]
    Launch(String),
}

/// A running host the runner drives: the in-process reference host, a
/// subprocess speaking the protocol, or anything else that can.
#[async_trait]
pub trait Host: Send {
    async fn initialize(&mut self, params: InitializeParams)
    -> Result<InitializeResult, HostError>;
    async fn call(&mut self, action: &Action) -> Result<ActionResult, HostError>;
    /// Stops the host; its store stays for a restart.
    async fn shutdown(&mut self) -> Result<(), HostError>;
    /// The last lines the host logged, for evidence in a verdict.
    fn stderr_tail(&self) -> String {
        String::new()
    }
}

/// Starts hosts: once per scenario, and again on the same store for a restart.
#[async_trait]
pub trait HostLauncher: Send + Sync {
    async fn launch(&self, store_dir: &Path) -> Result<Box<dyn Host>, HostError>;
    /// A short description for reports, such as the command line.
    fn describe(&self) -> String;
}
