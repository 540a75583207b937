//! Issue 16: evaluations on one warm server (crates/eval/src/warm.rs), forced on the CPU with
//! the c backend in the harness's own process (KSEARCH_IN_PROCESS=1: the candidate shares the
//! harness's process, as on the GPU backends). For each hostile candidate: it is evaluated on the
//! server, then an honest one is; the honest result (status, reason, every workload's status and
//! correctness) must equal a fresh process's, the server must still be the same process, and
//! whatever the hostile one tried against the server must have been refused.
//!
//! One test function: the switches are process-wide environment variables.

use ksearch_eval::{evaluate, warm, EvalOptions, Evaluation};
use ksearch_spec::{Solution, Task};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn task() -> Task {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/fixtures/tiny_softmax");
    Task::load_folder(&dir).unwrap()
}

fn eval(task: &Task, source: &str, timeout: Option<Duration>) -> Evaluation {
    let solution = Solution::from_source("cand.c", "cand.c", source.to_string(), task).unwrap();
    let mut opts = EvalOptions::new(7);
    opts.timeout = timeout;
    evaluate(task, &solution, &opts, &|_| {}).unwrap()
}

/// What must not depend on what ran before: everything but times.
fn digest(e: &Evaluation) -> serde_json::Value {
    serde_json::json!({
        "status": e.status,
        "reason": e.reason,
        "workloads": e.workloads.iter().map(|w| serde_json::json!({
            "uuid": w.uuid, "status": w.status, "reason": w.reason, "correctness": w.correctness,
        })).collect::<Vec<_>>(),
    })
}

const PRELUDE: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
/* Hides calls from the static checks, so the layer underneath is what is tested. */
#define CALL(f, ...) f(__VA_ARGS__)
#define J(a, b) a##b
static void said(const char *what, long r) {
    char path[512];
    snprintf(path, sizeof path, "%s/said.txt", CALL(J(get, env), "KSEARCH_WARM_TEST_DIR"));
    FILE *f = CALL(fopen, path, "a");
    if (!f) return;
    J(fpr, intf)(f, "%s %s\n", what, r < 0 ? "refused" : "reached");
    fclose(f);
}
static int python(const char *source) {
    void *(*ensure)(void) = (void *(*)(void))CALL(J(dl, sym), RTLD_DEFAULT, "PyGILState_Ensure");
    void (*release)(void *) = (void (*)(void *))CALL(J(dl, sym), RTLD_DEFAULT, "PyGILState_Release");
    int (*run)(const char *) = (int (*)(const char *))CALL(J(dl, sym), RTLD_DEFAULT, "PyRun_SimpleString");
    if (!ensure || !release || !run) return -2;
    void *state = ensure();
    int rc = run(source);
    release(state);
    return rc;
}
static void hostile(void);
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    static int done;
    if (!done) { done = 1; hostile(); }
    for (int64_t i = 0; i < M; i++) {
        const float *xr = x + i * N;
        float *yr = y + i * N, m = xr[0], s = 0.0f;
        for (int64_t j = 1; j < N; j++) if (xr[j] > m) m = xr[j];
        for (int64_t j = 0; j < N; j++) { yr[j] = expf(xr[j] - m); s += yr[j]; }
        for (int64_t j = 0; j < N; j++) yr[j] /= s;
    }
}
"#;

