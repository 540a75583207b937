use super::ncu_csv::csv_fields;
use super::run::{read_outcome, Failure};
use super::*;
use crate::{auth, supervisor};
use ksearch_spec::Task;
use std::path::Path;
use std::time::Duration;

/// Written by hand in ncu's raw-page format: two kernels launched twice each (calls of 3 ms and
/// 1 ms), ncu's ==PROF== lines first, a units line, thousands separators and an `n/a`.
const HANDWRITTEN: &str = include_str!("../../tests/fixtures/ncu-raw-handwritten.csv");

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn the_raw_page_gives_one_launch_per_line_with_numbers_in_base_units() {
    let launches = parse_ncu_csv(HANDWRITTEN).unwrap();
    let names: Vec<&str> = launches.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "mamba_scan_chunk",
            "mamba_scan_combine",
            "mamba_scan_chunk",
            "mamba_scan_combine"
        ]
    );
    let first = &launches[0].metrics;
    assert_eq!(first.get(DURATION), Some(&3_000_000.0)); // "3,000,000" nsecond
    assert_eq!(first.get(MEMORY_PCT), Some(&81.2));
    // Identification columns are not metrics; `n/a` is no value.
    assert!(!first.contains_key("Device") && !first.contains_key("CC"));
    assert!(!launches[1]
        .metrics
        .contains_key(&format!("{STALL_PREFIX}math_pipe_throttle{STALL_SUFFIX}")));
}

#[test]
fn time_units_other_than_ns_are_converted() {
    let csv = "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"\",\"\",\"usecond\"\n\"0\",\"k\",\"12.5\"\n";
    let launches = parse_ncu_csv(csv).unwrap();
    assert_eq!(launches[0].metrics.get(DURATION), Some(&12_500.0));
}

#[test]
fn launches_are_weighted_by_duration_and_kernels_ranked_by_time() {
    let launches = parse_ncu_csv(HANDWRITTEN).unwrap();
    let (total, kernels, count) = aggregate(&launches, 2).unwrap();
    // 8 ms over 2 calls; each metric weighted 3:1 between the kernels.
    assert_eq!(total.duration_ns, 4_000_000.0);
    assert!(close(total.memory_throughput_pct, 65.75), "{total:?}");
    assert!(close(total.dram_throughput_pct, 61.0));
    assert!(close(total.compute_throughput_pct, 37.5));
    assert!(close(total.achieved_occupancy_pct, 55.75));
    assert!(close(total.theoretical_occupancy_pct, 62.5));
    assert!(close(total.l2_hit_rate_pct, 49.5));
    // The busiest tensor pipe of each launch (HMMA 12.5% in the combine kernel).
    assert!(close(total.tensor_pipe_pct, 3.125));
    // `selected` is issuing, not a stall; a reason some launches lack is weighed over the rest.
    let stalls: Vec<(&str, f64)> = total
        .stalls
        .iter()
        .map(|s| (s.reason.as_str(), s.cycles_per_instruction))
        .collect();
    assert_eq!(
        stalls,
        [
            ("long_scoreboard", 9.25),
            ("wait", 3.5),
            ("barrier", 2.75),
            ("short_scoreboard", 2.25)
        ]
    );
    assert!((total.stalls[0].share_pct - 100.0 * 9.25 / 18.25).abs() < 1e-9);
    assert_eq!(count, 2);
    let ranked: Vec<(&str, usize, f64)> = kernels
        .iter()
        .map(|k| (k.name.as_str(), k.launches, k.share_pct))
        .collect();
    assert_eq!(ranked, [("mamba_scan_chunk", 2, 75.0), ("mamba_scan_combine", 2, 25.0)]);
    assert!(close(kernels[0].metrics.memory_throughput_pct, 81.0));
    assert!(close(kernels[1].metrics.tensor_pipe_pct, 12.5));
    assert_eq!(aggregate(&[], 2), None);
}

#[test]
fn unusable_reports_are_typed_errors() {
    assert_eq!(
        parse_ncu_csv("==PROF== Disconnected\n==WARNING== No kernels were profiled.\n"),
        Err(ProfileError::NoHeader)
    );
    assert_eq!(
        parse_ncu_csv("\"ID\",\"gpu__time_duration.sum\"\n\"0\",\"5\"\n"),
        Err(ProfileError::MissingColumn("Kernel Name"))
    );
    assert_eq!(
        parse_ncu_csv("\"ID\",\"Kernel Name\",\"x__y\"\n\"0\",\"k\"\n"),
        Err(ProfileError::FieldCount {
            line: 2,
            found: 2,
            expected: 3
        })
    );
    assert_eq!(
        parse_ncu_csv("\"ID\",\"Kernel Name\n"),
        Err(ProfileError::Unterminated { line: 1 })
    );
    // A header with no launch: a report of nothing.
    assert_eq!(parse_ncu_csv("\"ID\",\"Kernel Name\",\"x__y\"\n"), Ok(vec![]));
}

