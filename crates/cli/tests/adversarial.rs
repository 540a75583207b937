//! The adversarial suite: `ksearch eval` against one candidate per known hack, abuse and
//! forgery (tests/adversarial/c, each file says what it tries and what must happen), on the
//! tiny softmax fixture. Every test asserts the exact status and a piece of the reason, and that
//! no process of the evaluation is left behind. docs/threat-model.md maps each threat to its
//! defence and to the test here that proves it.
//!
//! The candidates hide their system calls from the static checks (macros), so that what is
//! tested is the layer underneath: the worker process, its sandbox, the checks against the
//! reference. Where a layer is taken away (KSEARCH_SANDBOX=off, KSEARCH_IN_PROCESS=1) a test
//! shows what the attack achieves without it: the suite can fail.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

fn candidate(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/adversarial/c")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

struct Verdict {
    run: Run,
    json: serde_json::Value,
}

impl Verdict {
    fn status(&self) -> &str {
        self.json["status"].as_str().unwrap_or("")
    }

    fn reason(&self) -> &str {
        self.json["reason"].as_str().unwrap_or("")
    }

    fn log(&self) -> &str {
        self.json["log"].as_str().unwrap_or("")
    }

    fn expect(&self, status: &str, reason_part: &str) {
        assert_eq!(
            self.status(),
            status,
            "reason: {}\nlog tail: {}",
            self.reason(),
            tail(self.log())
        );
        assert!(self.reason().contains(reason_part), "reason: {}", self.reason());
    }

    /// The stage the attack runs in ends within `limit` seconds, as the harness timed it. The
    /// whole command's wall time is not the measure: on a loaded 2-core CI machine its compile
    /// and start-up took 11 s for a candidate whose correctness stage lasted milliseconds.
    fn expect_correctness_ends_within(&self, limit: f64) {
        let seconds = self.json["stage_seconds"]["correctness"].as_f64();
        assert!(
            seconds.is_some_and(|s| s < limit),
            "correctness stage took {seconds:?} s (limit {limit} s); whole command {:?}",
            self.run.elapsed
        );
    }

    fn medians(&self) -> Vec<f64> {
        self.json["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|w| w["timing"]["candidate"]["median_ns"].as_f64())
            .collect()
    }
}

fn tail(log: &str) -> String {
    let start = log.len().saturating_sub(600);
    log.get(start..).unwrap_or(log).to_string()
}

/// Evaluates `source` (saved as `name`) on the tiny softmax task with `extra` arguments and
/// `env`, then checks that no process carrying this evaluation's marker is alive.
fn eval_source(name: &str, source: &str, extra: &[&str], env: &[(&str, &str)]) -> Verdict {
    let (_dir, path) = write_temp(name, source);
    let task = fixture("tiny_softmax");
    // Unique per evaluation: tests run in parallel, some on the same candidate.
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let marker_value = format!("{}-{name}-{n}", std::process::id());
    let mut envs: Vec<(&str, &str)> = vec![("KSEARCH_ADVERSARIAL_MARKER", &marker_value)];
    envs.extend_from_slice(env);
    let mut args = vec![
        "eval",
        task.to_str().unwrap(),
        path.to_str().unwrap(),
        "--json",
        "--seed",
        "7",
    ];
    args.extend_from_slice(extra);
    let run = ksearch_env(&args, &envs);
    let json = run.json();
    let marker = format!("KSEARCH_ADVERSARIAL_MARKER={marker_value}");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        process_with_env_marker(&marker),
        None,
        "a process of the evaluation of {name} survived it"
    );
    Verdict { run, json }
}

fn eval_candidate(name: &str, env: &[(&str, &str)]) -> Verdict {
    eval_source(name, &candidate(name), &[], env)
}

/// The sandbox layers this machine gives the worker, read from an honest evaluation's
/// provenance (`environment.sandbox`), with the harness's note on each layer it could not apply.
struct Layers {
    /// The Landlock ABI applied, 0 for none.
    landlock: u64,
    seccomp: bool,
    /// `"landlock: WHY"`, `"seccomp: WHY"` for a layer left out (sandbox.py `confine`).
    notes: Vec<String>,
}

impl Layers {
    /// Why `layer` (`landlock` or `seccomp`) is missing, as the harness recorded it: its note on
    /// the layer, else its notes on the whole sandbox ("disabled by KSEARCH_SANDBOX=off").
    fn why_missing(&self, layer: &str) -> String {
        let prefix = format!("{layer}: ");
        match self.notes.iter().find_map(|n| n.strip_prefix(&prefix)) {
            Some(why) => why.to_string(),
            None if !self.notes.is_empty() => self.notes.join("; "),
            None => "the provenance's environment.sandbox gives no reason".to_string(),
        }
    }
}

fn layers() -> &'static Layers {
    static LAYERS: OnceLock<Layers> = OnceLock::new();
    LAYERS.get_or_init(|| {
        let v = eval_source("honest.c", SOFTMAX_OK, &[], &[]);
        assert_eq!(v.status(), "passed", "{}", v.reason());
        let s = &v.json["provenance"]["environment"]["sandbox"];
        assert_eq!(
            s["worker"], true,
            "the c backend runs candidates in a worker on Linux: {s}"
        );
        Layers {
            landlock: s["landlock"].as_u64().unwrap_or(0),
            seccomp: s["seccomp"].as_bool().unwrap_or(false),
            notes: s["notes"]
                .as_array()
                .map(|a| a.iter().filter_map(|n| n.as_str().map(str::to_string)).collect())
                .unwrap_or_default(),
        }
    })
}

