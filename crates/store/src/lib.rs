//! The run store: one SQLite database (`run.sqlite`, WAL) per run directory holding everything a
//! run did — the event log the engine replays, requests (pending ones are what an external agent
//! answers), every LLM exchange with its usage and cost, candidates with their lineage,
//! evaluations with raw samples and provenance, and every version of the world model. Rows are
//! only ever added (world models are never overwritten), so a run can always be audited,
//! resumed and replayed.
//!
//! Bodies are JSON chosen by the caller; this crate knows tables, not kernels, and must not
//! interpret the bodies it keeps. The one exception is the run's metadata, which is the run
//! directory's contract with every reader (the CLI, the report, older and newer builds): its
//! keys ([`MetaKey`]) and the driver's stop record ([`StopRecord`], [`StopReason`]) are named
//! here once, so that no reader repeats their spellings.

#![warn(missing_docs)]

mod error;
mod meta;
mod migrations;
mod rows;

pub use error::StoreError;
pub use meta::{MetaKey, StopReason, StopRecord};
pub use rows::{CandidateRow, EvaluationRow, EventRow, ExchangeRow, RequestRow, RequestState, WorldModelRow};

use rusqlite::{params, Connection, OptionalExtension};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// File name of the database inside a run directory.
pub const DB_FILE: &str = "run.sqlite";

/// An open run store: one connection to a run directory's `run.sqlite`. Each method is one
/// statement or one transaction.
pub struct RunStore {
    conn: Connection,
    path: PathBuf,
}

impl std::fmt::Debug for RunStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunStore").field("path", &self.path).finish()
    }
}

fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    format!("{secs:.3}")
}

