//! Runs one harness process under supervision: its own process group (killed as a whole on
//! timeout and after exit, so nothing the candidate started survives), resource limits, a
//! private temp dir, a seccomp filter that keeps it (and whatever it runs: the compiler, the
//! candidate in the GPU backends' shared process) from reaching ksearch or any other process
//! (guard.rs), and bounded capture of everything it writes.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Limits applied to the harness process and everything it starts.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Wall-clock limit of the whole evaluation.
    pub timeout: Duration,
    /// Address-space limit (RLIMIT_AS); `None` for backends that need huge mappings (CUDA).
    pub memory_bytes: Option<u64>,
    /// Largest file the process may write (RLIMIT_FSIZE).
    pub file_bytes: u64,
    /// Most protocol bytes read from stdout; the rest is drained and dropped.
    pub protocol_bytes: usize,
    /// Longest single protocol line.
    pub line_bytes: usize,
    /// Bytes of stderr kept from its start.
    pub log_head_bytes: usize,
    /// Bytes of stderr kept from its end; what lies between head and tail is replaced by a note
    /// saying how many bytes were dropped.
    pub log_tail_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(60),
            memory_bytes: Some(8 << 30),
            file_bytes: 1 << 30,
            protocol_bytes: 64 << 20,
            line_bytes: 16 << 20,
            log_head_bytes: 16 << 10,
            log_tail_bytes: 48 << 10,
        }
    }
}

/// How the process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code (0 after `done` on success).
    Code(i32),
    /// A signal ended it (its number): a crash, the OOM killer, SIGXCPU at the CPU-time limit.
    Signal(i32),
    /// Killed by us at the wall-clock limit.
    TimedOut,
}

/// What a supervised process produced: its protocol lines, how it ended, its bounded log.
/// Nothing here is interpreted yet (lines are not verified or parsed: that is auth.rs and
/// assemble.rs).
#[derive(Debug)]
pub struct Outcome {
    /// Protocol lines, in order; lines too long to keep are replaced by an error note.
    pub lines: Vec<Result<String, String>>,
    /// How the process ended.
    pub exit: Exit,
    /// Its stderr (what the harness and the candidate printed), bounded by
    /// [`Limits::log_head_bytes`] and [`Limits::log_tail_bytes`].
    pub log: String,
    /// Wall-clock time from the start (the spawn; on a warm server, asking for one) to the exit
    /// or the kill at the timeout.
    pub elapsed: Duration,
    /// Processes the kernel's out-of-memory killer killed on this machine while the child ran
    /// (`oom_kill` of /proc/vmstat, after minus before); `None` where it cannot be read. Tells a
    /// SIGKILL from the OOM killer from one the candidate sent.
    pub oom_kills: Option<u64>,
}

/// The machine's count of OOM kills so far (Linux), if readable.
pub fn oom_kill_count() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/vmstat").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|v| v.trim().parse().ok())
}

