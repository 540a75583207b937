//! Deferred evaluation (`--executor deferred`, `ksearch evaluate`, `ksearch sync`) and the run
//! lock, through the real binary on a C task: a deferred agent-mode run whose evaluations happen
//! in a copy of the run directory elsewhere reaches the same tree and best as a local run given
//! the same answers; every refusal changes nothing; kill -9 during `evaluate` loses nothing and
//! records nothing twice.

mod common;
use common::*;
use std::path::{Path, PathBuf};

struct Setup {
    work: tempfile::TempDir,
    task: tempfile::TempDir,
}

impl Setup {
    /// The tiny softmax task, with its seed kernel (evaluated first) or without.
    fn new(with_seed: bool) -> Setup {
        Setup::timed(
            with_seed,
            "trials = 2\niterations = 15\nmin_iterations = 5\nmax_timing_s = 0.3",
        )
    }

    /// The same with these `[evaluation]` settings (how long each evaluation takes).
    fn timed(with_seed: bool, evaluation: &str) -> Setup {
        let task = copy_fixture("tiny_softmax");
        let toml = format!(
            "[evaluation]\n{evaluation}\n\n[tolerance.float32]\natol = 1e-7\nrtol = 1e-4\n\n\
             [kernel]\nlanguage = \"c\"\nentry = \"softmax\"\n"
        );
        let seed = if with_seed { "seed = \"seed.c\"\n" } else { "" };
        std::fs::write(task.path().join("task.toml"), format!("{toml}{seed}")).unwrap();
        Setup {
            work: tempfile::tempdir().unwrap(),
            task,
        }
    }

    fn ksearch(&self, args: &[&str]) -> Run {
        ksearch_in(self.work.path(), args, &[])
    }

    fn start(&self, run_dir: &Path, extra: &[&str]) -> Run {
        let mut args = vec![
            "run",
            self.task.path().to_str().unwrap(),
            "--brain",
            "agent",
            "--rounds",
            "3",
            "--json",
            "--seed",
            "5",
            "--out",
            run_dir.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        self.ksearch(&args)
    }

    fn show(&self, run_dir: &Path) -> serde_json::Value {
        self.ksearch(&["show", run_dir.to_str().unwrap(), "--json"]).json()
    }

    /// Answers the run's next agent request by its prompt; `false` when none waits (the reason
    /// is returned in `why`).
    fn answer_next(&self, run_dir: &Path, why: &mut String) -> bool {
        let dir = run_dir.to_str().unwrap();
        let next = self.ksearch(&["agent", "next", dir, "--json"]);
        if next.code != 0 {
            *why = next.stderr;
            return false;
        }
        let request = next.json();
        let id = request["id"].as_str().unwrap().to_string();
        let prompt = request["messages"][1]["content"].as_str().unwrap();
        let answer = match request["role"].as_str().unwrap() {
            "planner" => planner_answer(prompt),
            _ if prompt.contains("## Your assignment: implement") => format!("```c kernel.c\n{SLOW}```"),
            _ => format!("**kernel.c**\n```c\n{}```", fast()),
        };
        let file = self.work.path().join(format!("answer-{id}.txt"));
        std::fs::write(&file, answer).unwrap();
        let s = self.ksearch(&["agent", "submit", dir, &id, file.to_str().unwrap(), "--json"]);
        assert_eq!(s.code, 0, "{}\n{}", s.stdout, s.stderr);
        true
    }
}

/// The tree as structure: node ids, statuses, and whether a candidate is attached.
fn tree_shape(show: &serde_json::Value) -> Vec<(String, String, bool)> {
    show["world_model"]["decision_tree"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["node_id"].as_str().unwrap().to_string(),
                n["status"].as_str().unwrap().to_string(),
                n["solution_ref"].is_object(),
            )
        })
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).unwrap();
        }
    }
}

/// (events, evaluation rows, `evaluated` events) of a run, read from its store.
fn counts(run_dir: &Path) -> (i64, i64, i64) {
    let db = rusqlite::Connection::open(run_dir.join("run.sqlite")).unwrap();
    let one = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    (
        one("SELECT COUNT(*) FROM events"),
        one("SELECT COUNT(*) FROM evaluations"),
        one("SELECT COUNT(*) FROM events WHERE kind = 'evaluated'"),
    )
}