/// `KSEARCH_REQUIRE_SANDBOX=1` (CI sets it, like KSEARCH_REQUIRE_NVCC): a sandbox layer this
/// machine lacks fails every test that needs it instead of letting it pass untested.
fn sandbox_required() -> bool {
    std::env::var("KSEARCH_REQUIRE_SANDBOX").is_ok_and(|v| v == "1")
}

/// Whether `test` can go on: with `layer` missing it fails under KSEARCH_REQUIRE_SANDBOX=1, or
/// else says on stderr that it skips and why, and returns false.
fn need(layer: &str, present: bool, test: &str) -> bool {
    if present {
        return true;
    }
    let why = layers().why_missing(layer);
    assert!(
        !sandbox_required(),
        "{test}: KSEARCH_REQUIRE_SANDBOX=1 but the worker has no {layer} on this machine ({why})"
    );
    eprintln!("skipping {test}: no {layer} ({why}); KSEARCH_REQUIRE_SANDBOX=1 makes this a failure");
    false
}

fn need_seccomp(test: &str) -> bool {
    need("seccomp", layers().seccomp, test)
}

fn need_landlock(test: &str) -> bool {
    need("landlock", layers().landlock > 0, test)
}

const POISON: &str = "still hold the NaN poison of unwritten outputs";
const SIGSYS: &str = "the candidate's process was killed by signal 31 (SIGSYS, a system call the sandbox forbids";

// ---- hacks against the checks and the clock ----------------------------------------------------

#[test]
fn returning_the_references_freed_output_finds_nothing() {
    eval_candidate("freed_reference.c", &[]).expect("incorrect_numerical", POISON);
    // In one process with the harness too: the candidate is always called before the reference.
    eval_candidate("freed_reference.c", &[("KSEARCH_IN_PROCESS", "1")]).expect("incorrect_numerical", POISON);
}

#[test]
fn mutating_an_input_is_caught() {
    eval_candidate("mutate_input.c", &[]).expect(
        "incorrect_numerical",
        "the candidate modified its input 'x' (1 of 512 elements changed)",
    );
}

#[test]
fn a_partial_write_leaves_the_poison() {
    let v = eval_candidate("partial_write.c", &[]);
    v.expect("incorrect_numerical", "256 of 512 elements differ");
    assert!(v.reason().contains(POISON), "{}", v.reason());
}

