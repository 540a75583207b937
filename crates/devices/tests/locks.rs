//! Device locks across processes: real processes (this test binary run again as a lock holder,
//! see `lock_holder_child`) never hold one device at once, a waiter says whom it waits for, and a
//! holder that dies (exit without cleanup, SIGKILL) frees its device.

use ksearch_devices::{cpu_slots, lock_key, parse_nvidia_smi, DeviceError, DeviceLocks, DevicePool};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const CHILD: &str = "KSEARCH_LOCK_TEST_CHILD";

fn now_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos()
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Not a test of its own: when run by the tests below (with `KSEARCH_LOCK_TEST_CHILD` set), this
/// process leases `LEASES` times from a pool of `SLOTS` CPU slots with locks in `LOCK_DIR`,
/// printing `WAITING <message>` when told to wait and `HOLD <slot>` when it holds one, appends
/// `acquire`/`release` lines with the time to `LOG`, and holds each lease `HOLD_MS` ms (0:
/// until killed). `END=exit` leaves with the last lease still held, without dropping it.
#[test]
fn lock_holder_child() {
    let Ok(name) = std::env::var(CHILD) else { return };
    let locks = DeviceLocks::new(std::env::var("LOCK_DIR").unwrap());
    let pool = DevicePool::new(cpu_slots(env_or("SLOTS", 1))).unwrap();
    let log = std::env::var("LOG").ok();
    let append = |line: String| {
        if let Some(log) = &log {
            let mut f = std::fs::OpenOptions::new().append(true).create(true).open(log).unwrap();
            f.write_all(line.as_bytes()).unwrap();
        }
    };
    let leases: u32 = env_or("LEASES", 1);
    let hold_ms: u64 = env_or("HOLD_MS", 0);
    for i in 0..leases {
        let lease = pool.lease_locked(&locks, &|m| println!("WAITING {m}")).unwrap();
        let slot = lease.device().index;
        append(format!("acquire {name} {slot} {}\n", now_ns()));
        println!("HOLD {slot}");
        if hold_ms == 0 {
            loop {
                thread::sleep(Duration::from_secs(1));
            }
        }
        thread::sleep(Duration::from_millis(hold_ms));
        if i + 1 == leases && std::env::var("END").as_deref() == Ok("exit") {
            // No destructor runs: the lock file keeps this process's record.
            std::process::exit(0);
        }
        append(format!("release {name} {slot} {}\n", now_ns()));
        drop(lease);
    }
}