#[test]
fn quoted_fields_keep_commas_and_quotes() {
    assert_eq!(
        csv_fields(r#""a,b","say ""hi""",,3"#).unwrap(),
        ["a,b", "say \"hi\"", "", "3"]
    );
}

fn profiled() -> Profile {
    let launches = parse_ncu_csv(HANDWRITTEN).unwrap();
    let (total, kernels, kernel_count) = aggregate(&launches, 2).unwrap();
    Profile {
        status: ProfileStatus::Profiled,
        note: None,
        tool: Some("ncu 2025.3.1.0".into()),
        workload: Some("mamba_scan-4x2048x4096".into()),
        workload_choice: Some("the largest workload (1.00 GiB of inputs and outputs)".into()),
        calls: 2,
        launches: launches.len(),
        kernel_count,
        total: Some(total),
        kernels,
        seconds: Some(12.0),
    }
}

#[test]
fn the_summary_names_what_bounds_the_kernels() {
    assert_eq!(
        summary(&profiled()),
        "Profile (ncu 2025.3.1.0, workload mamba_scan-4x2048x4096, 2 kernels, 4.00 ms of GPU time per call under ncu):\n\
         - throughput, % of peak: memory 66% (DRAM 61%), compute (SM) 38%; L2 hit rate 50%; tensor pipes 3%\n\
         - achieved occupancy 56% (theoretical 62%); top warp stalls (share of stalled cycles): long_scoreboard 51%, wait 19%, barrier 15%\n\
         - kernel mamba_scan_chunk (2x): 75% of GPU time, memory 81%, compute 30%, occupancy 46%, mostly stalled on long_scoreboard\n\
         - kernel mamba_scan_combine (2x): 25% of GPU time, memory 20%, compute 60%, occupancy 85%, mostly stalled on barrier"
    );
    // One kernel: no per-kernel lines; metrics ncu did not give read n/a.
    let mut one = profiled();
    one.kernel_count = 1;
    if let Some(t) = one.total.as_mut() {
        t.l2_hit_rate_pct = None;
        t.stalls.clear();
    }
    let text = summary(&one);
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.contains("1 kernel,") && text.contains("L2 hit rate n/a") && text.contains("stalled cycles): n/a"));
}

#[test]
fn a_profile_not_taken_is_one_line_saying_why() {
    let p = Profile::unavailable("not profiled: Nsight Compute (ncu) was not found");
    assert_eq!(summary(&p), "Profile: none (Nsight Compute (ncu) was not found)");
    let json = serde_json::to_value(&p).unwrap();
    assert_eq!(json["status"], "unavailable");
    // Absent parts are left out, and a record without them reads back.
    assert!(json.get("total").is_none() && json.get("kernels").is_none());
    let back: Profile = serde_json::from_value(serde_json::json!({"status": "failed"})).unwrap();
    assert_eq!(back.status, ProfileStatus::Failed);
    assert_eq!(summary(&back), "Profile: none (no profile)");
}

#[test]
fn a_profile_survives_the_record_round_trip() {
    let p = profiled();
    let back: Profile = serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap();
    assert_eq!(back, p);
}

#[test]
fn ncu_watches_only_the_bracketed_calls_and_writes_csv_to_its_own_file() {
    let args: Vec<String> = ncu_arguments(Path::new("/py"), Path::new("/r/ncu.csv"), true)
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let joined = args.join(" ");
    for wanted in [
        "--csv --page raw --print-units base",
        "--profile-from-start off",
        "--section WarpStateStats",
        "--log-file /r/ncu.csv /py -m ksearch_harness",
    ] {
        assert!(joined.contains(wanted), "{wanted}: {joined}");
    }
    assert!(joined.contains(&format!("--metrics {}", METRICS.join(","))));
    let sections_only = ncu_arguments(Path::new("/py"), Path::new("/r/ncu.csv"), false);
    assert!(!sections_only.iter().any(|a| a == "--metrics"));
}

