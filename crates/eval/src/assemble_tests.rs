//! The harness's output is untrusted: these feed `finish` canned outcomes, well-formed and not.
use super::*;
use crate::supervisor::Outcome;

fn task(task_toml: Option<&str>) -> (tempfile::TempDir, Task) {
    let dir = tempfile::tempdir().unwrap();
    if let Some(toml) = task_toml {
        std::fs::write(dir.path().join("task.toml"), toml).unwrap();
    }
    std::fs::write(
        dir.path().join("definition.json"),
        r#"{"name": "t", "op_type": "x", "axes": {"N": {"type": "var"}},
            "inputs": {"x": {"shape": ["N"], "dtype": "float32"}},
            "outputs": {"y": {"shape": ["N"], "dtype": "float32"}},
            "reference": "def run(x):\n    return x\n"}"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("workloads.jsonl"),
        "{\"uuid\": \"a\", \"axes\": {\"N\": 4}}\n{\"uuid\": \"b\", \"axes\": {\"N\": 8}}\n",
    )
    .unwrap();
    let task = Task::load_folder(dir.path()).unwrap();
    (dir, task)
}

fn finish(lines: &[&str], exit: Exit) -> Evaluation {
    finish_on("cpu", true, lines, exit)
}

fn finish_on(device: &str, timing_required: bool, lines: &[&str], exit: Exit) -> Evaluation {
    finish_task(None, device, timing_required, lines, exit)
}

/// As `finish_on`, for a task with this task.toml.
fn finish_task(task_toml: Option<&str>, device: &str, timing_required: bool, lines: &[&str], exit: Exit) -> Evaluation {
    // Every line signed as the harness signs it, in order.
    let key = [3u8; 32];
    let signed: Vec<String> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{l}\t{}", crate::auth::code(&key, i as u64, l)))
        .collect();
    finish_raw_task(task_toml, device, timing_required, &key, &signed, exit)
}

/// `lines` as they came through the pipe (codes included, or not), verified under `key`.
fn finish_raw(device: &str, timing_required: bool, key: &[u8], lines: &[String], exit: Exit) -> Evaluation {
    finish_raw_task(None, device, timing_required, key, lines, exit)
}

fn finish_raw_task(
    task_toml: Option<&str>,
    device: &str,
    timing_required: bool,
    key: &[u8],
    lines: &[String],
    exit: Exit,
) -> Evaluation {
    try_finish_raw_task(task_toml, device, timing_required, key, lines, exit).unwrap()
}

/// As `finish`, keeping an error of the evaluator (a task error) as it is.
fn try_finish(lines: &[&str], exit: Exit) -> Result<Evaluation, EvalError> {
    let key = [3u8; 32];
    let signed: Vec<String> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{l}\t{}", crate::auth::code(&key, i as u64, l)))
        .collect();
    try_finish_raw_task(None, "cpu", true, &key, &signed, exit)
}

fn try_finish_raw_task(
    task_toml: Option<&str>,
    device: &str,
    timing_required: bool,
    key: &[u8],
    lines: &[String],
    exit: Exit,
) -> Result<Evaluation, EvalError> {
    let (_dir, task) = task(task_toml);
    let solution = Solution {
        name: "k.c".into(),
        definition: "t".into(),
        author: None,
        spec: ksearch_spec::BuildSpec {
            language: ksearch_spec::Language::C,
            target_hardware: vec![],
            entry_point: "k.c::f".into(),
            dependencies: vec![],
            destination_passing_style: true,
            binding: None,
        },
        sources: vec![],
        description: None,
    };
    let provenance = Provenance {
        device: device.into(),
        // As backend_for chooses it.
        backend: match device {
            d if d.starts_with("cuda") => "cuda",
            d if d.starts_with("mlx") => "mlx",
            _ => "c",
        }
        .into(),
        seed: 1,
        harness_version: None,
        environment: serde_json::Value::Null,
        trials: 1,
    };
    let verified = crate::auth::verify(key, lines.iter().map(|l| Ok(l.to_string())).collect());
    let outcome = Outcome {
        lines: verified.lines,
        exit,
        log: String::new(),
        elapsed: Duration::from_millis(10),
        oom_kills: OOM_KILLS.with(|k| k.get()),
    };
    let unauthenticated = Unauthenticated {
        lines: verified.unauthenticated,
        authenticated: verified.authenticated,
    };
    Assembler::new(&task, &solution, provenance, Duration::from_secs(5), timing_required)
        .finish(outcome, unauthenticated)
}

