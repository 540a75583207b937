//! `--executor ray` against a real local Ray head (127.0.0.1, two CPU worker slots) started by
//! the test and stopped after it, even on failure: a CPU-task search reaches the same final
//! state as a local run; a Ray worker killed mid-evaluation is re-run once and the candidate
//! recorded once; a wrong address fails at once, naming it; a head stopped mid-run stops the
//! run cleanly (exit 1, the address and `ksearch resume` named, the evaluations in flight left
//! pending) and `resume --executor local` evaluates those once each; a `ray://` address is
//! watched the same way, and `resume --ray-address` moves a run to a cluster at another address.
//!
//! Skipped (said on stderr) when `python3 -c 'import ray'` fails, unless KSEARCH_REQUIRE_RAY=1.

mod common;
use common::*;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn ray_missing() -> Option<String> {
    let out = Command::new("python3").args(["-c", "import ray"]).output();
    match out {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(
            String::from_utf8_lossy(&o.stderr)
                .trim()
                .lines()
                .last()
                .unwrap_or("")
                .to_string(),
        ),
        Err(e) => Some(format!("python3: {e}")),
    }
}

/// `true` when the test must skip (ray is missing and not required).
fn skip() -> bool {
    let Some(why) = ray_missing() else { return false };
    if std::env::var("KSEARCH_REQUIRE_RAY").as_deref() == Ok("1") {
        panic!("KSEARCH_REQUIRE_RAY=1 but python3 cannot import ray: {why}");
    }
    eprintln!("skipped: python3 cannot import ray ({why}); `pip install ray==2.60.0` runs these tests");
    true
}

/// The tests of this file one at a time: each starts a Ray head (a GCS, a raylet, workers, and
/// for `ray://` a client server that starts a server per connection within a time limit), and on
/// a 2-core CI machine several at once starve each other into Ray's own start-up timeouts.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A Ray head in a process group of its own; dropping it ends that group (never `ray stop`,
/// which would stop every Ray on the machine).
struct Head {
    child: Child,
    address: String,
    temp: tempfile::TempDir,
    stopped: bool,
}

impl Head {
    fn start() -> Head {
        Head::start_on(None)
    }

    /// A head whose Ray Client server listens on a port of its own; `client` is then its
    /// `ray://` address.
    fn start_with_client() -> (Head, String) {
        let port = free_port();
        (Head::start_on(Some(port)), format!("ray://127.0.0.1:{port}"))
    }

    fn start_on(client_port: Option<u16>) -> Head {
        use std::os::unix::process::CommandExt;
        // Short: Ray's socket paths live under it and must stay under 107 bytes.
        let temp = tempfile::Builder::new().prefix("ksr").tempdir_in("/tmp").unwrap();
        let port = free_port();
        let mut cmd = Command::new("ray");
        cmd.args([
            "start",
            "--head",
            "--block",
            "--node-ip-address=127.0.0.1",
            "--num-cpus=2",
            "--num-gpus=0",
        ])
        .arg(format!("--port={port}"))
        .arg(format!("--temp-dir={}", temp.path().display()))
        .arg(format!("--dashboard-agent-listen-port={}", free_port()))
        .args(["--include-dashboard=false", "--disable-usage-stats"])
        .args(client_port.map(|p| format!("--ray-client-server-port={p}")))
        .env("RAY_USAGE_STATS_ENABLED", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
        let child = cmd.spawn().expect("cannot run `ray start`");
        let head = Head {
            child,
            address: format!("127.0.0.1:{port}"),
            temp,
            stopped: false,
        };
        // Ready once a driver connects the way the test will: through the Ray Client server when
        // there is one (its first connection starts a server per client, which fails while the
        // head's runtime-env agent is still starting), else through the GCS.
        let connect_to = match client_port {
            Some(p) => format!("ray://127.0.0.1:{p}"),
            None => head.address.clone(),
        };
        let ready = format!(
            "import ray; ray.init(address='{connect_to}', logging_level='ERROR'); \
             import sys; sys.exit(0 if ray.cluster_resources().get('CPU', 0) >= 2 else 1)"
        );
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(90) {
            let client_up = client_port.is_none_or(|p| std::net::TcpStream::connect(("127.0.0.1", p)).is_ok());
            if client_up
                && std::net::TcpStream::connect(&head.address).is_ok()
                && Command::new("python3")
                    .args(["-c", &ready])
                    .output()
                    .is_ok_and(|o| o.status.success())
            {
                return head;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        panic!("the Ray head at {} did not come up in 90 s", head.address);
    }
}

impl Head {
    /// Ends the head's process group (the GCS, the raylet, its workers); once.
    fn stop(&mut self, grace: Duration) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        std::thread::sleep(grace);
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.wait();
    }
}

impl Drop for Head {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(2));
    }
}

