//! The harness's own file descriptors, watched while scenarios run, so that a
//! run starved of them is reported as the harness's failure, never the host's.
//!
//! Every scenario holds a host process and three observers listening on
//! loopback. When the process runs out of descriptors an observer can no
//! longer accept the host's connection: a tool call the host really made is
//! then counted as none (`handler_calls expected 1, observed 0`), and a check
//! that nothing happened passes on nothing. So a scenario that ran while
//! descriptors were short gets no verdict about the host at all.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the watcher counts open descriptors. An accept that fails in
/// between is caught by the probe at the end of each scenario instead.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// Fewer free descriptors than this is a shortage: an accept, a pipe or a
/// connection of the harness's own may fail at any moment.
const MIN_FREE: u64 = 16;

/// Descriptors one job holds at its peak: the host's pipes, three observers'
/// listeners and the host's connections to them, the store. Measured: a
/// whole-catalogue run with `--jobs 8` peaked at 150 open descriptors in the
/// harness process (about 16 a job over a base of 20); rounded up for a
/// host over stdio.
pub const DESCRIPTORS_PER_JOB: u64 = 20;

/// Before a run: a warning when `jobs` scenarios at once would need more
/// descriptors than this process may open, with the `--jobs` that fits.
pub fn shortage_ahead(jobs: usize) -> Option<String> {
    let (open, limit) = descriptors()?;
    let needed = open + jobs as u64 * DESCRIPTORS_PER_JOB;
    (needed > limit).then(|| {
        let fits = (limit.saturating_sub(open) / DESCRIPTORS_PER_JOB).max(1);
        format!(
            "--jobs {jobs} needs about {needed} file descriptors ({DESCRIPTORS_PER_JOB} a job), but this process may open {limit}: scenarios that run short are reported as harness errors, not judged. Lower --jobs to {fits} or raise the limit (`ulimit -n`)"
        )
    })
}

/// Counts shortages seen by the watcher; a scenario compares it before and after.
#[derive(Debug, Default)]
pub struct DescriptorWatch {
    shortages: AtomicU64,
    /// The worst moment seen: (open, limit).
    worst: Mutex<Option<(u64, u64)>>,
}

/// A position of the watch, taken when a scenario starts.
#[derive(Clone, Copy, Debug)]
pub struct WatchMark {
    shortages: u64,
    /// Resource exhaustion met in this process and counted where it was met
    /// ([`delegation_host::resource_exhaustion_met`]).
    met: u64,
}

impl DescriptorWatch {
    /// Starts sampling on the current runtime until the returned handle is dropped.
    pub fn start() -> (Arc<DescriptorWatch>, WatchTask) {
        let watch = Arc::new(DescriptorWatch::default());
        let task = tokio::spawn({
            let watch = Arc::clone(&watch);
            async move {
                loop {
                    watch.sample();
                    tokio::time::sleep(SAMPLE_EVERY).await;
                }
            }
        });
        (watch, WatchTask(task))
    }

    pub fn mark(&self) -> WatchMark {
        WatchMark {
            shortages: self.shortages.load(Ordering::SeqCst),
            met: delegation_host::resource_exhaustion_met(),
        }
    }

    /// Counts open descriptors once; records a shortage below [`MIN_FREE`],
    /// or when not even `/proc/self/fd` can be opened to count them.
    pub fn sample(&self) {
        match descriptors() {
            Some((open, limit)) if limit.saturating_sub(open) < MIN_FREE => {
                self.record(open, limit)
            }
            Some(_) => {}
            None => {
                if let Err(e) = std::fs::read_dir("/proc/self/fd")
                    && delegation_host::is_resource_exhaustion(&e)
                {
                    self.record(0, soft_limit().unwrap_or(0));
                }
            }
        }
    }

