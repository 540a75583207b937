//! `ksearch resume RUN --rounds N` through the real binary, on the tiny tunable softmax task with
//! the knob tuner: a finished run goes on to the new budget and ends again (its best, report
//! and show say so); a raise the run cannot take is refused with a message naming why and adds
//! nothing to the run; the raise is one `budget_raised` event in the log.

mod common;
use common::*;
use std::path::Path;

fn events(run_dir: &Path) -> Vec<String> {
    let db = rusqlite::Connection::open(run_dir.join("run.sqlite")).unwrap();
    let mut stmt = db.prepare("SELECT kind FROM events ORDER BY seq").unwrap();
    stmt.query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .map(|k| k.unwrap())
        .collect()
}

fn show(run_dir: &Path) -> serde_json::Value {
    let show = ksearch(&["show", run_dir.to_str().unwrap(), "--json"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    show.json()
}

#[test]
fn a_finished_run_raised_goes_on_to_the_new_budget_and_refusals_change_nothing() {
    let work = tempfile::tempdir().unwrap();
    let run_dir = work.path().join("run");
    let run_str = run_dir.to_str().unwrap();
    let task = fixture("tiny_softmax_tunable");
    let first = ksearch(&[
        "run",
        task.to_str().unwrap(),
        "--brain",
        "tuner",
        "--rounds",
        "2",
        "--seed",
        "3",
        "--json",
        "--out",
        run_str,
    ]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let before = show(&run_dir);
    assert_eq!(before["rounds"], 2);
    assert_eq!(before["state"], "finished: the round budget (2) is spent");
    let logged = events(&run_dir);

    // Not above the budget: refused, exit status non-zero, nothing recorded.
    let same = ksearch(&["resume", run_str, "--rounds", "2"]);
    assert_ne!(same.code, 0);
    assert!(
        same.stderr
            .contains("the round budget cannot be raised: the run's round budget is 2 already"),
        "{}",
        same.stderr
    );
    assert_eq!(events(&run_dir), logged);

    // Raised: two more rounds, then the run ends again with its final re-measurement.
    let raised = ksearch(&["resume", run_str, "--rounds", "4", "--json"]);
    assert_eq!(raised.code, 0, "{}", raised.stderr);
    let after = show(&run_dir);
    assert_eq!(after["rounds"], 4);
    assert_eq!(after["round"], 4);
    assert_eq!(after["state"], "finished: the round budget (4) is spent");
    let now = events(&run_dir);
    assert_eq!(
        &now[..logged.len()],
        &logged[..],
        "the log before the raise is untouched"
    );
    assert_eq!(now[logged.len()], "budget_raised");
    assert_eq!(now.iter().filter(|k| *k == "budget_raised").count(), 1);
    let candidates = after["candidates"].as_array().unwrap();
    assert_eq!(candidates.iter().filter(|c| c["round"].as_u64() > Some(2)).count(), 2);
    assert!(run_dir.join("best").is_dir() && run_dir.join("report.html").is_file());
}
