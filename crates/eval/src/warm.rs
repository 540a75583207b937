//! Warm evaluations (issue 16): a fork server per (interpreter, environment, pre-imported
//! modules) that has imported NumPy and PyTorch once, and forks one child per evaluation that
//! runs the harness exactly as a fresh `python3 -m ksearch_harness` would. The isolation
//! argument is in docs/protocol.md ("Warm evaluations"); in short: the child is a copy-on-write
//! copy of a server that never ran candidate or harness code, so nothing a candidate changes in
//! its own memory reaches the server, and the server's guard, dumpability and the dropped
//! CAP_SYS_PTRACE keep it from reaching the server from outside.
//!
//! [`run`] gives back the same [`Outcome`] as [`supervisor::run`], or an error that says why the
//! warm path could not be used: the caller then runs a fresh process (and says so in the log).

use crate::supervisor::{self, guard, Exit, Limits, LiveChild, Outcome};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

const SERVER: &str = include_str!("warm_server.py");

/// Why the warm path was not taken; the evaluation then runs in a fresh process.
#[derive(Debug, thiserror::Error)]
pub enum WarmError {
    /// No server could be started or got ready (a spawn that failed, no ready line within
    /// 120 s), or an earlier start for the same key failed: none is tried again after that.
    #[error("could not start the warm server: {0}")]
    Start(String),
    /// The server failed this evaluation: it did not take the request, named no child within
    /// 10 s, died, answered something unexpected, or did not reap a child killed at the
    /// timeout. Such a server is dropped (its process group killed), not reused.
    #[error("the warm server failed: {0}")]
    Server(String),
    /// The FIFOs for the child's stdout and stderr could not be made in the evaluation's
    /// private dir.
    #[error("cannot set up the evaluation's pipes: {0}")]
    Pipes(std::io::Error),
    /// Not a failure: no server was ready, one is starting now for the evaluations after this
    /// one, and this one runs in a fresh process meanwhile (its nvcc build overlaps the
    /// interpreter's imports there, as it cannot on a server still importing torch).
    #[error("the warm server is starting (for the evaluations after this one)")]
    Starting,
}

/// The server an evaluation wants: its interpreter, what it pre-imports ([`preload`]), and how
/// the evaluation gets one when none is ready ([`mode`]).
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    /// The interpreter the server runs, the one a fresh process would run the harness with.
    pub python: &'a Path,
    /// What the server imports before it forks ([`preload`]). With the interpreter and the
    /// evaluation's environment (less `PYTHONPATH`) it is the server's key: evaluations share a
    /// server only when all three are equal.
    pub modules: &'a [&'static str],
    /// What to do when no server of that key is idle ([`mode`]).
    pub cold: ColdStart,
}

/// How an evaluation without a ready server gets one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColdStart {
    /// Start one (or wait for one that is starting) and evaluate on it.
    Wait,
    /// Start one in the background and evaluate in a fresh process meanwhile ([`WarmError::Starting`]);
    /// an evaluation that finds a server starting that no other evaluation waits for waits for it.
    Overlap,
}

/// Whether evaluations of `backend` use a warm server, and how the first one gets it:
/// `KSEARCH_WARM=0` never; `=1` always, the first evaluation waiting for the server (CI forces
/// it on CPU); `=overlap` always, the first in a fresh process while the server starts; unset:
/// overlap for the backends whose harness imports torch on a CUDA device, else never.
pub fn mode(backend: &crate::Backend) -> Option<ColdStart> {
    match std::env::var("KSEARCH_WARM").as_deref() {
        Ok("0") => None,
        Ok("1") => Some(ColdStart::Wait),
        Ok("overlap") => Some(ColdStart::Overlap),
        _ => (backend.device.starts_with("cuda") && backend.rules().imports_torch()).then_some(ColdStart::Overlap),
    }
}

/// What the server of `backend` imports before it forks.
pub fn preload(backend: &crate::Backend) -> &'static [&'static str] {
    match backend.rules().imports_torch() {
        true => &["numpy", "torch"],
        false => &["numpy"],
    }
}

/// The pids of the idle warm servers of this process (tests check that one survived).
pub fn server_pids() -> Vec<u32> {
    lock()
        .values()
        .flat_map(|slot| &slot.idle)
        .map(|s| s.child.id())
        .collect()
}

/// Blocks until no server of this process is starting (at most `limit`); tests use it to see
/// the server an overlapped evaluation started.
pub fn settle(limit: Duration) {
    let until = Instant::now() + limit;
    let mut pool = lock();
    while pool.values().any(|slot| slot.starting > 0) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        pool = ready().wait_timeout(pool, left).unwrap_or_else(|p| p.into_inner()).0;
    }
}