/// Spawns `program args` in `workdir` with `env`, writes `stdin_data`, and supervises it.
pub fn run<S: AsRef<std::ffi::OsStr>>(
    program: &Path,
    args: &[S],
    workdir: &Path,
    env: &[(&str, &std::ffi::OsStr)],
    stdin_data: Vec<u8>,
    limits: &Limits,
) -> std::io::Result<Outcome> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(workdir)
        .env("TMPDIR", workdir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let memory = limits.memory_bytes;
    let file_bytes = limits.file_bytes;
    let cpu_seconds = cpu_seconds(limits);
    let mut filter = guard::Filter::new();
    // SAFETY: only async-signal-safe calls (setrlimit, getuid, prctl) run between fork
    // and exec, and nothing is allocated there (the filter was built before the fork).
    unsafe {
        cmd.pre_exec(move || {
            let set = |resource, value: u64| {
                let lim = libc::rlimit {
                    rlim_cur: value as libc::rlim_t,
                    rlim_max: value as libc::rlim_t,
                };
                libc::setrlimit(resource, &lim)
            };
            if let Some(bytes) = memory {
                set(libc::RLIMIT_AS, bytes);
            }
            set(libc::RLIMIT_CPU, cpu_seconds);
            set(libc::RLIMIT_FSIZE, file_bytes);
            set(libc::RLIMIT_CORE, 0);
            filter.install();
            Ok(())
        });
    }
    become_subreaper();
    let oom_before = oom_kill_count();
    let start = Instant::now();
    let (mut child, _registered) = LiveChild::spawn(&mut cmd)?;
    let pgid = child.id() as libc::pid_t;
    let kill_group = || {
        // SAFETY: plain syscall; a negative pid addresses the process group we created.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    };

    let mut stdin = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let Some(mut s) = stdin.take() {
            // A harness that dies early closes the pipe; the exit status tells that story.
            let _ = s.write_all(&stdin_data);
        }
    });

    let (line_tx, line_rx) = mpsc::channel::<Result<String, String>>();
    let stdout = child.stdout.take();
    let (protocol_bytes, line_bytes) = (limits.protocol_bytes, limits.line_bytes);
    std::thread::spawn(move || {
        if let Some(out) = stdout {
            read_lines(out, protocol_bytes, line_bytes, &line_tx);
        }
    });
    let (log_tx, log_rx) = mpsc::channel::<String>();
    let stderr = child.stderr.take();
    let (head, tail) = (limits.log_head_bytes, limits.log_tail_bytes);
    std::thread::spawn(move || {
        if let Some(err) = stderr {
            let _ = log_tx.send(read_bounded(err, head, tail));
        }
    });

    let deadline = start + limits.timeout;
    let mut lines = Vec::new();
    let exit = loop {
        while let Ok(line) = line_rx.try_recv() {
            lines.push(line);
        }
        if let Some(status) = child.try_wait()? {
            break match (status.code(), status.signal()) {
                (Some(code), _) => Exit::Code(code),
                (None, Some(sig)) => Exit::Signal(sig),
                _ => Exit::Code(-1),
            };
        }
        if Instant::now() >= deadline {
            kill_group();
            let _ = child.wait();
            break Exit::TimedOut;
        }
        if let Ok(line) = line_rx.recv_timeout(Duration::from_millis(5)) {
            lines.push(line);
        }
    };
    let elapsed = start.elapsed();
    // Whatever the candidate started in the group dies with it, and whatever left the group
    // (setsid) was re-parented to us as the subreaper: it dies too.
    kill_group();
    let _ = child.wait();
    drop(_registered);
    sweep_orphans();
    let _ = writer.join();
    // The pipes close once every process holding them is gone; a process that escaped the
    // group could hold them open, so we wait only briefly.
    let grace = Instant::now() + Duration::from_secs(1);
    while let Ok(line) = line_rx.recv_timeout(grace.saturating_duration_since(Instant::now())) {
        lines.push(line);
    }
    let log = log_rx
        .recv_timeout(grace.saturating_duration_since(Instant::now()) + Duration::from_millis(100))
        .unwrap_or_default();
    let oom_kills = match (oom_before, oom_kill_count()) {
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

/// CPU seconds: enough for every core to be busy for the whole wall-clock limit, so that
/// this limit only catches what escapes the wall clock (e.g. a detached spinner).
pub(crate) fn cpu_seconds(limits: &Limits) -> u64 {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get() as u64)
        .unwrap_or(1);
    limits
        .timeout
        .as_secs()
        .saturating_add(1)
        .saturating_mul(cores)
        .saturating_add(5)
}

/// Makes this process the reaper of its orphaned descendants, so a candidate that escapes its
/// process group (setsid, double fork) is re-parented to us instead of to init, where
/// [`sweep_orphans`] finds it.
fn become_subreaper() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: plain prctl; failure (an old kernel) only weakens the sweep.
        unsafe {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        }
    });
}

/// Harness processes currently supervised (by any thread): the sweep must spare them.
static LIVE: std::sync::Mutex<Vec<libc::pid_t>> = std::sync::Mutex::new(Vec::new());

pub(crate) struct LiveChild(libc::pid_t);

impl LiveChild {
    /// Spawns and registers under one lock: a sweep by another thread's evaluation can never see
    /// the new harness before it is on the list (it would take it for a stray and kill it).
    pub(crate) fn spawn(cmd: &mut Command) -> std::io::Result<(std::process::Child, LiveChild)> {
        let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
        let child = cmd.spawn()?;
        let pid = child.id() as libc::pid_t;
        live.push(pid);
        Ok((child, LiveChild(pid)))
    }
}

impl Drop for LiveChild {
    fn drop(&mut self) {
        LIVE.lock().unwrap_or_else(|p| p.into_inner()).retain(|p| *p != self.0);
    }
}

/// Kills and reaps every child of ours that is not a supervised harness: these are processes
/// that escaped an evaluation's process group. Repeats while killing them orphans more.
fn sweep_orphans() {
    let me = std::process::id() as libc::pid_t;
    for _ in 0..50 {
        let live = LIVE.lock().unwrap_or_else(|p| p.into_inner()).clone();
        // Only children outside our own process group: escaped candidates are in their own
        // group or session (or their harness's group), while processes this program starts for
        // other purposes (a compiler check, nvidia-smi, another test's child) stay in ours.
        // SAFETY: plain syscall.
        let own_group = unsafe { libc::getpgrp() };
        let strays: Vec<libc::pid_t> = children_of(me)
            .into_iter()
            .filter(|(p, group)| !live.contains(p) && *group != own_group)
            .map(|(p, _)| p)
            .collect();
        if strays.is_empty() {
            return;
        }
        for pid in strays {
            // SAFETY: plain syscalls on a process that is our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
        }
    }
}

