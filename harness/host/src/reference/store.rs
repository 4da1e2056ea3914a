//! The reference host's authoritative store: SQLite in the store directory the harness hands it.
//!
//! One SQL table of rows, each the kind of durable entity it is (the model's
//! [`Table`]), its key and its JSON: one table rather than one per kind, so
//! opening a fresh store (every scenario, every restart) creates and parses
//! one schema entry, not nine. A batch of writes is one transaction: it
//! commits whole before the state machine lets the change take effect, or
//! not at all.

use std::path::{Path, PathBuf};

use delegation_model::state::{Journal, Table, Write};
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
    #[error("store read failed: {0}")]
    Read(#[from] rusqlite::Error),
}

pub struct SqliteJournal {
    conn: Connection,
    /// Whether a receipt's tombstone is written only over an unconsumed row
    /// (the correct host); `false` only for defect receipt-consume-check-then-act.
    conditional_consume: bool,
}

impl SqliteJournal {
    pub fn open(dir: &Path) -> Result<SqliteJournal, StoreError> {
        let path = dir.join(STORE_FILE);
        let open_err = |source| StoreError::Open {
            path: path.clone(),
            source,
        };
        let conn = Connection::open(&path).map_err(open_err)?;
        // WAL without fsync: a committed batch is written to the WAL (handed
        // to the kernel) before `commit` returns, so it survives the process
        // being killed right after, which is what restart and crash
        // scenarios test. Only an OS crash could lose the last batches, and
        // the store lives as long as one scenario. An fsync per commit, per
        // table created and per checkpoint on close cost every scenario
        // milliseconds of the run's time. `synchronous` is set first so
        // that switching the journal mode does not sync either.
        conn.pragma_update(None, "synchronous", "OFF")
            .map_err(open_err)?;
        // Only this connection ever opens the store (a restart closes the
        // old one first), so it keeps its lock: no lock calls per
        // transaction, and the WAL's index lives in this process's memory
        // rather than in a shared `-shm` file created, mapped and removed
        // per store. Set before WAL mode, which reads it. Creating, using and
        // removing a store in memory: 0.47 ms against 0.30 ms with it
        // (`cargo bench -p delegation-host --bench store_open`).
        conn.pragma_update(None, "locking_mode", "EXCLUSIVE")
            .map_err(open_err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open_err)?;
        conn.execute(
            "CREATE TABLE IF NOT EXISTS rows (kind TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (kind, key))",
            [],
        )
        .map_err(open_err)?;
        Ok(SqliteJournal {
            conn,
            conditional_consume: true,
        })
    }

    /// Writes a receipt's tombstone whatever the row says: what a host with
    /// a check-then-act consume does (defect receipt-consume-check-then-act).
    pub fn write_tombstones_unconditionally(&mut self) {
        self.conditional_consume = false;
    }

    /// Every committed row, for a restart: kind by kind in [`Table::ALL`]'s order, each by key.
    pub fn load(&self) -> Result<Vec<(Table, String, Value)>, StoreError> {
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

impl Journal for SqliteJournal {
    fn commit(&mut self, writes: Vec<Write>) -> Result<(), String> {
        let tx = self.conn.transaction().map_err(|e| e.to_string())?;
        for w in writes {
            let value = w.value.to_json();
            if self.conditional_consume
                && w.table == Table::Receipts
                && value.get("state").and_then(Value::as_str) == Some("consumed")
            {
                // The consume is one conditional update inside the batch's
                // transaction: a receipt already tombstoned (or never
                // issued) matches no row, and the whole batch (the child,
                // its record) rolls back.
                let changed = tx
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
            tx.prepare_cached(
                "INSERT INTO rows (kind, key, value) VALUES (?1, ?2, ?3) ON CONFLICT(kind, key) DO UPDATE SET value = excluded.value",
            )
            .and_then(|mut upsert| {
                upsert.execute(params![w.table.name(), w.key, value.to_string()])
            })
            .map_err(|e| e.to_string())?;
        }
        tx.commit().map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use delegation_model::state::RowValue;
    use serde_json::json;

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
