//! The `Host` trait the runner drives and the errors a host can answer with, alone: for adapters written in Rust and anything else that needs only the trait, without the reference host's SQLite store or the MCP client.

use std::path::Path;

use delegation_model::{Action, ActionResult};
use delegation_protocol::{InitializeParams, InitializeResult};

/// The attribute an implementation of [`Host`] or [`HostLauncher`] is written under.
pub use async_trait::async_trait;

/// Why a host could not answer. Each is a verdict about the host, never a panic of the harness.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HostError {
    #[error("no answer to `{method}` within {after_ms} ms")]
    Timeout { method: String, after_ms: u64 },
    /// A timeout with not one byte on stdout since the adapter started.
    #[error(
        "no answer to `{method}` within {after_ms} ms, and not one byte on stdout since the adapter started: \
         the usual cause is an adapter that does not flush its stdout after each line \
         (Python: `print(..., flush=True)` or `python3 -u`; C: `fflush(stdout)`; a pipe is block-buffered), \
         or one that needs longer than the step deadline to start (raise --step-timeout-ms)"
    )]
    Silent { method: String, after_ms: u64 },
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
    /// The harness itself lacked a resource (file descriptors, processes,
    /// memory) to run the host: says nothing about the host.
    #[error("the harness ran out of resources: {0}")]
    HarnessResources(String),
}

impl HostError {
    /// The error for an I/O failure of the harness's own while running a
    /// host: a resource the harness lacks is its own failure, anything else
    /// is the host's (a missing program, a bad path).
    pub fn from_launch_io(context: String, e: &std::io::Error) -> HostError {
        if is_resource_exhaustion(e) {
            HostError::HarnessResources(format!(
                "{context}: {e}; raise the limit (`ulimit -n`, `ulimit -u`) or lower --jobs"
            ))
        } else {
            HostError::Launch(format!("{context}: {e}"))
        }
    }
}

/// Whether an I/O error means the harness's process or the machine ran out
/// of descriptors, processes or memory (EMFILE, ENFILE, EAGAIN, ENOMEM).
pub fn is_resource_exhaustion(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::EAGAIN | libc::ENOMEM)
    )
}

/// Resource exhaustion met by code in this process that can only report it
/// as text to the host's side (the in-process reference host's HTTP client,
/// whose failed connection becomes a failed model turn). The runner's
/// descriptor watch reads the count: a scenario during which it grew is the
/// harness's failure, even when the shortage was too brief to be sampled.
static RESOURCE_EXHAUSTION_MET: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Counts `error` when it, or an error it was caused by, is resource
/// exhaustion ([`is_resource_exhaustion`]); says whether it was.
pub fn note_if_resource_exhaustion(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && is_resource_exhaustion(io)
        {
            RESOURCE_EXHAUSTION_MET.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            return true;
        }
        cause = e.source();
    }
    false
}

/// How many times [`note_if_resource_exhaustion`] counted one, in this process.
pub fn resource_exhaustion_met() -> u64 {
    RESOURCE_EXHAUSTION_MET.load(std::sync::atomic::Ordering::SeqCst)
}

/// A running host the runner drives: the in-process reference host, a
/// subprocess speaking the protocol, or anything else that can.
#[async_trait]
pub trait Host: Send {
    async fn initialize(&mut self, params: InitializeParams)
    -> Result<InitializeResult, HostError>;
    async fn call(&mut self, action: &Action) -> Result<ActionResult, HostError>;
    /// Sends every action at once, all in flight together, and returns their
    /// answers in the order the actions were given. Only for a host that
    /// declared the capability `concurrent-requests`; the default is a host
    /// that cannot take requests in flight at once.
    async fn call_concurrently(
        &mut self,
        actions: &[Action],
    ) -> Vec<Result<ActionResult, HostError>> {
        actions
            .iter()
            .map(|action| {
                Err(HostError::Unsupported {
                    method: format!("{} (requests in flight at once)", action.method()),
                })
            })
            .collect()
    }
    /// [`Host::call_concurrently`], calling `noted` with an action's index
    /// as soon as its answer has arrived, so that the runner can mark what
    /// its observers had seen by then (a handler call the tool server saw
    /// after a revoke was answered started after the revoke committed:
    /// TC2). The default notes every answer once all are in, which can
    /// never make a call look late.
    async fn call_concurrently_noting(
        &mut self,
        actions: &[Action],
        noted: &(dyn Fn(usize) + Send + Sync),
    ) -> Vec<Result<ActionResult, HostError>> {
        let answers = self.call_concurrently(actions).await;
        (0..answers.len()).for_each(noted);
        answers
    }
    /// Stops the host; its store stays for a restart.
    async fn shutdown(&mut self) -> Result<(), HostError>;
    /// The last lines the host logged, for evidence in a verdict.
    fn stderr_tail(&self) -> String {
        String::new()
    }
    /// What the host logged (stderr and `log` notifications) since the last
    /// call, bounded, for the secret search (TC4). Default: nothing.
    fn take_log(&mut self) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that wraps another, as an HTTP client's connect error wraps
    /// the socket's.
    #[derive(Debug, thiserror::Error)]
    #[error("error sending request")]
    struct Wrapped(#[source] std::io::Error);

    #[test]
    fn exhaustion_is_counted_through_the_causes_and_nothing_else_is() {
        let before = resource_exhaustion_met();
        let refused = Wrapped(std::io::Error::from_raw_os_error(libc::ECONNREFUSED));
        assert!(!note_if_resource_exhaustion(&refused));
        assert_eq!(
            resource_exhaustion_met(),
            before,
            "a refused connection is the host's"
        );
        let starved = Wrapped(std::io::Error::from_raw_os_error(libc::EMFILE));
        assert!(note_if_resource_exhaustion(&starved));
        assert_eq!(resource_exhaustion_met(), before + 1);
    }
}