fn sign(key: &[u8], seq: u64, line: &str) -> String {
    format!("{line}\t{}", crate::auth::code(key, seq, line))
}

#[test]
fn a_forged_passed_record_voids_the_evaluation() {
    let key = [9u8; 32];
    let load = r#"{"event": "progress", "stage": "load", "workload": 0, "trial": null}"#;
    let failed = r#"{"event": "workload", "index": 0, "uuid": "a", "status": "incorrect_numerical", "reason": "bad"}"#;
    // The candidate's forgery: two passed workloads and a done, without (valid) codes, written
    // between the harness's genuine lines; one even carries a code under another key.
    let lines = vec![
        sign(&key, 0, load),
        passed(0, "a"),
        sign(&[1u8; 32], 1, &passed(1, "b")),
        DONE.to_string(),
        sign(&key, 1, failed),
    ];
    let e = finish_raw("cpu", true, &key, &lines, Exit::Code(0));
    assert_eq!(e.status, Status::RuntimeError);
    let reason = e.reason.unwrap();
    assert!(
        reason.starts_with("the protocol stream carried 3 line(s) that fail authentication"),
        "{reason}"
    );
    assert!(reason.contains("most likely the candidate"), "{reason}");
    assert!(e
        .workloads
        .iter()
        .all(|w| w.status == Status::NotRun && w.timing.is_none()));
    assert_eq!(e.speedup, None);
}

#[test]
fn lines_without_any_code_are_a_harness_error() {
    let lines = vec![passed(0, "a"), passed(1, "b"), DONE.to_string()];
    let e = finish_raw("cpu", true, &[4u8; 32], &lines, Exit::Code(0));
    assert_eq!(e.status, Status::HarnessError);
    assert!(e
        .reason
        .unwrap()
        .starts_with("the harness wrote no authenticated protocol line (3 line(s)"));
}

const TIMING: &str = r#""timing": {"clock": "ns", "candidate_ns": [10, 12, 11], "reference_ns": [20, 22, 21]}"#;

