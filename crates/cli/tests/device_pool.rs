//! The device pool through `ksearch run`: evaluations of two ksearch processes never share a
//! device (the cross-process lock), a process killed with SIGKILL frees its device, and with
//! `--parallel 2 --devices 0,1` (GPUs from a fake `nvidia-smi`) concurrent evaluations get
//! distinct GPUs and each is told its own. A fake interpreter (`KSEARCH_PYTHON`) stands for the
//! harness's: it logs when each evaluation starts and ends and what it was given, and either
//! runs the real harness with `python3` or fails the evaluation (GPU tasks, no GPU here).

mod common;
use common::*;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Writes the fake interpreter and `nvidia-smi` into `dir/bin`. The interpreter appends
/// `start <pid> <time> <MARK> <device name> <CUDA_VISIBLE_DEVICES>` and `end <pid> <time>` to
/// `$FAKE_LOG` around each evaluation (not around `-c` probes); with `$FAKE_HOLD` it holds the
/// evaluation until killed, with `$FAKE_GPU` it sleeps a second and fails, otherwise it runs the
/// real harness.
fn fakes(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let python = r#"#!/bin/bash
if [ "$1" != "-m" ]; then exec python3 "$@"; fi
request=$(mktemp)
cat > "$request"
device=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["device"]["name"])' "$request")
echo "start $$ $(date +%s.%N) ${MARK:-none} $device ${CUDA_VISIBLE_DEVICES-unset}" >> "$FAKE_LOG"
if [ -n "$FAKE_HOLD" ]; then exec sleep 300; fi
if [ -n "$FAKE_GPU" ]; then sleep 1; rc=3; else python3 "$@" < "$request"; rc=$?; fi
echo "end $$ $(date +%s.%N)" >> "$FAKE_LOG"
rm -f "$request"
exit $rc
"#;
    let smi = "#!/bin/sh\nprintf '0, NVIDIA H200, GPU-aaaaaaaa-0000-0000-0000-000000000000, 143771 MiB\\n1, NVIDIA H200, GPU-bbbbbbbb-1111-1111-1111-111111111111, 143771 MiB\\n'\n";
    for (name, text) in [("python", python), ("nvidia-smi", smi)] {
        let path = bin.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    bin
}

/// One evaluation as the fake interpreter logged it.
#[derive(Debug, Clone)]
struct Logged {
    pid: u32,
    start: f64,
    end: Option<f64>,
    mark: String,
    device: String,
    visible: String,
}

fn read_log(path: &Path) -> Vec<Logged> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out: Vec<Logged> = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.first() {
            Some(&"start") => out.push(Logged {
                pid: f[1].parse().unwrap(),
                start: f[2].parse().unwrap(),
                end: None,
                mark: f[3].to_string(),
                device: f[4].to_string(),
                visible: f[5].to_string(),
            }),
            Some(&"end") => {
                let pid: u32 = f[1].parse().unwrap();
                if let Some(e) = out.iter_mut().find(|e| e.pid == pid && e.end.is_none()) {
                    e.end = Some(f[2].parse().unwrap());
                }
            }
            _ => {}
        }
    }
    out
}

/// A `ksearch run` in the background, its stderr read line by line.
struct Background {
    child: Child,
    stderr: mpsc::Receiver<String>,
}

impl Background {
    fn start(work: &Path, args: &[&str], env: &[(&str, String)]) -> Background {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ksearch"));
        cmd.current_dir(work)
            .args(args)
            .env("XDG_CONFIG_HOME", work)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let err = child.stderr.take().unwrap();
        let (tx, stderr) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Background { child, stderr }
    }

    /// The first stderr line containing `text` within `within`.
    fn said(&self, text: &str, within: Duration) -> Option<String> {
        let deadline = Instant::now() + within;
        loop {
            match self
                .stderr
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(line) if line.contains(text) => return Some(line),
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
    }

    fn wait(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "ksearch did not finish within {within:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn eventually<T>(what: &str, within: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The environment of a run: the fakes first on PATH, private device locks, the log.
fn run_env(dir: &Path, bin: &Path, mark: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()),
        ),
        ("KSEARCH_PYTHON", bin.join("python").display().to_string()),
        ("KSEARCH_DEVICE_LOCK_DIR", dir.join("locks").display().to_string()),
        ("FAKE_LOG", dir.join("log").display().to_string()),
        ("MARK", mark.to_string()),
        // The fake interpreter stands in for the harness process that a fresh evaluation
        // starts (`python -m ksearch_harness`); the warm server (on for GPU backends) would run
        // the real harness in its forked children instead, out of the fake's sight.
        ("KSEARCH_WARM", "0".to_string()),
    ]
}

