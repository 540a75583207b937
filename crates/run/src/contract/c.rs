//! Backend `c` (harness/ksearch_harness/backends/c/): C11 compiled to a shared library on the
//! CPU of the machine that evaluates, called through ctypes in destination-passing style.

use super::{entry, file, writes, BackendContract, Setting};
use ksearch_spec::Language;
use ksearch_spec::{DType, Task};

/// The compiler flags of backend `c`, in the harness's order (c/build.py's `_FLAGS`; a test keeps the
/// two equal). `-std=c11` alone makes GCC stop contracting `a*b+c` into fused multiply-adds
/// (ISO C mode sets `-ffp-contract=off`), so the contraction is chosen explicitly: FMA is what
/// a fast CPU kernel uses, and the correctness check compares with a float64 reference within
/// a tolerance that either rounding meets.
pub const FLAGS: &[&str] = &[
    "-O3",
    "-march=native",
    "-fPIC",
    "-shared",
    "-std=c11",
    "-ffp-contract=fast",
];

/// The compiler the harness runs: `$CC` split on whitespace (`ccache gcc`), else `cc`.
pub fn compiler_command() -> Vec<String> {
    let named = std::env::var("CC").unwrap_or_default();
    let words: Vec<String> = named.split_whitespace().map(str::to_string).collect();
    if words.is_empty() {
        vec!["cc".to_string()]
    } else {
        words
    }
}

/// The C type of an element of `dtype`, as the `c` backend passes it.
fn c_type(dtype: DType) -> &'static str {
    match dtype {
        DType::Float64 => "double",
        DType::Float32 => "float",
        DType::Float16 | DType::Bfloat16 => "uint16_t",
        DType::Int64 => "int64_t",
        DType::Int32 => "int32_t",
        DType::Int16 => "int16_t",
        DType::Int8 => "int8_t",
        DType::Uint8 | DType::Float8E4m3 | DType::Float8E5m2 | DType::Float4E2m1 => "uint8_t",
        DType::Bool => "bool",
    }
}

/// The entry point's C signature under the `c` backend's convention (docs/protocol.md), with
/// element types from `ty`.
pub(crate) fn signature_with(task: &Task, ty: impl Fn(DType) -> &'static str) -> String {
    let def = &task.definition;
    let mut params = Vec::new();
    for (name, spec) in &def.inputs {
        if spec.is_scalar() {
            params.push(format!("{} {name}", ty(spec.dtype)));
        } else {
            params.push(format!("const {} *{name}", ty(spec.dtype)));
        }
    }
    for (name, spec) in &def.outputs {
        params.push(format!("{} *{name}", ty(spec.dtype)));
    }
    for axis in def.var_axes() {
        params.push(format!("int64_t {axis}"));
    }
    format!("void {}({})", entry(task), params.join(", "))
}

/// The entry point's C signature.
pub fn signature(task: &Task) -> String {
    signature_with(task, c_type)
}

/// The compile command, as the harness runs it.
pub fn command(openmp: bool) -> String {
    let cc = compiler_command().join(" ");
    format!(
        "{cc} {}{} -o candidate.so SOURCES.c -lm",
        FLAGS.join(" "),
        if openmp { " -fopenmp" } else { "" }
    )
}

/// The file a single unnamed code block is given when the task has no seed.
pub(super) const DEFAULT_FILE: &str = "kernel.c";

pub(super) fn contract(s: &Setting<'_>) -> BackendContract {
    let task = s.task;
    let openmp = task.config.kernel.openmp;
    let probe = s.host.and_then(|h| h.compiler.as_ref());
    let cpu = s
        .host
        .filter(|h| h.detected())
        .and_then(|h| h.model.clone())
        .map(|m| format!(" (here: {})", m.trim()))
        .unwrap_or_default();
    BackendContract {
        language: Language::C,
        signature: signature(task),
        calling: format!(
            "C11 source (entry `{}::{}`; .h files are written beside the sources, other files are not compiled). \
             Destination-passing style, called through ctypes: the inputs in definition order (arrays as pointers to \
             contiguous row-major host memory, scalars by value), then the outputs (pointers to buffers the harness \
             allocated), then every varying axis as int64_t; it returns void. {} On Linux it runs in a confined worker \
             process (no writing files, no sockets, no new processes), and all work is done before it returns. No \
             inline assembly (`asm`, `__asm__`: the static check refuses it); use the compiler's intrinsics \
             (immintrin.h, arm_neon.h).",
            file(task),
            entry(task),
            writes(task),
        ),
        device: format!(
            "the CPU of the machine that evaluates{cpu}; {}",
            if openmp {
                "OpenMP threads on its cores (the task compiles with -fopenmp)"
            } else {
                "one thread (OpenMP is off for this task)"
            }
        ),
        build: format!(
            "`{}`{}.",
            command(openmp),
            probe.map(|p| format!(" (cc here: {})", p.version)).unwrap_or_default()
        ),
        arithmetic: format!(
            "FMA contraction is on (-ffp-contract=fast, chosen deliberately: -std=c11 alone turns it off in GCC), so \
             a*b+c may become one fused multiply-add rounded once, across statements too{}; no -ffast-math, so sums \
             are never reassociated, and no reciprocal or NaN/inf shortcuts. Outputs are compared with a float64 \
             reference within the task's tolerance, which either rounding meets.",
            match probe {
                Some(p) if p.fma => " (this compiler does so: vfmadd/fmla in a probe)",
                Some(_) => " (this compiler did not fuse a probe loop)",
                None => "",
            }
        ),
        timing: format!(
            "{}. The host clock (perf_counter_ns) spans each single call, its inputs already in place.",
            super::timed_calls(s.task)
        ),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A Python list of string literals on one line (`NAME = ["-O3", ...]`) of `source`.
    pub(crate) fn python_list<'a>(source: &'a str, name: &str) -> Vec<&'a str> {
        let head = format!("{name} = [");
        let line = source
            .lines()
            .find(|l| l.starts_with(&head))
            .unwrap_or_else(|| panic!("no {head} line"));
        let body = line[head.len()..].trim_end().trim_end_matches(']');
        body.split(',').map(|s| s.trim().trim_matches('"')).collect()
    }

    #[test]
    fn the_prompts_flags_are_the_harnesss() {
        let harness = include_str!("../../../../harness/ksearch_harness/backends/c/build.py");
        assert_eq!(python_list(harness, "_FLAGS"), FLAGS);
        // FMA contraction chosen explicitly: -std=c11 alone turns it off in GCC.
        assert!(FLAGS.contains(&"-std=c11") && FLAGS.contains(&"-ffp-contract=fast"));
        assert!(command(true).ends_with("-std=c11 -ffp-contract=fast -fopenmp -o candidate.so SOURCES.c -lm"));
    }

    #[test]
    fn signature_of_a_builtin_task() {
        let task = Task::load_builtin("rmsnorm").unwrap();
        let sig = signature(&task);
        assert!(
            sig.starts_with("void rmsnorm(const float *x, const float *weight, float *y, int64_t "),
            "{sig}"
        );
    }
}