fn passed(index: usize, uuid: &str) -> String {
    format!(r#"{{"event": "workload", "index": {index}, "uuid": "{uuid}", "status": "passed", {TIMING}}}"#)
}

/// `done` of a harness that ran the candidate in its own process (no worker: not Linux, or
/// KSEARCH_IN_PROCESS=1).
const DONE: &str =
    r#"{"event": "done", "environment": {"sandbox": {"worker": false}}, "harness_version": "0", "stages": {}}"#;

#[test]
fn a_clean_run_passes_with_speedups_from_raw_samples() {
    let e = finish(&[&passed(0, "a"), &passed(1, "b"), DONE], Exit::Code(0));
    assert_eq!(e.status, Status::Passed);
    assert!((e.speedup.unwrap() - 21.0 / 11.0).abs() < 1e-12);
}

#[test]
fn duplicate_and_late_lines_are_protocol_errors() {
    let e = finish(
        &[&passed(0, "a"), &passed(0, "a"), &passed(1, "b"), DONE],
        Exit::Code(0),
    );
    assert_eq!(e.status, Status::HarnessError);
    assert!(e.reason.unwrap().contains("reported twice"));
    let e = finish(&[&passed(0, "a"), DONE, &passed(1, "b")], Exit::Code(0));
    assert_eq!(e.status, Status::HarnessError);
    assert!(e.reason.unwrap().contains("after `done`"));
}

#[test]
fn wrong_index_uuid_status_or_samples_are_refused() {
    for (line, needle) in [
        (passed(5, "a"), "out of range"),
        (passed(0, "b"), "reported as 'b'"),
        (r#"{"event": "workload", "index": 0, "uuid": "a", "status": "great"}"#.to_string(), "unknown workload status"),
        (r#"{"event": "workload", "index": 0, "uuid": "a", "status": "passed"}"#.to_string(), "without timing"),
        (
            r#"{"event": "workload", "index": 0, "uuid": "a", "status": "passed", "timing": {"candidate_ns": [], "reference_ns": [1]}}"#.to_string(),
            "invalid timing samples",
        ),
        ("not json at all".to_string(), "unreadable protocol line"),
    ] {
        let e = finish(&[&line, &passed(1, "b"), DONE], Exit::Code(0));
        assert_eq!(e.status, Status::HarnessError, "{line}");
        assert!(e.reason.as_deref().unwrap_or("").contains(needle), "{line}: {:?}", e.reason);
    }
}

thread_local! {
    /// The OOM-kill count the next assembled outcome reports (`None`: unreadable).
    static OOM_KILLS: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

#[test]
fn a_sigkill_is_named_by_whether_the_oom_killer_struck() {
    let progress = r#"{"event": "progress", "stage": "correctness", "workload": 0, "trial": 0}"#;
    let reason = |oom: Option<u64>| {
        OOM_KILLS.with(|k| k.set(oom));
        let e = finish(&[progress], Exit::Signal(libc::SIGKILL));
        OOM_KILLS.with(|k| k.set(None));
        assert_eq!(e.status, Status::RuntimeError);
        e.reason.unwrap_or_default()
    };
    assert!(reason(Some(0)).contains("not from the out-of-memory killer: most likely the candidate"));
    assert!(reason(Some(2)).contains("SIGKILL from the out-of-memory killer"));
    assert!(reason(None).contains("SIGKILL, possibly out of memory"));
}

#[test]
fn a_task_error_about_a_workload_names_its_line_of_workloads_jsonl() {
    let line = r#"{"event": "task_error", "field": "workloads[2].axes", "message": "needs 80 GiB"}"#;
    let Err(EvalError::Task(p)) = try_finish(&[line], Exit::Code(0)) else {
        panic!("a task error")
    };
    let text = p.to_string();
    assert!(
        text.contains("workloads.jsonl:3") && text.contains("axes") && text.contains("needs 80 GiB"),
        "{text}"
    );
    assert!(!text.contains("definition.json"), "{text}");
}

#[test]
fn death_during_candidate_stages_is_the_candidate_s() {
    for stage in ["load", "correctness", "timing"] {
        let progress = format!(r#"{{"event": "progress", "stage": "{stage}", "workload": 1, "trial": 0}}"#);
        let e = finish(&[&passed(0, "a"), &progress], Exit::Signal(libc::SIGSEGV));
        assert_eq!(e.status, Status::RuntimeError, "{stage}");
        assert_eq!(e.workloads[0].status, Status::Passed);
        assert_eq!(e.workloads[1].status, Status::RuntimeError);
        assert!(e.reason.unwrap().contains("SIGSEGV"));
    }
    let progress = r#"{"event": "progress", "stage": "compile"}"#;
    let e = finish(&[progress], Exit::Signal(libc::SIGSEGV));
    assert_eq!(e.status, Status::HarnessError);
}

#[test]
fn a_missing_done_without_a_signal_is_not_a_pass() {
    let e = finish(&[&passed(0, "a"), &passed(1, "b")], Exit::Code(0));
    assert_ne!(e.status, Status::Passed);
}

#[test]
fn a_build_refused_for_its_imports_is_rejected_not_a_compile_error() {
    let refused = r#"{"event": "compile", "ok": false, "seconds": 2.0, "command": ["nvcc"],
        "log": "refused before linking: the compiled code imports dlsym (kernel.cu): it looks up code",
        "refused": "the compiled code imports dlsym (kernel.cu): it looks up code"}"#;
    let e = finish_on("cuda:0", true, &[refused, DONE], Exit::Code(0));
    assert_eq!(e.status, Status::Rejected, "{:?}", e.reason);
    let reason = e.reason.as_deref().unwrap();
    assert!(
        reason.starts_with("refused after compiling: the compiled code imports dlsym"),
        "{reason}"
    );
    assert!(e.workloads.iter().all(|w| w.status == Status::Rejected));
    let c = e.compile.as_ref().unwrap();
    assert_eq!(
        c.refused.as_deref(),
        Some("the compiled code imports dlsym (kernel.cu): it looks up code")
    );
    // Which defences a build had is kept in the record.
    let unchecked = r#"{"event": "compile", "ok": true, "command": ["nvcc"], "log": "", "import_check": "off"}"#;
    let e = finish_on("cuda:0", true, &[unchecked, DONE], Exit::Code(0));
    assert_eq!(e.compile.as_ref().unwrap().import_check.as_deref(), Some("off"));
    // A build that failed on its own is still a compile error.
    let failed = r#"{"event": "compile", "ok": false, "command": ["nvcc"], "log": "error: x"}"#;
    let e = finish_on("cuda:0", true, &[failed, DONE], Exit::Code(0));
    assert_eq!(e.status, Status::CompileError, "{:?}", e.reason);
}

#[test]
fn gpu_events_resources_and_host_samples_are_kept() {
    let compile = r#"{"event": "compile", "ok": true, "seconds": 1.5, "command": ["nvcc"], "log": "",
        "cached": true, "arch": "sm_90a", "resources": [{"name": "k", "arch": "sm_90a", "registers": 40,
        "spill_store_bytes": 0, "spill_load_bytes": 0, "stack_frame_bytes": 0, "shared_bytes": 1024,
        "constant_bytes": null, "barriers": 1}]}"#;
    let gpu = |i: usize, u: &str, cand_host: &str| {
        format!(
            r#"{{"event": "workload", "index": {i}, "uuid": "{u}", "status": "passed", "timing": {{"clock": "cuda_event",
            "candidate_ns": [10000, 12000, 11000], "reference_ns": [20000, 22000, 21000],
            "candidate_host_ns": {cand_host}, "reference_host_ns": [30000, 32000, 31000],
            "cuda_graph": false, "cuda_graph_note": null,
            "gate": {{"candidate": "gated", "reference": "expired at call 3: waited"}}, "event_overhead_ns": 1250.0}}}}"#
        )
    };
    let honest = gpu(0, "a", "[19000, 21000, 20000]");
    let e = finish_on(
        "cuda:0",
        true,
        &[compile, &honest, &gpu(1, "b", "[20000, 20000, 20000]"), DONE],
        Exit::Code(0),
    );
    assert_eq!(e.status, Status::Passed, "{:?}", e.reason);
    let c = e.compile.as_ref().unwrap();
    assert!(c.cached);
    assert_eq!(c.arch.as_deref(), Some("sm_90a"));
    assert_eq!(c.resources[0].registers, 40);
    assert_eq!(c.resources[0].shared_bytes, 1024);
    assert_eq!(c.resources[0].constant_bytes, None);
    let t = e.workloads[0].timing.as_ref().unwrap();
    assert_eq!(t.candidate.median_ns, 11000.0);
    assert_eq!(t.candidate_host.unwrap().median_ns, 20000.0);
    assert_eq!(t.cuda_graph, Some(false));
    // The gate's state per callee and the events' own cost reach the record.
    let gate = t.gate.as_ref().unwrap();
    assert_eq!(gate["candidate"], "gated");
    assert!(gate["reference"].starts_with("expired at call 3"));
    assert_eq!(t.event_overhead_ns, Some(1250.0));
    assert_eq!(t.suspicious, None);
    // 11 us of events against 500 us on the host clock: work the events did not see.
    let hidden = gpu(0, "a", "[500000, 510000, 490000]");
    let e = finish_on(
        "cuda:0",
        true,
        &[
            compile,
            &hidden,
            &honest.replace(r#""index": 0, "uuid": "a""#, r#""index": 1, "uuid": "b""#),
            DONE,
        ],
        Exit::Code(0),
    );
    let flag = e.workloads[0].timing.as_ref().unwrap().suspicious.clone().unwrap();
    assert!(flag.contains("another stream or thread"), "{flag}");
    assert!(e.workloads[1].timing.as_ref().unwrap().suspicious.is_none());
}