fn task_with(workloads: &str) -> (tempfile::TempDir, Task) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("definition.json"),
        r#"{"name": "t", "op_type": "x", "axes": {"N": {"type": "var"}, "K": {"type": "const", "value": 8}},
            "inputs": {"x": {"shape": ["N", "K"], "dtype": "float16"}, "s": {"shape": null, "dtype": "float32"}},
            "outputs": {"y": {"shape": ["N"], "dtype": "float32"}},
            "reference": "def run(x, s):\n    return x.sum(-1) * s\n"}"#,
    )
    .unwrap();
    std::fs::write(dir.path().join("workloads.jsonl"), workloads).unwrap();
    std::fs::write(
        dir.path().join("task.toml"),
        "targets = [\"cpu\"]\n[kernel]\nlanguage = \"c\"\nentry = \"k\"\n",
    )
    .unwrap();
    let task = Task::load_folder(dir.path()).unwrap();
    (dir, task)
}

#[test]
fn the_largest_workload_is_profiled_unless_one_is_named() {
    let (_dir, task) = task_with(
        "{\"uuid\": \"small\", \"axes\": {\"N\": 4}}\n{\"uuid\": \"big\", \"axes\": {\"N\": 1024}}\n{\"uuid\": \"same\", \"axes\": {\"N\": 1024}}\n",
    );
    // 1024 * 8 fp16 + one fp32 scalar + 1024 fp32 = 20484 bytes; the first of equals.
    assert_eq!(
        choose_workload(&task, None).unwrap(),
        (1, "the largest workload (20.0 KiB of inputs and outputs)".to_string())
    );
    assert_eq!(choose_workload(&task, Some("small")).unwrap().0, 0);
    assert_eq!(
        choose_workload(&task, Some("nope")),
        Err(ProfileError::UnknownWorkload("nope".into()))
    );
}

/// A profiling run's outcome whose lines are authenticated under `key`, as the harness writes them.
fn outcome(key: &[u8], events: &[serde_json::Value], exit: supervisor::Exit) -> supervisor::Outcome {
    let lines = events
        .iter()
        .enumerate()
        .map(|(seq, e)| {
            let json = e.to_string();
            Ok(format!("{json}\t{}", auth::code(key, seq as u64, &json)))
        })
        .collect();
    supervisor::Outcome {
        lines,
        exit,
        log: "Traceback ...\nRuntimeError: boom".into(),
        elapsed: Duration::from_secs(1),
        oom_kills: None,
    }
}

fn note(r: Result<Vec<Launch>, Failure>) -> String {
    match r {
        Ok(l) => panic!("expected a failure, got {} launches", l.len()),
        Err(Failure::Other(n)) => format!("other: {n}"),
        Err(Failure::MetricsRefused(n)) => format!("refused: {n}"),
    }
}

#[test]
fn the_profiling_runs_lines_and_report_become_launches_or_a_reason() {
    use serde_json::json;
    let key = [7u8; 32];
    let ok = |bracketed: bool| {
        vec![
            json!({"event": "compile", "ok": true}),
            json!({"event": "profiled", "workload": "w", "calls": 2, "bracketed": bracketed}),
            json!({"event": "done"}),
        ]
    };
    let code0 = supervisor::Exit::Code(0);
    let launches = read_outcome(&key, outcome(&key, &ok(true), code0.clone()), Some(HANDWRITTEN), true)
        .ok()
        .unwrap();
    assert_eq!(launches.len(), 4);

    // Lines under another key are not the harness's.
    let forged = outcome(&[8u8; 32], &ok(true), code0.clone());
    assert!(note(read_outcome(&key, forged, Some(HANDWRITTEN), true)).contains("failed authentication"));
    // The harness could not mark the calls: whatever ncu says is not about them.
    let unmarked = note(read_outcome(
        &key,
        outcome(&key, &ok(false), code0.clone()),
        Some(HANDWRITTEN),
        true,
    ));
    assert!(unmarked.contains("no CUDA profiler API"), "{unmarked}");
    // A build failure, a crash while profiled, a run that died: each says so.
    let failed_build = [json!({"event": "compile", "ok": false, "log": "\nkernel.cu(3): error: x undefined\n"})];
    let n = note(read_outcome(
        &key,
        outcome(&key, &failed_build, code0.clone()),
        None,
        true,
    ));
    assert_eq!(
        n,
        "other: the candidate did not build: kernel.cu(3): error: x undefined"
    );
    let crashed = [json!({"event": "profile_error", "status": "runtime_error", "reason": "illegal address"})];
    let n = note(read_outcome(&key, outcome(&key, &crashed, code0.clone()), None, true));
    assert_eq!(
        n,
        "other: the candidate failed while profiled (runtime_error): illegal address"
    );
    let died = note(read_outcome(
        &key,
        outcome(&key, &[], supervisor::Exit::Signal(9)),
        None,
        true,
    ));
    assert!(
        died.contains("(signal 9): Traceback ... | RuntimeError: boom"),
        "{died}"
    );
    // ncu's refusal of a metric asks for a retry with the sections alone; only once.
    let refused =
        "==PROF== Connected to process 1\n==ERROR== Failed to find metric sm__pipe_tensor_op_gmma_cycles_active\n";
    let n = note(read_outcome(
        &key,
        outcome(&key, &ok(true), code0.clone()),
        Some(refused),
        true,
    ));
    assert!(
        n.starts_with("refused: ncu's report could not be used: the report has no header"),
        "{n}"
    );
    assert!(
        n.contains("ncu said: Failed to find metric sm__pipe_tensor_op_gmma"),
        "{n}"
    );
    let again = note(read_outcome(
        &key,
        outcome(&key, &ok(true), code0.clone()),
        Some(refused),
        false,
    ));
    assert!(again.starts_with("other: "), "{again}");
    // Counters that cannot be read are not a metric problem.
    let denied =
        "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters\n";
    let n = note(read_outcome(&key, outcome(&key, &ok(true), code0), Some(denied), true));
    assert!(n.starts_with("other: ") && n.contains("ERR_NVGPUCTRPERM"), "{n}");
}