impl RunStore {
    /// Creates a new run directory's database; fails if one is already there.
    pub fn create(dir: &Path) -> Result<RunStore, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Io {
            path: dir.to_path_buf(),
            source: e,
        })?;
        let path = dir.join(DB_FILE);
        if path.exists() {
            return Err(StoreError::AlreadyExists { path });
        }
        let mut store = RunStore::connect(&path)?;
        migrations::migrate(&mut store.conn, &path)?;
        Ok(store)
    }

    /// Like [`RunStore::create`], but the database is written under a temporary name
    /// (`run.sqlite.new`) until [`RunStore::publish`] gives it its real name. A process killed in
    /// between leaves no `run.sqlite` behind, so the directory never holds a run that lacks its
    /// first records (a run that `resume` could not continue). A leftover temporary file from
    /// such a kill is replaced.
    pub fn create_staged(dir: &Path) -> Result<RunStore, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Io {
            path: dir.to_path_buf(),
            source: e,
        })?;
        let path = dir.join(DB_FILE);
        if path.exists() {
            return Err(StoreError::AlreadyExists { path });
        }
        let staged = dir.join(format!("{DB_FILE}.new"));
        for stale in [
            staged.clone(),
            dir.join(format!("{DB_FILE}.new-wal")),
            dir.join(format!("{DB_FILE}.new-shm")),
        ] {
            match std::fs::remove_file(&stale) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::Io { path: stale, source: e }),
            }
        }
        let mut store = RunStore::connect(&staged)?;
        migrations::migrate(&mut store.conn, &staged)?;
        Ok(store)
    }

    /// Gives a store made by [`RunStore::create_staged`] its real name and reopens it: the
    /// write-ahead log is folded into the database and closed first, so the rename moves
    /// everything written so far in one step.
    pub fn publish(self) -> Result<RunStore, StoreError> {
        let staged = self.path.clone();
        let dir = staged.parent().map(Path::to_path_buf).unwrap_or_default();
        let path = dir.join(DB_FILE);
        if staged == path {
            return Ok(self);
        }
        // Back to a rollback journal: the WAL is checkpointed and removed, leaving one file.
        self.conn
            .pragma_update(None, "journal_mode", "DELETE")
            .map_err(|e| StoreError::from_sqlite(&staged, e))?;
        self.conn
            .close()
            .map_err(|(_, e)| StoreError::from_sqlite(&staged, e))?;
        if path.exists() {
            return Err(StoreError::AlreadyExists { path });
        }
        std::fs::rename(&staged, &path).map_err(|e| StoreError::Io {
            path: path.clone(),
            source: e,
        })?;
        RunStore::open(&dir)
    }

    /// Opens an existing run directory, upgrading an older schema in place.
    pub fn open(dir: &Path) -> Result<RunStore, StoreError> {
        let path = dir.join(DB_FILE);
        if !path.is_file() {
            return Err(StoreError::NotARun {
                path: dir.to_path_buf(),
            });
        }
        let mut store = RunStore::connect(&path)?;
        migrations::migrate(&mut store.conn, &path)?;
        Ok(store)
    }

    fn connect(path: &Path) -> Result<RunStore, StoreError> {
        let conn = Connection::open(path).map_err(|e| StoreError::from_sqlite(path, e))?;
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(|e| StoreError::from_sqlite(path, e))?;
        // WAL lets a dashboard read while the run writes; FULL sync makes every appended event
        // durable before the engine acts on it.
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| StoreError::from_sqlite(path, e))?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(|e| StoreError::from_sqlite(path, e))?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(|e| StoreError::from_sqlite(path, e))?;
        Ok(RunStore {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// How long a write waits for another process's lock before failing with `Locked`.
    pub fn set_busy_timeout(&self, timeout: Duration) -> Result<(), StoreError> {
        self.conn.busy_timeout(timeout).map_err(|e| self.err(e))
    }

    /// Caps the database's size in pages, as a full disk would (fault-injection tests).
    #[doc(hidden)]
    pub fn limit_pages_for_tests(&self, pages: i64) -> Result<(), StoreError> {
        self.conn
            .pragma_update(None, "max_page_count", pages)
            .map_err(|e| self.err(e))
    }

    /// The database file, `RUN_DIR/run.sqlite`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's schema version (SQLite's `user_version`), as the migrations left it.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        self.conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(|e| self.err(e))
    }

    fn err(&self, e: rusqlite::Error) -> StoreError {
        StoreError::from_sqlite(&self.path, e)
    }

    // --- run metadata -------------------------------------------------------------------

    /// Sets run metadata `key` to `value`, replacing an earlier value.
    pub fn set_meta(&self, key: MetaKey, value: &serde_json::Value) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO meta(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                params![key.as_str(), value.to_string()],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Run metadata `key`; `None` when it was never set.
    pub fn meta(&self, key: MetaKey) -> Result<Option<serde_json::Value>, StoreError> {
        let key = key.as_str();
        let text: Option<String> = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))?;
        text.map(|t| serde_json::from_str(&t).map_err(|e| self.corrupt("meta", key, e)))
            .transpose()
    }

    /// Run metadata `key` when it holds a JSON string; `None` when it was never set or holds
    /// anything else (readers of the string-valued keys, such as [`MetaKey::BrainNote`] or
    /// [`MetaKey::Executor`], fall back to their default rather than fail on them).
    pub fn meta_str(&self, key: MetaKey) -> Result<Option<String>, StoreError> {
        Ok(self.meta(key)?.and_then(|v| v.as_str().map(str::to_string)))
    }

    /// Why driving the run last stopped; `None` when no drive recorded a stop, while a drive is
    /// under way (the record is cleared then), or when the row holds no readable stop record
    /// (a hand-edited one: the event log, not this record, is the run's truth). A reason this
    /// build does not know reads as [`StopReason::Other`].
    pub fn stop_record(&self) -> Result<Option<StopRecord>, StoreError> {
        Ok(self
            .meta(MetaKey::Stopped)?
            .and_then(|v| serde_json::from_value::<StopRecord>(v).ok()))
    }

    /// Records why driving the run stopped ([`MetaKey::Stopped`]), replacing an earlier record.
    pub fn set_stop_record(&self, record: &StopRecord) -> Result<(), StoreError> {
        self.set_meta(MetaKey::Stopped, &record.to_json())
    }

    /// Clears the stop record (stores `null`), as a drive does when it starts: from then until
    /// it records why it stopped, the run is live.
    pub fn clear_stop_record(&self) -> Result<(), StoreError> {
        self.set_meta(MetaKey::Stopped, &serde_json::Value::Null)
    }

    fn corrupt(&self, table: &str, row: &str, e: serde_json::Error) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            message: format!("{table} row {row}: {e}"),
        }
    }

    // --- event log ----------------------------------------------------------------------

    /// Appends an event; returns its sequence number (1, 2, ...). Durable when this returns.
    pub fn append_event(&self, kind: &str, body: &serde_json::Value) -> Result<i64, StoreError> {
        self.conn
            .execute(
                "INSERT INTO events(at, kind, body) VALUES (?1, ?2, ?3)",
                params![now(), kind, body.to_string()],
            )
            .map_err(|e| self.err(e))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Every event, in order.
    pub fn events(&self) -> Result<Vec<EventRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT seq, at, kind, body FROM events ORDER BY seq")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, at, kind, body) = row.map_err(|e| self.err(e))?;
            let body = serde_json::from_str(&body).map_err(|e| self.corrupt("events", &seq.to_string(), e))?;
            out.push(EventRow { seq, at, kind, body });
        }
        Ok(out)
    }

    // --- requests -----------------------------------------------------------------------

    /// Records a request the engine emitted (state `pending`); recording it again is a no-op.
    pub fn put_request(&self, id: &str, role: &str, body: &serde_json::Value) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT OR IGNORE INTO requests(id, role, body, state, created_at) VALUES (?1, ?2, ?3, 'pending', ?4)",
                params![id, role, body.to_string(), now()],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Moves request `id` to `state`, stamping `updated_at`; [`StoreError::NoSuchRow`] if there is none.
    pub fn set_request_state(&self, id: &str, state: RequestState) -> Result<(), StoreError> {
        let n = self
            .conn
            .execute(
                "UPDATE requests SET state = ?2, updated_at = ?3 WHERE id = ?1",
                params![id, state.as_str(), now()],
            )
            .map_err(|e| self.err(e))?;
        if n == 0 {
            return Err(StoreError::NoSuchRow {
                path: self.path.clone(),
                table: "requests",
                id: id.to_string(),
            });
        }
        Ok(())
    }

    /// The recorded requests in the order they were recorded, only those in `state` when given.
    pub fn requests(&self, state: Option<RequestState>) -> Result<Vec<RequestRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, role, body, state, created_at FROM requests WHERE (?1 IS NULL OR state = ?1) ORDER BY rowid",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![state.map(|s| s.as_str())], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (id, role, body, state, created_at) = row.map_err(|e| self.err(e))?;
            let body = serde_json::from_str(&body).map_err(|e| self.corrupt("requests", &id, e))?;
            let state = RequestState::parse(&state).ok_or_else(|| StoreError::Corrupt {
                path: self.path.clone(),
                message: format!("requests row {id}: unknown state '{state}'"),
            })?;
            out.push(RequestRow {
                id,
                role,
                body,
                state,
                created_at,
            });
        }
        Ok(out)
    }

    // --- LLM exchanges ------------------------------------------------------------------

    /// Records one LLM call and returns its row id.
    pub fn record_exchange(&self, x: &ExchangeRow) -> Result<i64, StoreError> {
        self.conn
            .execute(
                "INSERT INTO llm_exchanges(request_id, role, provider, model, key, prompt, answer, finish_reason,
                   input_tokens, output_tokens, cached_input_tokens, reasoning_tokens, cost_dollars, latency_s,
                   attempts, from_cache, error, at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
                params![
                    x.request_id,
                    x.role,
                    x.provider,
                    x.model,
                    x.key,
                    x.prompt.to_string(),
                    x.answer.as_ref().map(|a| a.to_string()),
                    x.finish_reason,
                    x.input_tokens as i64,
                    x.output_tokens as i64,
                    x.cached_input_tokens as i64,
                    x.reasoning_tokens as i64,
                    x.cost_dollars,
                    x.latency_s,
                    x.attempts as i64,
                    x.from_cache,
                    x.error,
                    now()
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Every LLM call in id order, prompts and answers included.
    pub fn exchanges(&self) -> Result<Vec<ExchangeRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, request_id, role, provider, model, key, prompt, answer, finish_reason, input_tokens,
                   output_tokens, cached_input_tokens, reasoning_tokens, cost_dollars, latency_s, attempts,
                   from_cache, error FROM llm_exchanges ORDER BY id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt.query_map([], rows::exchange_from_row).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (mut x, prompt, answer) = row.map_err(|e| self.err(e))?;
            let id = x.id.unwrap_or_default().to_string();
            x.prompt = serde_json::from_str(&prompt).map_err(|e| self.corrupt("llm_exchanges", &id, e))?;
            x.answer = answer
                .map(|a| serde_json::from_str(&a).map_err(|e| self.corrupt("llm_exchanges", &id, e)))
                .transpose()?;
            out.push(x);
        }
        Ok(out)
    }

    /// The latest successful answer recorded under a request key (for caching and replay).
    pub fn answer_for_key(&self, key: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let text: Option<String> = self
            .conn
            .query_row(
                "SELECT answer FROM llm_exchanges WHERE key = ?1 AND answer IS NOT NULL ORDER BY id DESC LIMIT 1",
                params![key],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        text.map(|t| serde_json::from_str(&t).map_err(|e| self.corrupt("llm_exchanges", key, e)))
            .transpose()
    }

    /// The answer recorded for a request of this run, if it was answered (the request may have
    /// been answered and recorded just before a crash kept its event from being appended).
    pub fn answer_for_request(&self, request_id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let text: Option<String> = self
            .conn
            .query_row(
                "SELECT answer FROM llm_exchanges WHERE request_id = ?1 AND answer IS NOT NULL ORDER BY id DESC LIMIT 1",
                params![request_id],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        text.map(|t| serde_json::from_str(&t).map_err(|e| self.corrupt("llm_exchanges", request_id, e)))
            .transpose()
    }

    // --- candidates and evaluations -----------------------------------------------------

    /// Records a candidate under the id the engine gave it; recording it again (a resumed run
    /// serving the same request) keeps the first record.
    pub fn add_candidate(&self, c: &CandidateRow) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT OR IGNORE INTO candidates(id, parent_id, node_id, round, cycle, origin, language, sources, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![c.id, c.parent_id, c.node_id, c.round, c.cycle, c.origin, c.language, c.sources.to_string(), now()],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Every candidate in id order, with its sources.
    pub fn candidates(&self) -> Result<Vec<CandidateRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, parent_id, node_id, round, cycle, origin, language, sources FROM candidates ORDER BY id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt.query_map([], rows::candidate_from_row).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (mut c, sources) = row.map_err(|e| self.err(e))?;
            let id = c.id.to_string();
            c.sources = serde_json::from_str(&sources).map_err(|e| self.corrupt("candidates", &id, e))?;
            out.push(c);
        }
        Ok(out)
    }

    /// Adds an evaluation and returns its row id.
    pub fn add_evaluation(&self, e: &EvaluationRow) -> Result<i64, StoreError> {
        self.conn
            .execute(
                "INSERT INTO evaluations(candidate_id, purpose, status, speedup, record, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![e.candidate_id, e.purpose, e.status, e.speedup, e.record.to_string(), now()],
            )
            .map_err(|err| self.err(err))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Every evaluation in id order, with its record.
    pub fn evaluations(&self) -> Result<Vec<EvaluationRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, candidate_id, purpose, status, speedup, record FROM evaluations ORDER BY id")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    EvaluationRow {
                        id: Some(r.get(0)?),
                        candidate_id: r.get(1)?,
                        purpose: r.get(2)?,
                        status: r.get(3)?,
                        speedup: r.get(4)?,
                        record: serde_json::Value::Null,
                    },
                    r.get::<_, String>(5)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (mut e, record) = row.map_err(|err| self.err(err))?;
            let id = e.id.unwrap_or_default().to_string();
            e.record = serde_json::from_str(&record).map_err(|err| self.corrupt("evaluations", &id, err))?;
            out.push(e);
        }
        Ok(out)
    }

    // --- world model versions -----------------------------------------------------------

    /// Stores a new version; earlier versions are never touched. Returns the version number.
    pub fn add_world_model(&self, round: u32, cause: &str, body: &serde_json::Value) -> Result<i64, StoreError> {
        self.conn
            .execute(
                "INSERT INTO world_models(round, cause, body, at) VALUES (?1, ?2, ?3, ?4)",
                params![round, cause, body.to_string(), now()],
            )
            .map_err(|e| self.err(e))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Every world-model version, oldest first.
    pub fn world_models(&self) -> Result<Vec<WorldModelRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT version, round, cause, body FROM world_models ORDER BY version")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, u32>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (version, round, cause, body) = row.map_err(|e| self.err(e))?;
            let body =
                serde_json::from_str(&body).map_err(|e| self.corrupt("world_models", &version.to_string(), e))?;
            out.push(WorldModelRow {
                version,
                round,
                cause,
                body,
            });
        }
        Ok(out)
    }

    /// Writes a copy of the whole database (the write-ahead log folded in) to `dest`, which
    /// must not exist.
    pub fn vacuum_into(&self, dest: &Path) -> Result<(), StoreError> {
        let dest_text = dest.to_string_lossy().to_string();
        self.conn
            .execute("VACUUM INTO ?1", params![dest_text])
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Runs `f` in one transaction: all of its writes land, or none do (a process killed in
    /// the middle leaves none of them).
    pub fn transaction<T, E: From<StoreError>>(&self, f: impl FnOnce(&RunStore) -> Result<T, E>) -> Result<T, E> {
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(|e| self.err(e))?;
        match f(self) {
            Ok(v) => {
                self.conn.execute_batch("COMMIT").map_err(|e| self.err(e))?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }
}
