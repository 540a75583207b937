//! Device discovery from recorded `nvidia-smi` output, `CUDA_VISIBLE_DEVICES` and `--devices`.

use ksearch_devices::*;

const FOUR: &str = "\
0, NVIDIA H200, GPU-aaaa0000-0000-0000-0000-000000000000, 143771 MiB
1, NVIDIA H200, GPU-bbbb1111-0000-0000-0000-000000000000, 143771 MiB
2, NVIDIA H200, GPU-cccc2222-0000-0000-0000-000000000000, 143771 MiB
3, NVIDIA GeForce RTX 4090, GPU-dddd3333-0000-0000-0000-000000000000, 24564 MiB
";

fn indices(d: &[Device]) -> Vec<u32> {
    d.iter().map(|d| d.index).collect()
}

#[test]
fn nvidia_smi_output_is_read() {
    let gpus = parse_nvidia_smi(FOUR).unwrap();
    assert_eq!(gpus.len(), 4);
    assert_eq!(gpus[3].name, "NVIDIA GeForce RTX 4090");
    assert_eq!(gpus[3].memory_mib, Some(24564));
    assert_eq!(
        gpus[1].uuid.as_deref(),
        Some("GPU-bbbb1111-0000-0000-0000-000000000000")
    );
    assert_eq!(gpus[1].kind, DeviceKind::Cuda);
    assert_eq!(gpus[1].label(), "cuda:1");
    // nounits, a name with a comma, unknown memory, blank lines.
    let odd = "\n0, Tesla, rev B, GPU-1, 40960\n1, X, GPU-2, [N/A]\n";
    let g = parse_nvidia_smi(odd).unwrap();
    assert_eq!(g[0].name, "Tesla, rev B");
    assert_eq!((g[0].memory_mib, g[1].memory_mib), (Some(40960), None));
    assert!(parse_nvidia_smi("").unwrap().is_empty());
}

#[test]
fn unreadable_nvidia_smi_lines_name_the_line_and_the_fault() {
    for (text, fault) in [
        (
            "0, H200, GPU-1, 10 MiB\nNo devices were found\n",
            "4 comma-separated fields",
        ),
        ("x, H200, GPU-1, 10 MiB", "index is not a number"),
        ("0, H200, 1234, 10 MiB", "uuid does not start with GPU-"),
        ("0, H200, GPU-1, lots", "memory.total"),
        ("0, H200, GPU-1, 1\n0, H200, GPU-2, 1", "appears twice"),
    ] {
        let err = parse_nvidia_smi(text).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(fault), "{text:?}: {msg}");
        assert!(msg.starts_with("nvidia-smi output line"), "{msg}");
    }
}

#[test]
fn cuda_visible_devices_is_respected_as_cuda_reads_it() {
    let all = || parse_nvidia_smi(FOUR).unwrap();
    assert_eq!(indices(&apply_cuda_visible_devices(all(), None)), vec![0, 1, 2, 3]);
    assert_eq!(indices(&apply_cuda_visible_devices(all(), Some(""))), Vec::<u32>::new());
    assert_eq!(indices(&apply_cuda_visible_devices(all(), Some("2,0"))), vec![2, 0]);
    // Inside this process (and children inheriting its environment) they are cuda:0 and cuda:1.
    let masked = apply_cuda_visible_devices(all(), Some("2,0"));
    let names: Vec<_> = masked.iter().map(|d| (d.label(), d.cuda_device().unwrap())).collect();
    assert_eq!(
        names,
        [
            ("cuda:2".into(), "cuda:0".to_string()),
            ("cuda:0".into(), "cuda:1".into())
        ]
    );
    assert_eq!(all()[3].cuda_device().as_deref(), Some("cuda:3"));
    assert_eq!(cpu_slots(1)[0].cuda_device(), None);
    assert_eq!(indices(&apply_cuda_visible_devices(all(), Some(" 1 , 3 "))), vec![1, 3]);
    // By UUID or a unique UUID prefix.
    assert_eq!(
        indices(&apply_cuda_visible_devices(all(), Some("GPU-cccc,GPU-aaaa0000-0000"))),
        vec![2, 0]
    );
    // The list ends at the first entry naming no GPU, a repeat, or garbage.
    assert_eq!(indices(&apply_cuda_visible_devices(all(), Some("1,7,2"))), vec![1]);
    assert_eq!(indices(&apply_cuda_visible_devices(all(), Some("1,1,2"))), vec![1]);
    assert_eq!(
        indices(&apply_cuda_visible_devices(all(), Some("-1"))),
        Vec::<u32>::new()
    );
    assert_eq!(
        indices(&apply_cuda_visible_devices(all(), Some("0,NoDevFiles"))),
        vec![0]
    );
    // An ambiguous prefix names no GPU.
    assert_eq!(
        indices(&apply_cuda_visible_devices(all(), Some("GPU-"))),
        Vec::<u32>::new()
    );
}

