use std::path::{Path, PathBuf};

/// What went wrong with a run store, always naming the database file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Opening a directory that has no `run.sqlite`.
    #[error("{}: not a run directory (no run.sqlite); pass the directory `ksearch run` printed", path.display())]
    NotARun {
        /// The directory asked for.
        path: PathBuf,
    },

    /// Creating a store where one exists already.
    #[error("{}: a run store already exists; choose another --out directory or resume it with `ksearch resume`", path.display())]
    AlreadyExists {
        /// The existing database file.
        path: PathBuf,
    },

    /// SQLite's busy or locked error after the busy timeout: another process is writing.
    #[error("{}: the run store is locked by another process (is another ksearch working on this run?)", path.display())]
    Locked {
        /// The database file.
        path: PathBuf,
    },

    /// A write failed for want of space (or the page cap of the fault-injection tests); the
    /// transaction was rolled back.
    #[error("{}: the disk is full; nothing was lost, free some space and resume the run", path.display())]
    DiskFull {
        /// The database file.
        path: PathBuf,
    },

    /// The file's schema version (`user_version`) is above what this build can read.
    #[error("{}: was written by a newer ksearch (schema {found}, this one knows up to {supported}); upgrade ksearch", path.display())]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// The file's schema version.
        found: i64,
        /// The newest schema version this build knows.
        supported: i64,
    },

    /// Not a database, a damaged one, or a row whose JSON or state cannot be read.
    #[error("{}: corrupt: {message}", path.display())]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What is wrong, naming the table and row where known (`requests row r1: ...`).
        message: String,
    },

    /// An update named a row that does not exist.
    #[error("{}: no {table} row '{id}'", path.display())]
    NoSuchRow {
        /// The database file.
        path: PathBuf,
        /// The table, e.g. `requests`.
        table: &'static str,
        /// The row's id as given.
        id: String,
    },

    /// A file-system error around the database (creating the run directory, say).
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory that failed.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },

    /// Any other SQLite error.
    #[error("{}: {source}", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
}

impl StoreError {
    pub(crate) fn from_sqlite(path: &Path, e: rusqlite::Error) -> StoreError {
        use rusqlite::ErrorCode;
        let path = path.to_path_buf();
        match e.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked) => StoreError::Locked { path },
            Some(ErrorCode::DiskFull) => StoreError::DiskFull { path },
            Some(ErrorCode::NotADatabase) | Some(ErrorCode::DatabaseCorrupt) => StoreError::Corrupt {
                path,
                message: e.to_string(),
            },
            _ => StoreError::Sqlite { path, source: e },
        }
    }
}