fn search(work: &Path, run_dir: &Path, extra: &[&str]) -> Run {
    search_rounds(work, run_dir, "2", extra)
}

fn search_rounds(work: &Path, run_dir: &Path, rounds: &str, extra: &[&str]) -> Run {
    let task = fixture("tiny_softmax_tunable");
    let mut args = vec![
        "run",
        task.to_str().unwrap(),
        "--brain",
        "tuner",
        "--rounds",
        rounds,
        "--seed",
        "3",
        // Whether the best is measured again depends on the noise each run measured: the two
        // executors are compared on the same evaluations, so none.
        "--remeasure",
        "0",
        "--json",
        "--out",
        run_dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    ksearch_in(work, &args, &[("XDG_CONFIG_HOME", work.to_str().unwrap())])
}

/// ((candidate, purpose), record) of every evaluation row.
fn records(run_dir: &Path) -> Vec<((i64, String), serde_json::Value)> {
    let db = rusqlite::Connection::open(run_dir.join("run.sqlite")).unwrap();
    let mut q = db
        .prepare("SELECT candidate_id, purpose, record FROM evaluations ORDER BY id")
        .unwrap();
    q.query_map([], |r| {
        Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
    })
    .unwrap()
    .map(|r| {
        let (c, p, text) = r.unwrap();
        ((c, p), serde_json::from_str(&text).unwrap())
    })
    .collect()
}

/// The (candidate, purpose) of each evaluation, sorted (parallel runs record in any order).
/// The candidates searched, and those re-measured at the end: some, and only candidates whose
/// search evaluation passed. Which ones pass, and whether a final re-measurement itself is
/// recorded, is up to the timings under load (CI runs here lost one and two finals), so two runs
/// are compared on what they searched, each held to its own finals.
fn searched_and_finals_consistent(recs: &[((i64, String), serde_json::Value)]) -> Vec<i64> {
    let ids = |purpose: &str| -> Vec<i64> {
        let mut v: Vec<i64> = recs
            .iter()
            .filter(|((_, p), _)| p == purpose)
            .map(|((c, _), _)| *c)
            .collect();
        v.sort();
        v
    };
    let mut passed: Vec<i64> = recs
        .iter()
        .filter(|((_, p), r)| p == "search" && r["status"] == "passed")
        .map(|((c, _), _)| *c)
        .collect();
    passed.sort();
    let finals = ids("final");
    assert!(
        !finals.is_empty() && finals.iter().all(|c| passed.contains(c)),
        "finals {finals:?} are not some of the passing candidates {passed:?}: {recs:?}"
    );
    ids("search")
}

fn keys(recs: &[((i64, String), serde_json::Value)]) -> Vec<(i64, String)> {
    let mut k: Vec<_> = recs.iter().map(|(k, _)| k.clone()).collect();
    k.sort();
    k
}

/// Whether a `ksearch eval` of this head's workers is running now (its parent is a Ray worker
/// of this head).
fn evaluation_running(head: &Head) -> bool {
    let marker = head.temp.path().to_string_lossy().into_owned();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let dir = entry.path();
        let cmd = std::fs::read(dir.join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if !(cmd.contains(" eval ") && cmd.contains("ksearch-ray-")) {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
        let Some(ppid) = stat.rsplit(')').next().and_then(|s| s.split_whitespace().nth(1)) else {
            continue;
        };
        let parent =
            String::from_utf8_lossy(&std::fs::read(format!("/proc/{ppid}/cmdline")).unwrap_or_default()).into_owned();
        let environ =
            String::from_utf8_lossy(&std::fs::read(format!("/proc/{ppid}/environ")).unwrap_or_default()).into_owned();
        if parent.contains("ray::") || parent.contains(&marker) || environ.contains(&marker) {
            return true;
        }
    }
    false
}

/// Evaluation rows recorded so far (0 while the run has no store yet).
fn recorded_count(run_dir: &Path) -> i64 {
    let Ok(db) =
        rusqlite::Connection::open_with_flags(run_dir.join("run.sqlite"), rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return 0;
    };
    db.query_row("SELECT COUNT(*) FROM evaluations", [], |r| r.get(0))
        .unwrap_or(0)
}

/// Kills, once, the Ray worker process (the parent of a `ksearch eval` under this head's
/// session) running the first evaluation it sees; `true` if it killed one.
fn kill_a_worker_mid_evaluation(head: &Head, deadline: Duration) -> bool {
    let marker = head.temp.path().to_string_lossy().into_owned();
    let start = Instant::now();
    while start.elapsed() < deadline {
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let dir = entry.path();
            let cmd = std::fs::read(dir.join("cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if !(cmd.contains(" eval ") && cmd.contains("ksearch-ray-")) {
                continue;
            }
            let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
            let Some(ppid) = stat.rsplit(')').next().and_then(|s| s.split_whitespace().nth(1)) else {
                continue;
            };
            let parent = std::fs::read(format!("/proc/{ppid}/cmdline")).unwrap_or_default();
            let parent = String::from_utf8_lossy(&parent).into_owned();
            let environ = std::fs::read(format!("/proc/{ppid}/environ")).unwrap_or_default();
            let environ = String::from_utf8_lossy(&environ).into_owned();
            if parent.contains("ray::") || parent.contains(&marker) || environ.contains(&marker) {
                let _ = Command::new("kill").args(["-KILL", ppid]).status();
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn a_search_on_a_ray_cluster_ends_as_a_local_one_and_a_lost_worker_is_rerun_once() {
    let _serial = serial();
    if skip() {
        return;
    }
    let ksearch_bin = env!("CARGO_BIN_EXE_ksearch");
    let head = Head::start();
    let work = tempfile::tempdir().unwrap();
    let ray_args = [
        "--executor",
        "ray",
        "--ray-address",
        head.address.as_str(),
        "--ray-ksearch",
        ksearch_bin,
        "--parallel",
        "auto",
    ];

    // The same search, here and on the cluster: the same final state and candidates.
    let local_dir = work.path().join("local");
    let local = search(work.path(), &local_dir, &[]);
    assert_eq!(local.code, 0, "{}\n{}", local.stdout, local.stderr);
    let ray_dir = work.path().join("ray");
    let ray = search(work.path(), &ray_dir, &ray_args);
    assert_eq!(ray.code, 0, "{}\n{}", ray.stdout, ray.stderr);
    let (l, r) = (local.json(), ray.json());
    assert_eq!(r["status"], l["status"], "{r}\n{l}");
    assert_eq!(r["status"], "finished");
    assert_eq!(r["rounds"], l["rounds"]);
    // --parallel auto: the head's two CPUs.
    assert_eq!(r["max_in_flight"], 2, "{r}");
    let (lrec, rrec) = (records(&local_dir), records(&ray_dir));
    assert_eq!(
        searched_and_finals_consistent(&lrec),
        searched_and_finals_consistent(&rrec)
    );
    for (_, rec) in &rrec {
        // The node's own address (Ray reports the host's, whatever the head listens on).
        let ip = rec["node"]["ip"].as_str().unwrap_or("");
        assert!(
            !ip.is_empty() && rec["node"]["node_id"].as_str().is_some_and(|n| !n.is_empty()),
            "{rec}"
        );
        assert_eq!(rec["leased_device"], format!("ray:{ip}:cpu"), "{rec}");
        assert_eq!(rec["node"]["attempts"], 1, "{rec}");
    }

    // A worker killed mid-evaluation: re-run once, recorded once, and the run still finishes.
    let kill_dir = work.path().join("killed");
    let killer = {
        let head = &head;
        std::thread::scope(|s| {
            let k = s.spawn(|| kill_a_worker_mid_evaluation(head, Duration::from_secs(60)));
            let run = search(work.path(), &kill_dir, &ray_args);
            (k.join().unwrap(), run)
        })
    };
    let (killed, run) = killer;
    assert!(killed, "no evaluation was seen running on the cluster");
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.json()["status"], "finished", "{}", run.stderr);
    let recs = records(&kill_dir);
    let mut ids = keys(&recs);
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n, "an evaluation was recorded twice: {ids:?}");
    assert_eq!(
        searched_and_finals_consistent(&recs),
        searched_and_finals_consistent(&rrec)
    );
    let rerun: Vec<_> = recs.iter().filter(|(_, r)| r["node"]["attempts"] == 2).collect();
    assert_eq!(rerun.len(), 1, "{recs:?}");
}

#[test]
fn a_wrong_ray_address_fails_at_once_naming_it() {
    let _serial = serial();
    if skip() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let run_dir: PathBuf = work.path().join("run");
    let address = format!("127.0.0.1:{}", free_port());
    let r = search(work.path(), &run_dir, &["--executor", "ray", "--ray-address", &address]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains(&address), "{}", r.stderr);
    assert!(r.elapsed < Duration::from_secs(10), "{:?}", r.elapsed);
    assert!(
        !run_dir.exists(),
        "a run directory was created for an unreachable cluster"
    );
    // Without any address the flag's absence is named.
    let r = search(work.path(), &run_dir, &["--executor", "ray"]);
    assert!(r.stderr.contains("--ray-address"), "{}", r.stderr);
}

#[test]
fn a_cluster_that_goes_away_stops_the_run_cleanly_and_resume_evaluates_what_was_in_flight() {
    let _serial = serial();
    if skip() {
        return;
    }
    let ksearch_bin = env!("CARGO_BIN_EXE_ksearch");
    let mut head = Head::start();
    let address = head.address.clone();
    let work = tempfile::tempdir().unwrap();
    let ray_args = [
        "--executor",
        "ray",
        "--ray-address",
        address.as_str(),
        "--ray-ksearch",
        ksearch_bin,
        "--parallel",
        "auto",
    ];
    let rounds = "3";
    let run_dir = work.path().join("ray");

    // The head is stopped once something is recorded and an evaluation is running on it.
    let (stopped_head, run) = std::thread::scope(|s| {
        let run = s.spawn(|| search_rounds(work.path(), &run_dir, rounds, &ray_args));
        let start = Instant::now();
        let mut stopped_head = false;
        while start.elapsed() < Duration::from_secs(60) && !run.is_finished() {
            if recorded_count(&run_dir) >= 1 && evaluation_running(&head) {
                head.stop(Duration::ZERO);
                stopped_head = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        (stopped_head, run.join().unwrap())
    });
    assert!(
        stopped_head,
        "no evaluation was seen running after a recorded one:\n{}",
        run.stderr
    );
    assert!(run.elapsed < Duration::from_secs(60), "{:?}", run.elapsed);

    // A clean stop: exit 1, the address and the resume hint named, nothing recorded as failed.
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let j = run.json();
    assert_eq!(j["status"], "executor_unavailable", "{j}");
    let message = j["message"].as_str().unwrap_or("");
    eprintln!("the stopped run says:\n{message}");
    assert!(message.contains(&address), "{message}");
    assert!(
        message.contains(&format!("ksearch resume {}", run_dir.display())),
        "{message}"
    );
    let pending: Vec<i64> = serde_json::from_value(j["pending"].clone()).unwrap();
    assert!(!pending.is_empty(), "no evaluation was in flight: {j}");
    let db = rusqlite::Connection::open(run_dir.join("run.sqlite")).unwrap();
    let stop: serde_json::Value = serde_json::from_str(
        &db.query_row("SELECT value FROM meta WHERE key = 'stopped'", [], |r| {
            r.get::<_, String>(0)
        })
        .unwrap(),
    )
    .unwrap();
    assert_eq!(stop["reason"], "executor_unavailable", "{stop}");
    assert!(stop["detail"].as_str().unwrap_or("").contains(&address), "{stop}");
    let failed: i64 = db
        .query_row("SELECT COUNT(*) FROM events WHERE kind = 'request_failed'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(failed, 0, "an evaluation was recorded as failed");
    let before = records(&run_dir);
    assert!(!before.is_empty());
    for (key, rec) in &before {
        assert!(
            !pending.contains(&key.0) || key.1 != "search",
            "pending {key:?} was recorded: {rec}"
        );
    }
    drop(db);

    // Resumed here: the run finishes as the same search run locally does, each evaluation once.
    let env = [("XDG_CONFIG_HOME", work.path().to_str().unwrap())];
    let dir = run_dir.to_str().unwrap();
    // Meanwhile `show` says why it stopped, not that it waits on the evaluator.
    let shown = ksearch_in(work.path(), &["show", dir], &env);
    assert!(
        shown.stdout.contains("stopped (executor_unavailable)") && shown.stdout.contains(&address),
        "{}",
        shown.stdout
    );
    // A resume on the cluster while it is still down fails, and the run still says why it is
    // stopped, with the hint (not a generic error).
    let early = ksearch_in(work.path(), &["resume", dir], &env);
    assert_ne!(early.code, 0, "{}\n{}", early.stdout, early.stderr);
    let shown = ksearch_in(work.path(), &["show", dir], &env);
    assert!(
        shown.stdout.contains("stopped (executor_unavailable)") && shown.stdout.contains("ksearch resume"),
        "{}",
        shown.stdout
    );
    let resumed = ksearch_in(work.path(), &["resume", dir, "--executor", "local", "--json"], &env);
    assert_eq!(resumed.code, 0, "{}\n{}", resumed.stdout, resumed.stderr);
    assert_eq!(resumed.json()["status"], "finished", "{}", resumed.stdout);
    let local_dir = work.path().join("local");
    let local = search_rounds(work.path(), &local_dir, rounds, &[]);
    assert_eq!(local.code, 0, "{}\n{}", local.stdout, local.stderr);
    let after = records(&run_dir);
    let mut ids = keys(&after);
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n, "an evaluation was recorded twice: {ids:?}");
    // The same candidates searched, and as many re-measured (which ones are the fastest is up
    // to the timings, here and there).
    let local_keys = keys(&records(&local_dir));
    let of = |keys: &[(i64, String)], purpose: &str| -> Vec<i64> {
        keys.iter().filter(|(_, p)| p == purpose).map(|(c, _)| *c).collect()
    };
    assert_eq!(of(&ids, "search"), of(&local_keys, "search"), "{ids:?}\n{local_keys:?}");
    assert_eq!(
        of(&ids, "final").len(),
        of(&local_keys, "final").len(),
        "{ids:?}\n{local_keys:?}"
    );
    for c in &pending {
        assert!(ids.iter().any(|(id, _)| id == c), "candidate {c} was never evaluated");
    }
    // What was recorded before the stop is still there, unchanged, and judged as a local run
    // judges it (no record of the cluster's going away).
    let local_recs = records(&local_dir);
    for (key, rec) in &before {
        assert!(after.iter().any(|(k, r)| k == key && r == rec), "{key:?} changed");
        if key.1 == "search" {
            let same = local_recs.iter().find(|(k, _)| k == key).map(|(_, r)| &r["status"]);
            assert_eq!(Some(&rec["status"]), same, "{key:?}: {rec}");
        }
    }
}

/// What Ray Client says when its per-connection server fails to start (seen under load).
const CLIENT_SERVER_FLAKE: &str = "Starting Ray client server failed";

/// `true` when the `ray://` test must skip: Ray Client needs `ray[client]` (grpcio).
fn skip_client() -> bool {
    if skip() {
        return true;
    }
    let ok = Command::new("python3")
        .args(["-c", "import grpc"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return false;
    }
    if std::env::var("KSEARCH_REQUIRE_RAY").as_deref() == Ok("1") {
        panic!("KSEARCH_REQUIRE_RAY=1 but python3 cannot import grpc, which Ray Client (`ray://`) needs");
    }
    eprintln!("skipped: python3 cannot import grpc; `pip install 'ray[client]==2.60.0'` runs this test");
    true
}

#[test]
fn a_ray_client_address_is_watched_and_resume_moves_the_run_to_a_cluster_at_another_address() {
    let _serial = serial();
    if skip_client() {
        return;
    }
    let ksearch_bin = env!("CARGO_BIN_EXE_ksearch");
    let (mut first, address) = Head::start_with_client();
    let work = tempfile::tempdir().unwrap();
    let run_dir = work.path().join("ray");
    let ray_args = [
        "--executor",
        "ray",
        "--ray-address",
        address.as_str(),
        "--ray-ksearch",
        ksearch_bin,
        "--parallel",
        "auto",
    ];

    // The head goes away mid-evaluation: the watchdog, trying the Ray Client server's port,
    // stops the run in seconds (Ray Client itself waits out a 30 s reconnection grace).
    // Ray Client's per-connection server sometimes fails to start on a loaded machine ("Starting
    // Ray client server failed", before anything is recorded); that connection is tried again,
    // up to three times, on a fresh run directory.
    let mut attempts = 0;
    let (stopped_at, run) = loop {
        attempts += 1;
        let (stopped_at, run) = std::thread::scope(|s| {
            let run = s.spawn(|| search_rounds(work.path(), &run_dir, "3", &ray_args));
            let start = Instant::now();
            let mut stopped_at = None;
            while start.elapsed() < Duration::from_secs(60) && !run.is_finished() {
                if recorded_count(&run_dir) >= 1 && evaluation_running(&first) {
                    first.stop(Duration::ZERO);
                    stopped_at = Some(Instant::now());
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            (stopped_at, run.join().unwrap())
        });
        if stopped_at.is_none() && run.stderr.contains(CLIENT_SERVER_FLAKE) && attempts < 3 {
            eprintln!("Ray Client's server did not start (attempt {attempts}); connecting again");
            let _ = std::fs::remove_dir_all(&run_dir);
            continue;
        }
        break (stopped_at, run);
    };
    let stopped_at = stopped_at.unwrap_or_else(|| panic!("no evaluation was seen running:\n{}", run.stderr));
    let noticed = stopped_at.elapsed();
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let j = run.json();
    assert_eq!(j["status"], "executor_unavailable", "{j}");
    assert!(
        noticed < Duration::from_secs(20),
        "the run went on {noticed:?} after its head stopped"
    );
    let message = j["message"].as_str().unwrap_or("");
    assert!(
        message.contains(&address) && message.contains("--ray-address ADDR"),
        "{message}"
    );
    let pending: Vec<i64> = serde_json::from_value(j["pending"].clone()).unwrap();
    let before = records(&run_dir);

    let env = [("XDG_CONFIG_HOME", work.path().to_str().unwrap())];
    let dir = run_dir.to_str().unwrap();
    let recorded_address = || -> String {
        let db = rusqlite::Connection::open(run_dir.join("run.sqlite")).unwrap();
        let v: String = db
            .query_row("SELECT value FROM meta WHERE key = 'ray'", [], |r| r.get(0))
            .unwrap();
        serde_json::from_str::<serde_json::Value>(&v).unwrap()["address"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // A new address nothing answers at is refused at once, naming it, and changes nothing.
    let dead = format!("ray://127.0.0.1:{}", free_port());
    let refused = ksearch_in(work.path(), &["resume", dir, "--ray-address", &dead], &env);
    assert_ne!(refused.code, 0, "{}\n{}", refused.stdout, refused.stderr);
    assert!(refused.stderr.contains(&dead), "{}", refused.stderr);
    assert_eq!(recorded_address(), address);
    // --ray-address is for a drive on Ray.
    let local = ksearch_in(
        work.path(),
        &["resume", dir, "--executor", "local", "--ray-address", &dead],
        &env,
    );
    assert_ne!(local.code, 0, "{}\n{}", local.stdout, local.stderr);
    assert!(local.stderr.contains("--executor ray"), "{}", local.stderr);
    assert_eq!(recorded_address(), address);

    // The cluster at another address takes the run over; the address is recorded.
    let (_second, moved) = Head::start_with_client();
    let mut resumed = ksearch_in(work.path(), &["resume", dir, "--ray-address", &moved, "--json"], &env);
    for _ in 0..2 {
        if !resumed.stderr.contains(CLIENT_SERVER_FLAKE) {
            break;
        }
        resumed = ksearch_in(work.path(), &["resume", dir, "--json"], &env);
    }
    assert_eq!(resumed.code, 0, "{}\n{}", resumed.stdout, resumed.stderr);
    assert_eq!(resumed.json()["status"], "finished", "{}", resumed.stdout);
    assert_eq!(recorded_address(), moved);
    let after = records(&run_dir);
    let mut ids = keys(&after);
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n, "an evaluation was recorded twice: {ids:?}");
    for c in &pending {
        assert!(ids.iter().any(|(id, _)| id == c), "candidate {c} was never evaluated");
    }
    for (key, rec) in &before {
        assert!(after.iter().any(|(k, r)| k == key && r == rec), "{key:?} changed");
    }
}
