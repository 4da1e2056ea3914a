//! The reference host's authoritative store: SQLite in the store directory the harness hands it.
//!
//! One SQL table of rows, each the kind of durable entity it is (the model's
//! [`Table`]), its key and its JSON: one table rather than one per kind, so
//! opening a fresh store (every scenario, every restart) creates and parses
//! one schema entry, not nine. A batch of writes is one transaction: it
//! commits whole before the state machine lets the change take effect, or
//! not at all.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use delegation_model::state::{Journal, Table, Write};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, params};
use serde_json::Value;

/// The file inside the store directory.
pub const STORE_FILE: &str = "reference-host.sqlite3";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the store at {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("store row {table}/{key} is not JSON: {source}")]
    Corrupt {
        table: &'static str,
        key: String,
        source: serde_json::Error,
    },
    #[error(
        "store row {kind}/{key} is of no kind this host knows; the kinds are the model's tables"
    )]
    UnknownKind { kind: String, key: String },
    #[error("cannot write the new store {path} from the empty store's bytes: {source}")]
    Template {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("store read failed: {0}")]
    Read(#[from] rusqlite::Error),
}

pub struct SqliteJournal {
    conn: Connection,
    /// Whether a receipt's tombstone is written only over an unconsumed row
    /// (the correct host); `false` only for defect receipt-consume-check-then-act.
    conditional_consume: bool,
    /// A copy of the empty store nothing was committed to yet: a load has
    /// nothing to read (and would prepare a statement to find that out).
    known_empty: bool,
}

/// The connection's settings, in one batch; the store's one table is in [`FILE_FORMAT`].
///
/// `locking_mode=EXCLUSIVE` first: only this connection ever opens the
/// store (a restart closes the old one first), so it keeps its lock: no
/// lock calls per transaction, and the WAL's index lives in this process's
/// memory rather than in a shared `-shm` file created, sized, mapped and
/// removed per store. It must precede the first read of a store already in
/// WAL mode (a restart's, or a fresh one made from [`EMPTY_STORE`]), and
/// `synchronous` is such a read: it loads the schema.
///
/// WAL without fsync: a committed batch is written to the WAL (handed to
/// the kernel) before `commit` returns, so it survives the process being
/// killed right after, which is what restart and crash scenarios test. Only
/// an OS crash could lose the last batches, and the store lives as long as
/// one scenario. `synchronous` comes before the journal mode so that
/// switching it does not sync either.
const CONNECTION_SETTINGS: &str = "PRAGMA locking_mode = EXCLUSIVE; PRAGMA synchronous = OFF;";

/// What a store's file keeps once made: WAL mode (written in its header) and
/// the table. A copy of [`EMPTY_STORE`] has both already, so only a store
/// made from nothing or reopened runs these; each statement is parsed anew
/// on every connection.
///
/// The table's rows are keyed by (kind, key) and stored in that key's order
/// (`WITHOUT ROWID`), so a write touches one b-tree, not a table and its
/// primary-key index, and a commit appends one page to the WAL, not two.
const FILE_FORMAT: &str = "PRAGMA journal_mode = WAL; \
    CREATE TABLE IF NOT EXISTS rows (kind TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (kind, key)) WITHOUT ROWID;";

/// The bytes of an empty store (WAL mode in its header, the schema made,
/// checkpointed), taken from the first store this process makes and
/// written as the file of every later fresh one. Making a store from
/// nothing switches an empty file to WAL through a rollback journal
/// (created, written, removed) and writes the schema's pages through the
/// WAL; a copy of those 8 KB is one file written.
static EMPTY_STORE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();

impl SqliteJournal {
    pub fn open(dir: &Path) -> Result<SqliteJournal, StoreError> {
        let path = dir.join(STORE_FILE);
        let open_err = |source| StoreError::Open {
            path: path.clone(),
            source,
        };
        let fresh_from_template = match EMPTY_STORE.get() {
            Some(bytes) => write_new_file(&path, bytes).map_err(|e| StoreError::Template {
                path: path.clone(),
                source: e,
            })?,
            None => false,
        };
        let conn = Connection::open(&path).map_err(open_err)?;
        // The WAL stays when the store closes: what it holds is as durable
        // there as in the database file, a reopening reads it, and the
        // checkpoint on close (WAL copied into the file, file truncated,
        // WAL removed) was most of the cost of closing a store.
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
            .map_err(open_err)?;
        conn.execute_batch(CONNECTION_SETTINGS).map_err(open_err)?;
        if !fresh_from_template {
            conn.execute_batch(FILE_FORMAT).map_err(open_err)?;
        }
        if EMPTY_STORE.get().is_none() && !fresh_from_template {
            remember_empty_store(&conn, &path);
        }
        Ok(SqliteJournal {
            conn,
            conditional_consume: true,
            known_empty: fresh_from_template,
        })
    }

    /// Writes a receipt's tombstone whatever the row says: what a host with
    /// a check-then-act consume does (defect receipt-consume-check-then-act).
    pub fn write_tombstones_unconditionally(&mut self) {
        self.conditional_consume = false;
    }

