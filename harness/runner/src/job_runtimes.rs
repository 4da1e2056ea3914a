//! One single-threaded tokio runtime per job, each on a thread of its own: a scenario's host, observers and checks run on one thread, so their many small hand-offs (an HTTP request to an observer, its answer, the MCP client's worker) wake no other thread.
//!
//! A scenario's futures talk to each other all the time over loopback
//! connections and channels. On a multi-threaded runtime each such hand-off
//! may move a task to another worker, with a futex wake-up and a cache miss
//! each time; on a runtime of its own a scenario's tasks take turns on one
//! thread. Jobs still run in parallel, one thread each.

use std::future::Future;
use std::sync::Mutex;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// `jobs` runtimes, lent out one per running scenario. Dropping the pool
/// stops every runtime and waits for its thread: every task still on one
/// (an interrupted scenario's) is dropped before, so its host is killed and
/// its store removed before the run reports.
pub struct JobRuntimes {
    free: Mutex<Vec<Handle>>,
    threads: Vec<(oneshot::Sender<()>, std::thread::JoinHandle<()>)>,
}

impl JobRuntimes {
    pub fn start(jobs: usize) -> std::io::Result<JobRuntimes> {
        let mut free = Vec::new();
        let mut threads = Vec::new();
        for job in 0..jobs.max(1) {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            free.push(runtime.handle().clone());
            let (stop, stopped) = oneshot::channel::<()>();
            let thread = std::thread::Builder::new()
                .name(format!("job-{job}"))
                .spawn(move || {
                    runtime.block_on(async {
                        let _ = stopped.await;
                    });
                    // The runtime is dropped here, on its own thread, with
                    // every task still on it.
                })?;
            threads.push((stop, thread));
        }
        Ok(JobRuntimes {
            free: Mutex::new(free),
            threads,
        })
    }

    /// Runs `work` to its end on a free runtime. The caller must hold one of
    /// the run's `jobs` slots, so a runtime is always free. Dropped before
    /// its end (an interrupt), the work is aborted on its runtime.
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
    ) -> T {
        let handle = self
            .free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop()
            .expect("a job slot is held, so one of the jobs' runtimes is free");
        let lent = Lent {
            pool: self,
            handle: Some(handle.clone()),
        };
        let mut task = AbortOnDrop(handle.spawn(work));
        let joined = (&mut task.0).await;
        drop(lent);
        match joined {
            Ok(value) => value,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => panic!("a job's runtime dropped a running scenario: {e}"),
        }
    }
}

impl Drop for JobRuntimes {
    fn drop(&mut self) {
        for (stop, thread) in self.threads.drain(..) {
            let _ = stop.send(());
            let _ = thread.join();
        }
    }
}

/// A runtime lent to one scenario, given back when the scenario ends.
struct Lent<'p> {
    pool: &'p JobRuntimes,
    handle: Option<Handle>,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            self.pool
                .free
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(handle);
        }
    }
}

struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn two_jobs_run_at_once_each_on_a_thread_of_its_own() {
        let runtimes = Arc::new(JobRuntimes::start(2).unwrap());
        let both_started = Arc::new(tokio::sync::Barrier::new(2));
        let job = |runtimes: Arc<JobRuntimes>, barrier: Arc<tokio::sync::Barrier>| async move {
            runtimes
                .run(async move {
                    // Each waits for the other: only two runtimes at once get past.
                    barrier.wait().await;
                    std::thread::current().name().map(str::to_string)
                })
                .await
        };
        let (first, second) = tokio::time::timeout(Duration::from_secs(10), async {
            tokio::join!(
                job(runtimes.clone(), both_started.clone()),
                job(runtimes.clone(), both_started.clone())
            )
        })
        .await
        .expect("both jobs ran at the same time");
        let caller = std::thread::current().name().map(str::to_string);
        assert_ne!(first, caller, "a job runs on its runtime's thread");
        assert_ne!(first, second, "two jobs at once, two threads");
        assert!(first.is_some_and(|n| n.starts_with("job-")));
    }

    #[tokio::test]
    async fn a_runtime_is_lent_again_once_its_job_ended() {
        let runtimes = JobRuntimes::start(1).unwrap();
        let mut threads = Vec::new();
        for n in 0..3 {
            let (value, thread) = runtimes
                .run(async move { (n * 2, std::thread::current().id()) })
                .await;
            assert_eq!(value, n * 2);
            threads.push(thread);
        }
        assert!(
            threads.windows(2).all(|w| w[0] == w[1]),
            "one runtime, reused"
        );
    }

    #[tokio::test]
    async fn an_interrupted_job_is_aborted_on_its_runtime() {
        struct SetOnDrop(Arc<AtomicBool>);
        impl Drop for SetOnDrop {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let runtimes = JobRuntimes::start(1).unwrap();
        let dropped = Arc::new(AtomicBool::new(false));
        let (started, has_started) = oneshot::channel();
        let guard = SetOnDrop(dropped.clone());
        let job = runtimes.run(async move {
            let _guard = guard;
            let _ = started.send(());
            std::future::pending::<()>().await
        });
        // Interrupted mid-way: the job's future is dropped, as an aborted scenario's is.
        let interrupted = tokio::time::timeout(Duration::from_secs(10), async {
            tokio::select! {
                _ = job => unreachable!("the job never ends on its own"),
                _ = has_started => {}
            }
        })
        .await;
        assert!(interrupted.is_ok(), "the job started");
        // Aborted on its runtime while the runtimes still run: without the
        // abort it would stay pending there until the pool is dropped.
        let aborted = tokio::time::timeout(Duration::from_secs(10), async {
            while !dropped.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert!(
            aborted.is_ok(),
            "the interrupted job's state was dropped on its runtime"
        );
        drop(runtimes);
    }
}
