//! What the search is told about a task: its text, the calling convention, the seed.

use ksearch_search::engine::{Source, TaskBrief};
use ksearch_spec::{DType, Task};

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

/// The entry point's C signature under the `c` backend's convention (docs/protocol.md).
pub fn c_signature(task: &Task) -> String {
    let def = &task.definition;
    let mut params = Vec::new();
    for (name, spec) in &def.inputs {
        if spec.is_scalar() {
            params.push(format!("{} {name}", c_type(spec.dtype)));
        } else {
            params.push(format!("const {} *{name}", c_type(spec.dtype)));
        }
    }
    for (name, spec) in &def.outputs {
        params.push(format!("{} *{name}", c_type(spec.dtype)));
    }
    for axis in def.var_axes() {
        params.push(format!("int64_t {axis}"));
    }
    let entry = task.config.kernel.entry.as_deref().unwrap_or("kernel");
    format!("void {entry}({})", params.join(", "))
}

/// The candidate format of an MLX task (docs/mlx.md): a launch spec or a Python launcher.
fn mlx_convention(task: &Task) -> String {
    let def = &task.definition;
    let entry = task.config.kernel.entry.as_deref().unwrap_or("kernel");
    let inputs: Vec<&str> = def.inputs.keys().map(String::as_str).collect();
    let outputs: Vec<&str> = def.outputs.keys().map(String::as_str).collect();
    format!(
        "An MLX kernel (docs/mlx.md): a TOML launch spec (entry `FILE.toml::{entry}`) holding the kernel body \
         for the device's dialect, [cuda] for mx.fast.cuda_kernel on NVIDIA GPUs or [metal] for \
         mx.fast.metal_kernel on Apple GPUs (source = a multi-line string, or source_file; optional header), \
         with grid and threadgroup counted in threads (integers or expressions over the axes), [template] \
         constants, and optionally [[outputs]] (extra names are scratch outputs) and init_value. MLX writes \
         the signature: the inputs {} as const T* (a scalar input is a 0-d array: name[0] in CUDA, name in \
         Metal), then the outputs {} as T*; sizes come from template constants. MLX rounds the CUDA grid up \
         to whole blocks, so bounds-check. Write every output element (unwritten ones hold NaN) and never \
         write the inputs. Or a Python launcher (entry `FILE.py::{entry}`) called with the inputs as MLX \
         arrays, returning the outputs as MLX arrays; it may build several mx.fast kernels.",
        inputs.join(", "),
        outputs.join(", ")
    )
}

pub fn task_brief(task: &Task, target: String) -> TaskBrief {
    let def = &task.definition;
    let mut text = String::new();
    if let Some(d) = &def.description {
        text.push_str(d.trim());
        text.push_str("\n\n");
    }
    let shape = |dims: &[String]| {
        if dims.is_empty() {
            "scalar".to_string()
        } else {
            format!("[{}]", dims.join(", "))
        }
    };
    text.push_str("Inputs:\n");
    for (name, spec) in &def.inputs {
        text.push_str(&format!("- {name}: {} {}\n", spec.dtype, shape(spec.dims())));
    }
    text.push_str("Outputs:\n");
    for (name, spec) in &def.outputs {
        text.push_str(&format!("- {name}: {} {}\n", spec.dtype, shape(spec.dims())));
    }
    let axes: Vec<String> = def
        .axes
        .iter()
        .map(|(n, a)| match a {
            ksearch_spec::Axis::Const { value, .. } => format!("{n} = {value}"),
            ksearch_spec::Axis::Var { .. } => format!("{n} (varies)"),
        })
        .collect();
    text.push_str(&format!("Axes: {}\n", axes.join(", ")));
    if !def.constraints.is_empty() {
        text.push_str(&format!("Constraints: {}\n", def.constraints.join("; ")));
    }
    let workloads: Vec<String> = task
        .workloads
        .iter()
        .map(|w| format!("{} ({})", w.uuid, axes_label(w)))
        .collect();
    text.push_str(&format!(
        "Workloads (all must pass; speed is the geometric mean over them): {}\n",
        workloads.join(", ")
    ));
    text.push_str(&format!(
        "\nReference ({}):\n```python\n{}\n```",
        def.op_type,
        def.reference.trim_end()
    ));
    let signature = c_signature(task);
    let convention = if task.config.kernel.language == "mlx" {
        mlx_convention(task)
    } else {
        format!(
            "{signature}\nInputs come first in definition order (arrays as pointers to contiguous row-major data, \
             scalars by value), then the outputs, then every varying axis as int64_t. Write every output element; \
             do not modify the inputs. Compiled as C11 with -O3 -march=native{}.",
            if task.config.kernel.openmp { " -fopenmp" } else { "" }
        )
    };
    let default_file = task
        .seed
        .as_ref()
        .map(|s| s.path.clone())
        .unwrap_or_else(|| "kernel.c".to_string());
    TaskBrief {
        name: def.name.clone(),
        text,
        language: task.config.kernel.language.clone(),
        convention,
        default_file,
        target,
        // Set from the task's [[expertise]] at the full context level (knowledge::brief).
        expertise: String::new(),
        seed: task.seed.as_ref().map(|s| {
            vec![Source {
                path: s.path.clone(),
                content: s.content.clone(),
            }]
        }),
    }
}

fn axes_label(w: &ksearch_spec::Workload) -> String {
    w.axes
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mlx_tasks_are_told_the_launch_spec_format() {
        let task = Task::load_builtin("mlx_mamba_step").unwrap();
        let brief = task_brief(&task, String::new());
        assert!(brief
            .convention
            .contains("launch spec (entry `FILE.toml::mlx_mamba_step`)"));
        assert!(brief
            .convention
            .contains("u, delta, A, B, C, D, z, delta_bias, state as const T*"));
        assert!(!brief.convention.contains("C11"), "{}", brief.convention);
        assert_eq!(brief.default_file, "seed.toml");
    }

    #[test]
    fn signature_of_a_builtin_task() {
        let task = Task::load_builtin("rmsnorm").unwrap();
        let sig = c_signature(&task);
        assert!(
            sig.starts_with("void rmsnorm(const float *x, const float *weight, float *y, int64_t "),
            "{sig}"
        );
    }
}