    /// Every committed row, for a restart: kind by kind in [`Table::ALL`]'s order, each by key.
    pub fn load(&self) -> Result<Vec<(Table, String, Value)>, StoreError> {
        if self.known_empty {
            return Ok(Vec::new());
        }
        let mut by_kind: Vec<Vec<(Table, String, Value)>> =
            Table::ALL.iter().map(|_| Vec::new()).collect();
        let mut stmt = self
            .conn
            .prepare("SELECT kind, key, value FROM rows ORDER BY kind, key")?;
        let found = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })?;
        for row in found {
            let (kind, key, text) = row?;
            let Some(index) = Table::ALL.iter().position(|t| t.name() == kind) else {
                return Err(StoreError::UnknownKind { kind, key });
            };
            let table = Table::ALL[index];
            let value = serde_json::from_str(&text).map_err(|source| StoreError::Corrupt {
                table: table.name(),
                key: key.clone(),
                source,
            })?;
            by_kind[index].push((table, key, value));
        }
        Ok(by_kind.into_iter().flatten().collect())
    }
}

/// Writes `bytes` as a new file at `path`; `false` when a file is already
/// there (a restart: the store is reopened as it is).
fn write_new_file(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    use std::io::Write as _;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(mut file) => file.write_all(bytes).map(|()| true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// Keeps the bytes of a store that holds no row yet as [`EMPTY_STORE`],
/// from the second such store a process makes: a process that makes one
/// store only (the stdio host) would pay for the copy and never use it.
/// Best effort: if anything fails, later stores are made from nothing.
fn remember_empty_store(conn: &Connection, path: &Path) {
    static EMPTY_STORES_MADE: AtomicUsize = AtomicUsize::new(0);
    let empty = conn
        .query_row("SELECT NOT EXISTS (SELECT 1 FROM rows)", [], |r| {
            r.get::<_, bool>(0)
        })
        .unwrap_or(false);
    if !empty || EMPTY_STORES_MADE.fetch_add(1, Ordering::Relaxed) == 0 {
        return;
    }
    // Everything into the database file, so that its bytes alone are the store.
    let checkpointed = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            r.get::<_, i64>(0)
        })
        .is_ok_and(|busy| busy == 0);
    if let (true, Ok(bytes)) = (checkpointed, std::fs::read(path)) {
        let _ = EMPTY_STORE.set(bytes);
    }
}

impl Journal for SqliteJournal {
    /// One transaction: every write or none. `BEGIN`, `COMMIT` and the
    /// writes are statements prepared once per connection (rusqlite's
    /// `Transaction` prepares its `BEGIN` and `COMMIT` anew each time).
    fn commit(&mut self, writes: Vec<Write>) -> Result<(), String> {
        self.known_empty = false;
        self.run_cached("BEGIN").map_err(|e| e.to_string())?;
        let written = self.write_all(writes).and_then(|()| {
            self.run_cached("COMMIT")
                .map(drop)
                .map_err(|e| e.to_string())
        });
        if written.is_err() {
            // A failed COMMIT leaves the transaction open too; what it
            // wrote is dropped either way.
            let _ = self.run_cached("ROLLBACK");
        }
        written
    }
}

impl SqliteJournal {
    fn run_cached(&self, sql: &str) -> rusqlite::Result<usize> {
        self.conn.prepare_cached(sql)?.execute([])
    }