/// Children of `parent` with their process group, from /proc.
fn children_of(parent: libc::pid_t) -> Vec<(libc::pid_t, libc::pid_t)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<libc::pid_t>().ok()))
        .filter_map(|pid| {
            // After the name in parentheses (which may hold spaces): state, parent, group.
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (_, rest) = stat.rsplit_once(')')?;
            let mut fields = rest.split_whitespace().skip(1);
            let ppid = fields.next()?.parse::<libc::pid_t>().ok()?;
            let group = fields.next()?.parse::<libc::pid_t>().ok()?;
            (ppid == parent).then_some((pid, group))
        })
        .collect()
}

pub(crate) fn read_lines(out: impl Read, max_total: usize, max_line: usize, tx: &mpsc::Sender<Result<String, String>>) {
    let mut reader = BufReader::new(out);
    let mut total = 0usize;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = match (&mut reader).take(max_line as u64 + 1).read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        total += n;
        if total > max_total {
            let _ = tx.send(Err(format!(
                "the harness wrote more than {max_total} bytes of protocol; the rest was dropped"
            )));
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
            return;
        }
        if buf.last() != Some(&b'\n') && n > max_line {
            let _ = tx.send(Err(format!("a protocol line longer than {max_line} bytes was dropped")));
            // Skip the rest of that line.
            let mut rest = Vec::new();
            if reader.read_until(b'\n', &mut rest).is_err() {
                return;
            }
            total += rest.len();
            continue;
        }
        let line = String::from_utf8_lossy(&buf).trim_end().to_string();
        if !line.is_empty() && tx.send(Ok(line)).is_err() {
            return;
        }
    }
}

/// Reads a stream to its end, keeping its first `head` and last `tail` bytes.
pub(crate) fn read_bounded(mut r: impl Read, head: usize, tail: usize) -> String {
    let mut first = Vec::new();
    let mut last: std::collections::VecDeque<u8> = std::collections::VecDeque::new();
    let mut dropped = 0usize;
    let mut chunk = [0u8; 8192];
    loop {
        let n = match r.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut data = &chunk[..n];
        if first.len() < head {
            let take = (head - first.len()).min(data.len());
            first.extend_from_slice(&data[..take]);
            data = &data[take..];
        }
        last.extend(data);
        while last.len() > tail {
            last.pop_front();
            dropped += 1;
        }
    }
    let mut text = String::from_utf8_lossy(&first).to_string();
    if dropped > 0 {
        text.push_str(&format!("\n[... {dropped} bytes of log dropped ...]\n"));
    }
    text.push_str(&String::from_utf8_lossy(last.make_contiguous()));
    text
}