type Key = (PathBuf, Vec<(String, OsString)>, Vec<&'static str>);

struct Server {
    child: Child,
    control: ChildStdin,
    replies: mpsc::Receiver<Value>,
    _live: LiveChild,
}

impl Drop for Server {
    fn drop(&mut self) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: plain syscall on the group our own child leads.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// The servers of one key: idle ones, how many are starting, how many evaluations wait for
/// one of those, and why the last start failed (no start is tried again after one failed: the
/// evaluations run in fresh processes, as they would without warm servers).
#[derive(Default)]
struct Slot {
    idle: Vec<Server>,
    starting: usize,
    waiting: usize,
    failed: Option<String>,
}

fn pool() -> &'static Mutex<HashMap<Key, Slot>> {
    static POOL: OnceLock<Mutex<HashMap<Key, Slot>>> = OnceLock::new();
    POOL.get_or_init(|| Mutex::new(HashMap::new()))
}

fn lock() -> std::sync::MutexGuard<'static, HashMap<Key, Slot>> {
    pool().lock().unwrap_or_else(|p| p.into_inner())
}

/// Notified whenever a start ends (ready or failed) or a server goes back to the pool.
fn ready() -> &'static Condvar {
    static READY: Condvar = Condvar::new();
    &READY
}

/// An idle live server of `key`, or one that starts (waiting for it) as `cold` says.
fn acquire(key: &Key, cold: ColdStart) -> Result<Server, WarmError> {
    // Importing torch takes seconds; a server that is not ready in two minutes is broken.
    let until = Instant::now() + Duration::from_secs(120);
    let mut pool = lock();
    loop {
        let slot = pool.entry(key.clone()).or_default();
        // An idle server that died meanwhile (it should not: nothing of an evaluation runs in
        // it) is dropped here (which kills its group and reaps it), so the evaluation gets
        // another instead of falling back.
        while let Some(mut s) = slot.idle.pop() {
            if matches!(s.child.try_wait(), Ok(None)) {
                return Ok(s);
            }
        }
        if let Some(why) = &slot.failed {
            return Err(WarmError::Start(why.clone()));
        }
        if slot.starting > slot.waiting {
            slot.waiting += 1;
            let left = until.saturating_duration_since(Instant::now());
            pool = ready().wait_timeout(pool, left).unwrap_or_else(|p| p.into_inner()).0;
            if let Some(slot) = pool.get_mut(key) {
                slot.waiting -= 1;
            }
            if Instant::now() >= until {
                return Err(WarmError::Start("it did not get ready in 120 s".into()));
            }
            continue;
        }
        slot.starting += 1;
        drop(pool);
        start_in_background(key.clone())?;
        if cold == ColdStart::Overlap {
            return Err(WarmError::Starting);
        }
        pool = lock();
    }
}

/// Starts a server of `key`; it joins the pool's idle ones once it said it is ready.
fn start_in_background(key: Key) -> Result<(), WarmError> {
    let job_key = key.clone();
    let started = on_spawner(Box::new(move || {
        let (python, env, modules) = job_key.clone();
        let outcome = spawn_here(&python, &env, &modules);
        // The ready line is awaited on a thread of its own: the spawner stays free for others.
        let _ = std::thread::Builder::new()
            .name("ksearch-warm-start".into())
            .spawn(move || {
                let outcome =
                    outcome.and_then(
                        |mut server| match server.replies.recv_timeout(Duration::from_secs(120)) {
                            Ok(v) if v["ready"] == json!(true) => Ok(server),
                            Ok(v) => Err(WarmError::Start(format!("unexpected first line {v}"))),
                            Err(_) => {
                                let _ = server.child.try_wait();
                                Err(WarmError::Start("it exited or did not get ready".into()))
                            }
                        },
                    );
                start_ended(&job_key, outcome);
            });
    }));
    if let Err(e) = &started {
        start_ended(&key, Err(WarmError::Start(e.to_string())));
    }
    started
}

fn start_ended(key: &Key, outcome: Result<Server, WarmError>) {
    let mut pool = lock();
    let slot = pool.entry(key.clone()).or_default();
    slot.starting = slot.starting.saturating_sub(1);
    match outcome {
        Ok(server) => slot.idle.push(server),
        Err(e) => slot.failed = Some(e.to_string()),
    }
    drop(pool);
    ready().notify_all();
}

type Job = Box<dyn FnOnce() + Send>;

/// Runs `job` on one thread that lives as long as the process: PR_SET_PDEATHSIG fires when the
/// *thread* that forked the server exits, so servers must not be forked by evaluation threads.
fn on_spawner(job: Job) -> Result<(), WarmError> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    let sender = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let _ = std::thread::Builder::new()
            .name("ksearch-warm-spawner".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job();
                }
            });
        Mutex::new(tx)
    });
    let sender = sender.lock().unwrap_or_else(|p| p.into_inner());
    sender
        .send(job)
        .map_err(|_| WarmError::Start("the spawner thread is gone".into()))
}