    /// The batch's writes, inside the transaction [`Journal::commit`] opened.
    fn write_all(&self, writes: Vec<Write>) -> Result<(), String> {
        for w in writes {
            if self.conditional_consume && w.table == Table::Receipts {
                let value = w.value.to_json();
                if value.get("state").and_then(Value::as_str) == Some("consumed") {
                    // The consume is one conditional update inside the batch's
                    // transaction: a receipt already tombstoned (or never
                    // issued) matches no row, and the whole batch (the child,
                    // its record) rolls back.
                    let changed = self
                        .conn
                        .prepare_cached(
                            "UPDATE rows SET value = ?3 WHERE kind = ?1 AND key = ?2 AND json_extract(value, '$.state') = 'issued'",
                        )
                        .and_then(|mut update| {
                            update.execute(params![w.table.name(), w.key, value.to_string()])
                        })
                        .map_err(|e| e.to_string())?;
                    if changed != 1 {
                        return Err(format!(
                            "receipt `{}` is not issued in the store: its consume matched no row",
                            w.key
                        ));
                    }
                    continue;
                }
            }
            self.conn
                .prepare_cached(
                    "INSERT INTO rows (kind, key, value) VALUES (?1, ?2, ?3) ON CONFLICT(kind, key) DO UPDATE SET value = excluded.value",
                )
                .and_then(|mut upsert| {
                    let text = w.value.to_json_text();
                    // Every row a debug build writes (each test's, each
                    // scenario's) is checked to read back as its value.
                    debug_assert_eq!(
                        serde_json::from_str::<Value>(&text).ok(),
                        Some(w.value.to_json()),
                        "row {}/{} as text",
                        w.table.name(),
                        w.key
                    );
                    upsert.execute(params![w.table.name(), w.key, text])
                })
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use delegation_model::state::RowValue;
    use serde_json::json;

    #[test]
    fn a_store_made_from_the_empty_stores_bytes_works_as_one_made_from_nothing() {
        // The second empty store a process makes is remembered; the third is its copy.
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        for dir in &dirs[..2] {
            drop(SqliteJournal::open(dir.path()).unwrap());
        }
        let template = EMPTY_STORE
            .get()
            .expect("the second empty store is remembered");
        let dir = dirs[2].path();
        {
            let mut j = SqliteJournal::open(dir).unwrap();
            let mode: String = j
                .conn
                .query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .unwrap();
            assert_eq!(mode, "wal");
            assert_eq!(j.load().unwrap(), vec![]);
            j.commit(vec![Write {
                table: Table::Instances,
                key: "inst-1".into(),
                value: RowValue::new(json!({"a": 1})),
            }])
            .unwrap();
            assert_eq!(
                j.load().unwrap(),
                vec![(Table::Instances, "inst-1".to_string(), json!({"a": 1}))],
                "what this connection committed is loaded too"
            );
        }
        // The commit went to the WAL, which closing left in place, and the
        // WAL's index was in memory: no shared-memory file was made.
        assert!(dir.join(format!("{STORE_FILE}-wal")).exists());
        assert!(!dir.join(format!("{STORE_FILE}-shm")).exists());
        let file = std::fs::read(dir.join(STORE_FILE)).unwrap();
        assert_eq!(&file, template, "the fresh store's file is the copy");
        let j = SqliteJournal::open(dir).unwrap();
        assert_eq!(
            j.load().unwrap(),
            vec![(Table::Instances, "inst-1".to_string(), json!({"a": 1}))]
        );
    }

    #[test]
    fn committed_rows_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut j = SqliteJournal::open(dir.path()).unwrap();
            j.commit(vec![
                Write {
                    table: Table::Instances,
                    key: "inst-1".into(),
                    value: RowValue::new(json!({"a": 1})),
                },
                Write {
                    table: Table::Instances,
                    key: "inst-1".into(),
                    value: RowValue::new(json!({"a": 2})),
                },
            ])
            .unwrap();
        }
        let j = SqliteJournal::open(dir.path()).unwrap();
        assert_eq!(
            j.load().unwrap(),
            vec![(Table::Instances, "inst-1".to_string(), json!({"a": 2}))]
        );
        assert!(
            !dir.path().join(format!("{STORE_FILE}-shm")).exists(),
            "a reopened store keeps its WAL index in memory too"
        );
    }

    #[test]
    fn a_receipt_is_tombstoned_once_and_a_second_consume_rolls_its_batch_back() {
        let dir = tempfile::tempdir().unwrap();
        let receipt = |state: &str| Write {
            table: Table::Receipts,
            key: "rcpt-1".into(),
            value: RowValue::new(json!({"receipt": {"id": "rcpt-1"}, "state": state})),
        };
        let child = |key: &str| Write {
            table: Table::Instances,
            key: key.into(),
            value: RowValue::new(json!({"id": key})),
        };
        let mut j = SqliteJournal::open(dir.path()).unwrap();
        j.commit(vec![receipt("issued")]).unwrap();
        // Positive control: the first consume commits the child and the tombstone.
        j.commit(vec![child("inst-2"), receipt("consumed")])
            .unwrap();
        let second = j.commit(vec![child("inst-3"), receipt("consumed")]);
        assert!(second.unwrap_err().contains("rcpt-1"));
        let keys: Vec<String> = j.load().unwrap().into_iter().map(|(_, k, _)| k).collect();
        assert_eq!(keys, ["inst-2", "rcpt-1"], "the losing batch left nothing");
        // The check-then-act host writes its tombstone whatever the row says.
        j.write_tombstones_unconditionally();
        j.commit(vec![child("inst-3"), receipt("consumed")])
            .unwrap();
        assert_eq!(j.load().unwrap().len(), 3);
    }

    #[test]
    fn rows_load_kind_by_kind_in_the_models_order_and_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let row = |table, key: &str| Write {
            table,
            key: key.into(),
            value: RowValue::new(json!({ "k": key })),
        };
        {
            let mut j = SqliteJournal::open(dir.path()).unwrap();
            j.commit(vec![
                row(Table::Records, "b"),
                row(Table::Instances, "inst-2"),
                row(Table::Settings, "z"),
                row(Table::Instances, "inst-1"),
                row(Table::Records, "a"),
            ])
            .unwrap();
        }
        let loaded: Vec<(Table, String)> = SqliteJournal::open(dir.path())
            .unwrap()
            .load()
            .unwrap()
            .into_iter()
            .map(|(t, k, _)| (t, k))
            .collect();
        assert_eq!(
            loaded,
            vec![
                (Table::Settings, "z".to_string()),
                (Table::Instances, "inst-1".to_string()),
                (Table::Instances, "inst-2".to_string()),
                (Table::Records, "a".to_string()),
                (Table::Records, "b".to_string()),
            ]
        );
    }
}
