//! The reference host's store as a scenario uses it: a fresh directory, the store opened in it, a few committed batches, closed and removed (and, for a restart, reopened and loaded).
//!
//! Every scenario and every fuzz case opens a fresh store, so its set-up
//! cost is paid hundreds of times a catalogue run.
//! `TMPDIR=/dev/shm cargo bench -p delegation-host --bench store_open`
//! measures the stores as a conformance run makes them (in memory).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use delegation_host::reference::store::SqliteJournal;
use delegation_model::state::{Journal, RowValue, Table, Write};
use serde_json::json;

/// About what a short scenario commits: a handful of one-row batches.
const BATCHES: usize = 6;

fn batch(n: usize) -> Vec<Write> {
    vec![Write {
        table: Table::Instances,
        key: format!("inst-{n}"),
        value: RowValue::new(json!({"id": format!("inst-{n}"), "state": "running", "n": n})),
    }]
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("store");
    group.bench_function("fresh_scenario", |b| {
        b.iter(|| {
            let dir = tempfile::tempdir().unwrap();
            let mut journal = SqliteJournal::open(dir.path()).unwrap();
            for n in 0..BATCHES {
                journal.commit(batch(n)).unwrap();
            }
            drop(journal);
            dir.close().unwrap();
        })
    });
    group.bench_function("directory_only", |b| {
        b.iter(|| tempfile::tempdir().unwrap().close().unwrap())
    });
    group.bench_function("open_and_close", |b| {
        b.iter(|| {
            let dir = tempfile::tempdir().unwrap();
            drop(SqliteJournal::open(dir.path()).unwrap());
            dir.close().unwrap();
        })
    });
    group.bench_function("restart_and_load", |b| {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut journal = SqliteJournal::open(dir.path()).unwrap();
            for n in 0..BATCHES {
                journal.commit(batch(n)).unwrap();
            }
        }
        b.iter(|| {
            let journal = SqliteJournal::open(dir.path()).unwrap();
            black_box(journal.load().unwrap());
        })
    });
    group.bench_function("one_commit", |b| {
        // What each operation of a fuzz case pays: one batch into an open store.
        let dir = tempfile::tempdir().unwrap();
        let mut journal = SqliteJournal::open(dir.path()).unwrap();
        let mut n = 0;
        b.iter(|| {
            n += 1;
            journal.commit(batch(n % 64)).unwrap();
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