fn spawn_here(python: &Path, env: &[(String, OsString)], modules: &[&str]) -> Result<Server, WarmError> {
    let mut cmd = Command::new(python);
    cmd.arg("-c")
        .arg(SERVER)
        .args(modules)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut filter = guard::Filter::protecting_self();
    // SAFETY: pid 0 is never ours: getppid() below can be compared with it.
    let parent = unsafe { libc::getpid() };
    // SAFETY: only async-signal-safe calls (getpid, getppid, setrlimit, prctl) run between fork
    // and exec, and nothing is allocated: the filter was built before the fork and is only
    // patched with the server's pid here.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &lim);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            filter.patch_self(libc::getpid());
            filter.install();
            Ok(())
        });
    }
    let (mut child, live) =
        LiveChild::spawn(&mut cmd).map_err(|e| WarmError::Start(format!("{}: {e}", python.display())))?;
    let control = child
        .stdin
        .take()
        .ok_or_else(|| WarmError::Start("no control pipe".into()))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| WarmError::Start("no reply pipe".into()))?;
    let (tx, replies) = mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let Ok(value) = serde_json::from_str::<Value>(&line) else {
                return;
            };
            if tx.send(value).is_err() {
                return;
            }
        }
    });
    Ok(Server {
        child,
        control,
        replies,
        _live: live,
    })
}

/// A FIFO in the evaluation's private dir, opened for reading, plus a write end held by us
/// until the child has ended, so the reader sees no end of file before the child opened its own.
fn fifo(dir: &Path, name: &str) -> std::io::Result<(std::fs::File, std::fs::File, PathBuf)> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(name);
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: plain syscall with a valid C string.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path)?;
    let writer = std::fs::OpenOptions::new().write(true).open(&path)?;
    // Blocking reads from here on (the reader threads wait for data).
    // SAFETY: plain fcntl on a descriptor we own.
    unsafe {
        use std::os::fd::AsRawFd;
        let fd = reader.as_raw_fd();
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
    }
    Ok((reader, writer, path))
}

fn to_str(v: &OsStr) -> Result<String, WarmError> {
    v.to_str()
        .map(str::to_string)
        .ok_or_else(|| WarmError::Server(format!("{} is not UTF-8", v.to_string_lossy())))
}

