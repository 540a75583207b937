//! The run's metadata is the run directory's contract: every key and every stop reason keeps
//! its spelling through a real SQLite store, stores written as today's builds write them still
//! read, and a stop reason from a newer build reads as `Other` instead of failing.

use ksearch_store::{MetaKey, RunStore, StopReason, StopRecord, DB_FILE};
use serde_json::json;
use std::path::Path;

/// The spellings runs have always been written with, typed out independently of the crate.
const KEYS: [(MetaKey, &str); 13] = [
    (MetaKey::Task, "task"),
    (MetaKey::TaskSnapshot, "task_snapshot"),
    (MetaKey::Brain, "brain"),
    (MetaKey::BrainNote, "brain_note"),
    (MetaKey::RunSeed, "run_seed"),
    (MetaKey::KsearchVersion, "ksearch_version"),
    (MetaKey::Executor, "executor"),
    (MetaKey::Ray, "ray"),
    (MetaKey::Profile, "profile"),
    (MetaKey::Devices, "devices"),
    (MetaKey::Context, "context"),
    (MetaKey::MaxInFlight, "max_in_flight"),
    (MetaKey::Stopped, "stopped"),
];

const REASONS: [(StopReason, &str); 10] = [
    (StopReason::Finished, "finished"),
    (StopReason::Budget, "budget"),
    (StopReason::Fatal, "fatal"),
    (StopReason::LlmUnavailable, "llm_unavailable"),
    (StopReason::LlmRefused, "llm_refused"),
    (StopReason::ExecutorUnavailable, "executor_unavailable"),
    (StopReason::Interrupted, "interrupted"),
    (StopReason::Error, "error"),
    (StopReason::AwaitingAgent, "awaiting_agent"),
    (StopReason::AwaitingEvaluation, "awaiting_evaluation"),
];

/// The `meta` row `key` as stored text, read past the crate.
fn raw_meta(dir: &Path, key: &str) -> Option<String> {
    let conn = rusqlite::Connection::open(dir.join(DB_FILE)).unwrap();
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .ok()
}

/// Writes a `meta` row as an earlier (or newer) build would have, past the crate.
fn put_raw_meta(dir: &Path, key: &str, text: &str) {
    let conn = rusqlite::Connection::open(dir.join(DB_FILE)).unwrap();
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [key, text],
    )
    .unwrap();
}

