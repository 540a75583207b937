//! A run store created under a temporary name is not a run until it is published: a process
//! killed between creating it and writing its first records leaves nothing `resume` trips on.

use ksearch_store::{MetaKey, RunStore, StoreError, DB_FILE};
use serde_json::json;

#[test]
fn an_unpublished_store_is_not_a_run_and_is_replaced_by_the_next_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    {
        let store = RunStore::create_staged(&run).unwrap();
        store.set_meta(MetaKey::Task, &json!("softmax")).unwrap();
        // Dropped without publish: as if killed here.
    }
    assert!(!run.join(DB_FILE).exists());
    assert!(matches!(RunStore::open(&run), Err(StoreError::NotARun { .. })));

    let store = RunStore::create_staged(&run).unwrap();
    assert_eq!(
        store.meta(MetaKey::Task).unwrap(),
        None,
        "the leftover was replaced, not reused"
    );
    store.set_meta(MetaKey::Task, &json!("matmul")).unwrap();
    store.append_event("started", &json!({"kind": "started"})).unwrap();
    let store = store.publish().unwrap();
    assert_eq!(store.path(), run.join(DB_FILE));
    store.append_event("planner_answered", &json!({})).unwrap();
    drop(store);

    let reopened = RunStore::open(&run).unwrap();
    assert_eq!(reopened.meta(MetaKey::Task).unwrap(), Some(json!("matmul")));
    let kinds: Vec<String> = reopened.events().unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["started", "planner_answered"]);
    let leftovers: Vec<String> = std::fs::read_dir(&run)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.contains(".new"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_published_run_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    RunStore::create_staged(dir.path()).unwrap().publish().unwrap();
    assert!(matches!(
        RunStore::create_staged(dir.path()),
        Err(StoreError::AlreadyExists { .. })
    ));
}
