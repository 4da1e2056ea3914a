//! The scenario's store directories: one fresh directory per execution, removed when it ends, and any left over by an interrupted run.

use super::*;

/// Where scenarios' store directories are made: `$TMPDIR` when it is set,
/// else `/dev/shm` when it is a directory one can write in, else the
/// system's temporary directory.
///
/// Why memory first: a store directory lives for one scenario, and on a
/// disk file system creating and removing it, with the store's files,
/// waits on the file system's journal: 3.4 ms a scenario on a busy disk
/// against 17 us in memory (`cargo bench -p delegation-host --bench
/// store_open`, `directory_only`). What a host commits there still
/// survives its process being killed, which is all that restart and crash
/// scenarios ask of it.
pub(super) fn store_parent() -> &'static Path {
    static PARENT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PARENT.get_or_init(|| {
        let memory = Path::new("/dev/shm");
        let writable = || {
            tempfile::Builder::new()
                .prefix("delegation-store-check-")
                .tempdir_in(memory)
                .is_ok()
        };
        if std::env::var_os("TMPDIR").is_none() && memory.is_dir() && writable() {
            memory.to_path_buf()
        } else {
            std::env::temp_dir()
        }
    })
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_are_made_where_one_can_write_in_memory_first() {
        let parent = store_parent();
        let dir = tempfile::Builder::new()
            .prefix("delegation-store-")
            .tempdir_in(parent)
            .expect("the store parent takes a directory");
        assert!(dir.path().starts_with(parent));
        let memory = Path::new("/dev/shm");
        if std::env::var_os("TMPDIR").is_none() && memory.is_dir() {
            assert_eq!(parent, memory, "memory is preferred where there is some");
        } else {
            assert_eq!(parent, std::env::temp_dir());
        }
    }
}
