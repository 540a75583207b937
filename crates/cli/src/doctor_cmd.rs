//! `ksearch doctor`: what this machine offers ksearch — compilers, Python and its packages,
//! GPUs, configured LLM providers — and what to do about anything missing.

use ksearch_llm::LlmConfig;
use std::path::Path;
use std::process::Command;

/// The first line a command prints of its version, or `None` if it cannot run.
fn version(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = if out.stdout.is_empty() { out.stderr } else { out.stdout };
    String::from_utf8_lossy(&text)
        .lines()
        .next()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
}

fn python_module(python: &Path, module: &str) -> Option<String> {
    let code = format!("import {module}; print(getattr({module}, '__version__', 'present'))");
    let out = Command::new(python).args(["-c", &code]).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// MLX's version and the kernel dialects it can run on a GPU (docs/mlx.md), or `None` when the
/// interpreter cannot import it.
fn mlx_backends(python: &Path) -> Option<String> {
    let code = "import mlx.core as mx\n\
                has = lambda m: bool(getattr(getattr(mx, m, None), 'is_available', lambda: False)())\n\
                gpu = [d for d, m in (('metal', 'metal'), ('cuda', 'cuda')) if has(m)]\n\
                print(mx.__version__, '(GPU kernels: ' + (', '.join(gpu) or 'none, CPU only') + ')')";
    let out = Command::new(python).args(["-c", code]).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The nvcc the cuda backend would use (found as the harness finds it: `$KSEARCH_NVCC`,
/// `$CUDA_HOME`, PATH, /usr/local/cuda, or NVIDIA's pip package in the interpreter's
/// site-packages) and its release line.
fn harness_nvcc(python: &Path) -> Option<(String, String)> {
    let dir = tempfile::tempdir().ok()?;
    let harness = ksearch_eval::harness::install_harness(dir.path()).ok()?;
    let code = "import sys; sys.path.insert(0, sys.argv[1]); \
                from ksearch_harness.backends.cuda import nvcc; print(nvcc.find() or '')";
    let out = Command::new(python).args(["-c", code]).arg(&harness).output().ok()?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || path.is_empty() {
        return None;
    }
    let shown = Command::new(&path).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&shown.stdout);
    let release = text
        .lines()
        .find(|l| l.contains("release"))
        .unwrap_or("version unknown")
        .trim()
        .to_string();
    Some((path, release))
}

/// Prints what this machine offers, one line a check; returns the exit status.
pub(crate) fn run() -> anyhow::Result<u8> {
    let mut problems = 0;
    let mut line = |ok: bool, what: &str, detail: String| {
        println!("{} {what:<22} {detail}", if ok { "ok  " } else { "miss" });
        if !ok {
            problems += 1;
        }
    };
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    match version(&cc, &["--version"]) {
        Some(v) => line(true, "C compiler", format!("{cc}: {v}")),
        None => line(
            false,
            "C compiler",
            format!("{cc} not found: install gcc or clang (the c backend needs it)"),
        ),
    }
    let python = ksearch_eval::harness::python();
    match version(&python.display().to_string(), &["--version"]) {
        Some(v) => line(true, "Python", format!("{}: {v}", python.display())),
        None => line(
            false,
            "Python",
            format!("{} not found: install Python 3", python.display()),
        ),
    }
    match python_module(&python, "numpy") {
        Some(v) => line(true, "NumPy", v),
        None => line(
            false,
            "NumPy",
            "missing: ksearch creates a virtual environment with it on first use".into(),
        ),
    }
    for (module, why) in [("torch", "PyTorch references"), ("triton", "the triton backend")] {
        match python_module(&python, module) {
            Some(v) => line(true, module, v),
            None => println!("-    {module:<22} not installed (needed only for {why})"),
        }
    }
    match mlx_backends(&python) {
        Some(v) => line(true, "mlx", v),
        None => println!(
            "-    {:<22} not installed (needed only for the mlx backend: pip install mlx on Apple \
             Silicon, mlx[cuda13] on Linux with an NVIDIA GPU)",
            "mlx"
        ),
    }
    match version("nvidia-smi", &["-L"]) {
        Some(v) => line(true, "NVIDIA GPU", v),
        None => println!(
            "-    {:<22} none found (CPU tasks only; GPU backends need one)",
            "NVIDIA GPU"
        ),
    }
    match harness_nvcc(&python) {
        Some((path, release)) => line(true, "nvcc", format!("{path}: {release}")),
        None => println!(
            "-    {:<22} not found (compile checks of CUDA need it: pip install nvidia-cuda-nvcc)",
            "nvcc"
        ),
    }
    match LlmConfig::load(Path::new(".")) {
        Ok(config) => {
            let roles = [("planner", &config.roles.planner), ("coder", &config.roles.coder)];
            let mut any = false;
            for (role, spec) in roles {
                let Some(spec) = spec else { continue };
                any = true;
                match config.resolve(spec) {
                    Ok(p) => {
                        let key = match &p.api_key_env {
                            Some(env) if std::env::var(env).is_ok_and(|v| !v.trim().is_empty()) => {
                                format!("key in {env}")
                            }
                            Some(env) => format!("KEY MISSING: export {env}"),
                            None => "no key needed".into(),
                        };
                        let ok = !key.starts_with("KEY MISSING");
                        line(
                            ok,
                            &format!("LLM {role}"),
                            format!("{}:{} at {} ({key})", p.name, p.model, p.base_url),
                        );
                    }
                    Err(e) => line(false, &format!("LLM {role}"), e.to_string()),
                }
            }
            if !any {
                println!(
                    "-    {:<22} none configured: searches use the knob tuner; pass --llm PROVIDER:MODEL or set [roles] in ksearch.toml",
                    "LLM"
                );
            }
        }
        Err(e) => line(false, "ksearch.toml", e.to_string()),
    }
    let (ok, kb) = crate::knowledge::describe(crate::knowledge::overrides_dir().as_deref());
    line(ok, "knowledge base", kb);
    println!("     {:<22} {}", "cache", ksearch_eval::harness::cache_dir().display());
    Ok(if problems == 0 { 0 } else { crate::EXIT_FAILED })
}