#[path = "guard.rs"]
pub(crate) mod guard;

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, limits: &Limits) -> Outcome {
        let dir = tempfile::tempdir().unwrap();
        run(
            Path::new("/bin/sh"),
            &["-c", script],
            dir.path(),
            &[],
            Vec::new(),
            limits,
        )
        .unwrap()
    }

    #[test]
    fn lines_exit_code_and_log() {
        let o = sh("echo '{\"a\":1}'; echo oops >&2; exit 3", &Limits::default());
        assert_eq!(o.exit, Exit::Code(3));
        assert_eq!(o.lines, vec![Ok("{\"a\":1}".to_string())]);
        assert_eq!(o.log.trim(), "oops");
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let limits = Limits {
            timeout: Duration::from_millis(300),
            ..Limits::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("child.pid");
        let script = format!("sleep 30 & echo $! > {}; wait", marker.display());
        let o = run(
            Path::new("/bin/sh"),
            &["-c", &script],
            dir.path(),
            &[],
            Vec::new(),
            &limits,
        )
        .unwrap();
        assert_eq!(o.exit, Exit::TimedOut);
        assert!(o.elapsed < Duration::from_secs(3), "{:?}", o.elapsed);
        let pid: i32 = std::fs::read_to_string(&marker).unwrap().trim().parse().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // SAFETY: signal 0 only probes for existence.
        let alive = unsafe { libc::kill(pid, 0) } == 0 && !is_zombie(pid);
        assert!(!alive, "the grandchild {pid} survived the timeout");
    }

    fn is_zombie(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.contains(") Z "))
            .unwrap_or(true)
    }

    #[test]
    fn log_is_bounded_head_and_tail() {
        let limits = Limits {
            log_head_bytes: 10,
            log_tail_bytes: 10,
            ..Limits::default()
        };
        let o = sh(
            "i=0; while [ $i -lt 1000 ]; do echo line$i >&2; i=$((i+1)); done",
            &limits,
        );
        assert!(o.log.starts_with("line0\nline"), "{}", o.log);
        assert!(o.log.contains("bytes of log dropped"));
        assert!(o.log.trim_end().ends_with("line999"));
    }

    #[test]
    fn overlong_line_is_dropped_not_kept() {
        let limits = Limits {
            line_bytes: 100,
            ..Limits::default()
        };
        let o = sh("head -c 1000 /dev/zero | tr '\\0' x; echo; echo ok", &limits);
        assert_eq!(o.lines.len(), 2);
        assert!(o.lines[0].as_ref().unwrap_err().contains("longer than 100 bytes"));
        assert_eq!(o.lines[1], Ok("ok".to_string()));
    }

    #[test]
    fn the_sweep_spares_children_started_for_other_purposes() {
        // A process this program starts in its own group (a compiler check, nvidia-smi, another
        // test's child) is not an escaped candidate, even while another evaluation sweeps.
        become_subreaper();
        let mut other = Command::new("sleep").arg("30").spawn().unwrap();
        sweep_orphans();
        assert!(
            other.try_wait().unwrap().is_none(),
            "the sweep killed a process it did not own"
        );
        other.kill().unwrap();
        other.wait().unwrap();
    }

    #[test]
    fn a_process_that_leaves_the_group_is_killed_too() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("escaped.pid");
        // setsid puts the sleeper in a new session and process group: the group kill misses it.
        let script = format!(
            "setsid sh -c 'echo $$ > {}; exec sleep 30' & sleep 0.3; exit 0",
            marker.display()
        );
        let o = run(
            Path::new("/bin/sh"),
            &["-c", &script],
            dir.path(),
            &[],
            Vec::new(),
            &Limits::default(),
        )
        .unwrap();
        assert_eq!(o.exit, Exit::Code(0));
        let pid: i32 = std::fs::read_to_string(&marker).unwrap().trim().parse().unwrap();
        // SAFETY: signal 0 only probes for existence.
        let alive = unsafe { libc::kill(pid, 0) } == 0 && !is_zombie(pid);
        assert!(!alive, "the escaped process {pid} survived");
    }

    /// Issue 19, item 3: whatever runs in the harness's process tree (a GPU backend's candidate,
    /// a worker without its sandbox) cannot reach ksearch: its limits, priority and scheduling,
    /// signals (even the harmless signal 0), while the harness's own stay its own. Every call
    /// here is harmless if it got through (queries, or setting what is already set).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_harness_cannot_reach_ksearch() {
        let script = r#"exec python3 -c '
import errno, os, resource
def t(name, f):
    try:
        f()
        print(name, "reached")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
k = os.getppid()
t("prlimit", lambda: resource.prlimit(k, resource.RLIMIT_CPU))
t("kill", lambda: os.kill(k, 0))
t("kill_all", lambda: os.kill(-1, 0))
t("kill_group", lambda: os.killpg(os.getpgid(k), 0))
t("setpriority", lambda: os.setpriority(os.PRIO_PROCESS, k, os.getpriority(os.PRIO_PROCESS, k)))
t("sched_setscheduler", lambda: os.sched_setscheduler(k, os.sched_getscheduler(k), os.sched_getparam(k)))
t("sched_setparam", lambda: os.sched_setparam(k, os.sched_getparam(k)))
t("own_prlimit", lambda: resource.prlimit(0, resource.RLIMIT_CPU))
t("own_prlimit_by_pid", lambda: resource.prlimit(os.getpid(), resource.RLIMIT_CPU))
t("own_setrlimit", lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
t("own_setpriority", lambda: os.setpriority(os.PRIO_PROCESS, 0, 1))
t("own_kill", lambda: os.kill(os.getpid(), 0))
t("own_group", lambda: os.killpg(0, 0))
'"#;
        let o = sh(script, &Limits::default());
        assert_eq!(o.exit, Exit::Code(0), "{}", o.log);
        let said: Vec<String> = o.lines.iter().flatten().cloned().collect();
        let expected = [
            "prlimit EPERM",
            "kill EPERM",
            "kill_all EPERM",
            "kill_group EPERM",
            "setpriority EPERM",
            "sched_setscheduler EPERM",
            "sched_setparam EPERM",
            "own_prlimit reached",
            "own_prlimit_by_pid EPERM",
            "own_setrlimit reached",
            "own_setpriority reached",
            "own_kill reached",
            "own_group reached",
        ];
        assert_eq!(said, expected, "{}", o.log);
    }

    #[test]
    fn signal_death_is_reported() {
        let o = sh("kill -SEGV $$", &Limits::default());
        assert_eq!(o.exit, Exit::Signal(libc::SIGSEGV));
    }
}