fn tuner_run<'a>(task: &'a str, out: &'a str, rounds: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run", task, "--rounds", rounds, "--seed", "3", "--json", "--out", out];
    args.extend_from_slice(extra);
    args
}

#[test]
fn two_ksearch_processes_never_evaluate_on_one_cpu_slot_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fakes(dir.path());
    let task = fixture("tiny_softmax_tunable").display().to_string();
    let (out_a, out_b) = (
        dir.path().join("a").display().to_string(),
        dir.path().join("b").display().to_string(),
    );
    let mut runs = [
        Background::start(
            dir.path(),
            &tuner_run(&task, &out_a, "3", &["--devices", "cpu"]),
            &run_env(dir.path(), &bin, "A"),
        ),
        Background::start(
            dir.path(),
            &tuner_run(&task, &out_b, "3", &["--devices", "cpu"]),
            &run_env(dir.path(), &bin, "B"),
        ),
    ];
    for r in &mut runs {
        assert!(r.wait(Duration::from_secs(300)).success());
    }
    let mut log = read_log(&dir.path().join("log"));
    assert!(log.iter().filter(|e| e.mark == "A").count() >= 3, "{log:?}");
    assert!(log.iter().filter(|e| e.mark == "B").count() >= 3, "{log:?}");
    log.sort_by(|a, b| a.start.total_cmp(&b.start));
    for w in log.windows(2) {
        let end = w[0].end.expect("every evaluation ended");
        assert!(
            w[1].start >= end,
            "evaluations of {} and {} overlapped on cpu:0: {w:?}",
            w[0].mark,
            w[1].mark
        );
    }
}

#[test]
fn a_run_waits_for_a_device_held_by_another_and_gets_it_when_that_one_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fakes(dir.path());
    let task = fixture("tiny_softmax_tunable").display().to_string();
    let (out_a, out_b) = (
        dir.path().join("a").display().to_string(),
        dir.path().join("b").display().to_string(),
    );
    let log = dir.path().join("log");
    // A holds cpu:0 in an evaluation that never ends.
    let mut env_a = run_env(dir.path(), &bin, "A");
    env_a.push(("FAKE_HOLD", "1".into()));
    let mut a = Background::start(dir.path(), &tuner_run(&task, &out_a, "2", &[]), &env_a);
    let held = eventually("A's evaluation", Duration::from_secs(60), || {
        read_log(&log).into_iter().find(|e| e.mark == "A")
    });
    let mut b = Background::start(
        dir.path(),
        &tuner_run(&task, &out_b, "2", &[]),
        &run_env(dir.path(), &bin, "B"),
    );
    let notice = b
        .said("waiting for it", Duration::from_secs(60))
        .expect("B waits without saying why");
    assert!(
        notice.contains("cpu:0 is in use by another process")
            && notice.contains(&format!("pid {}", a.child.id()))
            && notice.contains("ksearch run"),
        "the notice names the holder's pid and command: {notice}"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !read_log(&log).iter().any(|e| e.mark == "B"),
        "B evaluated while A held the device"
    );
    a.child.kill().unwrap(); // SIGKILL: ksearch cleans nothing up
    a.child.wait().unwrap();
    // A's orphaned evaluation (its own process group) is still running: it must not hold the
    // device. It is ended only after B is seen to proceed.
    let orphan_alive = Path::new(&format!("/proc/{}", held.pid)).exists();
    let got = eventually("B's evaluation after A was killed", Duration::from_secs(60), || {
        read_log(&log).into_iter().find(|e| e.mark == "B")
    });
    assert!(got.start > held.start);
    if orphan_alive {
        let _ = Command::new("kill").args(["-9", &held.pid.to_string()]).status();
    }
    let status = b.wait(Duration::from_secs(300));
    assert!(status.success(), "B failed: {status}");
}

