//! A task's hardware figures, the knob limits, and the knob tuner with the knowledge base's
//! pattern priors for the task's regime.

use super::host::{kb_here, HostCpu};
use super::{kb, target_of, Platform};
use anyhow::Context;
use indexmap::IndexMap;
use ksearch_kb::{DeviceKind, Kb, Regime, FIGURE_META};
use ksearch_search::tuner::Tuner;
use ksearch_spec::{eval_formula, KernelTemplate, Task};
use std::collections::HashMap;

/// The prior of a pattern in a regime its file leaves out: the file says it is not expected to
/// pay there, so below every prior the library lists (the lowest is 0.15).
const PRIOR_NOT_EXPECTED: f64 = 0.1;

/// Every GPU's ridge point (peak FLOP per DRAM byte) is above this, so a GPU kernel doing fewer
/// FLOP per byte is memory-bound even where the figures do not say. Not used for CPUs: there an
/// exponential or a division is a library call or a long-latency instruction that the roofline
/// formulas count as one FLOP (a CPU softmax with libm's expf is bound by the exponentials, and
/// the tuner measured on the H200's host that a memory-bound prior kept it from trying fast_exp
/// at all in one of two runs: bench/results/tuner.md).
const MIN_GPU_RIDGE: f64 = 1.0;

/// A GPU kernel whose roofline floor (its bytes at peak bandwidth, its FLOP at peak rate) is
/// shorter than this is bound by launch and memory latency rather than by either peak: a few
/// launch latencies (about 2-5 us each, docs/protocol.md).
const LATENCY_FLOOR_S: f64 = 5e-6;

/// The target's hardware figures by name (`l1_kb`, `simd_width`, ...), for knob constraints.
/// A CPU target's are this machine's as detected ([`super::host`]): the CPU tasks run where
/// ksearch runs, and the knowledge base's generic CPU (2 cores, 256-bit vectors, 32 KB L1d)
/// would bound a `threads` knob below a larger machine's cores and keep a matmul tile sized
/// for AVX-512's 32 registers out of reach.
pub fn hw_figures(kb: &Kb, target: &str) -> anyhow::Result<IndexMap<String, f64>> {
    figures_with(kb, target, HostCpu::for_device(kb, target))
}

/// As [`hw_figures`], with `host` as this machine's CPU.
pub(crate) fn figures_with(kb: &Kb, target: &str, host: &HostCpu) -> anyhow::Result<IndexMap<String, f64>> {
    let kb = kb_here(kb, target, host)?;
    let spec = kb.hardware(target)?;
    let mut figures: IndexMap<String, f64> = FIGURE_META
        .iter()
        .filter_map(|m| spec.figures.get(m.key).map(|f| (m.key.to_string(), f.value)))
        .collect();
    if spec.kind == DeviceKind::Cpu && host.cores.is_none() {
        if let Ok(cores) = std::thread::available_parallelism() {
            figures.insert("compute_units".into(), cores.get() as f64);
        }
    }
    Ok(figures)
}

/// The hardware figures of `task`'s target device on this platform (the knob limits of
/// `ksearch sweep`); prints a warning when the device was assumed.
pub fn task_figures(kb: &Kb, task: &Task) -> anyhow::Result<IndexMap<String, f64>> {
    let target = target_of(kb, task, Platform::current())?;
    if let Some(warning) = &target.warning {
        eprintln!("warning: {warning}");
    }
    hw_figures(kb, &target.device)
}