#[test]
fn work_left_to_another_thread_does_not_count() {
    eval_candidate("late_thread.c", &[]).expect("incorrect_numerical", POISON);
    // Spelled plainly, the static checks refuse it before anything is compiled.
    let plain = candidate("late_thread.c").replace("CALL(J(pthread_, create), ", "pthread_create(");
    eval_source("late_thread_plain.c", &plain, &[], &[]).expect("rejected", "creates a thread");
}

#[test]
fn an_output_cache_keyed_on_pointers_fails_in_timing() {
    let v = eval_candidate("pointer_cache.c", &[]);
    v.expect("incorrect_numerical", "during timing (call 1, a warm-up call;");
    assert!(v
        .reason()
        .contains("are results cached, or work skipped, on repeated calls?"));
}

#[test]
fn an_output_cache_keyed_on_shapes_fails_on_the_second_trial() {
    eval_candidate("shape_cache.c", &[]).expect("incorrect_numerical", "(first in trial 1 at index (0, 0)");
}

#[test]
fn a_precision_downcast_beyond_tolerance_fails() {
    eval_candidate("downcast.c", &[]).expect("incorrect_numerical", "elements differ beyond atol=1e-07 + rtol=0.0001");
}

#[test]
fn a_constant_for_small_outputs_fails() {
    eval_candidate("constant_output.c", &[]).expect("incorrect_numerical", "got 0.015625");
}

#[test]
fn the_frameworks_op_through_the_embedded_interpreter_is_out_of_reach() {
    if !need_landlock("the_frameworks_op_through_the_embedded_interpreter_is_out_of_reach") {
        return;
    }
    let v = eval_candidate("framework_numpy.c", &[]);
    v.expect("incorrect_numerical", POISON);
    // Landlock refuses NumPy's files (PermissionError); a worker started as root also runs as
    // nobody, which cannot even enter root's folders, so the import finds no NumPy at all.
    assert!(
        (v.log().contains("PermissionError") || v.log().contains("ModuleNotFoundError: No module named 'numpy'"))
            && v.log().contains("numpy"),
        "{}",
        tail(v.log())
    );
    // Without the sandbox NumPy can be imported and the hack passes: the layer is what stops it.
    eval_candidate("framework_numpy.c", &[("KSEARCH_SANDBOX", "off")]).expect("passed", "");
    // Spelled plainly, the static checks refuse it.
    let plain = candidate("framework_numpy.c").replace("CALL(J(dl, sym), ", "dlsym(");
    eval_source("framework_numpy_plain.c", &plain, &[], &[]).expect("rejected", "looks up symbols");
}

#[test]
fn falling_back_to_the_reference_finds_no_reference() {
    eval_candidate("reference_fallback.c", &[]).expect("incorrect_numerical", POISON);
    // Not the sandbox: the worker was forked before the harness read the request.
    eval_candidate("reference_fallback.c", &[("KSEARCH_SANDBOX", "off")]).expect("incorrect_numerical", POISON);
}

#[test]
fn known_limit_in_process_the_reference_can_be_called() {
    // docs/threat-model.md: where the candidate shares the harness's process (GPU backends,
    // KSEARCH_IN_PROCESS=1), native code can find and call the reference; only the static
    // checks stand in the way. When this starts failing, update the threat model.
    eval_candidate("reference_fallback.c", &[("KSEARCH_IN_PROCESS", "1")]).expect("passed", "");
}

#[test]
fn patching_the_timer_changes_nothing() {
    // The candidate busy-waits about 0.7 ms per call: its median must show it.
    let v = eval_candidate("timer_patch.c", &[]);
    v.expect("passed", "");
    let medians = v.medians();
    assert_eq!(medians.len(), 2);
    assert!(medians.iter().all(|m| *m > 200e3), "medians {medians:?}");
}

#[test]
fn known_limit_in_process_the_timer_can_be_patched() {
    // In one process the patch reaches the timing loop (1 ns per clock read).
    let v = eval_candidate("timer_patch.c", &[("KSEARCH_IN_PROCESS", "1")]);
    v.expect("passed", "");
    assert!(v.medians().iter().all(|m| *m < 1e3), "medians {:?}", v.medians());
}

