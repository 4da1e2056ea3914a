//! The committed seed corpora of the cargo-fuzz targets, and reproducible noise for tests and benchmarks.

/// The committed seed corpus of a cargo-fuzz target: `fuzz/corpus/<target>/`.
pub fn corpus_dir(target: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

/// For the seed tests of every fuzzing library: the committed seed
/// `fuzz/corpus/<target>/<name>` as it is on disk, (re)written from `bytes`
/// first when `DELEGATION_WRITE_SEEDS` is set, so the readable sources in
/// the tests stay the one definition of the seeds. Panics, naming the file
/// and the variable, when the seed is missing.
pub fn committed_seed(target: &str, name: &str, bytes: &[u8]) -> Vec<u8> {
    let dir = corpus_dir(target);
    let path = dir.join(name);
    if std::env::var_os("DELEGATION_WRITE_SEEDS").is_some() {
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&path, bytes))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (DELEGATION_WRITE_SEEDS=1 writes it)",
            path.display()
        )
    })
}

/// Deterministic pseudo-random bytes (xorshift): varied inputs for tests
/// and benchmarks, reproducible without a dependency.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}