#[test]
fn the_devices_option_is_parsed_and_checked() {
    let parse = |s: &str| s.parse::<DeviceSpec>();
    assert_eq!(parse("cpu").unwrap(), DeviceSpec::Cpu { slots: 1 });
    assert_eq!(parse("CPU:4").unwrap(), DeviceSpec::Cpu { slots: 4 });
    assert_eq!(parse("all").unwrap(), DeviceSpec::AllGpus);
    assert_eq!(
        parse("0, 2").unwrap(),
        DeviceSpec::Gpus(vec![GpuSelector::Index(0), GpuSelector::Index(2)])
    );
    assert_eq!(
        parse("GPU-bbbb").unwrap(),
        DeviceSpec::Gpus(vec![GpuSelector::Uuid("GPU-bbbb".into())])
    );
    for (bad, fault) in [
        ("", "empty"),
        ("cpu:0", "expected 1 to 1024"),
        ("cpu:x", "not a number of CPU slots"),
        ("0,gpu1", "'gpu1' is neither a GPU index"),
        ("1,1", "listed twice"),
        ("-1", "neither a GPU index"),
    ] {
        let err = parse(bad).unwrap_err();
        assert!(matches!(err, DeviceError::Spec { .. }), "{bad}: {err:?}");
        assert!(err.to_string().contains(fault), "{bad}: {err}");
        assert!(err.to_string().starts_with("--devices '"), "{err}");
    }
}

#[test]
fn selection_picks_visible_gpus_or_cpu_slots() {
    let visible = || Ok(apply_cuda_visible_devices(parse_nvidia_smi(FOUR).unwrap(), Some("1,2")));
    let spec = |s: &str| s.parse::<DeviceSpec>().unwrap();
    assert_eq!(indices(&select(&spec("all"), visible).unwrap()), vec![1, 2]);
    assert_eq!(indices(&select(&spec("2,1"), visible).unwrap()), vec![2, 1]);
    assert_eq!(indices(&select(&spec("GPU-bbbb"), visible).unwrap()), vec![1]);
    let err = select(&spec("0,1"), visible).unwrap_err();
    assert_eq!(
        err,
        DeviceError::NotVisible {
            selector: "0".into(),
            visible: "1,2".into()
        }
    );
    assert!(err.to_string().contains("GPU 0 is not visible (visible: 1,2)"), "{err}");
    // A CPU choice never asks for GPUs.
    let cpus = select(&spec("cpu:3"), || panic!("GPUs were discovered for a CPU choice")).unwrap();
    assert_eq!(
        cpus.iter().map(|d| d.label()).collect::<Vec<_>>(),
        ["cpu:0", "cpu:1", "cpu:2"]
    );
    // No GPU at all is a clear error when GPUs are asked for.
    let err = select(&spec("all"), || Ok(vec![])).unwrap_err();
    assert!(matches!(err, DeviceError::NoDevices { .. }), "{err:?}");
    // A failing nvidia-smi is passed on.
    let err = select(&spec("0"), || {
        Err(DeviceError::NvidiaSmi {
            reason: "exited with 9".into(),
        })
    })
    .unwrap_err();
    assert_eq!(err.to_string(), "nvidia-smi: exited with 9");
}

#[test]
fn discovery_on_this_machine_does_not_fail_without_nvidia_smi() {
    // On a machine without nvidia-smi this is an empty list; with one, every entry is a GPU.
    match discover_gpus() {
        Ok(gpus) => assert!(gpus.iter().all(|g| g.kind == DeviceKind::Cuda && g.uuid.is_some())),
        Err(e) => assert!(
            matches!(e, DeviceError::NvidiaSmi { .. } | DeviceError::Parse { .. }),
            "{e:?}"
        ),
    }
}
