//! Every built-in CUDA task's seed kernel follows the `cuda` backend's calling convention and
//! compiles with nvcc for the H200 (sm_90a), without a GPU.
//!
//! The signature check reads the seed's `extern "C"` entry function and compares its
//! parameters with the definition: inputs in order (arrays as pointers to the element type,
//! `const`; scalars by value), then outputs (non-const pointers), then every var axis as
//! `int64_t`. It needs no compiler and always runs.
//!
//! The compile check runs nvcc (`-O3 -gencode arch=compute_90a,code=[sm_90a,compute_90a]
//! -Xptxas -v -c`, the backend's flags except that it stops at an object file) and, where `nm` exists, checks that the entry symbol is
//! exported unmangled. nvcc is looked up as the harness does: $KSEARCH_NVCC, $CUDA_HOME/bin,
//! $CUDA_PATH/bin, PATH, /usr/local/cuda/bin, then the pip wheel (nvidia/*/bin/nvcc) on
//! python3's sys.path. Without nvcc the compile check is skipped with a printed reason, unless
//! KSEARCH_REQUIRE_NVCC=1, which makes a missing nvcc a failure (CI installs it from PyPI:
//! nvidia-cuda-nvcc nvidia-cuda-runtime nvidia-cuda-cccl).

use ksearch_spec::{builtin_names, DType, Definition, Task};
use std::path::{Path, PathBuf};
use std::process::Command;

fn cuda_tasks() -> Vec<Task> {
    builtin_names()
        .into_iter()
        .map(|name| Task::load_builtin(&name).unwrap_or_else(|e| panic!("built-in task '{name}': {e}")))
        .filter(|t| t.config.kernel.language == ksearch_spec::Language::Cuda)
        .collect()
}

#[test]
fn the_gpu_tasks_are_cuda_tasks_with_seeds() {
    let names: Vec<String> = cuda_tasks().iter().map(|t| t.definition.name.clone()).collect();
    for expected in [
        "attention_prefill",
        "gqa_paged_decode",
        "mamba_scan",
        "rmsnorm_llm",
        "softmax_llm",
    ] {
        assert!(names.iter().any(|n| n == expected), "{expected} missing from {names:?}");
    }
    for t in cuda_tasks() {
        let seed = t
            .seed
            .as_ref()
            .unwrap_or_else(|| panic!("{} has no seed", t.definition.name));
        assert!(seed.path.ends_with(".cu"), "{}: seed {}", t.definition.name, seed.path);
        assert!(
            t.config.kernel.entry.is_some(),
            "{}: no [kernel].entry",
            t.definition.name
        );
        assert!(!t.baselines.is_empty(), "{}: no baseline", t.definition.name);
    }
}

// ---------------------------------------------------------------------------------------------
// Signature check

/// One parameter as written: `const`, the base type, the number of `*`, the name.
#[derive(Debug, PartialEq)]
struct Param {
    is_const: bool,
    base: String,
    pointers: usize,
    name: String,
}

/// The C type names the backend passes for a dtype (either spelling is accepted).
fn c_types(dtype: DType) -> &'static [&'static str] {
    match dtype.name() {
        "float16" => &["__half", "half"],
        "bfloat16" => &["__nv_bfloat16", "nv_bfloat16"],
        "float32" => &["float"],
        "float64" => &["double"],
        "int64" => &["int64_t"],
        "int32" => &["int32_t"],
        "int16" => &["int16_t"],
        "int8" => &["int8_t"],
        "uint8" => &["uint8_t"],
        "bool" => &["bool"],
        _ => &[],
    }
}