/// A lock holder (this binary, running `lock_holder_child`) and its stdout lines.
struct Holder {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Holder {
    fn spawn(name: &str, dir: &Path, env: &[(&str, String)]) -> Holder {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["lock_holder_child", "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, name)
            .env("LOCK_DIR", dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Holder { child, lines }
    }

    /// The next line (from `prefix` on) holding `prefix` within `within` (None if none came).
    fn next(&self, prefix: &str, within: Duration) -> Option<String> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                // libtest may print `test lock_holder_child ... ` before the first line.
                Ok(line) if line.contains(prefix) => return Some(line[line.find(prefix)?..].to_string()),
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn two_processes_never_hold_one_device_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let env = |n: &str| {
        vec![
            ("LEASES", "5".to_string()),
            ("HOLD_MS", "40".to_string()),
            ("LOG", log.display().to_string()),
            ("SLOTS", n.to_string()),
        ]
    };
    // Three processes on cpu:0 (one of them with two slots, so it may also use cpu:1).
    let holders = [
        Holder::spawn("a", dir.path(), &env("1")),
        Holder::spawn("b", dir.path(), &env("1")),
        Holder::spawn("c", dir.path(), &env("2")),
    ];
    for mut h in holders {
        let status = h.child.wait().unwrap();
        assert!(status.success(), "a holder failed: {status}");
    }
    let text = std::fs::read_to_string(&log).unwrap();
    // Per slot: (acquired, released) intervals, which must not overlap.
    let mut spans: std::collections::BTreeMap<String, Vec<(u128, u128, String)>> = Default::default();
    let mut open: std::collections::HashMap<(String, String), u128> = Default::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let (what, who, slot, t) = (f[0], f[1].to_string(), f[2].to_string(), f[3].parse::<u128>().unwrap());
        match what {
            "acquire" => {
                open.insert((who, slot), t);
            }
            _ => {
                let start = open.remove(&(who.clone(), slot.clone())).unwrap();
                spans.entry(slot).or_default().push((start, t, who));
            }
        }
    }
    let total: usize = spans.values().map(Vec::len).sum();
    assert_eq!(total, 15, "every lease was taken and released:\n{text}");
    assert!(spans["0"].len() >= 10, "a and b only ever use cpu:0:\n{text}");
    for (slot, mut s) in spans {
        s.sort();
        for w in s.windows(2) {
            assert!(
                w[1].0 >= w[0].1,
                "cpu:{slot} held by {} and {} at once:\n{text}",
                w[0].2,
                w[1].2
            );
        }
    }
}

#[test]
fn a_holder_that_dies_frees_its_device_and_the_waiter_says_whom_it_waits_for() {
    for end in ["sigkill", "exit"] {
        let dir = tempfile::tempdir().unwrap();
        let first = match end {
            "sigkill" => Holder::spawn("first", dir.path(), &[]),
            _ => Holder::spawn(
                "first",
                dir.path(),
                &[("HOLD_MS", "3000".to_string()), ("END", "exit".to_string())],
            ),
        };
        assert!(
            first.next("HOLD", Duration::from_secs(30)).is_some(),
            "{end}: the first never held cpu:0"
        );
        let second = Holder::spawn("second", dir.path(), &[("HOLD_MS", "1".to_string())]);
        let waiting = second
            .next("WAITING", Duration::from_secs(30))
            .unwrap_or_else(|| panic!("{end}: the second process waits silently"));
        assert!(
            waiting.contains("cpu:0 is in use by another process")
                && waiting.contains(&format!("pid {}", first.pid()))
                && waiting.contains("lock_holder_child"),
            "{end}: the notice names the holder's pid and command: {waiting}"
        );
        assert!(
            second.next("HOLD", Duration::from_millis(300)).is_none(),
            "{end}: the second held cpu:0 while the first did"
        );
        let mut first = first;
        if end == "sigkill" {
            first.child.kill().unwrap(); // SIGKILL: nothing of ksearch runs
        }
        let status = first.child.wait().unwrap();
        if end == "exit" {
            assert!(status.success());
            // It left its record behind (no destructor ran), and still it does not block.
            let record = std::fs::read_to_string(DeviceLocks::new(dir.path()).path(&cpu_slots(1)[0])).unwrap();
            assert!(record.contains(&format!("pid {}", first.pid())), "{record}");
        }
        assert!(
            second.next("HOLD", Duration::from_secs(10)).is_some(),
            "{end}: the second never got cpu:0 after the first died"
        );
        assert!(DeviceLocks::new(dir.path()).path(&cpu_slots(1)[0]).exists());
    }
}

#[test]
fn a_device_held_by_another_process_is_skipped_for_a_free_one() {
    let dir = tempfile::tempdir().unwrap();
    let other = Holder::spawn("other", dir.path(), &[]);
    assert!(other.next("HOLD 0", Duration::from_secs(30)).is_some());
    let locks = DeviceLocks::new(dir.path());
    let pool = DevicePool::new(cpu_slots(2)).unwrap();
    let told = Mutex::new(Vec::new());
    let lease = pool
        .lease_locked(&locks, &|m| told.lock().unwrap().push(m.to_string()))
        .unwrap();
    assert_eq!(lease.label(), "cpu:1");
    assert!(told.lock().unwrap().is_empty(), "{:?}", told.lock().unwrap());
    assert_eq!(lease.lock_path(), Some(locks.path(&cpu_slots(2)[1]).as_path()));
}

#[test]
fn an_evaluation_child_does_not_inherit_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let locks = DeviceLocks::new(dir.path());
    let pool = DevicePool::new(cpu_slots(1)).unwrap();
    let lease = pool.lease_locked(&locks, &|_| {}).unwrap();
    // A child started while the lock is held, as an evaluation's harness is, that outlives it.
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    assert!(locks.try_lock(&cpu_slots(1)[0]).unwrap().is_none(), "held while leased");
    drop(lease);
    let again = locks.try_lock(&cpu_slots(1)[0]).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(again.is_some(), "a child process kept the device locked");
}

#[test]
fn separate_pools_in_one_process_share_the_locks() {
    // flock conflicts between separate opens of one file, so two pools (two handles) model two
    // processes: over the same two GPUs, they never hold one GPU at once.
    let dir = tempfile::tempdir().unwrap();
    let text = "0, NVIDIA H200, GPU-00000000-aaaa, 143771 MiB\n1, NVIDIA H200, GPU-11111111-aaaa, 143771 MiB\n";
    let pools = [
        DevicePool::new(parse_nvidia_smi(text).unwrap()).unwrap(),
        DevicePool::new(parse_nvidia_smi(text).unwrap()).unwrap(),
    ];
    let holders: Arc<Vec<AtomicUsize>> = Arc::new((0..2).map(|_| AtomicUsize::new(0)).collect());
    let overlaps = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..6)
        .map(|w| {
            let (pool, holders, overlaps) = (pools[w % 2].clone(), holders.clone(), overlaps.clone());
            let locks = DeviceLocks::new(dir.path());
            thread::spawn(move || {
                for _ in 0..4 {
                    let lease = pool.lease_locked(&locks, &|_| {}).unwrap();
                    let gpu = lease.device().index as usize;
                    if holders[gpu].fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    thread::sleep(Duration::from_millis(3));
                    holders[gpu].fetch_sub(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    assert!(pools.iter().all(|p| p.in_use() == 0));
}

#[test]
fn locks_are_named_by_stable_identity() {
    let text = "0, NVIDIA H200, GPU-aaaa, 143771 MiB\n1, NVIDIA H200, GPU-bbbb, 143771 MiB\n";
    let gpus = parse_nvidia_smi(text).unwrap();
    assert_eq!(lock_key(&gpus[0]), "GPU-aaaa");
    assert_ne!(lock_key(&gpus[0]), lock_key(&gpus[1]));
    // The same GPU seen through CUDA_VISIBLE_DEVICES=1 (ordinal 0) is the same lock.
    let seen = ksearch_devices::apply_cuda_visible_devices(gpus.clone(), Some("1"));
    assert_eq!(lock_key(&seen[0]), lock_key(&gpus[1]));
    let mut no_uuid = gpus[1].clone();
    no_uuid.uuid = None;
    let cpu = cpu_slots(2);
    assert!(lock_key(&no_uuid).starts_with("gpu-") && lock_key(&no_uuid).ends_with("-1"));
    assert!(lock_key(&cpu[1]).starts_with("cpu-") && lock_key(&cpu[1]).ends_with("-1"));
    assert_ne!(lock_key(&cpu[0]), lock_key(&cpu[1]));
    for key in [lock_key(&no_uuid), lock_key(&cpu[0])] {
        assert!(
            key.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)),
            "{key}"
        );
    }
}

#[test]
fn an_unusable_lock_directory_is_an_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let pool = DevicePool::new(cpu_slots(1)).unwrap();
    let err = pool
        .lease_locked(&DeviceLocks::new(file.join("locks")), &|_| {})
        .unwrap_err();
    assert!(matches!(err, DeviceError::Lock { .. }), "{err:?}");
    assert!(err.to_string().contains("KSEARCH_DEVICE_LOCK_DIR"), "{err}");
    // The failed caller left the queue: the device is still there for the next one.
    assert_eq!(pool.waiting(), 0);
    assert!(pool.try_lease().is_some());
}

#[test]
fn the_lock_directory_is_the_machines_and_shared_safely() {
    // One place whatever the session's environment says (XDG_RUNTIME_DIR, TMPDIR, HOME).
    assert_eq!(
        DeviceLocks::default_dir(),
        std::path::PathBuf::from("/tmp/ksearch-device-locks")
    );
    // A directory the locks create is sticky and writable by all, its files by all.
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let locks = DeviceLocks::new(root.path().join("shared"));
    let slot = ksearch_devices::cpu_slots(1).remove(0);
    let lock = locks.try_lock(&slot).unwrap().expect("free");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&root.path().join("shared")), 0o1777);
    assert_eq!(mode(lock.path()), 0o666);
    drop(lock);
    // A lock file that is a symbolic link (another user pointing it at a file of yours) is
    // refused, and the file it points to is left as it was.
    let victim = root.path().join("victim");
    std::fs::write(&victim, "keep me").unwrap();
    let path = locks.path(&slot);
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(&victim, &path).unwrap();
    assert!(locks.try_lock(&slot).is_err());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
}
