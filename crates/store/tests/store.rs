use ksearch_store::*;
use serde_json::json;
use std::time::Duration;

#[test]
fn create_write_reopen_read() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run-1");
    {
        let s = RunStore::create(&run).unwrap();
        s.set_meta(MetaKey::Task, &json!("softmax")).unwrap();
        assert_eq!(s.append_event("started", &json!({"seed": 3})).unwrap(), 1);
        assert_eq!(s.append_event("planner_answered", &json!({"text": "..."})).unwrap(), 2);
        s.put_request("r1", "planner", &json!({"prompt": "p"})).unwrap();
        let c = 1;
        s.add_candidate(&CandidateRow {
            id: 1,
            parent_id: None,
            node_id: Some("root".into()),
            round: 0,
            cycle: 0,
            origin: "seed".into(),
            language: "c".into(),
            sources: json!([{"path": "k.c", "content": "void f(){}"}]),
        })
        .unwrap();
        s.add_evaluation(&EvaluationRow {
            id: None,
            candidate_id: c,
            purpose: "search".into(),
            status: "passed".into(),
            speedup: Some(1.5),
            record: json!({"workloads": []}),
        })
        .unwrap();
        s.record_exchange(&ExchangeRow {
            role: "planner".into(),
            provider: "openai".into(),
            model: "gpt-5".into(),
            key: "abc".into(),
            prompt: json!([{"role": "user", "content": "hi"}]),
            answer: Some(json!({"text": "hello"})),
            input_tokens: 10,
            output_tokens: 5,
            latency_s: 0.5,
            attempts: 1,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(s.add_world_model(0, "init", &json!({"v": 1})).unwrap(), 1);
        assert_eq!(s.add_world_model(1, "refine", &json!({"v": 2})).unwrap(), 2);
    }
    let s = RunStore::open(&run).unwrap();
    assert_eq!(s.meta(MetaKey::Task).unwrap(), Some(json!("softmax")));
    let kinds: Vec<String> = s.events().unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["started", "planner_answered"]);
    assert_eq!(s.requests(Some(RequestState::Pending)).unwrap().len(), 1);
    s.set_request_state("r1", RequestState::Answered).unwrap();
    assert!(s.requests(Some(RequestState::Pending)).unwrap().is_empty());
    assert_eq!(s.candidates().unwrap()[0].sources[0]["path"], "k.c");
    assert_eq!(s.evaluations().unwrap()[0].speedup, Some(1.5));
    assert_eq!(s.answer_for_key("abc").unwrap(), Some(json!({"text": "hello"})));
    assert_eq!(s.answer_for_key("nope").unwrap(), None);
    let versions: Vec<i64> = s.world_models().unwrap().iter().map(|w| w.version).collect();
    assert_eq!(versions, [1, 2]);
}

#[test]
fn world_models_and_events_cannot_be_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let s = RunStore::create(dir.path()).unwrap();
    s.add_world_model(0, "init", &json!({})).unwrap();
    s.append_event("e", &json!({})).unwrap();
    let conn = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
    let e = conn
        .execute("UPDATE world_models SET body = '{}'", [])
        .unwrap_err()
        .to_string();
    assert!(e.contains("never overwritten"), "{e}");
    assert!(conn.execute("DELETE FROM world_models", []).is_err());
    assert!(conn.execute("UPDATE events SET kind = 'x'", []).is_err());
}

#[test]
fn errors_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let e = RunStore::open(dir.path()).unwrap_err().to_string();
    assert!(e.contains("not a run directory"), "{e}");
    RunStore::create(dir.path()).unwrap();
    let e = RunStore::create(dir.path()).unwrap_err().to_string();
    assert!(e.contains("already exists") && e.contains("ksearch resume"), "{e}");
    let e = RunStore::open(dir.path())
        .unwrap()
        .set_request_state("zz", RequestState::Failed)
        .unwrap_err();
    assert!(e.to_string().contains("no requests row 'zz'"), "{e}");
}

#[test]
fn newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    RunStore::create(dir.path()).unwrap();
    let conn = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    let e = RunStore::open(dir.path()).unwrap_err().to_string();
    assert!(e.contains("schema 99") && e.contains("upgrade ksearch"), "{e}");
}

#[test]
fn a_locked_database_gives_a_clear_error_and_keeps_data() {
    let dir = tempfile::tempdir().unwrap();
    let s = RunStore::create(dir.path()).unwrap();
    s.append_event("before", &json!({})).unwrap();
    let other = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();
    s.set_busy_timeout(Duration::from_millis(100)).unwrap();
    let e = s.append_event("during", &json!({})).unwrap_err();
    assert!(matches!(e, StoreError::Locked { .. }), "{e}");
    assert!(e.to_string().contains("locked by another process"));
    other.execute_batch("ROLLBACK").unwrap();
    s.append_event("after", &json!({})).unwrap();
    let kinds: Vec<String> = s.events().unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["before", "after"]);
}

#[test]
fn a_full_disk_gives_a_clear_error_and_corrupts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = RunStore::create(dir.path()).unwrap();
    s.append_event("kept", &json!({"n": 1})).unwrap();
    // Cap the database at its current size: the next large write fails as a full disk would.
    let conn = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
    let pages: i64 = conn.pragma_query_value(None, "page_count", |r| r.get(0)).unwrap();
    drop(conn);
    let big = "x".repeat(1 << 20);
    let s2 = RunStore::open(dir.path()).unwrap();
    s2.limit_pages_for_tests(pages + 2).unwrap();
    let e = s2.append_event("too_big", &json!({ "blob": big })).unwrap_err();
    assert!(matches!(e, StoreError::DiskFull { .. }), "{e}");
    assert!(e.to_string().contains("disk is full"));
    drop(s2);
    drop(s);
    let s3 = RunStore::open(dir.path()).unwrap();
    let kinds: Vec<String> = s3.events().unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["kept"]);
}
