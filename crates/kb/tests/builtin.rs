//! The built-in knowledge base: every file parses and validates, lookups, and prompt slices.

use ksearch_kb::{Basis, Context, DeviceKind, Kb, Regime, TargetKind, FIGURE_META, MAX_SLICE_CHARS};

fn kb() -> Kb {
    match Kb::builtin() {
        Ok(kb) => kb,
        Err(e) => panic!("the built-in knowledge base is invalid:\n{e}"),
    }
}

#[test]
fn every_builtin_file_parses_and_validates() {
    let kb = kb();
    let expected = [
        "a100-sxm",
        "apple-m1-max",
        "apple-m1-pro",
        "apple-m1-ultra",
        "apple-m2-max",
        "apple-m2-pro",
        "apple-m2-ultra",
        "apple-m3-max",
        "apple-m3-pro",
        "apple-m3-ultra",
        "apple-m4-max",
        "apple-m4-pro",
        "b200",
        "cpu-generic",
        "h100-sxm",
        "h200",
    ];
    assert_eq!(kb.hardware_names(), expected);
    // Every .toml file under kb/hardware and kb/patterns was loaded (none silently skipped).
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kb");
    let count = |sub: &str| {
        std::fs::read_dir(root.join(sub))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "toml"))
            .count()
    };
    assert_eq!(count("hardware"), kb.hardware_specs().count());
    assert_eq!(count("patterns"), kb.patterns().count());
    assert_eq!(count("translation"), kb.translations().count());
    assert_eq!(count("assertions"), kb.families().count());
    // The same files through the directory loader give the same knowledge base.
    let from_dir = Kb::from_dir(&root).unwrap();
    assert_eq!(
        from_dir.hardware_specs().collect::<Vec<_>>(),
        kb.hardware_specs().collect::<Vec<_>>()
    );
    assert_eq!(
        from_dir.patterns().collect::<Vec<_>>(),
        kb.patterns().collect::<Vec<_>>()
    );
    assert_eq!(
        from_dir.translations().collect::<Vec<_>>(),
        kb.translations().collect::<Vec<_>>()
    );
    assert_eq!(
        from_dir.families().collect::<Vec<_>>(),
        kb.families().collect::<Vec<_>>()
    );
}

#[test]
fn required_patterns_are_present() {
    let kb = kb();
    for id in [
        "exp2-trick",
        "vector-loads",
        "loop-unrolling",
        "tiling",
        "double-buffering",
        "online-softmax",
        "simd-reductions",
        "fp32-accumulation",
        "loop-interchange",
        "openmp-threads",
        "kernel-fusion",
        "k-transposition",
    ] {
        let p = kb.pattern(id).unwrap_or_else(|| panic!("pattern {id} missing"));
        assert!(!p.regimes().is_empty());
        assert!((0.0..=1.0).contains(&p.best_prior()));
    }
    assert!(kb.pattern("no-such-pattern").is_none());
}

