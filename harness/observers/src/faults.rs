//! Failures of the harness's own observers, recorded where they happen, so that a run reports them as the harness's failure and never as the host's.
//!
//! A host that gets an HTTP 500 from the model endpoint, or a dropped
//! connection from the tool server, answers with an error or a failed step;
//! judged on that alone it would be blamed for the harness's bug. Every
//! request an observer answers goes through a guard that records a panic
//! (and answers 500 so the host is not left hanging); the runner reads the
//! record after each scenario and turns the verdict into `harness-error`.
//! Each observer can also be broken on purpose, which is how the tests show
//! that the line between the two holds for each of them.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::FutureExt;
use wiremock::{Request, Respond, ResponseTemplate};

/// What went wrong inside one observer; clones share one record.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    record: Arc<Mutex<Vec<String>>>,
    broken: Arc<AtomicBool>,
}

impl Faults {
    pub fn record(&self, what: String) {
        self.record
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(what);
    }

    /// The first failure recorded, if any.
    pub fn first(&self) -> Option<String> {
        self.record
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .first()
            .cloned()
    }

    /// From now on every request this observer answers fails inside it, as
    /// a bug in the harness would (tests of the blame line only).
    pub fn break_on_purpose(&self) {
        self.broken.store(true, Ordering::SeqCst);
    }

    fn broken(&self) -> bool {
        self.broken.load(Ordering::SeqCst)
    }

    /// Runs one answer of `observer`, recording a panic instead of losing it.
    pub fn guard<T>(&self, observer: &str, what: &str, answer: impl FnOnce() -> T) -> Option<T> {
        let broken = self.broken();
        match std::panic::catch_unwind(AssertUnwindSafe(|| {
            assert!(!broken, "broken on purpose");
            answer()
        })) {
            Ok(value) => Some(value),
            Err(panic) => {
                self.record(format!(
                    "the {observer} failed answering {what}: {}",
                    panic_text(&*panic)
                ));
                None
            }
        }
    }

    /// [`Faults::guard`] for an answer that is a future.
    pub async fn guard_async<T>(
        &self,
        observer: &str,
        what: &str,
        answer: impl Future<Output = T>,
    ) -> Option<T> {
        let broken = self.broken();
        let run = async move {
            assert!(!broken, "broken on purpose");
            answer.await
        };
        match AssertUnwindSafe(run).catch_unwind().await {
            Ok(value) => Some(value),
            Err(panic) => {
                self.record(format!(
                    "the {observer} failed answering {what}: {}",
                    panic_text(&*panic)
                ));
                None
            }
        }
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".into())
}

/// A wiremock responder whose failures are recorded in [`Faults`]; the host
/// gets a 500 saying the harness failed.
pub struct Guarded<R> {
    pub inner: R,
    pub faults: Faults,
    pub observer: &'static str,
}

impl<R: Respond> Respond for Guarded<R> {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let what = format!("{} {}", request.method, request.url.path());
        self.faults
            .guard(self.observer, &what, || self.inner.respond(request))
            .unwrap_or_else(|| {
                ResponseTemplate::new(500).set_body_string(format!(
                    "the harness's {} failed (its own fault, not the host's)",
                    self.observer
                ))
            })
    }
}
