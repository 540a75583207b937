//! FlashInfer-Bench's Solution JSON as its current and older releases write it, brought onto
//! what ksearch builds, or refused with the reason.
//!
//! Current files carry `spec.binding` (`tvm-ffi`, the default for `cpp`/`cuda`, or `torch`) and
//! the languages `python`, `triton`, `cuda`, `cpp` and `tilelang`; older ones had
//! `dependencies: null` and `build_commands`. ksearch runs `python` and `triton` modules (called
//! with torch tensors, as FlashInfer-Bench calls them, the binding ignored as there); `cpp` as
//! [`Language::Cpp`] and `cuda` with a binding as [`Language::CudaBinding`], built through that
//! binding (tvm-ffi when none is given for `cpp`); and `cuda` with no binding whose sources use
//! none as ksearch's own `cuda` (an `extern "C"` entry in destination-passing style,
//! docs/protocol.md). A bindingless `cuda` whose sources use a binding is read with it
//! (`tvm/ffi/` or `TVM_FFI_DLL_EXPORT`: tvm-ffi; `torch/extension.h`, `PYBIND11_MODULE`:
//! torch). `tilelang` is refused, never guessed at.

use crate::error::SpecError;
use crate::language::Language;
use serde_json::Value;

/// What ksearch builds, for the refusals.
const SUPPORTED: &str = "ksearch builds python and triton modules (called with torch tensors), \
    cpp and cuda through the tvm-ffi or torch binding, cuda kernels whose entry is an extern \"C\" \
    function in destination-passing style (docs/protocol.md) with no `binding`, c (C11, the same \
    convention on the CPU) and mlx";

/// Marks of a binding in CUDA/C++ sources that do not name one: FlashInfer-Bench's default is
/// tvm-ffi.
const BINDING_MARKS: [(&str, &str); 6] = [
    ("tvm/ffi/", "tvm-ffi"),
    ("TVM_FFI_DLL_EXPORT", "tvm-ffi"),
    ("torch/extension.h", "torch"),
    ("PYBIND11_MODULE", "torch"),
    ("TORCH_LIBRARY", "torch"),
    ("torch::Tensor", "torch"),
];