#[test]
fn figures_agree_with_translation_md() {
    let kb = kb();
    let bw = |name: &str| {
        kb.hardware(name)
            .unwrap()
            .figures
            .memory_bandwidth_gbs
            .as_ref()
            .unwrap()
            .value
    };
    assert_eq!(bw("h100-sxm"), 3350.0);
    assert_eq!(bw("h200"), 4800.0);
    assert_eq!(bw("m1-max"), 400.0);
    assert_eq!(bw("m3-max"), 400.0);
    assert_eq!(bw("m4-max"), 546.0);
    let m3 = kb.hardware("m3-max").unwrap();
    assert!(m3
        .figures
        .memory_bandwidth_gbs
        .as_ref()
        .unwrap()
        .note
        .as_ref()
        .unwrap()
        .contains("300 GB/s"));
    // The Pro and Ultra parts, from Apple's announcements and tech specs.
    for (name, gbs) in [
        ("m1-pro", 200.0),
        ("m1-ultra", 800.0),
        ("m2-pro", 200.0),
        ("m2-ultra", 800.0),
        ("m3-pro", 150.0),
        ("m3-ultra", 819.0),
        ("m4-pro", 273.0),
    ] {
        assert_eq!(bw(name), gbs, "{name}");
    }
    // Apple threadgroup memory: 32 KB with no opt-in; Hopper: 48 KB default, 227 KB opt-in.
    let apple: Vec<_> = kb.hardware_specs().filter(|h| h.vendor == "apple").collect();
    assert_eq!(apple.len(), 11);
    for hw in apple {
        let f = &hw.figures;
        assert_eq!(f.shared_mem_per_block_kb.as_ref().unwrap().value, 32.0, "{}", hw.name);
        assert_eq!(
            f.shared_mem_per_block_max_kb.as_ref().unwrap().value,
            32.0,
            "{}",
            hw.name
        );
        assert_eq!(f.simd_width.as_ref().unwrap().value, 32.0, "{}", hw.name);
        assert_eq!(f.max_threads_per_block.as_ref().unwrap().value, 1024.0, "{}", hw.name);
        assert!(f.compute_units.is_some() && f.memory_gb.is_some(), "{}", hw.name);
        assert_eq!(hw.targets, [TargetKind::Metal], "{}", hw.name);
        // The Metal GPU family follows the generation (M1 Apple7, M2 Apple8, M3 and M4 Apple9).
        let family = match &hw.name[..8] {
            "apple-m1" => "apple7",
            "apple-m2" => "apple8",
            _ => "apple9",
        };
        assert_eq!(hw.arch, family, "{}", hw.name);
    }
    // Ultra = two Max dies: twice the cores of the Max of its generation.
    for (ultra, max) in [("m1-ultra", "m1-max"), ("m2-ultra", "m2-max"), ("m3-ultra", "m3-max")] {
        let cores = |n: &str| kb.hardware(n).unwrap().figures.compute_units.as_ref().unwrap().value;
        assert_eq!(cores(ultra), 2.0 * cores(max), "{ultra}");
    }
    // A derived figure says what it is derived from.
    let ultra = kb.hardware("m1-ultra").unwrap().figures.fp32_tflops.clone().unwrap();
    assert_eq!(ultra.basis, Basis::Derived);
    assert!(ultra.source.contains("two M1 Max dies") && ultra.value == 20.8);
    // Every GPU says what its matrix units are.
    for hw in kb.hardware_specs().filter(|h| h.kind == DeviceKind::Gpu) {
        assert!(hw.matrix_units.is_some(), "{}: matrix_units missing", hw.name);
    }
    let h200 = &kb.hardware("h200").unwrap().figures;
    assert_eq!(h200.shared_mem_per_block_kb.as_ref().unwrap().value, 48.0);
    assert_eq!(h200.shared_mem_per_block_max_kb.as_ref().unwrap().value, 227.0);
}

#[test]
fn provenance_is_recorded() {
    let kb = kb();
    for hw in kb.hardware_specs() {
        for meta in FIGURE_META {
            if let Some(f) = hw.figures.get(meta.key) {
                assert!(!f.source.trim().is_empty(), "{}: {}", hw.name, meta.key);
                // Throughput figures are vendor peaks or our own measurements, never plain "spec".
                if meta.unit == "GB/s" || meta.unit == "TFLOP/s" {
                    assert!(
                        matches!(f.basis, Basis::VendorPeak | Basis::Measured | Basis::Derived),
                        "{}: {} should be marked as a peak",
                        hw.name,
                        meta.key
                    );
                }
            }
        }
    }
    let h200 = kb.hardware("h200").unwrap();
    assert!(h200
        .measured
        .iter()
        .all(|m| m.source.contains("measured on our H200 on 2026-12-02")));
    assert_eq!(h200.measured.len(), 2);
    let sources = h200.sources_markdown();
    assert!(sources.contains("NVIDIA H200 Tensor Core GPU datasheet"));
    assert!(sources.contains("(vendor peak)"));
}