/// The regime `task` runs in on a device with figures `hw`, from its `[roofline]` formulas
/// over its workloads (the median workload): memory-bound below the device's FP32 ridge point
/// (or, on a GPU, below 1 FLOP per byte where the figures give no ridge), compute-bound above it, and on a
/// GPU latency-bound when even the roofline floor is a few launch latencies. `None` when the
/// task declares no roofline or the figures cannot decide.
pub fn task_regime(task: &Task, hw: &IndexMap<String, f64>, kind: DeviceKind) -> Option<Regime> {
    let roof = task.config.roofline.as_ref()?;
    let (bytes, flops) = (roof.bytes.as_ref()?, roof.flops.as_ref()?);
    let mut per_workload: Vec<(f64, f64)> = task
        .workloads
        .iter()
        .map(|w| w.all_axes(&task.definition))
        .filter_map(|axes| Some((eval_formula(bytes, &axes).ok()?, eval_formula(flops, &axes).ok()?)))
        .filter(|(b, _)| *b > 0.0)
        .collect();
    if per_workload.is_empty() {
        return None;
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let intensity = median(&mut per_workload.iter().map(|(b, f)| f / b).collect());
    let bandwidth = hw.get("memory_bandwidth_gbs").map(|g| g * 1e9);
    let peak = hw.get("fp32_tflops").map(|t| t * 1e12);
    if let (DeviceKind::Gpu, Some(bw), Some(peak)) = (kind, bandwidth, peak) {
        let floor = median(&mut per_workload.iter_mut().map(|(b, f)| (*b / bw).max(*f / peak)).collect());
        if floor < LATENCY_FLOOR_S {
            return Some(Regime::LatencyBound);
        }
    }
    match (bandwidth, peak) {
        (Some(bw), Some(peak)) if intensity >= peak / bw => Some(Regime::ComputeBound),
        (Some(_), Some(_)) => Some(Regime::MemoryBound),
        _ if kind == DeviceKind::Gpu && intensity < MIN_GPU_RIDGE => Some(Regime::MemoryBound),
        _ => None,
    }
}

/// Per knob, the prior that changing it helps: the highest over its tags (pattern ids) of
/// each pattern's prior for `regime` (or its highest prior in any regime when the regime is
/// unknown). An unknown tag is an error naming the knob file, the knob and the patterns there
/// are.
fn knob_priors(kb: &Kb, template: &KernelTemplate, regime: Option<Regime>) -> anyhow::Result<HashMap<String, f64>> {
    let mut priors = HashMap::new();
    for (i, knob) in template.space.knobs.iter().enumerate() {
        let mut best: Option<f64> = None;
        for tag in &knob.tags {
            let Some(pattern) = kb.pattern(tag) else {
                let mut known: Vec<&str> = kb.patterns().map(|p| p.id.as_str()).collect();
                known.sort_unstable();
                anyhow::bail!(
                    "{}: knob[{i}] ({}).tags: '{tag}' is not a pattern of the knowledge base (patterns: {})",
                    template.space.file_name(),
                    knob.name,
                    known.join(", ")
                );
            };
            let prior = match regime {
                Some(r) => pattern.prior(r).unwrap_or(PRIOR_NOT_EXPECTED),
                None => pattern.best_prior(),
            };
            best = Some(best.map_or(prior, |b: f64| b.max(prior)));
        }
        if let Some(p) = best {
            priors.insert(knob.name.clone(), p);
        }
    }
    Ok(priors)
}

/// The knob tuner for `task` on device `device`.
fn tuner_on(kb: &Kb, task: &Task, device: &str) -> anyhow::Result<Tuner> {
    tuner_with(kb, task, device, HostCpu::for_device(kb, device))
}

/// As [`tuner_on`], with `host` as this machine's CPU.
fn tuner_with(kb: &Kb, task: &Task, device: &str, host: &HostCpu) -> anyhow::Result<Tuner> {
    let template = task.template.clone().with_context(|| {
        format!(
            "{}: kernel.template: the task has no kernel template, so the knob tuner has nothing to tune; \
             use an LLM (--llm PROVIDER:MODEL) or an agent (--brain agent)",
            task.file("task.toml")
        )
    })?;
    let hw = figures_with(kb, device, host)?;
    let regime = task_regime(task, &hw, kb.hardware(device)?.kind);
    let priors = knob_priors(kb, &template, regime)?;
    let path = match &task.config.kernel.template {
        Some(rel) => task.file(rel),
        None => format!("{}.j2", template.file),
    };
    let tuner = Tuner::for_template(template, &path, hw, priors)?;
    Ok(match regime {
        Some(r) => tuner.with_prior_basis(r.as_str()),
        None => tuner,
    })
}

/// The knob tuner for a task with a template, with its target device's figures on this
/// platform as the knob limits.
pub fn tuner(task: &Task) -> anyhow::Result<Tuner> {
    let kb = kb()?;
    let device = target_of(&kb, task, Platform::current())?.device;
    tuner_on(&kb, task, &device)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksearch_search::engine::{Engine, EngineConfig, EvalSummary, Event, Request, Source, TaskBrief};

    fn builtin(name: &str) -> Task {
        Task::load_builtin(name).unwrap()
    }

    #[test]
    fn a_cpu_targets_compute_units_are_this_machines_cores() {
        let kb = Kb::builtin().unwrap();
        let cores = std::thread::available_parallelism().unwrap().get() as f64;
        assert_eq!(hw_figures(&kb, "cpu-generic").unwrap()["compute_units"], cores);
        // A GPU's come from the knowledge base.
        let h200 = kb.hardware("h200").unwrap().figures.get("compute_units").unwrap().value;
        assert_eq!(hw_figures(&kb, "h200").unwrap()["compute_units"], h200);
    }

    #[test]
    fn a_cpu_targets_figures_are_the_detected_ones() {
        let kb = Kb::builtin().unwrap();
        let host = crate::knowledge::test_support::avx512_host();
        let hw = figures_with(&kb, "cpu-generic", &host).unwrap();
        for (key, value) in [
            ("compute_units", 8.0),
            ("simd_width", 16.0),
            ("vector_bits", 512.0),
            ("l1_kb", 48.0),
            ("l2_per_core_kb", 2048.0),
            ("l3_mb", 32.0),
        ] {
            assert_eq!(hw.get(key), Some(&value), "{key}: {hw:?}");
        }
        // Nothing detected: the knowledge base's generic figures.
        let generic = figures_with(&kb, "cpu-generic", &HostCpu::default()).unwrap();
        assert_eq!((generic["simd_width"], generic["l1_kb"]), (8.0, 32.0));

        // The matmul template's best tile on an AVX-512 machine, 4 rows x 32 columns (8 of the
        // 32 zmm registers as accumulators) with a 128 x 64 block of B in L1, is valid with the
        // detected figures and was excluded by the generic ones (mr * nr <= 12 * simd_width).
        let template = builtin("matmul").template.unwrap();
        let best = |hw: &IndexMap<String, f64>| {
            template.space.enumerate_valid(hw, 100_000).iter().any(|a| {
                let v = |k: &str| a[k].to_string();
                (v("mr"), v("nr"), v("block_k"), v("block_n")) == ("4".into(), "32".into(), "128".into(), "64".into())
            })
        };
        assert!(best(&hw), "the best tile is excluded on the AVX-512 machine");
        assert!(!best(&generic));
        // The tuner for it plans with those figures.
        assert!(tuner_with(&kb, &builtin("matmul"), "cpu-generic", &host).is_ok());
    }

    #[test]
    fn the_regime_comes_from_the_tasks_roofline() {
        let kb = Kb::builtin().unwrap();
        let cpu = hw_figures(&kb, "cpu-generic").unwrap();
        let h200 = hw_figures(&kb, "h200").unwrap();
        // Softmax moves 8 bytes per 5 FLOP, but one of those FLOP is a libm expf costing tens of
        // instructions on a CPU: without the CPU's figures the regime is not decided.
        assert_eq!(task_regime(&builtin("softmax"), &cpu, DeviceKind::Cpu), None);
        // On a GPU without a ridge in its figures, under 1 FLOP per byte is memory-bound.
        let mut no_ridge = h200.clone();
        no_ridge.shift_remove("fp32_tflops");
        assert_eq!(
            task_regime(&builtin("softmax"), &no_ridge, DeviceKind::Gpu),
            Some(Regime::MemoryBound)
        );
        // Matmul is far above 1 FLOP per byte, but the generic CPU has no ridge point to say more.
        assert_eq!(task_regime(&builtin("matmul"), &cpu, DeviceKind::Cpu), None);
        assert_eq!(
            task_regime(&builtin("attention_prefill"), &h200, DeviceKind::Gpu),
            Some(Regime::ComputeBound)
        );
        // An LLM-sized softmax streams a few MB: under 2 us at the H200's bandwidth, so launch
        // and memory latency decide its time.
        assert_eq!(
            task_regime(&builtin("softmax_llm"), &h200, DeviceKind::Gpu),
            Some(Regime::LatencyBound)
        );
        // Without a roofline there is nothing to decide by.
        let mut bare = builtin("softmax");
        bare.config.roofline = None;
        assert_eq!(task_regime(&bare, &cpu, DeviceKind::Cpu), None);
    }

    #[test]
    fn priors_are_the_tasks_regimes() {
        let kb = Kb::builtin().unwrap();
        let softmax = builtin("softmax");
        let template = softmax.template.clone().unwrap();
        // exp2-trick: memory-bound 0.15, compute-bound 0.55. Softmax is memory-bound.
        let priors = knob_priors(&kb, &template, Some(Regime::MemoryBound)).unwrap();
        assert_eq!(priors["fast_exp"], 0.15);
        let unknown = knob_priors(&kb, &template, None).unwrap();
        assert_eq!(
            unknown["fast_exp"], 0.55,
            "the highest prior only when the regime is unknown"
        );
        // A pattern the regime's list leaves out is not expected to pay there.
        let latency = knob_priors(&kb, &template, Some(Regime::LatencyBound)).unwrap();
        let tiling = kb.pattern("tiling").unwrap();
        let expected = tiling.prior(Regime::LatencyBound).unwrap_or(PRIOR_NOT_EXPECTED);
        assert_eq!(latency["row_block"], expected);
        // And a tuner built for a task plans with its regime's priors, saying which: mamba_scan
        // on the H200 is memory-bound; softmax on the generic CPU has no regime (see
        // MIN_GPU_RIDGE), so its moves cite the patterns' highest priors without a label.
        let mamba = tuner_on(&kb, &builtin("mamba_scan"), "h200").unwrap();
        let regime = task_regime(
            &builtin("mamba_scan"),
            &hw_figures(&kb, "h200").unwrap(),
            DeviceKind::Gpu,
        );
        let label = format!(
            " ({}) from the pattern library",
            regime.expect("mamba_scan's regime").as_str()
        );
        let text = first_plan(&mamba);
        assert!(text.contains(&label), "{label}: {text}");
        let text = first_plan(&tuner_on(&kb, &softmax, "cpu-generic").unwrap());
        assert!(text.contains("from the pattern library"), "{text}");
        assert!(!text.contains("-bound) from the pattern library"), "{text}");
    }

    /// The tuner's first plan after its seed was measured at 1x.
    fn first_plan(tuner: &Tuner) -> String {
        let mut engine = Engine::new();
        let brief = TaskBrief {
            name: "task".into(),
            text: String::new(),
            language: ksearch_spec::Language::C,
            convention: String::new(),
            default_file: tuner.file().into(),
            target: String::new(),
            expertise: String::new(),
            seed: Some(vec![Source {
                path: tuner.file().into(),
                content: tuner.seed().unwrap(),
            }]),
        };
        let config = EngineConfig::default();
        engine.apply(&Event::Started { task: brief, config }).unwrap();
        let Some(Request::Evaluate { id, candidate_id, .. }) = engine.pending().cloned() else {
            panic!("the seed is evaluated first")
        };
        let summary = EvalSummary {
            status: "passed".into(),
            reason: None,
            speedup: Some(1.0),
            relative_noise: Some(0.01),
            workloads: vec![],
            log_tail: String::new(),
            suspicious: None,
            resources: vec![],
            profile: None,
            harness: None,
        };
        let evaluated = Event::Evaluated {
            request_id: id,
            candidate_id,
            summary,
        };
        engine.apply(&evaluated).unwrap();
        let plan = engine.pending().cloned().unwrap();
        tuner.answer(&engine, &plan).unwrap()
    }

    #[test]
    fn an_unknown_tag_names_the_knob_file_the_knob_and_the_patterns() {
        let kb = Kb::builtin().unwrap();
        let mut template = builtin("softmax").template.unwrap();
        template.space.file = "tasks/softmax/template/knobs.toml".into();
        let k = template.space.knobs.iter().position(|k| k.name == "row_block").unwrap();
        template.space.knobs[k].tags = vec!["tilng".into()];
        let e = knob_priors(&kb, &template, None).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "tasks/softmax/template/knobs.toml: knob[{k}] (row_block).tags: 'tilng' is not a pattern of the \
                 knowledge base (patterns: "
            )),
            "{e}"
        );
        assert!(e.contains("tiling") && e.contains("exp2-trick"), "{e}");
    }
}