#[test]
fn a_deferred_run_evaluated_in_a_copy_elsewhere_ends_as_a_local_run_with_the_same_answers() {
    let setup = Setup::new(false);
    // The local run: agent answers, evaluations in the same process.
    let local = setup.work.path().join("local");
    assert_eq!(setup.start(&local, &[]).code, 0);
    let mut why = String::new();
    let mut answered = 0;
    while setup.answer_next(&local, &mut why) {
        answered += 1;
        assert!(answered < 20, "the local run does not end");
    }
    assert!(why.contains("the run is finished"), "{why}");

    // The deferred run: every evaluation waits for `ksearch evaluate`, which runs in a copy of
    // the run directory in another folder (moved there by relative path: the task travels in it).
    let deferred = setup.work.path().join("deferred");
    let r = setup.start(&deferred, &["--executor", "deferred"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    // No seed: the planner is asked first, and the coder's kernels then wait for `evaluate`.
    assert_eq!(r.json()["status"], "awaiting_agent", "{}", r.stdout);
    let elsewhere = tempfile::tempdir().unwrap();
    let mut trips = 0;
    loop {
        if setup.answer_next(&deferred, &mut why) {
            continue;
        }
        if why.contains("the run is finished") {
            break;
        }
        assert!(why.contains("wait to be evaluated"), "{why}");
        trips += 1;
        assert!(trips < 20, "the deferred run does not end");
        let copy = elsewhere.path().join(format!("trip{trips}"));
        copy_dir(&deferred, &copy);
        let e = ksearch_in(elsewhere.path(), &["evaluate", &format!("trip{trips}"), "--json"], &[]);
        assert_eq!(e.code, 0, "{}\n{}", e.stdout, e.stderr);
        let j = e.json();
        assert!(!j["evaluated"].as_array().unwrap().is_empty(), "{j}");
        // Back home: the copy extends the run, so it is taken whole.
        let s = setup.ksearch(&["sync", copy.to_str().unwrap(), deferred.to_str().unwrap(), "--json"]);
        assert_eq!(s.code, 0, "{}\n{}", s.stdout, s.stderr);
        assert_eq!(s.json()["status"], "fast_forwarded");
    }
    // One per coder round; the final re-measurement follows the last round in the same call.
    assert_eq!(trips, 3, "{trips} trips");
    let (a, b) = (setup.show(&local), setup.show(&deferred));
    assert_eq!(tree_shape(&a), tree_shape(&b));
    assert!(b["state"].as_str().unwrap().starts_with("finished"), "{b}");
    for dir in [&local, &deferred] {
        // Final re-measurement only after the search: the best is the FAST variant either way.
        let best: String = std::fs::read_dir(dir.join("best"))
            .map(|d| {
                d.flatten()
                    .map(|f| std::fs::read_to_string(f.path()).unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default();
        assert!(best.contains("variant FAST"), "{}: {best}", dir.display());
    }
    let (events, rows, evaluated) = counts(&deferred);
    assert_eq!(
        rows, evaluated,
        "one evaluation row per evaluated event ({events} events)"
    );
}

#[test]
fn refusals_change_nothing() {
    let setup = Setup::new(true);
    let run = setup.work.path().join("r");
    let dir = run.to_str().unwrap();
    assert_eq!(setup.start(&run, &["--executor", "deferred"]).code, 0);
    let before = counts(&run);

    // A second writer: refused at once, naming the holder.
    {
        use std::io::Write;
        let mut lock = std::fs::OpenOptions::new()
            .write(true)
            .open(run.join(".ksearch.lock"))
            .unwrap();
        lock.lock().unwrap();
        lock.set_len(0).unwrap();
        write!(lock, "ksearch resume (process 4242 on box, since now)").unwrap();
        for args in [vec!["evaluate", dir], vec!["resume", dir]] {
            let r = setup.ksearch(&args);
            assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
            assert!(
                r.stderr.contains("in use by ksearch resume (process 4242 on box"),
                "{args:?}: {}",
                r.stderr
            );
        }
    }
    // A run directory into which another `run` goes is refused whole.
    let again = setup.start(&run, &[]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert!(again.stderr.contains("already holds a run"), "{}", again.stderr);

    // The task edited since the start.
    let wl = run.join("task/workloads.jsonl");
    let text = std::fs::read_to_string(&wl).unwrap();
    std::fs::write(&wl, format!("{text}\n")).unwrap();
    let r = setup.ksearch(&["evaluate", dir]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("the task changed since the run started"),
        "{}",
        r.stderr
    );
    std::fs::write(&wl, &text).unwrap();
    assert_eq!(counts(&run), before);

    // Diverged copies: both continued, the copy is refused.
    let copy = setup.work.path().join("copy");
    copy_dir(&run, &copy);
    assert_eq!(setup.ksearch(&["evaluate", copy.to_str().unwrap()]).code, 0);
    assert_eq!(setup.ksearch(&["evaluate", dir]).code, 0);
    let here = counts(&run);
    let s = setup.ksearch(&["sync", copy.to_str().unwrap(), dir]);
    assert_ne!(s.code, 0, "{}", s.stdout);
    assert!(s.stderr.contains("have diverged"), "{}", s.stderr);
    assert_eq!(counts(&run), here);
    // An older copy brought back over a run that went on is refused too.
    let old = setup.work.path().join("old");
    copy_dir(&run, &old);
    let mut why = String::new();
    assert!(setup.answer_next(&run, &mut why), "{why}");
    let s = setup.ksearch(&["sync", old.to_str().unwrap(), dir]);
    assert!(s.stderr.contains("have diverged"), "{}", s.stderr);
    let s = setup.ksearch(&["sync", dir, old.to_str().unwrap(), "--json"]);
    assert_eq!(s.code, 0, "{}", s.stderr);
    assert_eq!(s.json()["status"], "fast_forwarded");
}

#[test]
fn evaluating_where_the_tasks_gpu_is_absent_is_refused() {
    if std::process::Command::new("nvidia-smi")
        .arg("-L")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        eprintln!("skipped: this machine has an NVIDIA GPU");
        return;
    }
    let setup = Setup::new(true);
    let run: PathBuf = setup.work.path().join("gpu");
    let r = setup.ksearch(&[
        "run",
        "softmax_llm",
        "--brain",
        "agent",
        "--executor",
        "deferred",
        "--rounds",
        "2",
        "--json",
        "--out",
        run.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let before = counts(&run);
    let e = setup.ksearch(&["evaluate", run.to_str().unwrap()]);
    assert_eq!(e.code, 1, "{}", e.stderr);
    assert!(
        e.stderr.contains("run on an NVIDIA GPU, and this machine shows none"),
        "{}",
        e.stderr
    );
    assert!(e.stderr.contains("nothing was evaluated or recorded"), "{}", e.stderr);
    assert_eq!(counts(&run), before);
}

#[test]
fn kill_9_during_evaluate_loses_nothing_and_records_nothing_twice() {
    // Evaluations long enough (several seconds each: more trials, a longer timing budget) that
    // the kills below land while `evaluate` runs even on a fast, idle machine; with the default
    // settings an evaluation could finish before the first delays and the test found too few.
    let setup = Setup::timed(
        true,
        "trials = 4\niterations = 400\nmin_iterations = 100\nmax_timing_s = 1.0",
    );
    let run = setup.work.path().join("k");
    let dir = run.to_str().unwrap();
    assert_eq!(setup.start(&run, &["--executor", "deferred"]).code, 0);
    let mut why = String::new();
    let mut kills = 0;
    for delay_ms in [150u64, 400, 700, 1000, 1500, 2500] {
        while setup.answer_next(&run, &mut why) {}
        if why.contains("the run is finished") {
            break;
        }
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ksearch"))
            .args(["evaluate", dir])
            .current_dir(setup.work.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        if child.try_wait().unwrap().is_none() {
            kills += 1;
        }
        let _ = child.kill();
        let _ = child.wait();
        let (_, rows, evaluated) = counts(&run);
        assert_eq!(rows, evaluated, "after a kill at {delay_ms} ms");
    }
    assert!(kills >= 2, "only {kills} kills found evaluate running");
    loop {
        if setup.answer_next(&run, &mut why) {
            continue;
        }
        if why.contains("the run is finished") {
            break;
        }
        let e = setup.ksearch(&["evaluate", dir]);
        assert_eq!(e.code, 0, "{}", e.stderr);
    }
    let (_, rows, evaluated) = counts(&run);
    assert_eq!(rows, evaluated);
    let show = setup.show(&run);
    assert!(show["state"].as_str().unwrap().starts_with("finished"), "{show}");
}

#[test]
fn two_runs_into_one_directory_at_once_leave_one_whole_run() {
    let work = tempfile::tempdir().unwrap();
    let task = fixture("tiny_softmax_tunable");
    for i in 0..6 {
        let out = work.path().join(format!("r{i}"));
        let spawn = || {
            std::process::Command::new(env!("CARGO_BIN_EXE_ksearch"))
                .args([
                    "run",
                    task.to_str().unwrap(),
                    "--brain",
                    "tuner",
                    "--rounds",
                    "1",
                    "--seed",
                    "4",
                    "--json",
                    "--out",
                ])
                .arg(&out)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (spawn(), spawn());
        let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
        let won = outs.iter().filter(|o| o.status.code() == Some(0)).count();
        assert_eq!(
            won,
            1,
            "try {i}: {:?}",
            outs.iter()
                .map(|o| String::from_utf8_lossy(&o.stderr).to_string())
                .collect::<Vec<_>>()
        );
        let lost = outs.iter().find(|o| o.status.code() != Some(0)).unwrap();
        let why = String::from_utf8_lossy(&lost.stderr);
        assert!(
            // (The holder's name may not be written yet when the lock is seen taken.)
            why.contains("the run is in use by") || why.contains("already holds a run"),
            "try {i}: the second run must be refused cleanly: {why}"
        );
        // The directory holds one whole run that show and resume accept.
        let show = ksearch(&["show", out.to_str().unwrap(), "--json"]);
        assert_eq!(show.code, 0, "try {i}: {}", show.stderr);
        assert!(
            show.json()["state"].as_str().unwrap().starts_with("finished"),
            "try {i}"
        );
    }
}