#[test]
fn every_meta_key_keeps_its_spelling_and_round_trips() {
    assert_eq!(MetaKey::ALL.len(), KEYS.len());
    for (key, spelling) in KEYS {
        assert_eq!(key.as_str(), spelling);
        assert_eq!(key.to_string(), spelling);
        assert_eq!(MetaKey::ALL.iter().filter(|k| **k == key).count(), 1, "{spelling}");
    }
    let dir = tempfile::tempdir().unwrap();
    {
        let store = RunStore::create(dir.path()).unwrap();
        for (i, (key, spelling)) in KEYS.iter().enumerate() {
            store.set_meta(*key, &json!({"key": spelling, "n": i})).unwrap();
        }
    }
    let store = RunStore::open(dir.path()).unwrap();
    for (i, (key, spelling)) in KEYS.iter().enumerate() {
        assert_eq!(
            store.meta(*key).unwrap(),
            Some(json!({"key": spelling, "n": i})),
            "{spelling}"
        );
        assert_eq!(
            raw_meta(dir.path(), spelling).as_deref(),
            Some(format!(r#"{{"key":"{spelling}","n":{i}}}"#).as_str()),
            "{spelling} is stored under its spelling"
        );
    }
}

#[test]
fn string_meta_reads_as_a_string_and_anything_else_as_none() {
    let dir = tempfile::tempdir().unwrap();
    let store = RunStore::create(dir.path()).unwrap();
    assert_eq!(store.meta_str(MetaKey::BrainNote).unwrap(), None);
    store.set_meta(MetaKey::BrainNote, &json!("claude-opus")).unwrap();
    assert_eq!(
        store.meta_str(MetaKey::BrainNote).unwrap().as_deref(),
        Some("claude-opus")
    );
    store.set_meta(MetaKey::Executor, &json!(3)).unwrap();
    assert_eq!(store.meta_str(MetaKey::Executor).unwrap(), None);
}

#[test]
fn every_stop_reason_round_trips_in_the_format_runs_store() {
    let mut reasons: Vec<(StopReason, &str)> = REASONS.to_vec();
    reasons.push((
        StopReason::Other("paused_by_a_newer_build".into()),
        "paused_by_a_newer_build",
    ));
    assert_eq!(StopReason::KNOWN.len(), REASONS.len());
    let dir = tempfile::tempdir().unwrap();
    RunStore::create(dir.path()).unwrap();
    for (reason, spelling) in reasons {
        assert_eq!(reason.as_str(), spelling);
        assert_eq!(StopReason::parse(spelling), reason);
        let record = StopRecord {
            reason: reason.clone(),
            at: 1700000000.25,
            detail: Some(format!("why {spelling}")),
        };
        RunStore::open(dir.path()).unwrap().set_stop_record(&record).unwrap();
        // The exact text the driver has always written (keys in its order).
        assert_eq!(
            raw_meta(dir.path(), "stopped").as_deref(),
            Some(format!(r#"{{"reason":"{spelling}","at":1700000000.25,"detail":"why {spelling}"}}"#).as_str())
        );
        let read = RunStore::open(dir.path()).unwrap().stop_record().unwrap();
        assert_eq!(read, Some(record), "{spelling}");
    }
    let store = RunStore::open(dir.path()).unwrap();
    store.clear_stop_record().unwrap();
    assert_eq!(raw_meta(dir.path(), "stopped").as_deref(), Some("null"));
    assert_eq!(store.stop_record().unwrap(), None);
}

#[test]
fn a_store_written_as_today_still_loads() {
    let dir = tempfile::tempdir().unwrap();
    RunStore::create(dir.path()).unwrap();
    // What `ksearch run` writes (ksearch-run's create and driver), as text.
    for (key, text) in [
        ("task", r#""softmax""#),
        ("brain", r#"{"kind":"agent"}"#),
        ("brain_note", r#""claude-opus""#),
        ("run_seed", "42"),
        ("ksearch_version", r#""0.1.0""#),
        ("executor", r#""deferred""#),
        ("profile", "true"),
        ("devices", r#""cuda:0""#),
        ("context", r#""full""#),
        ("max_in_flight", "4"),
        ("stopped", r#"{"reason":"awaiting_agent","at":1712.5,"detail":""}"#),
    ] {
        put_raw_meta(dir.path(), key, text);
    }
    let store = RunStore::open(dir.path()).unwrap();
    assert_eq!(store.meta_str(MetaKey::Task).unwrap().as_deref(), Some("softmax"));
    assert_eq!(store.meta(MetaKey::Brain).unwrap(), Some(json!({"kind": "agent"})));
    assert_eq!(
        store.meta_str(MetaKey::BrainNote).unwrap().as_deref(),
        Some("claude-opus")
    );
    assert_eq!(store.meta(MetaKey::RunSeed).unwrap(), Some(json!(42)));
    assert_eq!(
        store.meta_str(MetaKey::KsearchVersion).unwrap().as_deref(),
        Some("0.1.0")
    );
    assert_eq!(store.meta_str(MetaKey::Executor).unwrap().as_deref(), Some("deferred"));
    assert_eq!(store.meta(MetaKey::Profile).unwrap(), Some(json!(true)));
    assert_eq!(store.meta_str(MetaKey::Devices).unwrap().as_deref(), Some("cuda:0"));
    assert_eq!(store.meta_str(MetaKey::Context).unwrap().as_deref(), Some("full"));
    assert_eq!(store.meta(MetaKey::MaxInFlight).unwrap(), Some(json!(4)));
    assert_eq!(store.meta(MetaKey::Ray).unwrap(), None);
    assert_eq!(
        store.stop_record().unwrap(),
        Some(StopRecord {
            reason: StopReason::AwaitingAgent,
            at: 1712.5,
            detail: Some(String::new()),
        })
    );
    drop(store);
    // Every reason as today's driver spells it reads as its named variant.
    for (reason, spelling) in REASONS {
        put_raw_meta(
            dir.path(),
            "stopped",
            &format!(r#"{{"reason":"{spelling}","at":3.0,"detail":"d"}}"#),
        );
        let read = RunStore::open(dir.path()).unwrap().stop_record().unwrap().unwrap();
        assert!(!matches!(read.reason, StopReason::Other(_)), "{spelling}");
        assert_eq!(read.reason, reason);
    }
}

#[test]
fn an_unknown_stop_reason_loads_as_other_and_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    RunStore::create(dir.path()).unwrap();
    put_raw_meta(
        dir.path(),
        "stopped",
        r#"{"reason":"paused_for_maintenance","at":9.5,"detail":"back at noon"}"#,
    );
    let store = RunStore::open(dir.path()).unwrap();
    let record = store.stop_record().unwrap().unwrap();
    assert!(matches!(&record.reason, StopReason::Other(s) if s == "paused_for_maintenance"));
    assert_eq!(record.reason.to_string(), "paused_for_maintenance");
    assert_eq!(record.detail.as_deref(), Some("back at noon"));
    // Written back, it keeps the newer build's spelling.
    store.set_stop_record(&record).unwrap();
    assert_eq!(
        raw_meta(dir.path(), "stopped").as_deref(),
        Some(r#"{"reason":"paused_for_maintenance","at":9.5,"detail":"back at noon"}"#)
    );
    // A record without a detail reads with none; one that is not a stop record reads as no stop.
    put_raw_meta(dir.path(), "stopped", r#"{"reason":"interrupted","at":1.0}"#);
    let record = store.stop_record().unwrap().unwrap();
    assert_eq!((record.reason, record.detail), (StopReason::Interrupted, None));
    put_raw_meta(dir.path(), "stopped", r#""interrupted""#);
    assert_eq!(store.stop_record().unwrap(), None);
}