#[test]
fn parallel_evaluations_get_distinct_gpus_each_told_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fakes(dir.path());
    let task = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/attention_prefill");
    let task = task.display().to_string();
    let out = dir.path().join("run");
    let out_s = out.display().to_string();
    let mut env = run_env(dir.path(), &bin, "G");
    env.push(("FAKE_GPU", "1".into()));
    let args = tuner_run(
        &task,
        &out_s,
        "4",
        &["--strategy", "evolve", "--parallel", "2", "--devices", "0,1"],
    );
    let r = ksearch_in(
        dir.path(),
        &args,
        &env.iter().map(|(k, v)| (*k, v.as_str())).collect::<Vec<_>>(),
    );
    assert_eq!(
        r.code, 1,
        "every evaluation fails (no GPU here):\n{}\n{}",
        r.stdout, r.stderr
    );
    assert_eq!(r.json()["max_in_flight"], 2, "{}", r.stdout);
    let log = read_log(&dir.path().join("log"));
    assert!(log.len() >= 3, "{log:?}");
    // Each evaluation sees its leased GPU alone: CUDA_VISIBLE_DEVICES names it by UUID, and
    // inside, it is cuda:0.
    let uuids = [
        "GPU-aaaaaaaa-0000-0000-0000-000000000000",
        "GPU-bbbbbbbb-1111-1111-1111-111111111111",
    ];
    for e in &log {
        assert_eq!(e.device, "cuda:0", "{e:?}");
        assert!(uuids.contains(&e.visible.as_str()), "{e:?}");
    }
    // Evaluations that ran at the same time ran on different GPUs, and some did.
    let mut overlapping = 0;
    for (i, x) in log.iter().enumerate() {
        for y in &log[i + 1..] {
            if x.start < y.end.unwrap() && y.start < x.end.unwrap() {
                overlapping += 1;
                assert_ne!(x.visible, y.visible, "two evaluations on one GPU at once: {x:?} {y:?}");
            }
        }
    }
    assert!(overlapping >= 1, "no two evaluations ran at once: {log:?}");
    // The records name the leased GPU by label and UUID, matching what the harness was told.
    let store = ksearch_store::RunStore::open(&out).unwrap();
    let evaluations = store.evaluations().unwrap();
    assert_eq!(evaluations.len(), log.len());
    for e in evaluations {
        let (leased, uuid) = (&e.record["leased_device"], &e.record["leased_device_uuid"]);
        let want = match leased.as_str() {
            Some("cuda:0") => "GPU-aaaaaaaa-0000-0000-0000-000000000000",
            Some("cuda:1") => "GPU-bbbbbbbb-1111-1111-1111-111111111111",
            other => panic!("leased_device {other:?}"),
        };
        assert_eq!(uuid, want, "{}", e.record);
        // The harness was told cuda:0 under CUDA_VISIBLE_DEVICES=<that UUID>.
        assert_eq!(e.record["provenance"]["device"], "cuda:0", "{}", e.record);
        assert!(
            log.iter().any(|l| l.visible == want),
            "no evaluation saw {want}: {log:?}"
        );
    }
}

#[test]
fn ksearch_eval_waits_for_the_cpu_slot_another_process_holds() {
    // Another process holds CPU slot 0's lock for two seconds (flock(1), which records no
    // holder); `ksearch eval` says it waits, and evaluates once the lock is free.
    let Ok(host) = Command::new("uname").arg("-n").output() else {
        return eprintln!("skipping: no uname");
    };
    let host: String = String::from_utf8_lossy(&host.stdout)
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let locks = tempfile::tempdir().unwrap();
    let file = locks.path().join(format!("cpu-{host}-0.lock"));
    let holder = Command::new("flock").arg(&file).args(["sleep", "2"]).spawn();
    let Ok(mut holder) = holder else {
        return eprintln!("skipping: no flock(1) (util-linux)");
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !file.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let task = fixture("tiny_softmax");
    let start = Instant::now();
    let r = ksearch_env(
        &["eval", task.to_str().unwrap(), "--json", "--seed", "7"],
        &[("KSEARCH_DEVICE_LOCK_DIR", locks.path().to_str().unwrap())],
    );
    let waited = start.elapsed();
    let _ = holder.wait();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["status"], "passed", "{}", r.stdout);
    assert!(r.stderr.contains("in use by another process"), "{}", r.stderr);
    assert!(
        waited >= Duration::from_millis(1500),
        "evaluated after {waited:?}, while the slot was held"
    );
}
