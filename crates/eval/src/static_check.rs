//! Static checks on candidate source, before anything is compiled. The rule set is data
//! (`rules/static_checks.toml`, plus each task's `[checks]`), applied to the source with
//! comments removed so that a comment never triggers a rejection.

use ksearch_spec::{Language, SourceFile, TaskConfig};
use regex::Regex;
use serde::Deserialize;
use std::sync::OnceLock;

#[derive(Deserialize)]
struct RuleFile {
    rule: Vec<RuleSpec>,
}

#[derive(Deserialize)]
struct RuleSpec {
    languages: Vec<Language>,
    pattern: String,
    reason: String,
    /// Lines a match may stand on without breaking the rule: the regex crate has no
    /// look-around, so an exception to a pattern is a second pattern over the match's line.
    #[serde(default)]
    allow: Option<String>,
}

struct Rule {
    languages: Vec<Language>,
    regex: Regex,
    reason: String,
    allow: Option<Regex>,
}

const BUILTIN_RULES: &str = include_str!("../rules/static_checks.toml");

fn builtin_rules() -> &'static [Rule] {
    static RULES: OnceLock<Vec<Rule>> = OnceLock::new();
    RULES.get_or_init(|| {
        // The file is ours and covered by a test, so a failure here is a build defect.
        let file: RuleFile = toml::from_str(BUILTIN_RULES).unwrap_or_else(|e| panic!("rules/static_checks.toml: {e}"));
        file.rule
            .into_iter()
            .map(|r| Rule {
                languages: r.languages,
                regex: Regex::new(&r.pattern)
                    .unwrap_or_else(|e| panic!("rules/static_checks.toml: {}: {e}", r.pattern)),
                reason: r.reason,
                allow: r
                    .allow
                    .map(|a| Regex::new(&a).unwrap_or_else(|e| panic!("rules/static_checks.toml: allow {a}: {e}"))),
            })
            .collect()
    })
}

/// Why a candidate was rejected: where, what matched, and the rule's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The source file's path, as in the solution.
    pub file: String,
    /// The 1-based line where the match starts (comments are blanked, not removed, so it is
    /// the line in the original source).
    pub line: usize,
    /// The text the rule's pattern matched, trimmed.
    pub matched: String,
    /// The rule's reason (from rules/static_checks.toml or the task's `[checks]`).
    pub reason: String,
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} line {}: `{}` {}",
            self.file, self.line, self.matched, self.reason
        )
    }
}

/// Returns the first rule a source breaks, checking the task's own rules (the most specific:
/// which framework op this task forbids) then the built-in ones.
pub fn check_sources(language: Language, sources: &[SourceFile], config: &TaskConfig) -> Option<Rejection> {
    let task_rules: Vec<(Regex, &str)> = config
        .checks
        .forbidden
        .iter()
        .filter_map(|f| Regex::new(&f.pattern).ok().map(|r| (r, f.reason.as_str())))
        .collect();
    for source in sources {
        let code = strip_comments(language, &source.path, &source.content);
        let builtin = builtin_rules()
            .iter()
            .filter(|r| r.languages.contains(&language))
            .map(|r| (&r.regex, r.reason.as_str(), r.allow.as_ref()));
        let task = task_rules.iter().map(|(r, reason)| (r, *reason, None));
        for (regex, reason, allow) in task.chain(builtin) {
            let line_of = |m: &regex::Match| {
                let start = code[..m.start()].rfind('\n').map_or(0, |i| i + 1);
                let end = code[m.start()..].find('\n').map_or(code.len(), |i| m.start() + i);
                &code[start..end]
            };
            let broken = regex
                .find_iter(&code)
                .find(|m| allow.is_none_or(|a| !a.is_match(line_of(m))));
            if let Some(m) = broken {
                return Some(Rejection {
                    file: source.path.clone(),
                    line: code[..m.start()].matches('\n').count() + 1,
                    matched: m.as_str().trim().to_string(),
                    reason: reason.to_string(),
                });
            }
        }
    }
    None
}

