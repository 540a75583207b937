//! One writer per run: an exclusive lock on `RUN_DIR/.ksearch.lock`, held by every command that
//! changes a run (`run`, `resume`, `evaluate`, `agent submit`, MCP's start_search and
//! submit_answer, `sync`) for as long as it works on it. A second caller is refused at once and
//! told who holds the lock. The lock is the operating system's (flock), so a holder that dies,
//! even by kill -9, releases it.

use crate::error::RunError;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// File name of the lock inside a run directory.
pub const LOCK_FILE: &str = ".ksearch.lock";

/// A held run lock; dropping it releases the run.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
    dir: PathBuf,
}

impl RunLock {
    /// Takes the lock of the run in `dir` (which must exist), saying `what` this process does
    /// with it; refuses with [`RunError::Locked`] when another process holds it.
    pub fn acquire(dir: &Path, what: &str) -> anyhow::Result<RunLock> {
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                return Err(RunError::Locked {
                    dir: dir.to_path_buf(),
                    holder: if holder.is_empty() {
                        "another ksearch process".to_string()
                    } else {
                        holder.to_string()
                    },
                }
                .into());
            }
            Err(TryLockError::Error(e)) => anyhow::bail!("cannot lock {}: {e}", path.display()),
        }
        let holder = format!(
            "ksearch {what} (process {} on {}, since {})",
            std::process::id(),
            hostname(),
            chrono::DateTime::from_timestamp(now_secs(), 0)
                .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
                .unwrap_or_default()
        );
        // Who holds it, for the next caller's message; the lock itself is the flock.
        let _ = file.set_len(0);
        let _ = file.rewind();
        let _ = file.write_all(holder.as_bytes());
        let _ = file.flush();
        Ok(RunLock {
            _file: file,
            dir: dir.to_path_buf(),
        })
    }

    /// The run directory this lock is for.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "this machine".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_and_told_who_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let first = RunLock::acquire(dir.path(), "resume").unwrap();
        let err = RunLock::acquire(dir.path(), "evaluate").unwrap_err();
        let text = err.to_string();
        assert!(matches!(err.downcast_ref::<RunError>(), Some(RunError::Locked { .. })));
        assert!(text.contains("ksearch resume (process "), "{text}");
        drop(first);
        RunLock::acquire(dir.path(), "evaluate").unwrap();
    }
}