/// Recorded on an H200 (ncu 2025.3.1.0, driver 580.159.04) by `KSEARCH_PROFILE_KEEP=DIR ksearch
/// eval mamba_scan --profile --json --seed 1`: the seed kernel's two profiled calls on
/// mamba_scan-4x2048x4096 (bench/results/profile-mamba-scan.md).
const H200_MAMBA: &str = include_str!("../../tests/fixtures/ncu-raw-h200-mamba-scan.csv");

#[test]
fn a_real_h200_report_of_the_mamba_seed_reads_as_recorded() {
    let launches = parse_ncu_csv(H200_MAMBA).unwrap();
    assert_eq!(launches.len(), 2);
    assert!(launches.iter().all(|l| l.name == "mamba_scan_kernel"));
    assert_eq!(launches[0].metrics.get(DURATION), Some(&4_146_208.0));
    assert_eq!(launches[1].metrics.get(DURATION), Some(&4_148_352.0));
    let (total, kernels, count) = aggregate(&launches, 2).unwrap();
    assert_eq!((count, kernels.len(), kernels[0].launches), (1, 1, 2));
    assert_eq!(total.duration_ns, 4_147_280.0);
    assert!(close(total.memory_throughput_pct, 16.5));
    assert!(close(total.dram_throughput_pct, 1.32));
    assert!(close(total.compute_throughput_pct, 10.09));
    assert!(close(total.achieved_occupancy_pct, 3.03));
    assert!(close(total.theoretical_occupancy_pct, 50.0));
    assert!(total.l2_hit_rate_pct.is_some_and(|h| (h - 89.455).abs() < 1e-2));
    // The named tensor-pipe metric is there (HMMA, which counts wgmma on Hopper) and next to idle.
    assert!(launches[0].metrics.contains_key(METRICS[5]));
    assert!(close(total.tensor_pipe_pct, 0.05));
    let reasons: Vec<&str> = total.stalls.iter().map(|s| s.reason.as_str()).collect();
    assert_eq!(
        reasons,
        ["long_scoreboard", "wait", "short_scoreboard", "branch_resolving"]
    );
    let p = Profile {
        status: ProfileStatus::Profiled,
        tool: Some("ncu 2025.3.1.0".into()),
        workload: Some("mamba_scan-4x2048x4096".into()),
        calls: 2,
        launches: 2,
        kernel_count: count,
        total: Some(total),
        kernels,
        ..Profile::unavailable("")
    };
    assert_eq!(
        summary(&p),
        "Profile (ncu 2025.3.1.0, workload mamba_scan-4x2048x4096, 1 kernel, 4.15 ms of GPU time per call under ncu):\n\
         - throughput, % of peak: memory 16% (DRAM 1%), compute (SM) 10%; L2 hit rate 89%; tensor pipes 0%\n\
         - achieved occupancy 3% (theoretical 50%); top warp stalls (share of stalled cycles): long_scoreboard 46%, wait 39%, short_scoreboard 12%"
    );
}
