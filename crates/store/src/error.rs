use std::path::{Path, PathBuf};

/// What went wrong with a run store, always naming the database file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{}: not a run directory (no run.sqlite); pass the directory `ksearch run` printed", path.display())]
    NotARun { path: PathBuf },

    #[error("{}: a run store already exists; choose another --out directory or resume it with `ksearch resume`", path.display())]
    AlreadyExists { path: PathBuf },

    #[error("{}: the run store is locked by another process (is another ksearch working on this run?)", path.display())]
    Locked { path: PathBuf },

    #[error("{}: the disk is full; nothing was lost, free some space and resume the run", path.display())]
    DiskFull { path: PathBuf },

    #[error("{}: was written by a newer ksearch (schema {found}, this one knows up to {supported}); upgrade ksearch", path.display())]
    NewerSchema { path: PathBuf, found: i64, supported: i64 },

    #[error("{}: corrupt: {message}", path.display())]
    Corrupt { path: PathBuf, message: String },

    #[error("{}: no {table} row '{id}'", path.display())]
    NoSuchRow {
        path: PathBuf,
        table: &'static str,
        id: String,
    },

    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{}: {source}", path.display())]
    Sqlite {
        path: PathBuf,
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