#[test]
fn threads_spinning_after_the_call_pass_and_leave_nothing_behind() {
    // harness/tests/test_adversarial.py proves the spinners are stopped while the reference
    // runs; here: the evaluation ends cleanly and no spinner survives it.
    eval_candidate("spin_threads.c", &[]).expect("passed", "");
}

// ---- sandbox abuse -----------------------------------------------------------------------------

#[test]
fn a_fork_bomb_is_killed_at_its_first_fork() {
    if !need_seccomp("a_fork_bomb_is_killed_at_its_first_fork") {
        return;
    }
    let v = eval_candidate("fork_bomb.c", &[]);
    v.expect("runtime_error", SIGSYS);
    v.expect_correctness_ends_within(5.0);
}

#[test]
fn a_100_gb_allocation_fails_under_the_memory_limit() {
    let v = eval_candidate("huge_alloc.c", &[]);
    v.expect(
        "runtime_error",
        "killed by signal 11 (SIGSEGV, invalid memory access) during correctness",
    );
    v.expect_correctness_ends_within(5.0);
}

#[test]
fn an_infinite_loop_times_out() {
    let v = eval_source(
        "infinite_loop.c",
        &candidate("infinite_loop.c"),
        &["--timeout", "3"],
        &[],
    );
    v.expect(
        "timeout",
        "the evaluation exceeded its 3 s limit during correctness of workload 0 (small), trial 0",
    );
    assert!(v.run.elapsed < Duration::from_secs(6), "{:?}", v.run.elapsed);
}

#[test]
fn filling_the_temp_dir_is_killed_at_the_open() {
    if !need_seccomp("filling_the_temp_dir_is_killed_at_the_open") {
        return;
    }
    eval_candidate("fill_tmpdir.c", &[]).expect("runtime_error", SIGSYS);
}

#[test]
fn writing_outside_the_temp_dir_is_killed_and_writes_nothing() {
    if !need_seccomp("writing_outside_the_temp_dir_is_killed_and_writes_nothing") {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let target: PathBuf = outside.path().join("owned");
    let source = candidate("write_outside.c").replace("@PATH@", target.to_str().unwrap());
    eval_source("write_outside.c", &source, &[], &[]).expect("runtime_error", SIGSYS);
    assert!(!target.exists(), "the candidate wrote {}", target.display());
}

#[test]
fn a_network_connection_is_killed_at_the_socket() {
    if !need_seccomp("a_network_connection_is_killed_at_the_socket") {
        return;
    }
    eval_candidate("network.c", &[]).expect("runtime_error", SIGSYS);
}

/// Issue 19, item 3: a correct kernel that sets the CPU-time limit of the harness and of
/// ksearch to 0 (which killed `ksearch eval` with 137 before), lowers their priority and
/// schedules them SCHED_IDLE. The worker's filter kills it at the first call; without the
/// worker's sandbox, and in the harness's own process as on the GPU backends, ksearch's guard on
/// the harness refuses every call and the kernel passes on what it computes. In every case
/// ksearch itself finishes and says what happened.
#[test]
fn reaching_the_harness_or_ksearch_is_stopped_and_the_evaluation_goes_on() {
    if need_seccomp("reaching_the_harness_or_ksearch_is_stopped_and_the_evaluation_goes_on") {
        let v = eval_candidate("other_processes.c", &[]);
        // ksearch finished and judged the candidate (exit 1: it failed), not killed (137).
        assert_eq!(v.run.code, 1, "{}", v.run.stderr);
        v.expect("runtime_error", SIGSYS);
        assert!(!v.log().contains(" reached "), "{}", tail(v.log()));
    }
    for env in [("KSEARCH_SANDBOX", "off"), ("KSEARCH_IN_PROCESS", "1")] {
        let v = eval_candidate("other_processes.c", &[env]);
        assert_eq!(v.run.code, 0, "{env:?}: {}", v.run.stderr);
        v.expect("passed", "");
        let log = v.log();
        assert!(!log.contains(" reached "), "{env:?}: {}", tail(log));
        for call in ["prlimit", "setpriority", "sched_setscheduler"] {
            // ksearch at least (in the worker without its sandbox: the harness too), each refused.
            let lines: Vec<&str> = log.lines().filter(|l| l.starts_with(&format!("{call}("))).collect();
            assert!(!lines.is_empty(), "{env:?}: {call}: {}", tail(log));
            assert!(
                lines.iter().all(|l| l.ends_with(") refused (Operation not permitted)")),
                "{env:?}: {lines:?}"
            );
        }
    }
}

/// Issue 19, item 4: started as root, the worker keeps no capability and runs as nobody; it may
/// not schedule itself in real time; renaming the machine is killed by seccomp.
#[test]
fn the_worker_holds_no_privilege() {
    if !need_seccomp("the_worker_holds_no_privilege") {
        return;
    }
    let v = eval_candidate("privileges.c", &[]);
    v.expect("runtime_error", SIGSYS);
    let log = v.log();
    for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
        assert!(
            log.contains(&format!("status {set}:\t0000000000000000")),
            "{set}: {}",
            tail(log)
        );
    }
    assert!(log.contains("status NoNewPrivs:\t1"), "{}", tail(log));
    assert!(log.contains("SCHED_FIFO Operation not permitted"), "{}", tail(log));
    assert!(log.contains("renaming the machine") && !log.contains("sethostname succeeded"));
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        assert!(log.contains("status CapBnd:\t0000000000000000"), "{}", tail(log));
        assert!(log.contains("status Uid:\t65534\t65534\t65534\t65534"), "{}", tail(log));
        assert!(log.contains("status Gid:\t65534\t65534\t65534\t65534"), "{}", tail(log));
        let p = &v.json["provenance"]["environment"]["sandbox"]["privileges"];
        assert_eq!(
            (p["uid"].as_u64(), p["capabilities"].as_u64()),
            (Some(65534), Some(0)),
            "{p}"
        );
    }
}