fn strip_comments(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map(|i| &after[i..]).unwrap_or("");
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map(|i| &after[i + 2..]).unwrap_or("");
            out.push(' ');
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// The parameters of `extern "C" void ENTRY(...)` in `source`.
fn entry_params(source: &str, entry: &str) -> Result<Vec<Param>, String> {
    let code = strip_comments(source);
    let pattern = format!(r#"extern\s+"C"\s+(__host__\s+)?void\s+{}\s*\("#, regex::escape(entry));
    let re = regex::Regex::new(&pattern).map_err(|e| e.to_string())?;
    let m = re
        .find(&code)
        .ok_or_else(|| format!("no `extern \"C\" void {entry}(` in the source"))?;
    let body = &code[m.end()..];
    let close = body
        .find(')')
        .ok_or_else(|| format!("the parameter list of {entry} is not closed"))?;
    let list = body[..close].trim();
    if list.is_empty() || list == "void" {
        return Ok(Vec::new());
    }
    list.split(',').map(parse_param).collect()
}

fn parse_param(text: &str) -> Result<Param, String> {
    let spaced = text.replace('*', " * ");
    let mut is_const = false;
    let mut pointers = 0;
    let mut words = Vec::new();
    for token in spaced.split_whitespace() {
        match token {
            "const" => is_const = true,
            "*" => pointers += 1,
            "__restrict__" | "__restrict" | "restrict" => {}
            word => words.push(word.to_string()),
        }
    }
    match words.as_slice() {
        [base, name] => Ok(Param {
            is_const,
            base: base.clone(),
            pointers,
            name: name.clone(),
        }),
        _ => Err(format!(
            "cannot read parameter `{}` (expected `[const] TYPE [*] NAME`)",
            text.trim()
        )),
    }
}

/// Differences between the entry's parameters and the backend's calling convention.
fn signature_problems(def: &Definition, params: &[Param]) -> Vec<String> {
    // (what, dtype, pointer, const) in calling order.
    let mut expected = Vec::new();
    for (name, spec) in &def.inputs {
        let array = !spec.is_scalar();
        expected.push((format!("input '{name}'"), spec.dtype, array, array));
    }
    for (name, spec) in &def.outputs {
        expected.push((format!("output '{name}'"), spec.dtype, true, false));
    }
    for axis in def.var_axes() {
        expected.push((format!("var axis '{axis}'"), DType::Int64, false, false));
    }
    let mut problems = Vec::new();
    if params.len() != expected.len() {
        problems.push(format!(
            "{} parameters, the convention needs {} ({})",
            params.len(),
            expected.len(),
            expected.iter().map(|e| e.0.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    for (i, (param, (what, dtype, pointer, is_const))) in params.iter().zip(&expected).enumerate() {
        let types = c_types(*dtype);
        let mut wrong = Vec::new();
        if !types.contains(&param.base.as_str()) {
            wrong.push(format!("type {} (needs {})", param.base, types.join(" or ")));
        }
        if param.pointers != usize::from(*pointer) {
            wrong.push(if *pointer {
                "not a pointer".into()
            } else {
                "a pointer, not a value".into()
            });
        }
        if *pointer && param.is_const != *is_const {
            wrong.push(if *is_const {
                "not const".into()
            } else {
                "const, but written".into()
            });
        }
        if !wrong.is_empty() {
            problems.push(format!(
                "parameter {i} `{}` for {what}: {}",
                param.name,
                wrong.join(", ")
            ));
        }
    }
    problems
}

#[test]
fn every_cuda_seed_follows_the_calling_convention() {
    for t in cuda_tasks() {
        let (Some(seed), Some(entry)) = (&t.seed, &t.config.kernel.entry) else {
            continue;
        };
        let params = entry_params(&seed.content, entry).unwrap_or_else(|e| panic!("{}: {e}", t.file(&seed.path)));
        let problems = signature_problems(&t.definition, &params);
        assert!(
            problems.is_empty(),
            "{}: entry {entry}:\n  {}",
            t.file(&seed.path),
            problems.join("\n  ")
        );
    }
}

#[test]
fn the_signature_check_catches_wrong_entries() {
    let task = Task::load_builtin("rmsnorm_llm").unwrap();
    let check = |source: &str| -> Vec<String> {
        match entry_params(source, "rmsnorm_llm") {
            Ok(params) => signature_problems(&task.definition, &params),
            Err(e) => vec![e],
        }
    };
    let good = "extern \"C\" void rmsnorm_llm(const __nv_bfloat16 *x, const __nv_bfloat16 *w, \
                __nv_bfloat16 *__restrict__ y, int64_t m, int64_t n) {}";
    assert_eq!(check(good), Vec::<String>::new());
    let missing_axis = "extern \"C\" void rmsnorm_llm(const __nv_bfloat16 *x, const __nv_bfloat16 *w, \
                        __nv_bfloat16 *y, int64_t m) {}";
    assert!(
        check(missing_axis)[0].starts_with("4 parameters, the convention needs 5"),
        "{:?}",
        check(missing_axis)
    );
    let wrong_type = "extern \"C\" void rmsnorm_llm(const __half *x, const __nv_bfloat16 *w, \
                      __nv_bfloat16 *y, int m, int64_t n) {}";
    let p = check(wrong_type);
    assert!(p[0].contains("input 'hidden_states': type __half"), "{p:?}");
    assert!(p[1].contains("var axis 'batch_size': type int"), "{p:?}");
    let const_output = "extern \"C\" void rmsnorm_llm(const __nv_bfloat16 *x, const __nv_bfloat16 *w, \
                        const __nv_bfloat16 *y, int64_t m, int64_t n) {}";
    assert!(
        check(const_output)[0].contains("const, but written"),
        "{:?}",
        check(const_output)
    );
    let mangled = "void rmsnorm_llm(const __nv_bfloat16 *x, const __nv_bfloat16 *w, __nv_bfloat16 *y, \
                   int64_t m, int64_t n) {}";
    assert!(
        check(mangled)[0].contains("no `extern \"C\" void rmsnorm_llm(`"),
        "{:?}",
        check(mangled)
    );
    // A commented-out declaration does not count.
    assert!(!check(&format!("// {good}")).is_empty());
}

// ---------------------------------------------------------------------------------------------
// Compile check

fn executable(p: &Path) -> bool {
    p.is_file()
}

fn find_nvcc() -> Option<PathBuf> {
    if let Some(named) = std::env::var_os("KSEARCH_NVCC") {
        return Some(PathBuf::from(named));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(root) = std::env::var_os(var) {
            let p = Path::new(&root).join("bin/nvcc");
            if executable(&p) {
                return Some(p);
            }
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join("nvcc");
            if executable(&p) {
                return Some(p);
            }
        }
    }
    let usual = Path::new("/usr/local/cuda/bin/nvcc");
    if executable(usual) {
        return Some(usual.to_path_buf());
    }
    // The pip wheel nvidia-cuda-nvcc puts it under site-packages/nvidia/<cu13 or cuda_nvcc>/bin.
    let python = std::env::var("KSEARCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(python)
        .args(["-c", "import sys; print('\\n'.join(p for p in sys.path if p))"])
        .output()
        .ok()?;
    let paths = String::from_utf8_lossy(&out.stdout).to_string();
    for base in paths.lines() {
        let nvidia = Path::new(base).join("nvidia");
        let Ok(entries) = std::fs::read_dir(&nvidia) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("bin/nvcc"))
            .filter(|p| executable(p))
            .collect();
        found.sort();
        if let Some(p) = found.into_iter().next() {
            return Some(p);
        }
    }
    None
}

fn on_path(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn every_cuda_seed_compiles_for_sm_90a() {
    let Some(nvcc) = find_nvcc() else {
        let required = std::env::var("KSEARCH_REQUIRE_NVCC").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "KSEARCH_REQUIRE_NVCC=1 but no nvcc was found ($KSEARCH_NVCC, $CUDA_HOME, PATH, \
             /usr/local/cuda, python3's site-packages/nvidia/*/bin)"
        );
        eprintln!(
            "skipping the CUDA seed compile check: no nvcc found (pip install nvidia-cuda-nvcc \
             nvidia-cuda-runtime nvidia-cuda-cccl provides one; KSEARCH_REQUIRE_NVCC=1 makes this a failure)"
        );
        return;
    };
    let check_symbols = on_path("nm");
    if !check_symbols {
        eprintln!("nm not found: the exported entry symbols are not checked");
    }
    let dir = tempfile::tempdir().unwrap();
    let tasks = cuda_tasks();
    assert!(!tasks.is_empty());
    for t in tasks {
        let (Some(seed), Some(entry)) = (&t.seed, &t.config.kernel.entry) else {
            continue;
        };
        let name = &t.definition.name;
        let source = dir.path().join(format!("{name}.cu"));
        let object = dir.path().join(format!("{name}.o"));
        std::fs::write(&source, &seed.content).unwrap();
        let out = Command::new(&nvcc)
            .args([
                "-O3",
                "-gencode",
                "arch=compute_90a,code=[sm_90a,compute_90a]",
                "-Xptxas",
                "-v",
                "-c",
                "-o",
            ])
            .arg(&object)
            .arg(&source)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", nvcc.display()));
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "{} does not compile with {}:\n{log}",
            t.file(&seed.path),
            nvcc.display()
        );
        for line in log.lines().filter(|l| l.contains("Used") || l.contains("spill")) {
            eprintln!("{name}: {}", line.trim());
        }
        if check_symbols {
            let nm = Command::new("nm").arg(&object).output().unwrap();
            let symbols = String::from_utf8_lossy(&nm.stdout);
            assert!(
                symbols.lines().any(|l| {
                    let words: Vec<&str> = l.split_whitespace().collect();
                    words.len() >= 2 && words[words.len() - 2..] == ["T", entry.as_str()]
                }),
                "{}: no exported (extern \"C\") symbol `{entry}` in the object:\n{symbols}",
                t.file(&seed.path)
            );
        }
    }
}