#[test]
fn untimed_passes_are_accepted_only_under_the_sanitizer() {
    let untimed =
        |i: usize, u: &str| format!(r#"{{"event": "workload", "index": {i}, "uuid": "{u}", "status": "passed"}}"#);
    let e = finish_on(
        "cuda:0",
        false,
        &[&untimed(0, "a"), &untimed(1, "b"), DONE],
        Exit::Code(0),
    );
    assert_eq!(e.status, Status::Passed);
    assert!(e.workloads[0].timing.is_none());
    assert_eq!(e.speedup, None);
    let e = finish_on(
        "cuda:0",
        true,
        &[&untimed(0, "a"), &untimed(1, "b"), DONE],
        Exit::Code(0),
    );
    assert_eq!(e.status, Status::HarnessError);
}

#[test]
fn sanitizer_errors_fail_a_pass_and_join_the_log() {
    // Nothing is timed under the sanitizer.
    let untimed =
        |i: usize, u: &str| format!(r#"{{"event": "workload", "index": {i}, "uuid": "{u}", "status": "passed"}}"#);
    let (a, b) = (untimed(0, "a"), untimed(1, "b"));
    let e = finish_on("cuda:0", false, &[&a, &b, DONE], Exit::Code(0));
    let log = "========= COMPUTE-SANITIZER\n========= Invalid __global__ read of size 4 bytes\n\
               =========     at k+0x10 in kernel.cu:3\n========= ERROR SUMMARY: 1 error\n";
    let e = gpu_checks::sanitizer_verdict(e, Ok(log));
    assert_eq!(e.status, Status::RuntimeError);
    assert!(e.reason.as_deref().unwrap().contains("Invalid __global__ read"));
    assert!(e.log.contains("--- compute-sanitizer ---"));
    let clean = finish_on("cuda:0", false, &[&a, &b, DONE], Exit::Code(0));
    let clean = gpu_checks::sanitizer_verdict(clean, Ok("========= ERROR SUMMARY: 0 errors\n"));
    assert_eq!(clean.status, Status::Passed);
}

#[test]
fn a_sanitizer_that_left_no_summary_fails_a_pass() {
    let untimed =
        |i: usize, u: &str| format!(r#"{{"event": "workload", "index": {i}, "uuid": "{u}", "status": "passed"}}"#);
    let (a, b) = (untimed(0, "a"), untimed(1, "b"));
    let passed = || finish_on("cuda:0", false, &[&a, &b, DONE], Exit::Code(0));
    assert_eq!(passed().status, Status::Passed);
    for (log, why) in [
        (
            Err("/tmp/x/sanitizer.log: No such file or directory (os error 2)".to_string()),
            "its log could not be read (/tmp/x/sanitizer.log: No such file",
        ),
        (Ok(""), "its log is empty"),
        // Cut short: a crash after the first report, before the summary.
        (
            Ok("========= COMPUTE-SANITIZER\n========= Invalid __global__ read of size 4 bytes\n"),
            "no readable \"ERROR SUMMARY: N errors\" line",
        ),
        (Ok("========= ERROR SUMMARY: lots of errors\n"), "no readable"),
    ] {
        let e = gpu_checks::sanitizer_verdict(passed(), log.as_deref().map_err(Clone::clone));
        assert_eq!(e.status, Status::HarnessError, "{log:?}");
        assert_eq!(e.speedup, None);
        let reason = e.reason.as_deref().unwrap();
        assert!(
            reason.starts_with("compute-sanitizer (memcheck) produced no error summary: "),
            "{reason}"
        );
        assert!(reason.contains(why), "{log:?}: {reason}");
        assert!(
            reason.ends_with("its verdict is unknown and the evaluation cannot pass"),
            "{reason}"
        );
        assert!(e.log.contains("--- compute-sanitizer ---"));
    }
    // An evaluation that already failed (here a timeout, which kills the sanitizer before its
    // summary) keeps its status and reason; the log says the sanitizer gave no verdict.
    let timed_out = finish_on("cuda:0", false, &[&a], Exit::TimedOut);
    let reason = timed_out.reason.clone();
    let e = gpu_checks::sanitizer_verdict(timed_out, Ok(""));
    assert_eq!(e.status, Status::Timeout);
    assert_eq!(e.reason, reason);
    assert!(e.log.contains("produced no error summary"), "{}", e.log);
}

/// A task whose workloads move 1 GB (`a`, N = 4) and 2 GB (`b`, N = 8) per call.
const GIGABYTES: &str = "[roofline]\nbytes = \"N * 250000000\"\n";

/// A passed workload timed as on a CUDA device: events (candidate median `cand_ns`, the
/// reference twice as slow) and host clocks 30 us above them (an honest gap).
fn gpu_timed(index: usize, uuid: &str, cand_ns: f64) -> String {
    let (c, r) = (cand_ns, 2.0 * cand_ns);
    let (ch, rh) = (c + 30e3, r + 30e3);
    format!(
        r#"{{"event": "workload", "index": {index}, "uuid": "{uuid}", "status": "passed", "timing": {{
        "clock": "cuda_event", "candidate_ns": [{c}, {c}, {c}], "reference_ns": [{r}, {r}, {r}],
        "host_clock": "perf_counter_ns", "candidate_host_ns": [{ch}, {ch}, {ch}],
        "reference_host_ns": [{rh}, {rh}, {rh}], "cuda_graph": false, "cuda_graph_note": null}}}}"#
    )
}