/// Issue 19, item 7: a worker that SIGKILLs itself is said to have done so, not to have run out
/// of memory.
#[test]
fn a_candidate_that_kills_its_own_process_is_named_as_the_sender() {
    eval_candidate("kill_itself.c", &[]).expect(
        "runtime_error",
        "the candidate's process was killed by signal 9 (SIGKILL, sent by the candidate's code to its own process (not the out-of-memory killer, not a limit)) during correctness",
    );
}

#[test]
fn another_runs_files_cannot_be_read() {
    if !need_landlock("another_runs_files_cannot_be_read") {
        return;
    }
    let other = tempfile::tempdir().unwrap();
    let secret = other.path().join("store.sqlite");
    std::fs::write(&secret, "another run's data").unwrap();
    let source = candidate("read_other_run.c").replace("@PATH@", secret.to_str().unwrap());
    eval_source("read_other_run.c", &source, &[], &[]).expect("incorrect_numerical", POISON);
    // Without Landlock the file is read (and the kernel then computes): the layer stops it.
    eval_source("read_other_run.c", &source, &[], &[("KSEARCH_SANDBOX", "off")]).expect("passed", "");
}

#[test]
fn including_a_file_of_the_machine_is_rejected_before_compiling() {
    let other = tempfile::tempdir().unwrap();
    let secret = other.path().join("secret.txt");
    std::fs::write(&secret, "the contents of another run\n").unwrap();
    let source = candidate("include_secret.c").replace("@PATH@", secret.to_str().unwrap());
    let v = eval_source("include_secret.c", &source, &[], &[]);
    v.expect("rejected", "includes a file outside the candidate's own sources");
    assert!(!v.run.stdout.contains("the contents of another run"));
    let via_macro = source.replace(
        &format!("#include \"{}\"", secret.display()),
        &format!("#define F \"{}\"\n#include F", secret.display()),
    );
    assert_ne!(via_macro, source);
    eval_source("include_macro.c", &via_macro, &[], &[]).expect("rejected", "line 8: `#include F`");
    // Relative names of the candidate's own files and system headers stay allowed.
    let fine = candidate("include_secret.c").replace("#include \"@PATH@\"", "#include <math.h>");
    eval_source("include_fine.c", &fine, &[], &[]).expect("incorrect_numerical", POISON);
}