/// (name, body of hostile(), what it reports in said.txt that must read "refused").
const CASES: &[(&str, &str)] = &[
    (
        "monkeypatch",
        r#"static void hostile(void) {
        python("import builtins, sys, numpy, json\n"
               "numpy.allclose = lambda *a, **k: True\n"
               "numpy.isclose = lambda *a, **k: True\n"
               "numpy.exp = lambda x, *a, **k: x\n"
               "builtins.abs = lambda x: 0\n"
               "builtins.open = None\n"
               "sys.modules['json'] = None\n"
               "sys.modules['hmac'] = numpy\n"
               "sys.path.insert(0, '/nonexistent')\n");
    }"#,
    ),
    (
        "signals",
        r#"static void hostile(void) {
        int server = CALL(J(getp, pid));
        said("kill_server", CALL(J(ki, ll), server, SIGKILL));
        said("kill_server_group", CALL(J(ki, ll), -CALL(J(getp, gid), server), SIGKILL));
        said("kill_all", CALL(J(ki, ll), -1, SIGKILL));
        said("stop_server", CALL(J(ki, ll), server, SIGSTOP));
    }"#,
    ),
    (
        "memory",
        r#"static void hostile(void) {
        int server = CALL(J(getp, pid));
        said("ptrace_attach", CALL(J(sysc, all), 101 /* ptrace */, 16 /* ATTACH */, server, 0, 0));
        char byte = 0;
        struct iovec local = { &byte, 1 }, remote = { (void *)0x400000, 1 };
        said("process_vm_writev", CALL(J(sysc, all), 311, server, &local, 1, &remote, 1, 0));
        char path[64];
        snprintf(path, sizeof path, "/pr" "oc/%d/mem", server);
        said("open_mem", CALL(J(op, en), path, O_RDWR));
        said("pidfd_open", CALL(J(sysc, all), 434, server, 0));
        /* The server's control pipes, through /proc (its descriptors are numbered low). */
        long any = -1;
        for (int fd = 0; fd < 16; fd++) {
            snprintf(path, sizeof path, "/pr" "oc/%d/fd/%d", server, fd);
            long r = CALL(J(op, en), path, O_WRONLY);
            if (r >= 0) any = r;
        }
        said("open_server_fds", any);
    }"#,
    ),
    (
        "sleeper",
        r#"static void hostile(void) {
        int p[2];
        if (CALL(J(pi, pe), p) != 0) return;
        if (CALL(J(fo, rk)) == 0) {
            CALL(J(sets, id));
            if (CALL(J(fo, rk)) == 0) {
                char path[512];
                snprintf(path, sizeof path, "%s/sleeper.pid", CALL(J(get, env), "KSEARCH_WARM_TEST_DIR"));
                FILE *f = CALL(fopen, path, "w");
                if (f) { J(fpr, intf)(f, "%d\n", CALL(J(getp, id))); fclose(f); }
                CALL(J(wr, ite), p[1], "x", 1);
                for (;;) CALL(J(sl, eep), 1);
            }
            CALL(J(_ex, it), 0);
        }
        char c;
        CALL(J(re, ad), p[0], &c, 1);
    }"#,
    ),
    (
        "harness_files",
        r#"static void hostile(void) {
        const char *root = CALL(J(get, env), "PYTHONPATH");
        const char *files[] = { "protocol.py", "evaluate.py", "__main__.py", "compare.py" };
        for (int i = 0; i < 4; i++) {
            char path[1024];
            snprintf(path, sizeof path, "%s/ksearch_harness/%s", root, files[i]);
            FILE *f = CALL(fopen, path, "w");
            if (f) { J(fpr, intf)(f, "raise SystemExit(3)\n"); fclose(f); }
        }
        python("import ksearch_harness.compare as c\nc.__file__ = 'x'\n");
    }"#,
    ),
    ("hang", r#"static void hostile(void) { for (;;) { } }"#),
];

fn alive(pid: i32) -> bool {
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.contains(") Z "))
        .unwrap_or(true);
    // SAFETY: signal 0 only probes for existence.
    (unsafe { libc::kill(pid, 0) } == 0) && !zombie
}