/// Runs the harness in `workdir` (its package under `harness_root`) on a warm server for
/// `python` with `env` (the entries a fresh process would get on top of ksearch's environment).
pub fn run(
    server: Wanted<'_>,
    env: &[(&str, &OsStr)],
    workdir: &Path,
    harness_root: &Path,
    stdin_data: Vec<u8>,
    limits: &Limits,
) -> Result<Outcome, WarmError> {
    let Wanted { python, modules, cold } = server;
    // Everything the interpreter or the native libraries read at start-up (PYTHONHASHSEED, the
    // BLAS and OpenMP threads, CUDA_VISIBLE_DEVICES) is in the key: a server started with other
    // values would give another process than a fresh one. PYTHONPATH (the evaluation's own
    // harness copy) is set in the child.
    let mut server_env: Vec<(String, OsString)> = env
        .iter()
        .filter(|(k, _)| *k != "PYTHONPATH")
        .map(|(k, v)| (k.to_string(), v.to_os_string()))
        .collect();
    server_env.sort();
    let key: Key = (python.to_path_buf(), server_env, modules.to_vec());
    // The clock starts before the server is found or started: a first (cold) evaluation pays
    // for starting the server, as a fresh one pays for starting its process.
    let oom_before = supervisor::oom_kill_count();
    let start = Instant::now();
    let mut server = acquire(&key, cold)?;

    // The child's whole environment, as a fresh process would have it.
    let mut full: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in std::env::vars_os() {
        if let (Some(k), Some(v)) = (k.to_str(), v.to_str()) {
            full.insert(k.to_string(), v.to_string());
        }
    }
    full.insert("TMPDIR".into(), to_str(workdir.as_os_str())?);
    for (k, v) in env {
        full.insert(k.to_string(), to_str(v)?);
    }
    let mut rlimits = serde_json::Map::new();
    if let Some(bytes) = limits.memory_bytes {
        rlimits.insert("RLIMIT_AS".into(), json!(bytes));
    }
    rlimits.insert("RLIMIT_CPU".into(), json!(supervisor::cpu_seconds(limits)));
    rlimits.insert("RLIMIT_FSIZE".into(), json!(limits.file_bytes));
    rlimits.insert("RLIMIT_CORE".into(), json!(0));
    let (out_r, out_w, out_path) = fifo(workdir, ".ksearch-stdout").map_err(WarmError::Pipes)?;
    let (err_r, err_w, err_path) = fifo(workdir, ".ksearch-stderr").map_err(WarmError::Pipes)?;
    let stdin =
        String::from_utf8(stdin_data).map_err(|e| WarmError::Server(format!("the request is not UTF-8: {e}")))?;
    let request = json!({
        "workdir": to_str(workdir.as_os_str())?,
        "harness": to_str(harness_root.as_os_str())?,
        "env": full,
        "rlimits": rlimits,
        "stdin": stdin,
        "stdout": to_str(out_path.as_os_str())?,
        "stderr": to_str(err_path.as_os_str())?,
    });

    // The candidate's wall-clock limit runs from the request on, as a fresh process's runs from
    // its spawn: the server's own start-up is not the candidate's time.
    let sent = Instant::now();
    let mut line = request.to_string().into_bytes();
    line.push(b'\n');
    server
        .control
        .write_all(&line)
        .and_then(|_| server.control.flush())
        .map_err(|e| WarmError::Server(format!("cannot send the request: {e}")))?;
    let pid = match server.replies.recv_timeout(Duration::from_secs(10)) {
        Ok(v) => v["pid"]
            .as_i64()
            .filter(|p| *p > 1)
            .ok_or_else(|| WarmError::Server(format!("unexpected reply {v}")))? as libc::pid_t,
        Err(_) => return Err(WarmError::Server("no child pid within 10 s".into())),
    };
    let kill_group = || {
        // SAFETY: plain syscall; the child leads its own group (setsid), which stays reserved
        // until the server reaps it, and the server replies only after that.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    };

    let (line_tx, line_rx) = mpsc::channel::<Result<String, String>>();
    let (protocol_bytes, line_bytes) = (limits.protocol_bytes, limits.line_bytes);
    std::thread::spawn(move || supervisor::read_lines(out_r, protocol_bytes, line_bytes, &line_tx));
    let (log_tx, log_rx) = mpsc::channel::<String>();
    let (head, tail) = (limits.log_head_bytes, limits.log_tail_bytes);
    std::thread::spawn(move || {
        let _ = log_tx.send(supervisor::read_bounded(err_r, head, tail));
    });

    let deadline = sent + limits.timeout;
    let mut lines = Vec::new();
    let mut timed_out = false;
    let reply = loop {
        while let Ok(line) = line_rx.try_recv() {
            lines.push(line);
        }
        let wait = if timed_out {
            Duration::from_secs(10)
        } else {
            deadline
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(5))
        };
        match server.replies.recv_timeout(wait) {
            Ok(v) => break Ok(v),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                kill_group();
                break Err(WarmError::Server("it died during the evaluation".into()));
            }
            Err(mpsc::RecvTimeoutError::Timeout) if timed_out => {
                break Err(WarmError::Server(
                    "it did not reap a child killed at the timeout".into(),
                ))
            }
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() >= deadline => {
                kill_group();
                timed_out = true;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    };
    let elapsed = start.elapsed();
    drop((out_w, err_w));
    let reply = match reply {
        Ok(v) => Some(v),
        Err(e) if !timed_out => return Err(e),
        // A server that did not answer after the timeout is dropped (killed); the candidate's
        // evaluation still timed out, which is the candidate's doing.
        Err(_) => None,
    };
    let exit = match &reply {
        _ if timed_out => Exit::TimedOut,
        Some(v) => match (v["exit"]["code"].as_i64(), v["exit"]["signal"].as_i64()) {
            (Some(code), _) => Exit::Code(code as i32),
            (None, Some(sig)) => Exit::Signal(sig as i32),
            _ => return Err(WarmError::Server(format!("unexpected reply {v}"))),
        },
        None => Exit::TimedOut,
    };
    if reply.is_some() {
        lock().entry(key).or_default().idle.push(server);
        ready().notify_all();
    }
    let grace = Instant::now() + Duration::from_secs(1);
    while let Ok(line) = line_rx.recv_timeout(grace.saturating_duration_since(Instant::now())) {
        lines.push(line);
    }
    let log = log_rx
        .recv_timeout(grace.saturating_duration_since(Instant::now()) + Duration::from_millis(100))
        .unwrap_or_default();
    let oom_kills = match (oom_before, supervisor::oom_kill_count()) {
        (Some(before), Some(after)) => Some(after.saturating_sub(before)),
        _ => None,
    };
    Ok(Outcome {
        lines,
        exit,
        log,
        elapsed,
        oom_kills,
    })
}
