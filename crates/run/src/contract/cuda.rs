//! Backend `cuda` (harness/ksearch_harness/backends/cuda/, nvcc.py): CUDA C++ compiled by nvcc
//! to a shared library, loaded into the harness and called through ctypes with device pointers.

use super::c::signature_with;
use super::{entry, file, gpu_name, writes, BackendContract, Setting};
use ksearch_spec::Language;
use ksearch_spec::{DType, Task};

/// nvcc's flags for each source, with the target's flags ([`target_flags`]) after the first
/// (nvcc.py's `FLAGS` and `compile_command`; a test keeps them equal).
pub const COMPILE_FLAGS: &[&str] = &["-O3", "-Xcompiler", "-fPIC", "-Xptxas", "-v", "-lineinfo"];
/// nvcc's flags for the link, after the target's flags (nvcc.py's `link_command`).
pub const LINK_FLAGS: &[&str] = &["-Xcompiler", "-fPIC", "-shared", "-Xlinker", "-z,defs"];

/// The CUDA type of an element of `dtype` as the harness hands it over.
fn cuda_type(dtype: DType) -> &'static str {
    match dtype {
        DType::Float16 => "__half",
        DType::Bfloat16 => "__nv_bfloat16",
        DType::Float8E4m3 => "__nv_fp8_e4m3",
        DType::Float8E5m2 => "__nv_fp8_e5m2",
        DType::Float4E2m1 => "uint8_t",
        DType::Float64 => "double",
        DType::Float32 => "float",
        DType::Int64 => "int64_t",
        DType::Int32 => "int32_t",
        DType::Int16 => "int16_t",
        DType::Int8 => "int8_t",
        DType::Uint8 => "uint8_t",
        DType::Bool => "bool",
    }
}

/// The entry's host signature: `extern "C" void entry(const __half *q, ..., int64_t n)`.
pub fn signature(task: &Task) -> String {
    format!("extern \"C\" {}", signature_with(task, cuda_type))
}

/// nvcc's target flags for `arch` (nvcc.py's `target_flags`): `-arch=sm_XY`, or for an
/// arch-specific target (sm_90a, sm_100a, sm_100f) `-gencode` naming its virtual arch too, since
/// `-arch=sm_90a` would also emit portable compute_90 PTX, which cannot hold wgmma.
pub fn target_flags(arch: &str) -> String {
    match arch.strip_prefix("sm_") {
        Some(number) if number.ends_with('a') || number.ends_with('f') => {
            format!("-gencode arch=compute_{number},code=[{arch},compute_{number}]")
        }
        _ => format!("-arch={arch}"),
    }
}

/// The two nvcc commands for `arch`.
pub fn commands(arch: &str) -> (String, String) {
    let (first, rest) = COMPILE_FLAGS.split_at(1);
    let target = target_flags(arch);
    (
        format!("nvcc {} {target} {} -c -o N.o FILE.cu", first.join(" "), rest.join(" ")),
        format!("nvcc {target} {} -o candidate.so *.o", LINK_FLAGS.join(" ")),
    )
}

/// The file a single unnamed code block is given when the task has no seed.
pub(super) const DEFAULT_FILE: &str = "kernel.cu";