/// Replaces comments with spaces (keeping newlines, so line numbers stay right). String and
/// character literals are kept, and a comment marker inside one is not a comment. An `mlx`
/// candidate mixes files: its launch specs (TOML) and launchers (Python) take `#` comments, its
/// kernel bodies (CUDA, Metal) C comments.
fn strip_comments(language: Language, path: &str, code: &str) -> String {
    let hash_comments = crate::backend::of(language).hash_comments(path);
    let mut out = String::with_capacity(code.len());
    let mut chars = code.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        if let Some(q) = quote {
            out.push(c);
            if c == '\\' {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            } else if c == q || (c == '\n' && !hash_comments) {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => {
                quote = Some(c);
                out.push(c);
            }
            '#' if hash_comments => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if !hash_comments && chars.peek() == Some(&'/') => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if !hash_comments && chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                    }
                    if prev == '*' && n == '/' {
                        break;
                    }
                    prev = n;
                }
                out.push(' ');
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(content: &str) -> Vec<SourceFile> {
        vec![SourceFile {
            path: "k.c".into(),
            content: content.into(),
        }]
    }

    #[test]
    fn builtin_rules_parse() {
        assert!(builtin_rules().len() >= 10);
    }

    #[test]
    fn binding_languages_get_the_c_and_cuda_rules() {
        // FlashInfer-Bench's tvm-ffi and torch bindings (cpp, cuda_binding) load into the
        // harness's process: at least the rules of the C and CUDA kernels apply to them.
        let cfg = TaskConfig::default();
        let ffi = "#include <tvm/ffi/container/tensor.h>\n#include <tvm/ffi/function.h>\n\
                   void k(tvm::ffi::TensorView x, tvm::ffi::TensorView y) { }\n\
                   TVM_FFI_DLL_EXPORT_TYPED_FUNC(k, k);\n";
        for lang in [Language::Cpp, Language::CudaBinding] {
            assert_eq!(check_sources(lang, &src(ffi), &cfg), None, "{lang}");
            for bad in [
                "void k() { system(\"id\"); }",
                "void k() { std::thread t; }",
                "#include \"../x.h\"",
            ] {
                assert!(check_sources(lang, &src(bad), &cfg).is_some(), "{lang}: {bad}");
            }
        }
        assert!(check_sources(Language::Cpp, &src("void k() { asm(\"nop\"); }"), &cfg).is_some());
        let stream = "void k() { cudaStream_t s; cudaStreamCreate(&s); }";
        assert!(check_sources(Language::CudaBinding, &src(stream), &cfg).is_some());
    }

    #[test]
    fn thread_creation_is_rejected_with_line() {
        let r = check_sources(
            Language::C,
            &src("#include <pthread.h>\nvoid f(){\n  pthread_create(0,0,0,0);\n}\n"),
            &TaskConfig::default(),
        )
        .unwrap();
        assert_eq!((r.line, r.matched.as_str()), (3, "pthread_create"));
        assert!(r.reason.contains("creates a thread"));
    }

    #[test]
    fn a_variable_named_write_is_not_output_but_a_call_to_write_is() {
        let cfg = TaskConfig::default();
        let kernel = "void f(float *y, int write) { if (write) y[0] = 1.0f; }\n";
        assert_eq!(check_sources(Language::C, &src(kernel), &cfg), None);
        let r = check_sources(Language::C, &src("void f(float *y) { write(1, y, 4); }\n"), &cfg).unwrap();
        assert!(r.reason.contains("writes output"), "{}", r.reason);
        let r = check_sources(Language::C, &src("void f(float *y) { fputs(\"x\", stderr); }\n"), &cfg).unwrap();
        assert!(r.reason.contains("writes output"), "{}", r.reason);
    }

    #[test]
    fn comments_do_not_trigger_but_code_after_them_does() {
        let cfg = TaskConfig::default();
        assert_eq!(
            check_sources(
                Language::C,
                &src("// no fopen( here\n/* nor system( \n here */ void f(){}\n"),
                &cfg
            ),
            None
        );
        let r = check_sources(
            Language::C,
            &src("/* a */ char *s = \"// not a comment\"; void f(){ system(\"ls\"); }"),
            &cfg,
        )
        .unwrap();
        assert_eq!(r.matched, "system(");
    }

    #[test]
    fn inline_ptx_is_allowed_in_cuda_but_x86_system_calls_and_c_assembly_are_not() {
        let cfg = TaskConfig::default();
        let ptx = "__device__ unsigned lane() { unsigned r; asm volatile(\"mov.u32 %0, %%laneid;\" : \"=r\"(r)); return r; }\n";
        assert_eq!(check_sources(Language::Cuda, &src(ptx), &cfg), None);
        let host = "void f() { asm volatile(\"mov $60, %%eax\\n\\tsyscall\"); }\n";
        let r = check_sources(Language::Cuda, &src(host), &cfg).unwrap();
        assert_eq!(r.matched, "\\tsyscall");
        let r = check_sources(Language::C, &src(ptx), &cfg).unwrap();
        assert!(r.reason.contains("inline assembly"), "{}", r.reason);
    }

    #[test]
    fn mlx_launch_specs_and_launchers_have_hash_comments_and_bodies_c_comments() {
        let mut cfg = TaskConfig::default();
        cfg.checks.forbidden.push(ksearch_spec::ForbiddenPattern {
            pattern: r"\bssm_step\b".into(),
            reason: "delegates".into(),
        });
        let file = |path: &str, content: &str| {
            vec![SourceFile {
                path: path.into(),
                content: content.into(),
            }]
        };
        let spec = "# replaces ssm_step\ngrid = [1]\n[cuda]\nsource = '''\ny[0] = x[0]; // ssm_step\n'''\n";
        let r = check_sources(Language::Mlx, &file("launch.toml", spec), &cfg).unwrap();
        assert_eq!(r.line, 5, "the TOML comment is dropped, the body is kept: {r}");
        let launcher = "# wraps ssm_step\ndef run(x):\n    return x\n";
        assert_eq!(check_sources(Language::Mlx, &file("launcher.py", launcher), &cfg), None);
        let body = "// like ssm_step\n#include <cuda_fp16.h>\ny[0] = x[0];\n";
        assert_eq!(check_sources(Language::Mlx, &file("kernel.cu", body), &cfg), None);
        let r = check_sources(Language::Mlx, &file("kernel.cu", "ssm_step(x);\n"), &cfg).unwrap();
        assert_eq!((r.file.as_str(), r.line), ("kernel.cu", 1));
    }

    fn py(content: &str) -> Vec<SourceFile> {
        vec![SourceFile {
            path: "kernel.py".into(),
            content: content.into(),
        }]
    }

    /// The Python-level hacks of docs/threat-model.md, each refused with its reason (the candidates of
    /// tests/adversarial/python go through `ksearch eval` in crates/cli/tests/adversarial.rs).
    #[test]
    fn python_hacks_are_rejected_with_their_reason() {
        let cfg = TaskConfig::default();
        let cases = [
            ("import time\n", "import time", "the clock"),
            (
                "from time import perf_counter_ns as t\n",
                "from time import",
                "the clock",
            ),
            (
                "torch.cuda.synchronize = lambda: None\n",
                "torch.cuda.synchronize =",
                "monkey-patching",
            ),
            (
                "c = torch.cuda\nc.synchronize = f\n",
                ".synchronize =",
                "monkey-patching",
            ),
            ("setattr(x, 'y', 1)\n", "setattr", "monkey-patching"),
            (
                "f = functools.partial(setattr, torch.cuda)\n",
                "setattr",
                "monkey-patching",
            ),
            ("torch.cuda.__dict__['synchronize'] = f\n", ".__dict__", "reaches into"),
            ("s = torch.cuda.Stream()\n", "torch.cuda.Stream", "streams"),
            ("from torch.cuda import Stream\n", "from torch.cuda import", "streams"),
            ("import threading\n", "threading", "thread"),
            (
                "def f(x):\n    try:\n        k(x)\n    except Exception:\n        ref(x)\n",
                "try:",
                "fall back",
            ),
            ("import gc\n", "gc", "reaches into"),
            (
                "import sys\nm = sys.modules['ksearch_harness']\n",
                "sys.modules",
                "reaches into",
            ),
            ("exec(src)\n", "exec(", "built at run time"),
            ("import ctypes\n", "ctypes", "native calls"),
            ("x = open('/etc/passwd').read()\n", "open(", "files"),
        ];
        for (code, matched, reason) in cases {
            let r = check_sources(Language::Triton, &py(code), &cfg).unwrap_or_else(|| panic!("accepted: {code}"));
            assert_eq!(r.matched, matched, "{code}");
            assert!(r.reason.contains(reason), "{code}: {}", r.reason);
            assert!(
                check_sources(Language::Python, &py(code), &cfg).is_some(),
                "python: {code}"
            );
        }
    }

    /// PyTorch's precision switches may be set (GPU MODE's references turn TF32 off around their
    /// own work; the harness puts them back after each call), each alone on its line; any other
    /// module attribute, or a switch beside something else on the line, is still refused.
    #[test]
    fn precision_switches_alone_on_their_line_are_allowed() {
        let cfg = TaskConfig::default();
        let allowed = "class NoTF32:\n    def __enter__(self):\n\
            \x20       self.old = torch.backends.cudnn.allow_tf32\n\
            \x20       torch.backends.cudnn.allow_tf32 = False\n\
            \x20       torch.backends.cudnn.deterministic = True\n\
            \x20   def __exit__(self, *e):\n\
            \x20       torch.backends.cudnn.allow_tf32 = self.old\n\
            torch.backends.cuda.matmul.allow_tf32=False\n";
        assert_eq!(check_sources(Language::Python, &py(allowed), &cfg), None);
        for (code, matched) in [
            (
                "torch.backends.cudnn.enabled = False\n",
                "torch.backends.cudnn.enabled =",
            ),
            (
                "torch.backends.cudnn.allow_tf32 = False; torch.cuda.synchronize = f\n",
                "torch.backends.cudnn.allow_tf32 =",
            ),
            (
                "torch.backends.cudnn.allow_tf32 = False\ntorch.cuda.synchronize = f\n",
                "torch.cuda.synchronize =",
            ),
        ] {
            let r = check_sources(Language::Python, &py(code), &cfg).unwrap_or_else(|| panic!("accepted: {code}"));
            assert_eq!(r.matched, matched, "{code}");
            assert!(r.reason.contains("monkey-patching"), "{}", r.reason);
        }
    }

    #[test]
    fn ordinary_triton_code_is_accepted() {
        let code = "import torch\nimport triton\nimport triton.language as tl\n\n\
            @triton.jit\ndef k(x_ptr, y_ptr, n, BLOCK: tl.constexpr = 64):\n\
            \x20   i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n\
            \x20   tl.store(y_ptr + i, tl.exp(tl.load(x_ptr + i, mask=i < n)), mask=i < n)\n\n\
            def run(x, y):\n    \"\"\"Every element except none: exp.\"\"\"\n\
            \x20   out = torch.empty_like(x, dtype=torch.float32)\n\
            \x20   k[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), num_warps=4)\n";
        assert_eq!(check_sources(Language::Triton, &py(code), &TaskConfig::default()), None);
    }

    #[test]
    fn cuda_side_streams_graphs_and_callbacks_are_rejected() {
        let cfg = TaskConfig::default();
        for (code, matched) in [
            (
                "cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);",
                "cudaStreamCreateWithFlags",
            ),
            ("k<<<1, 1, 0, cudaStreamPerThread>>>();", "cudaStreamPerThread"),
            ("cudaLaunchHostFunc(0, f, 0);", "cudaLaunchHostFunc"),
            ("cudaGraphLaunch(g, 0);", "cudaGraphLaunch"),
        ] {
            let r = check_sources(Language::Cuda, &src(code), &cfg).unwrap_or_else(|| panic!("accepted: {code}"));
            assert_eq!(r.matched, matched);
            assert!(r.reason.contains("default stream"), "{}", r.reason);
        }
        // The default stream itself (0, or no stream argument) is what kernels use.
        assert_eq!(check_sources(Language::Cuda, &src("k<<<g, b, 0, 0>>>(x);"), &cfg), None);
    }

    /// The Python and Triton kernels shipped with the tasks (templates, expertise; not the
    /// baselines, which are trusted) pass the Python rules.
    #[test]
    fn the_tasks_python_kernels_pass() {
        let tasks = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks");
        let mut checked = 0;
        let mut stack = vec![tasks];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                let name = path.to_string_lossy().to_string();
                if path.is_dir() {
                    if !name.ends_with("baselines") {
                        stack.push(path);
                    }
                } else if name.ends_with(".py") || name.ends_with(".py.j2") {
                    let content = std::fs::read_to_string(&path).unwrap();
                    let src = vec![SourceFile {
                        path: name.clone(),
                        content,
                    }];
                    assert_eq!(
                        check_sources(Language::Triton, &src, &TaskConfig::default()),
                        None,
                        "{name}"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked >= 1, "no Python kernel found under tasks/");
    }

    #[test]
    fn task_rules_apply() {
        let mut cfg = TaskConfig::default();
        cfg.checks.forbidden.push(ksearch_spec::ForbiddenPattern {
            pattern: r"\bcblas_\w+".into(),
            reason: "uses BLAS".into(),
        });
        let r = check_sources(Language::C, &src("void f(){ cblas_sgemm(); }"), &cfg).unwrap();
        assert_eq!((r.matched.as_str(), r.reason.as_str()), ("cblas_sgemm", "uses BLAS"));
        assert_eq!(
            check_sources(Language::C, &src("void f(float *x){ x[0] = 1; }"), &cfg),
            None
        );
    }
}
