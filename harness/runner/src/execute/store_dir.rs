//! The scenario's store directories: one fresh directory per execution, removed when it ends, and any left over by an interrupted run.

use super::*;

/// Store directories of scenarios still running (or whose removal failed).
pub(super) static LIVE_STORES: std::sync::Mutex<BTreeSet<PathBuf>> =
    std::sync::Mutex::new(BTreeSet::new());

pub(super) fn live_stores() -> std::sync::MutexGuard<'static, BTreeSet<PathBuf>> {
    LIVE_STORES.lock().unwrap_or_else(|p| p.into_inner())
}

/// A scenario's store directory, removed when the scenario ends, also when
/// its future is dropped mid-run (an interrupt); known to
/// [`remove_leftover_stores`] until it is gone.
pub(super) struct StoreDir(Option<tempfile::TempDir>);

impl StoreDir {
    pub(super) fn new(dir: tempfile::TempDir) -> StoreDir {
        live_stores().insert(dir.path().to_path_buf());
        StoreDir(Some(dir))
    }

    pub(super) fn path(&self) -> &Path {
        self.0.as_ref().map_or(Path::new(""), |d| d.path())
    }
}

impl Drop for StoreDir {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            let path = dir.path().to_path_buf();
            if dir.close().is_ok() || !path.exists() {
                live_stores().remove(&path);
            }
        }
    }
}

/// Removes the store directories of scenarios that did not remove their
/// own (a run interrupted while they ran, a removal that failed while an
/// adapter still wrote into it). Returns those that still cannot be removed.
pub fn remove_leftover_stores() -> Vec<(PathBuf, std::io::Error)> {
    let leftovers: Vec<PathBuf> = live_stores().iter().cloned().collect();
    let mut failed = Vec::new();
    for path in leftovers {
        match std::fs::remove_dir_all(&path) {
            Err(e) if path.exists() => failed.push((path, e)),
            _ => {
                live_stores().remove(&path);
            }
        }
    }
    failed
}