// ---- forging the record ------------------------------------------------------------------------

#[test]
fn a_record_forged_through_proc_is_not_believed() {
    let test = "a_record_forged_through_proc_is_not_believed";
    if !need_seccomp(test) || !need_landlock(test) {
        return;
    }
    // With the sandbox: the pipes cannot be reopened, and the kill is killed.
    eval_candidate("forge_via_proc.c", &[]).expect("runtime_error", SIGSYS);
    // Without it the forged lines may reach ksearch (as root, which may open any process's
    // /proc/PID/fd): they fail authentication. Otherwise the harness, non-dumpable, keeps its
    // descriptors and only the kill lands. Never `passed`.
    let v = eval_candidate("forge_via_proc.c", &[("KSEARCH_SANDBOX", "off")]);
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        v.expect("runtime_error", "line(s) that fail authentication");
        assert!(v.reason().contains("most likely the candidate"), "{}", v.reason());
    } else {
        v.expect("runtime_error", "killed by signal 9");
    }
    assert!(v.json["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .all(|w| w["status"] != "passed"));
}

#[test]
fn the_sandbox_is_recorded_in_the_provenance() {
    let l = layers();
    eprintln!(
        "sandbox: landlock ABI {}, seccomp {}, notes {:?}",
        l.landlock, l.seccomp, l.notes
    );
    // Stated here too, so a filtered run of the suite still fails on a machine without a layer.
    let test = "the_sandbox_is_recorded_in_the_provenance";
    need("landlock", l.landlock > 0, test);
    need("seccomp", l.seccomp, test);
}

// ---- Python-module candidates (backends python and triton) -------------------------------------
//
// These run in the harness's own process on the GPU backends, so the static checks are their
// first defence; `ksearch eval` refuses them before anything starts (no PyTorch needed).

fn python_candidate(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/adversarial/python")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn python_hacks_are_rejected_before_anything_runs() {
    let cases = [
        (
            "timer_patch.py",
            "line 4: `import time` reads, sleeps on or patches the clock",
        ),
        (
            "sync_patch.py",
            "line 5: `torch.cuda.synchronize =` assigns to an attribute of a module",
        ),
        (
            "side_stream.py",
            "line 6: `torch.cuda.Stream` creates, switches or synchronises CUDA streams",
        ),
        (
            "try_fallback.py",
            "line 12: `try:` try/except can fall back to the framework's op or the reference",
        ),
        (
            "harness_patch.py",
            "line 7: `sys.modules` reaches into the interpreter or the harness",
        ),
        ("thread.py", "line 3: `threading` creates a thread or a process"),
    ];
    for (name, reason) in cases {
        let v = eval_source(name, &python_candidate(name), &[], &[]);
        v.expect("rejected", &format!("static check: {name} {reason}"));
        assert!(v.json["compile"].is_null(), "{name}: nothing was compiled");
    }
}

#[test]
fn calling_the_frameworks_op_is_rejected_by_the_tasks_rule() {
    let task = copy_fixture("tiny_softmax");
    let toml = task.path().join("task.toml");
    let mut text = std::fs::read_to_string(&toml).unwrap();
    text.push_str(
        "\n[checks]\nforbidden = [\n  { pattern = '\\b(torch|F)\\.(\\w+\\.)*softmax\\b', reason = \"the softmax must be computed by the kernel, not by PyTorch\" },\n]\n",
    );
    std::fs::write(&toml, text).unwrap();
    let (_dir, path) = write_temp("framework_op.py", &python_candidate("framework_op.py"));
    let r = ksearch(&[
        "eval",
        task.path().to_str().unwrap(),
        path.to_str().unwrap(),
        "--json",
        "--seed",
        "7",
    ]);
    let j = r.json();
    assert_eq!(j["status"], "rejected", "{}", j["reason"]);
    assert_eq!(
        j["reason"],
        "static check: framework_op.py line 8: `torch.softmax` the softmax must be computed by the kernel, not by PyTorch"
    );
}
