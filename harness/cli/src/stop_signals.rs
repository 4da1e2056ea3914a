//! The signals that stop a run or a fuzz session cleanly: SIGINT (Ctrl-C), SIGTERM (CI cancelling a job, `timeout`) and SIGHUP (the terminal or SSH session closing).

use anyhow::Context;
use tokio::signal::unix::{Signal, SignalKind, signal};

/// Listens for all three stop signals at once; the first one asks for a
/// clean stop, a second one (any of the three) for an immediate exit.
pub struct StopSignals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

impl StopSignals {
    /// Installs the handlers; must be called inside a tokio runtime. From
    /// here on none of the three signals kills the process by default.
    pub fn install() -> anyhow::Result<Self> {
        let listen = |kind: SignalKind, name: &str| {
            signal(kind).with_context(|| format!("cannot listen for {name}"))
        };
        Ok(Self {
            interrupt: listen(SignalKind::interrupt(), "SIGINT")?,
            terminate: listen(SignalKind::terminate(), "SIGTERM")?,
            hangup: listen(SignalKind::hangup(), "SIGHUP")?,
        })
    }

    /// The name of the next stop signal to arrive.
    pub async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "SIGINT",
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.hangup.recv() => "SIGHUP",
        }
    }
}