/// `done` from a harness that found the device `name`.
fn done_on(name: &str) -> String {
    format!(
        r#"{{"event": "done", "environment": {{"device": {{"name": "{name}"}}, "sandbox": {{"worker": false}}}},
        "harness_version": "0.2.0", "stages": {{}}}}"#
    )
}

fn flag(e: &Evaluation, i: usize) -> Option<String> {
    e.workloads[i].timing.as_ref().unwrap().suspicious.clone()
}

#[test]
fn the_roofline_bound_is_the_evaluated_devices_own() {
    // 1 GB in 142.857 us is 7 TB/s: above the H200's 4.8 TB/s (5.28 with the margin); 2 GB in
    // 666.667 us is 3 TB/s, within it.
    let lines = [
        gpu_timed(0, "a", 142_857.0),
        gpu_timed(1, "b", 666_667.0),
        done_on("NVIDIA H200"),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let e = finish_task(Some(GIGABYTES), "cuda:0", true, &lines, Exit::Code(0));
    assert_eq!(e.status, Status::Passed, "{:?}", e.reason);
    let t = e.workloads[0].timing.as_ref().unwrap();
    assert!((t.achieved_gb_per_s.unwrap() - 7000.0).abs() < 1.0);
    let why = flag(&e, 0).expect("7 TB/s on an H200 is flagged");
    assert!(
        why.starts_with(
            "moves 7000 GB/s, above 5280 GB/s (1.1x the 4800 GB/s peak memory bandwidth of the NVIDIA H200"
        ),
        "{why}"
    );
    assert!(why.contains("knowledge-base entry h200"), "{why}");
    assert_eq!(flag(&e, 1), None, "3 TB/s on an H200 is plausible");

    // The same 7 TB/s on a GPU the knowledge base does not know: only the generic bound holds,
    // and the flag of a faster one says that was the bound.
    let lines = [
        gpu_timed(0, "a", 142_857.0),
        gpu_timed(1, "b", 166_667.0),
        done_on("NVIDIA H100 PCIe"),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let e = finish_task(Some(GIGABYTES), "cuda:0", true, &lines, Exit::Code(0));
    assert_eq!(flag(&e, 0), None);
    let why = flag(&e, 1).expect("12 TB/s is beyond any GPU");
    assert!(
        why.starts_with("moves 12000 GB/s, above 10000 GB/s (the generic bound for any GPU, as the knowledge base has no entry for 'NVIDIA H100 PCIe')"),
        "{why}"
    );
}

#[test]
fn an_mlx_gpu_is_bounded_by_its_apple_chips_bandwidth() {
    // MLX times with the host clock around a synchronise. 1 GB in 1.667 ms is 600 GB/s, above
    // an M2 Max's 400 GB/s; 2 GB in 6.667 ms is 300 GB/s.
    let mlx = |i: usize, u: &str, c: f64| {
        format!(
            r#"{{"event": "workload", "index": {i}, "uuid": "{u}", "status": "passed", "timing": {{
            "clock": "perf_counter_ns", "candidate_ns": [{c}, {c}], "reference_ns": [{c}, {c}]}}}}"#
        )
    };
    let lines = [
        mlx(0, "a", 1_666_667.0),
        mlx(1, "b", 6_666_667.0),
        done_on("Apple M2 Max"),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let e = finish_task(Some(GIGABYTES), "mlx:gpu", true, &lines, Exit::Code(0));
    assert_eq!(e.status, Status::Passed, "{:?}", e.reason);
    let why = flag(&e, 0).expect("600 GB/s on an M2 Max is flagged");
    assert!(
        why.starts_with("moves 600 GB/s, above 440 GB/s (1.1x the 400 GB/s peak memory bandwidth of the Apple M2 Max"),
        "{why}"
    );
    assert_eq!(flag(&e, 1), None);
}