/// Brings a Solution JSON value onto ksearch's reading of it (see the module's doc), or says
/// why ksearch cannot run it. `file` names it in errors.
pub(crate) fn normalize(file: &str, mut value: Value) -> Result<Value, SpecError> {
    let refuse = |field: &str, message: String| SpecError::one(file, field, message);
    let sources_text: String = value
        .get("sources")
        .and_then(Value::as_array)
        .map(|files| {
            files
                .iter()
                .filter_map(|f| f.get("content").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    let Some(spec) = value.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(value); // reported by the parse: `spec` is required
    };
    let language = spec
        .get("language")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if language == "tilelang" {
        return Err(refuse(
            "spec.language",
            format!("'tilelang' is not built by ksearch yet; {SUPPORTED}"),
        ));
    }
    // Any other unknown language is reported when the value is parsed into a Solution.
    let known = language.parse::<Language>().ok();
    let binding = match spec.remove("binding") {
        None | Some(Value::Null) => None,
        Some(Value::String(b)) if b == "tvm-ffi" || b == "torch" => Some(b),
        Some(other) => {
            return Err(refuse(
                "spec.binding",
                format!("{other} is not a binding FlashInfer-Bench knows (tvm-ffi, torch); {SUPPORTED}"),
            ))
        }
    };
    let marked = BINDING_MARKS
        .iter()
        .find(|(m, _)| sources_text.contains(m))
        .map(|(_, b)| b.to_string());
    let bound = |spec: &mut serde_json::Map<String, Value>, language: &str, binding: String| {
        spec.insert("language".into(), Value::String(language.into()));
        spec.insert("binding".into(), Value::String(binding));
    };
    match known {
        // FlashInfer-Bench ignores the binding of Python and Triton solutions; so does ksearch.
        Some(Language::Python | Language::Triton | Language::Mlx) | None => {}
        Some(Language::Cpp | Language::CudaBinding) => {
            let binding = binding.or(marked).unwrap_or_else(|| "tvm-ffi".into());
            bound(spec, &language, binding);
        }
        Some(Language::Cuda) => {
            // Without a binding it is ksearch's own cuda: an extern "C" entry.
            if let Some(binding) = binding.or(marked) {
                bound(spec, Language::CudaBinding.as_str(), binding);
            }
        }
        Some(Language::C) => {
            if let Some(b) = binding {
                return Err(refuse(
                    "spec.binding",
                    format!(
                        "'{b}': ksearch's c has no binding (its entry is an extern C11 function); \
                         give C++ with a binding as cpp. {SUPPORTED}"
                    ),
                ));
            }
        }
    }
    if spec.get("dependencies").is_some_and(Value::is_null) {
        spec.insert("dependencies".into(), Value::Array(Vec::new()));
    }
    match spec.remove("build_commands") {
        None | Some(Value::Null) => {}
        Some(Value::Array(cmds)) if cmds.is_empty() => {}
        Some(_) => {
            return Err(refuse(
                "spec.build_commands",
                "older FlashInfer-Bench's shell build commands are not run by ksearch (nor by \
                 FlashInfer-Bench since it dropped the field); ksearch builds the sources itself"
                    .into(),
            ))
        }
    }
    Ok(value)
}

/// A solution as FlashInfer-Bench's current Solution JSON (its pydantic `Solution`): `author`
/// and a non-empty `target_hardware` are required there; ksearch's `c` becomes `cpp` (C11
/// compiles as C++, but FlashInfer-Bench builds `cpp` through a binding, so the kernel needs a
/// binding wrapper before FlashInfer-Bench can run it: the returned note says so); `mlx` has no
/// counterpart and is refused. Returns the JSON and the notes a user should read.
pub fn to_flashinfer_bench(
    sol: &crate::Solution,
    author: &str,
    target_hardware: &[String],
) -> Result<(Value, Vec<String>), SpecError> {
    let file = format!("solution '{}'", sol.name);
    let mut notes = Vec::new();
    let language = match sol.spec.language {
        Language::Python | Language::Triton => sol.spec.language.as_str().to_string(),
        Language::Cuda => {
            notes.push(
                "the cuda entry is an extern \"C\" function taking raw pointers and the var axes \
                 (ksearch's convention, docs/protocol.md); FlashInfer-Bench builds cuda through a \
                 tvm-ffi or torch binding, so it needs a binding wrapper before FlashInfer-Bench \
                 can run it"
                    .to_string(),
            );
            "cuda".to_string()
        }
        Language::C => {
            notes.push(
                "ksearch's c kernel is exported as cpp (FlashInfer-Bench has no c): its entry is an \
                 extern C11 function taking raw pointers and the var axes, so it needs a tvm-ffi \
                 or torch binding wrapper before FlashInfer-Bench can run it"
                    .to_string(),
            );
            "cpp".to_string()
        }
        Language::Cpp => "cpp".to_string(),
        Language::CudaBinding => "cuda".to_string(),
        Language::Mlx => {
            return Err(SpecError::one(
                file,
                "spec.language",
                format!(
                    "'{}' has no FlashInfer-Bench counterpart (its languages: python, triton, \
                     cuda, cpp, tilelang)",
                    sol.spec.language
                ),
            ))
        }
    };
    if author.trim().is_empty() || target_hardware.is_empty() || target_hardware.iter().any(|h| h.is_empty()) {
        return Err(SpecError::one(
            file,
            "",
            "FlashInfer-Bench requires an author and at least one target hardware name",
        ));
    }
    if let Some(empty) = sol.sources.iter().find(|s| s.content.is_empty()) {
        return Err(SpecError::one(
            file,
            "sources",
            format!("'{}' is empty, which FlashInfer-Bench refuses", empty.path),
        ));
    }
    let mut spec = serde_json::Map::new();
    spec.insert("language".into(), Value::String(language));
    spec.insert("target_hardware".into(), serde_json::json!(target_hardware));
    spec.insert("entry_point".into(), Value::String(sol.spec.entry_point.clone()));
    spec.insert("dependencies".into(), serde_json::json!(sol.spec.dependencies));
    spec.insert(
        "destination_passing_style".into(),
        Value::Bool(sol.spec.destination_passing_style),
    );
    if let Some(b) = sol.spec.binding {
        spec.insert("binding".into(), Value::String(b.as_str().into()));
    }
    let mut out = serde_json::Map::new();
    out.insert("name".into(), Value::String(sol.name.clone()));
    out.insert("definition".into(), Value::String(sol.definition.clone()));
    out.insert("author".into(), Value::String(author.to_string()));
    out.insert("spec".into(), Value::Object(spec));
    out.insert("sources".into(), serde_json::json!(sol.sources));
    let mut description = sol.description.clone().unwrap_or_default();
    for n in &notes {
        if !description.is_empty() {
            description.push_str(". ");
        }
        description.push_str("Note: ");
        description.push_str(n);
    }
    if !description.is_empty() {
        out.insert("description".into(), Value::String(description));
    }
    Ok((Value::Object(out), notes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sol(spec: Value, content: &str) -> Value {
        json!({"name": "s", "definition": "d", "author": "a", "spec": spec,
               "sources": [{"path": "k.cu", "content": content}]})
    }

    #[test]
    fn current_and_old_fields_are_read_and_bindings_built() {
        let py = normalize(
            "f",
            sol(
                json!({"language": "python", "entry_point": "k.py::run", "binding": "torch"}),
                "",
            ),
        )
        .unwrap();
        assert!(py["spec"].get("binding").is_none());
        let old = normalize(
            "f",
            sol(
                json!({"language": "triton", "entry_point": "k.py::run", "dependencies": null, "build_commands": []}),
                "",
            ),
        )
        .unwrap();
        assert_eq!(old["spec"]["dependencies"], json!([]));
        assert!(old["spec"].get("build_commands").is_none());
        let read = |spec: Value, src: &str| normalize("f", sol(spec, src)).map_err(|e| e.to_string());
        // Bound cuda (given, or marked in the sources) is cuda_binding; cpp defaults to tvm-ffi.
        let lb = |v: Value| (v["spec"]["language"].clone(), v["spec"]["binding"].clone());
        let v = read(
            json!({"language": "cuda", "entry_point": "k.cu::k", "binding": "tvm-ffi"}),
            "",
        )
        .unwrap();
        assert_eq!(lb(v), (json!("cuda_binding"), json!("tvm-ffi")));
        let v = read(
            json!({"language": "cuda", "entry_point": "k.cu::k"}),
            "#include <torch/extension.h>",
        )
        .unwrap();
        assert_eq!(lb(v), (json!("cuda_binding"), json!("torch")));
        let v = read(
            json!({"language": "cuda", "entry_point": "k.cu::k"}),
            "extern \"C\" void k() {}",
        )
        .unwrap();
        assert_eq!(lb(v), (json!("cuda"), Value::Null));
        let v = read(json!({"language": "cpp", "entry_point": "k.cc::k"}), "").unwrap();
        assert_eq!(lb(v), (json!("cpp"), json!("tvm-ffi")));
        let v = read(
            json!({"language": "cpp", "entry_point": "k.cc::k", "binding": "torch"}),
            "",
        )
        .unwrap();
        assert_eq!(lb(v), (json!("cpp"), json!("torch")));
        let e = read(
            json!({"language": "c", "entry_point": "k.c::k", "binding": "torch"}),
            "",
        )
        .unwrap_err();
        assert!(e.contains("spec.binding: 'torch': ksearch's c has no binding"), "{e}");
        let e = read(
            json!({"language": "cpp", "entry_point": "k.cc::k", "binding": "pybind"}),
            "",
        )
        .unwrap_err();
        assert!(e.contains("is not a binding FlashInfer-Bench knows"), "{e}");
        let e = read(json!({"language": "tilelang", "entry_point": "k.py::k"}), "").unwrap_err();
        assert!(e.contains("'tilelang' is not built by ksearch yet"), "{e}");
        let e = read(
            json!({"language": "triton", "entry_point": "k.py::k", "build_commands": ["make"]}),
            "",
        )
        .unwrap_err();
        assert!(e.contains("spec.build_commands"), "{e}");
    }

    #[test]
    fn an_export_has_what_flashinfer_bench_requires_and_reads_back() {
        let sol = crate::Solution {
            name: "n".into(),
            definition: "d".into(),
            author: None,
            spec: crate::BuildSpec {
                language: Language::C,
                target_hardware: vec![],
                entry_point: "k.c::softmax".into(),
                dependencies: vec![],
                destination_passing_style: true,
                binding: None,
            },
            sources: vec![crate::SourceFile {
                path: "k.c".into(),
                content: "void softmax(void) {}".into(),
            }],
            description: Some("best of run r".into()),
        };
        let (j, notes) = to_flashinfer_bench(&sol, "ksearch (tuner)", &["cpu".into()]).unwrap();
        assert_eq!(j["spec"]["language"], "cpp");
        assert_eq!(j["spec"]["target_hardware"], json!(["cpu"]));
        assert_eq!(j["author"], "ksearch (tuner)");
        assert_eq!(notes.len(), 1);
        assert!(j["description"]
            .as_str()
            .unwrap()
            .starts_with("best of run r. Note: ksearch's c kernel"));
        // ksearch reads what it exports as FlashInfer-Bench would: cpp through tvm-ffi (which
        // this extern C kernel does not export; the note says so).
        let back = normalize("f", j).unwrap();
        assert_eq!(back["spec"]["language"], "cpp");
        assert_eq!(back["spec"]["binding"], "tvm-ffi");
        let mlx = crate::Solution {
            spec: crate::BuildSpec {
                language: Language::Mlx,
                ..sol.spec.clone()
            },
            ..sol.clone()
        };
        assert!(to_flashinfer_bench(&mlx, "a", &["cpu".into()]).is_err());
        assert!(to_flashinfer_bench(&sol, "a", &[]).is_err());
    }
}
