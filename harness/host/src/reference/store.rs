//! The reference host's authoritative store: SQLite in the store directory the harness hands it.
//!
//! One table per kind of durable entity, each row a key and its JSON. A batch
//! of writes is one transaction: it commits whole before the state machine
//! lets the change take effect, or not at all.

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
    #[error("store read failed: {0}")]
    Read(#[from] rusqlite::Error),
}

pub struct SqliteJournal {
    conn: Connection,
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
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open_err)?;
        // Every table in one transaction: one commit, not one per table.
        let mut schema = String::from("BEGIN;");
        for table in Table::ALL {
            schema.push_str(&format!(
                "CREATE TABLE IF NOT EXISTS {} (key TEXT PRIMARY KEY, value TEXT NOT NULL);",
                table.name()
            ));
        }
        schema.push_str("COMMIT;");
        conn.execute_batch(&schema).map_err(open_err)?;
        Ok(SqliteJournal { conn })
    }

    /// Every committed row, for a restart.
    pub fn load(&self) -> Result<Vec<(Table, String, Value)>, StoreError> {
        let mut rows = Vec::new();
        for table in Table::ALL {
            let mut stmt = self.conn.prepare(&format!(
                "SELECT key, value FROM {} ORDER BY key",
                table.name()
            ))?;
            let found =
                stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
            for row in found {
                let (key, text) = row?;
                let value = serde_json::from_str(&text).map_err(|source| StoreError::Corrupt {
                    table: table.name(),
                    key: key.clone(),
                    source,
                })?;
                rows.push((table, key, value));
            }
        }
        Ok(rows)
    }
}

impl Journal for SqliteJournal {
    fn commit(&mut self, writes: Vec<Write>) -> Result<(), String> {
        let tx = self.conn.transaction().map_err(|e| e.to_string())?;
        for w in writes {
            // Cached per table: parsing the statement anew cost more than running it.
            tx.prepare_cached(&format!(
                "INSERT INTO {} (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                w.table.name()
            ))
            .and_then(|mut upsert| upsert.execute(params![w.key, w.value.to_json().to_string()]))
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
}