#[test]
fn aliases_find_devices() {
    let kb = kb();
    for (query, name) in [
        ("h200", "h200"),
        ("H200", "h200"),
        ("nvidia-h200", "h200"),
        ("NVIDIA H200", "h200"),
        ("nvidia_h200", "h200"),
        ("  h200-sxm ", "h200"),
        ("h100", "h100-sxm"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("a100", "a100-sxm"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm"),
        ("b200", "b200"),
        ("NVIDIA B200", "b200"),
        ("m4-max", "apple-m4-max"),
        ("M4 Max", "apple-m4-max"),
        ("Apple M4 Max", "apple-m4-max"),
        ("m1max", "apple-m1-max"),
        ("cpu", "cpu-generic"),
        ("CPU", "cpu-generic"),
        ("x86_64", "cpu-generic"),
    ] {
        match kb.hardware(query) {
            Ok(hw) => assert_eq!(hw.name, name, "query {query:?}"),
            Err(e) => panic!("query {query:?}: {e}"),
        }
    }
    let err = kb.hardware("tpu-v5").unwrap_err().to_string();
    assert!(
        err.contains("'tpu-v5'") && err.contains("h200") && err.contains("cpu-generic"),
        "{err}"
    );
    assert_eq!(kb.source_file("H200"), Some("kb/hardware/h200.toml"));
    assert_eq!(kb.source_file("tiling"), Some("kb/patterns/tiling.toml"));
}

#[test]
fn device_kinds_and_targets() {
    let kb = kb();
    assert_eq!(kb.hardware("cpu").unwrap().kind, DeviceKind::Cpu);
    assert_eq!(kb.hardware("cpu").unwrap().targets, [TargetKind::Cpu]);
    assert_eq!(kb.hardware("h200").unwrap().targets[0], TargetKind::Cuda);
    assert_eq!(kb.hardware("m2-max").unwrap().targets, [TargetKind::Metal]);
    assert_eq!(kb.hardware("h200").unwrap().arch, "sm_90a");
    assert_eq!(kb.hardware("b200").unwrap().arch, "sm_100a");
}

#[test]
fn patterns_for_filters_and_orders() {
    let kb = kb();
    let cpu: Vec<&str> = kb
        .patterns_for(TargetKind::Cpu, None)
        .iter()
        .map(|p| p.id.as_str())
        .collect();
    assert!(cpu.contains(&"openmp-threads") && cpu.contains(&"loop-interchange"));
    assert!(!cpu.contains(&"simd-reductions") && !cpu.contains(&"tensor-cores"));
    let metal: Vec<&str> = kb
        .patterns_for(TargetKind::Metal, None)
        .iter()
        .map(|p| p.id.as_str())
        .collect();
    assert!(metal.contains(&"simd-reductions") && !metal.contains(&"openmp-threads"));

    for target in TargetKind::ALL {
        for regime in Regime::ALL {
            let list = kb.patterns_for(target, Some(regime));
            assert!(list.iter().all(|p| p.applies_to(target) && p.prior(regime).is_some()));
            let priors: Vec<f64> = list.iter().map(|p| p.prior(regime).unwrap()).collect();
            assert!(priors.windows(2).all(|w| w[0] >= w[1]), "{target} {regime}: {priors:?}");
        }
        let all = kb.patterns_for(target, None);
        let best: Vec<f64> = all.iter().map(|p| p.best_prior()).collect();
        assert!(best.windows(2).all(|w| w[0] >= w[1]));
    }
    // Compute-bound on CUDA: tensor cores lead.
    assert_eq!(
        kb.patterns_for(TargetKind::Cuda, Some(Regime::ComputeBound))[0].id,
        "tensor-cores"
    );
    // A regime filter drops patterns that cannot pay there.
    assert!(kb
        .patterns_for(TargetKind::Cuda, Some(Regime::ComputeBound))
        .iter()
        .all(|p| p.id != "kernel-fusion"));
}

#[test]
fn prompt_slices_have_the_three_levels() {
    let kb = kb();
    for name in kb.hardware_names() {
        let none = kb.prompt_slice(name, Context::None).unwrap();
        let hw = kb.prompt_slice(name, Context::Hardware).unwrap();
        let full = kb.prompt_slice(name, Context::Full).unwrap();
        assert!(none.is_empty());
        assert!(!hw.is_empty() && full.starts_with(&hw), "{name}");
        assert!(full.len() > hw.len(), "{name}: full adds patterns");
        let chars = full.chars().count();
        assert!(
            chars < MAX_SLICE_CHARS,
            "{name}: full slice has {chars} characters\n{full}"
        );
        assert!(hw.is_ascii() && full.is_ascii(), "{name}: keep prompt slices ASCII");
        // Deterministic: the same call, and a fresh knowledge base, give the same text.
        assert_eq!(kb.prompt_slice(name, Context::Full).unwrap(), full);
        assert_eq!(Kb::builtin().unwrap().prompt_slice(name, Context::Full).unwrap(), full);
    }
    // Unknown targets are an error at every level, `none` included.
    assert!(kb.prompt_slice("tpu", Context::None).is_err());
}

#[test]
fn prompt_slice_content() {
    let kb = kb();
    let h200 = kb.prompt_slice("H200", Context::Full).unwrap();
    for needle in [
        "NVIDIA H200",
        "sm_90a",
        "4800 GB/s (peak)",
        "141 GB HBM3e",
        "227 KB/block max (opt-in)",
        "device-to-device copy ~4164 GB/s",
        "bf16 GEMM ~785 TFLOP/s",
        "ridge point",
        "Online softmax",
        "__shfl_xor_sync",
    ] {
        assert!(h200.contains(needle), "missing {needle:?} in\n{h200}");
    }
    assert!(!h200.contains("OpenMP"), "CPU-only patterns stay out of a GPU slice");

    let m4 = kb.prompt_slice("m4-max", Context::Full).unwrap();
    for needle in [
        "546 GB/s",
        "410 GB/s",
        "threadgroup memory 32 KB",
        "simd_sum",
        "Dynamic Caching",
    ] {
        assert!(m4.contains(needle), "missing {needle:?} in\n{m4}");
    }
    assert!(!m4.contains("__shfl_xor_sync"), "hints follow the slice's dialect");

    let cpu = kb.prompt_slice("cpu", Context::Full).unwrap();
    for needle in [
        "2 cores",
        "vector registers 256-bit",
        "cache line 64 B",
        "~32 KB",
        "OpenMP",
        "-ffast-math",
    ] {
        assert!(cpu.contains(needle), "missing {needle:?} in\n{cpu}");
    }

    // Choosing another dialect changes the patterns and hints, not the spec.
    let hw = kb.hardware("h200").unwrap();
    let triton = kb.prompt_slice_for(hw, TargetKind::Triton, Context::Full);
    assert!(triton.contains("tl.exp2") && !triton.contains("Warp / SIMD-group reductions"));
    assert!(triton.starts_with(&kb.prompt_slice("h200", Context::Hardware).unwrap()));
}

#[test]
fn context_parses() {
    assert_eq!("none".parse::<Context>().unwrap(), Context::None);
    assert_eq!("Hardware".parse::<Context>().unwrap(), Context::Hardware);
    assert_eq!("full".parse::<Context>().unwrap(), Context::Full);
    assert!("some".parse::<Context>().is_err());
    assert_eq!("memory".parse::<Regime>().unwrap(), Regime::MemoryBound);
    assert_eq!("compute_bound".parse::<Regime>().unwrap(), Regime::ComputeBound);
    assert_eq!("metal".parse::<TargetKind>().unwrap(), TargetKind::Metal);
}

#[test]
fn a_device_put_in_place_of_another() {
    // What ksearch does with the CPU it runs on: the generic entry replaced by the detected one.
    let kb = Kb::builtin().unwrap();
    let mut cpu = kb.hardware("cpu").unwrap().clone();
    cpu.display_name = "AMD EPYC, this machine".into();
    let mut l3 = cpu.figures.l1_kb.clone().unwrap();
    l3.value = 32.0;
    l3.basis = Basis::Measured;
    l3.source = "detected on this machine on 2026-12-01".into();
    cpu.figures.l3_mb = Some(l3);
    let here = kb.clone().with_hardware(cpu.clone(), "(detected)").unwrap();
    let slice = here.prompt_slice("cpu", Context::Hardware).unwrap();
    assert!(
        slice.starts_with("## Target hardware: AMD EPYC, this machine (`cpu-generic`)"),
        "{slice}"
    );
    assert!(slice.contains("L3 32 MB shared;"), "{slice}");
    assert_eq!(here.source_file("cpu-generic"), Some("(detected)"));
    assert_eq!(here.hardware_names(), kb.hardware_names());
    // It is checked as a file would be.
    let mut bad = cpu;
    bad.figures.simd_width.as_mut().unwrap().value = 12.0;
    let err = kb.with_hardware(bad, "(detected)").unwrap_err().to_string();
    assert!(
        err.contains("(detected): figures.simd_width.value: must be a power of two, got 12"),
        "{err}"
    );
}