    /// Whether the harness was short of descriptors since `mark`, and then
    /// how: `None` when it was not. Also opens one descriptor, so that a
    /// shortage between two samples is not missed when it lasts.
    pub fn shortage_since(&self, mark: WatchMark) -> Option<String> {
        self.sample();
        if let Err(e) = std::fs::File::open("/dev/null")
            && delegation_host::is_resource_exhaustion(&e)
        {
            let (open, limit) = descriptors().unwrap_or((0, soft_limit().unwrap_or(0)));
            self.record(open, limit);
        }
        // A shortage too brief for a sample, met by an in-process host's
        // connection: counted where it failed.
        if delegation_host::resource_exhaustion_met() != mark.met {
            self.record(0, soft_limit().unwrap_or(0));
        }
        if self.shortages.load(Ordering::SeqCst) == mark.shortages {
            return None;
        }
        let worst = *self.worst.lock().unwrap_or_else(|p| p.into_inner());
        let how = match worst {
            Some((open, limit)) if open > 0 => format!("{open} open of a limit of {limit}"),
            Some((_, limit)) => format!("not one more could be opened, limit {limit}"),
            None => "limit unknown".into(),
        };
        Some(format!(
            "the harness ran short of file descriptors while this scenario ran \
             ({how}); its observers may have missed what the host did, so \
             nothing is concluded about the host. Raise the limit (`ulimit -n`) \
             or lower --jobs"
        ))
    }

    fn record(&self, open: u64, limit: u64) {
        self.shortages.fetch_add(1, Ordering::SeqCst);
        let mut worst = self.worst.lock().unwrap_or_else(|p| p.into_inner());
        if worst.is_none_or(|(o, _)| open > o) {
            *worst = Some((open, limit));
        }
    }
}

/// Stops the watcher when dropped.
#[derive(Debug)]
pub struct WatchTask(tokio::task::JoinHandle<()>);

impl Drop for WatchTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// (open descriptors, soft limit) of this process, where the platform tells.
pub fn descriptors() -> Option<(u64, u64)> {
    let open = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    Some((open, soft_limit()?))
}

fn soft_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    Some(limit.rlim_cur as u64)
}

/// Raises this process's soft descriptor limit to its hard limit, as test
/// runners do, when `jobs` scenarios at once could come near it (twice
/// [`DESCRIPTORS_PER_JOB`] a job): every job costs descriptors, and the soft
/// default (1024 on many systems) is an accident of history, not a choice
/// of the user's. Adapters are started with the limit the harness was given
/// (see [`delegation_host::process::raise_descriptor_limit`]).
pub fn raise_descriptor_limit(jobs: usize) -> Option<u64> {
    let open = descriptors().map(|(open, _)| open);
    delegation_host::process::raise_descriptor_limit(descriptors_wanted(open, jobs))
}

/// The soft limit under which [`raise_descriptor_limit`] raises it: room for
/// twice what `jobs` are expected to open. Where the platform does not say
/// how many are open (no `/proc/self/fd`), any limit below the hard one.
fn descriptors_wanted(open: Option<u64>, jobs: usize) -> u64 {
    match open {
        Some(open) => open + jobs as u64 * DESCRIPTORS_PER_JOB * 2,
        None => u64::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_raised_for_what_the_jobs_need_or_always_when_the_open_count_is_unknown() {
        assert_eq!(
            descriptors_wanted(Some(10), 1),
            10 + 2 * DESCRIPTORS_PER_JOB
        );
        assert_eq!(
            descriptors_wanted(Some(10), 16),
            10 + 32 * DESCRIPTORS_PER_JOB
        );
        assert_eq!(descriptors_wanted(None, 1), u64::MAX);
    }

    #[test]
    fn exhaustion_met_in_process_while_a_scenario_ran_is_a_shortage() {
        let watch = DescriptorWatch::default();
        let quiet = watch.mark();
        assert_eq!(watch.shortage_since(quiet), None, "nothing happened");
        let mark = watch.mark();
        // How an error's causes are walked is host-api's test; here, the count.
        let starved = std::io::Error::from_raw_os_error(libc::EMFILE);
        assert!(delegation_host::note_if_resource_exhaustion(&starved));
        let shortage = watch.shortage_since(mark).expect("a shortage");
        assert!(
            shortage.contains("not one more could be opened"),
            "{shortage}"
        );
        // It is over for the scenarios after it.
        let after = watch.mark();
        assert_eq!(watch.shortage_since(after), None);
    }
}
