//! The tool server reached without a socket, by a host running in the same process as the harness.
//!
//! The embedded reference host is in the harness's own process: its MCP
//! traffic over loopback TCP only paid for two HTTP stacks and the kernel.
//! Each [`crate::ToolServer`] registers its HTTP service (the very router
//! its listener serves: rmcp's streamable-HTTP service, the raw-listing
//! splice and the fault guard) under its URL, and a client in this process
//! may send its requests straight to that service. Counts, faults and
//! listings are the same either way because the same handlers answer; a
//! host in another process only knows the URL and keeps using real HTTP.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

pub use axum::body::Body;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

/// A registered observer's HTTP service, callable in memory.
#[derive(Clone)]
pub struct InProcessService {
    /// Which registration this is: a port freed and bound again gets a new one.
    serial: u64,
    router: axum::Router,
    /// Cancelled when the observer shuts down: from then on it refuses, as its closed port would.
    stopped: CancellationToken,
}

impl std::fmt::Debug for InProcessService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcessService")
            .field("stopped", &self.stopped.is_cancelled())
            .finish()
    }
}

/// Why an in-memory request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum InProcessError {
    #[error("the observer at {url} has shut down")]
    Stopped { url: String },
}

fn registry() -> MutexGuard<'static, HashMap<String, InProcessService>> {
    static SERVICES: OnceLock<Mutex<HashMap<String, InProcessService>>> = OnceLock::new();
    SERVICES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Makes `router` reachable in memory at `url` until [`unregister`]; returns the registration's serial.
pub(crate) fn register(url: &str, router: axum::Router, stopped: CancellationToken) -> u64 {
    static SERIAL: AtomicU64 = AtomicU64::new(0);
    let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
    registry().insert(
        url.to_string(),
        InProcessService {
            serial,
            router,
            stopped,
        },
    );
    serial
}

/// Forgets registration `serial` of `url`, and only that one (a later
/// observer on the same port keeps its own): a later [`lookup`] finds
/// nothing and a client uses the network.
pub(crate) fn unregister(url: &str, serial: u64) {
    let mut services = registry();
    if services.get(url).is_some_and(|s| s.serial == serial) {
        services.remove(url);
    }
}

/// The service of the observer listening at `url` in this process, if there is one.
pub fn lookup(url: &str) -> Option<InProcessService> {
    registry()
        .get(url)
        .filter(|s| !s.stopped.is_cancelled())
        .cloned()
}

impl InProcessService {
    /// Sends one HTTP request through the observer's whole service stack.
    pub async fn send(
        &self,
        request: http::Request<Body>,
    ) -> Result<http::Response<Body>, InProcessError> {
        if self.stopped.is_cancelled() {
            return Err(InProcessError::Stopped {
                url: request.uri().to_string(),
            });
        }
        let answered = self.router.clone().oneshot(request).await;
        Ok(match answered {
            Ok(response) => response,
            Err(never) => match never {},
        })
    }
}
