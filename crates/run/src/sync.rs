//! Bringing back a copy of a run directory that was continued on another machine (`ksearch
//! evaluate` on a GPU box, say). The copy may only *extend* this run: its event log must start
//! with every event of this one, and every row this run recorded must be in it. Then the copy's
//! store replaces this one's (a fast-forward, as git calls it). A copy that lacks events or rows
//! this run has (this run was continued too, or the copy is older) is refused as diverged,
//! never merged.

use crate::error::RunError;
use crate::lock::RunLock;
use anyhow::Context;
use ksearch_store::{RunStore, DB_FILE};
use std::path::Path;

/// What [`fast_forward`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Synced {
    /// The copy is this run as it stands: nothing to do.
    UpToDate,
    /// The copy's `new_events` events beyond this run's were taken.
    FastForwarded {
        /// Events of the copy beyond this run's last one.
        new_events: usize,
    },
}

/// Takes the run in `from` into the run in `into` when it extends it. Holds both runs' locks.
pub fn fast_forward(from: &Path, into: &Path) -> anyhow::Result<Synced> {
    let _from_lock = RunLock::acquire(from, "sync (source)")?;
    let _into_lock = RunLock::acquire(into, "sync")?;
    let src = RunStore::open(from)?;
    let dst = RunStore::open(into)?;
    let a = dst.events()?;
    let b = src.events()?;
    let diverged = |why: String| -> anyhow::Error {
        RunError::Diverged(format!(
            "{} and {} have diverged: {why}; the copies were continued apart and are not merged \
             (keep the one you want, or start the other as a new run)",
            into.display(),
            from.display()
        ))
        .into()
    };
    if b.len() < a.len() {
        return Err(diverged(format!(
            "{} has {} events, {} only {}",
            into.display(),
            a.len(),
            from.display(),
            b.len()
        )));
    }
    if let Some(i) = a.iter().zip(&b).position(|(x, y)| x.kind != y.kind || x.body != y.body) {
        return Err(diverged(format!(
            "event {} differs ({} here, {} in the copy)",
            i + 1,
            a[i].kind,
            b[i].kind
        )));
    }
    // Rows recorded here that the copy lacks (an LLM exchange, an evaluation) would be lost.
    let counts = |s: &RunStore| -> anyhow::Result<[usize; 3]> {
        Ok([s.exchanges()?.len(), s.evaluations()?.len(), s.candidates()?.len()])
    };
    let (here, there) = (counts(&dst)?, counts(&src)?);
    for (name, (h, t)) in ["exchanges", "evaluations", "candidates"]
        .iter()
        .zip(here.iter().zip(&there))
    {
        if h > t {
            return Err(diverged(format!("{name}: {h} here, {t} in the copy")));
        }
    }
    let new_events = b.len() - a.len();
    if new_events == 0 && here == there {
        return Ok(Synced::UpToDate);
    }
    drop(src);
    drop(dst);
    // The copy's database, with its write-ahead log folded in, replaces this one in one rename.
    let staged = into.join(format!("{DB_FILE}.sync"));
    let _ = std::fs::remove_file(&staged);
    {
        let src = RunStore::open(from)?;
        src.vacuum_into(&staged)?;
    }
    for side in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(into.join(format!("{DB_FILE}{side}")));
    }
    std::fs::rename(&staged, into.join(DB_FILE)).with_context(|| format!("cannot replace {}", into.display()))?;
    // What a finished drive wrote beside the store (the best kernel, the report) comes along.
    copy_products(from, into)?;
    Ok(Synced::FastForwarded { new_events })
}

fn copy_products(from: &Path, into: &Path) -> anyhow::Result<()> {
    let report = from.join("report.html");
    if report.is_file() {
        std::fs::copy(&report, into.join("report.html"))
            .with_context(|| format!("cannot copy {}", report.display()))?;
    }
    let best = from.join("best");
    if best.is_dir() {
        let dest = into.join("best");
        std::fs::create_dir_all(&dest).with_context(|| format!("cannot create {}", dest.display()))?;
        for entry in std::fs::read_dir(&best).with_context(|| format!("cannot read {}", best.display()))? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                std::fs::copy(entry.path(), dest.join(entry.file_name()))
                    .with_context(|| format!("cannot copy {}", entry.path().display()))?;
            }
        }
    }
    Ok(())
}