fn harness_error_of(e: &Evaluation) -> String {
    assert_eq!(e.status, Status::HarnessError, "{:?}", e.reason);
    e.reason.clone().unwrap()
}

#[test]
fn cuda_event_timings_must_carry_their_host_clock_samples() {
    let honest = gpu_timed(1, "b", 20e3);
    let done = done_on("NVIDIA H200");
    let on_gpu = |first: &str| finish_on("cuda:0", true, &[first, &honest, &done], Exit::Code(0));
    assert_eq!(on_gpu(&gpu_timed(0, "a", 20e3)).status, Status::Passed);
    let events =
        r#""clock": "cuda_event", "candidate_ns": [10000, 12000, 11000], "reference_ns": [20000, 22000, 21000]"#;
    for (timing, needle) in [
        // No host samples at all: the cross-check for work on another stream would be skipped.
        (
            events.to_string(),
            "was timed by CUDA events without the host-clock samples of its cross-check",
        ),
        (
            format!(r#"{events}, "candidate_host_ns": [40000, 41000, 42000]"#),
            "without the host-clock samples",
        ),
        (
            format!(r#"{events}, "candidate_host_ns": [40000], "reference_host_ns": [50000, 51000, 52000]"#),
            "has 3 and 3 CUDA-event samples but 1 and 3 host-clock samples",
        ),
        // Another clock on a CUDA device.
        (
            r#""clock": "perf_counter_ns", "candidate_ns": [10000], "reference_ns": [20000]"#.to_string(),
            "workload 0 on cuda:0 was timed by clock 'perf_counter_ns', not by CUDA events",
        ),
    ] {
        let line =
            format!(r#"{{"event": "workload", "index": 0, "uuid": "a", "status": "passed", "timing": {{{timing}}}}}"#);
        let reason = harness_error_of(&on_gpu(&line));
        assert!(reason.starts_with("the harness broke the protocol"), "{reason}");
        assert!(reason.contains(needle), "{timing}: {reason}");
    }
    // Host samples are not asked of other clocks (the CPU, MLX's host clock).
    let e = finish(&[&passed(0, "a"), &passed(1, "b"), DONE], Exit::Code(0));
    assert_eq!(e.status, Status::Passed, "{:?}", e.reason);
}

/// A passed workload of backend c timed in the worker: claimed `claimed_ns` per call, with the
/// harness's round trips `outer` and empty round trips `pings` (JSON lists, or absent).
fn worker_timed(index: usize, uuid: &str, claimed_ns: f64, outer: Option<&str>, pings: Option<&str>) -> String {
    let c = claimed_ns;
    let mut timing =
        format!(r#""clock": "perf_counter_ns", "candidate_ns": [{c}, {c}, {c}], "reference_ns": [9e5, 9e5, 9e5]"#);
    if let Some(o) = outer {
        timing.push_str(&format!(r#", "worker_outer_ns": {o}"#));
    }
    if let Some(p) = pings {
        timing.push_str(&format!(r#", "worker_ping_ns": {p}"#));
    }
    format!(
        r#"{{"event": "workload", "index": {index}, "uuid": "{uuid}", "status": "passed", "timing": {{{timing}}}}}"#
    )
}

const DONE_IN_WORKER: &str = r#"{"event": "done", "environment": {"sandbox": {"worker": true, "landlock": 7,
    "seccomp": true, "notes": []}}, "harness_version": "0.2.0", "stages": {}}"#;

#[test]
fn times_from_the_worker_must_carry_the_harnesss_round_trips() {
    let pings = Some("[14000, 15000, 13000, 14000, 14000]");
    let honest = |i: usize, u: &str| worker_timed(i, u, 38e3, Some("[58000, 59000, 60000]"), pings);
    let e = finish(&[&honest(0, "a"), &honest(1, "b"), DONE_IN_WORKER], Exit::Code(0));
    assert_eq!(e.status, Status::Passed, "{:?}", e.reason);
    assert_eq!(e.workloads[0].timing.as_ref().unwrap().suspicious, None);
    // The cross-check still runs: 1 us claimed for calls whose round trip is 500 us.
    let forged = worker_timed(0, "a", 1e3, Some("[500000, 500000, 500000]"), pings);
    let e = finish(&[&forged, &honest(1, "b"), DONE_IN_WORKER], Exit::Code(0));
    let why = flag(&e, 0).unwrap();
    assert!(why.starts_with("the worker's clock says 1.0 us per call"), "{why}");

    for (first, needle) in [
        (
            worker_timed(0, "a", 38e3, None, None),
            "workload 0 was timed by the worker's clock (the candidate ran in the worker) without the harness's round trips",
        ),
        (worker_timed(0, "a", 38e3, Some("[58000, 59000, 60000]"), None), "without the harness's round trips"),
        (worker_timed(0, "a", 38e3, None, pings), "without the harness's round trips"),
        (
            worker_timed(0, "a", 38e3, Some("[58000]"), pings),
            "workload 0 has 3 worker-clock samples but 1 round trips",
        ),
        (worker_timed(0, "a", 38e3, Some("[58000, 59000, 60000]"), Some("[-1]")), "invalid worker round-trip samples"),
    ] {
        let reason = harness_error_of(&finish(&[&first, &honest(1, "b"), DONE_IN_WORKER], Exit::Code(0)));
        assert!(reason.contains(needle), "{first}: {reason}");
    }
    // Backend c whose `done` does not say where the candidate ran.
    let silent = r#"{"event": "done", "environment": {}, "harness_version": "0.2.0", "stages": {}}"#;
    let reason = harness_error_of(&finish(&[&honest(0, "a"), &honest(1, "b"), silent], Exit::Code(0)));
    assert!(
        reason.contains("does not say whether the candidate ran in the worker"),
        "{reason}"
    );
    // In the harness's own process (no worker) there are no round trips to ask for.
    let e = finish(
        &[&worker_timed(0, "a", 38e3, None, None), &honest(1, "b"), DONE],
        Exit::Code(0),
    );
    assert_eq!(e.status, Status::Passed, "{:?}", e.reason);
}

/// A passed workload timed as on a CUDA device with the launch paths: (event, host, enqueue)
/// per call for the candidate and the reference, the same three calls each.
fn gpu_timed_enqueued(uuid: &str, cand: (f64, f64, f64), refr: (f64, f64, f64)) -> String {
    let three = |v: f64| format!("[{v}, {v}, {v}]");
    format!(
        r#"{{"event": "workload", "index": 0, "uuid": "{uuid}", "status": "passed", "timing": {{
        "clock": "cuda_event", "candidate_ns": {}, "reference_ns": {},
        "host_clock": "perf_counter_ns", "candidate_host_ns": {}, "reference_host_ns": {},
        "candidate_enqueue_ns": {}, "reference_enqueue_ns": {}, "cuda_graph": false, "cuda_graph_note": null,
        "gate": {{"candidate": "gated", "reference": "gated"}}, "event_overhead_ns": 1300.0}}}}"#,
        three(cand.0),
        three(refr.0),
        three(cand.1),
        three(refr.1),
        three(cand.2),
        three(refr.2)
    )
}

#[test]
fn work_after_the_call_is_flagged_net_of_the_launch_paths() {
    let on = |line: String| finish_on("cuda:0", true, &[&line, DONE], Exit::Code(0));
    // Honest: a 10 us kernel launched in 20 us, a 45 us synchronise; the reference's seven torch
    // ops take 250 us to launch. Neither check flags it.
    let honest = on(gpu_timed_enqueued(
        "a",
        (10e3, 20e3 + 10e3 + 45e3, 20e3),
        (30e3, 250e3 + 30e3 + 45e3, 250e3),
    ));
    assert_eq!(flag(&honest, 0), None);
    let timing = honest.workloads[0].timing.as_ref().unwrap();
    assert_eq!(timing.candidate_enqueue_ns, vec![20e3; 3], "the launch paths are kept");
    // 200 us of work on another stream after the call returned: the host gap (265 us) is within
    // the reference's gap plus the slack (295 + 50 us), so the gap check alone missed it; net of
    // the launch paths it is 245 us against the reference's 45.
    let hidden = on(gpu_timed_enqueued(
        "a",
        (10e3, 20e3 + 10e3 + 45e3 + 200e3, 20e3),
        (30e3, 250e3 + 30e3 + 45e3, 250e3),
    ));
    let why = flag(&hidden, 0).expect("work after the call should be flagged");
    assert!(
        why.contains("after its call returned") && why.contains("245.0 us"),
        "{why}"
    );
    // A long honest kernel (5 ms) with a slightly slower synchronise (+30 us): within the slack.
    let long = on(gpu_timed_enqueued(
        "a",
        (5e6, 15e3 + 5e6 + 75e3, 15e3),
        (6e6, 250e3 + 6e6 + 45e3, 250e3),
    ));
    assert_eq!(flag(&long, 0), None);
    // Without the launch-path lists (an older harness), only the gap check runs: as before.
    let old = finish_on("cuda:0", true, &[&gpu_timed(0, "a", 10e3), DONE], Exit::Code(0));
    assert_eq!(flag(&old, 0), None);
}
