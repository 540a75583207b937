//! Schema versions. `PRAGMA user_version` holds the version; each migration moves the schema
//! one step forward inside a transaction. Never edit a released migration: add the next one.

use crate::error::StoreError;
use rusqlite::Connection;
use std::path::Path;

const MIGRATIONS: &[&str] = &[
    // 1: the first schema.
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
     CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL);
     CREATE TABLE requests (id TEXT PRIMARY KEY, role TEXT NOT NULL, body TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'answered', 'failed', 'cancelled')),
        created_at TEXT NOT NULL, updated_at TEXT);
     CREATE TABLE llm_exchanges (id INTEGER PRIMARY KEY AUTOINCREMENT, request_id TEXT, role TEXT NOT NULL,
        provider TEXT NOT NULL, model TEXT NOT NULL, key TEXT NOT NULL, prompt TEXT NOT NULL, answer TEXT,
        finish_reason TEXT, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
        cached_input_tokens INTEGER NOT NULL, reasoning_tokens INTEGER NOT NULL, cost_dollars REAL,
        latency_s REAL NOT NULL, attempts INTEGER NOT NULL, from_cache INTEGER NOT NULL, error TEXT, at TEXT NOT NULL);
     CREATE INDEX llm_exchanges_key ON llm_exchanges(key);
     CREATE TABLE candidates (id INTEGER PRIMARY KEY AUTOINCREMENT, parent_id INTEGER REFERENCES candidates(id),
        node_id TEXT, round INTEGER NOT NULL, cycle INTEGER NOT NULL, origin TEXT NOT NULL, language TEXT NOT NULL,
        sources TEXT NOT NULL, created_at TEXT NOT NULL);
     CREATE TABLE evaluations (id INTEGER PRIMARY KEY AUTOINCREMENT, candidate_id INTEGER NOT NULL REFERENCES candidates(id),
        purpose TEXT NOT NULL, status TEXT NOT NULL, speedup REAL, record TEXT NOT NULL, at TEXT NOT NULL);
     CREATE INDEX evaluations_candidate ON evaluations(candidate_id);
     CREATE TABLE world_models (version INTEGER PRIMARY KEY AUTOINCREMENT, round INTEGER NOT NULL, cause TEXT NOT NULL,
        body TEXT NOT NULL, at TEXT NOT NULL);
     CREATE TRIGGER world_models_never_updated BEFORE UPDATE ON world_models
        BEGIN SELECT RAISE(ABORT, 'world model versions are never overwritten'); END;
     CREATE TRIGGER world_models_never_deleted BEFORE DELETE ON world_models
        BEGIN SELECT RAISE(ABORT, 'world model versions are never deleted'); END;
     CREATE TRIGGER events_append_only BEFORE UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;",
];

/// The schema version this build writes.
pub const CURRENT: i64 = MIGRATIONS.len() as i64;

pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let err = |e| StoreError::from_sqlite(path, e);
    let found: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(err)?;
    if found > CURRENT {
        return Err(StoreError::NewerSchema {
            path: path.to_path_buf(),
            found,
            supported: CURRENT,
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let tx = conn.transaction().map_err(err)?;
        tx.execute_batch(sql).map_err(err)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64).map_err(err)?;
        tx.commit().map_err(err)?;
    }
    Ok(())
}