pub(super) fn contract(s: &Setting<'_>) -> BackendContract {
    let task = s.task;
    let arch = s.device.map(|d| d.arch.clone()).unwrap_or_else(|| "ARCH".to_string());
    let (compile, link) = commands(&arch);
    BackendContract {
        language: Language::Cuda,
        signature: signature(task),
        calling: format!(
            "CUDA C++ (.cu sources are compiled, .cuh/.h written beside them), entry `{}::{}`: an `extern \"C\"` host \
             function (unmangled, so the harness finds the symbol) in destination-passing style: the inputs in \
             definition order (arrays as device pointers to contiguous row-major GPU memory, scalars by value), then \
             the outputs (device pointers to buffers the harness allocated), then every varying axis as int64_t; it \
             returns void. It launches its kernels on the default stream (`kernel<<<grid, block>>>(...)`, no stream \
             of its own) and need not synchronise: the harness synchronises the device after each call and times \
             it with CUDA events. {} No host threads, streams, graphs, host callbacks, dlopen/dlsym or files: the \
             build refuses objects that import them.",
            file(task),
            entry(task),
            writes(task)
        ),
        device: format!("{}, one GPU; every pointer is device memory", gpu_name(s.device)),
        build: format!(
            "nvcc (the CUDA runtime linked statically), each .cu to an object, the objects' imports checked, then \
             one link:\n  {compile}\n  {link}\n-Xptxas -v reports each kernel's registers, spills and shared memory \
             (shown with each result)."
        ),
        arithmetic: "nvcc's defaults: --fmad=true (a*b+c contracts to FMA), no --use_fast_math (IEEE division and \
                     square root, denormals kept; __expf, __fdividef and friends only where the kernel calls them). \
                     Outputs are compared with the task's reference within its tolerance."
            .to_string(),
        timing: super::gpu_timing(task),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::c::tests::python_list;

    #[test]
    fn the_prompts_nvcc_commands_are_the_harnesss() {
        let nvcc = include_str!("../../../../harness/ksearch_harness/backends/cuda/nvcc.py");
        assert_eq!(python_list(nvcc, "FLAGS"), COMPILE_FLAGS);
        // The target goes after the first flag, and the link's flags are these.
        assert!(nvcc
            .contains("[nvcc] + FLAGS[:1] + target_flags(arch) + FLAGS[1:] + extra + [\"-c\", \"-o\", obj, cu_file]"));
        let link: Vec<String> = LINK_FLAGS.iter().map(|f| format!("\"{f}\"")).collect();
        assert!(
            nvcc.contains(&format!("return [nvcc] + target_flags(arch) + [{}]", link.join(", "))),
            "nvcc.py's link command changed"
        );
        // nvcc.py's target_flags, in the same two shapes.
        assert!(nvcc.contains("return [\"-gencode\", f\"arch={virtual},code=[{arch},{virtual}]\"]"));
        assert!(nvcc.contains("return [f\"-arch={arch}\"]"));
        let (compile, link) = commands("sm_90a");
        assert_eq!(
            compile,
            "nvcc -O3 -gencode arch=compute_90a,code=[sm_90a,compute_90a] -Xcompiler -fPIC -Xptxas -v -lineinfo -c -o \
             N.o FILE.cu"
        );
        assert_eq!(
            link,
            "nvcc -gencode arch=compute_90a,code=[sm_90a,compute_90a] -Xcompiler -fPIC -shared -Xlinker -z,defs -o \
             candidate.so *.o"
        );
        assert_eq!(
            commands("sm_89").0,
            "nvcc -O3 -arch=sm_89 -Xcompiler -fPIC -Xptxas -v -lineinfo -c -o N.o FILE.cu"
        );
        assert_eq!(
            target_flags("sm_100f"),
            "-gencode arch=compute_100f,code=[sm_100f,compute_100f]"
        );
    }

    #[test]
    fn the_signature_has_cuda_types() {
        let task = Task::load_builtin("attention_prefill").unwrap();
        assert_eq!(
            signature(&task),
            "extern \"C\" void attention_prefill(const __half *q, const __half *k, const __half *v, int32_t causal, \
             __half *out, int64_t batch_size, int64_t seq_len)"
        );
        // The seed's own entry says the same.
        let seed = &task.seed.as_ref().unwrap().content;
        assert!(seed.contains(
            "extern \"C\" void attention_prefill(const __half *q, const __half *k, const __half *v, int32_t causal,"
        ));
    }

    #[test]
    fn the_contract_says_how_a_call_is_timed_with_the_tasks_counts() {
        let task = Task::load_builtin("rmsnorm_llm").unwrap();
        let setting = Setting {
            task: &task,
            device: None,
            platform: crate::knowledge::Platform::Linux,
            host: None,
        };
        let text = contract(&setting).render();
        let e = &task.config.evaluation;
        let timing = text.split("\nTiming: ").nth(1).expect("a Timing line");
        assert!(
            timing.contains(&format!("up to {} timed calls", e.iterations)),
            "{timing}"
        );
        assert!(
            timing.contains(&format!("after {} warm-up calls", e.warmup)),
            "{timing}"
        );
        assert!(timing.contains("L2 cache is flushed"), "{timing}");
        assert!(timing.contains("without the host's launch path"), "{timing}");
    }
}