#[test]
fn a_hostile_candidate_leaves_nothing_for_the_next_evaluation_on_one_warm_server() {
    let dir = tempfile::tempdir().unwrap();
    std::env::set_var("KSEARCH_WARM_TEST_DIR", dir.path());
    std::env::set_var("KSEARCH_IN_PROCESS", "1");
    let task = task();
    let honest = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/fixtures/tiny_softmax/seed.c"),
    )
    .unwrap();

    std::env::set_var("KSEARCH_WARM", "0");
    let fresh = eval(&task, &honest, None);
    assert_eq!(fresh.status.to_string(), "passed", "{}", fresh.log);
    std::env::set_var("KSEARCH_WARM", "1");
    let first = eval(&task, &honest, None);
    assert!(!first.log.contains("fresh process"), "{}", first.log);
    assert_eq!(digest(&first), digest(&fresh));
    let servers = warm::server_pids();
    assert_eq!(servers.len(), 1, "{servers:?}");

    for (name, body) in CASES {
        let _ = std::fs::remove_file(dir.path().join("said.txt"));
        let source = format!("{PRELUDE}\n{body}\n");
        let timeout = (*name == "hang").then_some(Duration::from_secs(3));
        let hostile = eval(&task, &source, timeout);
        eprintln!("{name}: {} {:?}", hostile.status, hostile.reason);
        assert_ne!(hostile.status.to_string(), "rejected", "{name}: {:?}", hostile.reason);
        if *name == "hang" {
            assert_eq!(hostile.status.to_string(), "timeout", "{name}: {}", hostile.log);
        }
        assert!(!hostile.log.contains("fresh process"), "{name}: {}", hostile.log);
        let said = std::fs::read_to_string(dir.path().join("said.txt")).unwrap_or_default();
        eprintln!("{said}");
        assert!(!said.contains("reached"), "{name}: {said}");
        if *name == "signals" || *name == "memory" {
            assert!(
                said.lines().count() >= 4,
                "{name} did not run: {said}\n{} {:?}\n{}",
                hostile.status,
                hostile.reason,
                hostile.log
            );
        }
        if *name == "sleeper" {
            let pid: i32 = std::fs::read_to_string(dir.path().join("sleeper.pid"))
                .unwrap_or_else(|e| panic!("the sleeper did not start ({e}): {}", hostile.log))
                .trim()
                .parse()
                .unwrap();
            assert!(!alive(pid), "the double-forked sleeper {pid} outlived its evaluation");
        }
        let next = eval(&task, &honest, None);
        assert!(!next.log.contains("fresh process"), "after {name}: {}", next.log);
        assert_eq!(digest(&next), digest(&fresh), "after {name}: {}", next.log);
        assert_eq!(warm::server_pids(), servers, "after {name} the server was replaced");
    }

    // A server that died while idle (killed from outside: a candidate cannot) is replaced
    // before the next evaluation, which still runs warm.
    let old = servers[0] as i32;
    // SAFETY: plain syscall on the server, a child of this process.
    unsafe { libc::kill(old, libc::SIGKILL) };
    std::thread::sleep(Duration::from_millis(100));
    let next = eval(&task, &honest, None);
    assert!(!next.log.contains("fresh process"), "{}", next.log);
    assert_eq!(digest(&next), digest(&fresh));
    let replaced = warm::server_pids();
    assert!(replaced.len() == 1 && replaced != servers, "{replaced:?}");

    // A server that dies during an evaluation: the evaluation is redone in a fresh process
    // (the log says so) and judged there, here a hang that times out as it would have.
    let server = replaced[0] as i32;
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        // SAFETY: as above.
        unsafe { libc::kill(server, libc::SIGKILL) };
    });
    let hang = format!("{PRELUDE}\nstatic void hostile(void) {{ for (;;) {{ }} }}\n");
    let fell_back = eval(&task, &hang, Some(Duration::from_secs(3)));
    killer.join().unwrap();
    assert!(
        fell_back.log.contains("this evaluation ran in a fresh process"),
        "{}",
        fell_back.log
    );
    assert_eq!(fell_back.status.to_string(), "timeout", "{:?}", fell_back.reason);
    let next = eval(&task, &honest, None);
    assert!(!next.log.contains("fresh process"), "{}", next.log);
    assert_eq!(digest(&next), digest(&fresh));
}
