//! Issue 16: the cold start of a warm server overlapped with the first evaluation
//! (`KSEARCH_WARM=overlap`, the default for the GPU backends): with no server ready, the first
//! evaluation runs in a fresh process while a server starts in the background, and the ones
//! after it run on that server. Forced on the CPU with the c backend, as in warm.rs.
//!
//! One test function: the switches are process-wide environment variables (and this file is
//! its own test binary, apart from warm.rs's server pool).

use ksearch_eval::{evaluate, warm, EvalOptions, Evaluation};
use ksearch_spec::{Solution, Task};
use std::path::Path;
use std::time::Duration;

fn eval(task: &Task, source: &str) -> Evaluation {
    let solution = Solution::from_source("cand.c", "cand.c", source.to_string(), task).unwrap();
    evaluate(task, &solution, &EvalOptions::new(7), &|_| {}).unwrap()
}

fn digest(e: &Evaluation) -> serde_json::Value {
    serde_json::json!({
        "status": e.status,
        "reason": e.reason,
        "workloads": e.workloads.iter().map(|w| serde_json::json!({
            "uuid": w.uuid, "status": w.status, "correctness": w.correctness,
        })).collect::<Vec<_>>(),
    })
}

#[test]
fn the_first_evaluation_runs_fresh_while_the_server_starts_and_the_next_ones_use_it() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/fixtures/tiny_softmax");
    let task = Task::load_folder(&fixtures).unwrap();
    let honest = std::fs::read_to_string(fixtures.join("seed.c")).unwrap();
    std::env::set_var("KSEARCH_IN_PROCESS", "1");

    std::env::set_var("KSEARCH_WARM", "0");
    let fresh = eval(&task, &honest);
    assert_eq!(fresh.status.to_string(), "passed", "{}", fresh.log);
    assert!(warm::server_pids().is_empty());

    std::env::set_var("KSEARCH_WARM", "overlap");
    let first = eval(&task, &honest);
    assert!(
        first.log.contains("the warm server is starting") && first.log.contains("ran in a fresh process"),
        "the first evaluation should have run fresh while the server started: {}",
        first.log
    );
    assert_eq!(digest(&first), digest(&fresh));

    // The second one takes the server: ready by now, or still starting (then it waits for it
    // rather than start a second one).
    let second = eval(&task, &honest);
    assert!(!second.log.contains("fresh process"), "{}", second.log);
    assert_eq!(digest(&second), digest(&fresh));
    let servers = warm::server_pids();
    assert_eq!(servers.len(), 1, "{servers:?}");

    let third = eval(&task, &honest);
    assert!(!third.log.contains("fresh process"), "{}", third.log);
    assert_eq!(digest(&third), digest(&fresh));
    assert_eq!(warm::server_pids(), servers, "the server was replaced");

    // Two at once with one idle server: one takes it, the other starts a second server and
    // runs fresh meanwhile (or, if the first returned its server in time, runs warm too).
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| eval(&task, &honest));
        let b = s.spawn(|| eval(&task, &honest));
        (a.join().unwrap(), b.join().unwrap())
    });
    for e in [&a, &b] {
        assert_eq!(digest(e), digest(&fresh), "{}", e.log);
    }
    let fresh_ones = [&a, &b].iter().filter(|e| e.log.contains("fresh process")).count();
    assert!(fresh_ones <= 1, "{}\n{}", a.log, b.log);
    warm::settle(Duration::from_secs(120));
    let after = warm::server_pids();
    assert_eq!(after.len(), 1 + fresh_ones, "{after:?}");
    assert!(after.contains(&servers[0]), "{after:?} {servers:?}");
}
