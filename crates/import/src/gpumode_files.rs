//! The GPU MODE folder's files: reference.py and its helper modules (task.py, utils.py), found
//! through task.yml's `files`; their stubs when absent; how the reference registers them and
//! where the task folder keeps them for candidates.

use crate::emit;
use crate::error::ImportError;
use crate::gpumode::FileEntry;
use std::path::{Path, PathBuf};

/// A helper module of the folder (task.py, utils.py): its file, or `None` for ksearch's stub.
pub(crate) struct Helper {
    pub(crate) name: String,
    pub(crate) path: Option<PathBuf>,
}

/// reference.py and the helper modules, from task.yml's `files` (or the usual names).
pub(crate) fn resolve_files(
    folder: &Path,
    files: &[FileEntry],
    bad: &dyn Fn(&str, String) -> ImportError,
) -> Result<(PathBuf, Vec<Helper>), ImportError> {
    let mut reference = folder.join("reference.py");
    let mut helpers: Vec<Helper> = Vec::new();
    if files.is_empty() {
        for (name, candidates) in [("task", vec!["task.py"]), ("utils", vec!["utils.py", "../utils.py"])] {
            let path = candidates.iter().map(|c| folder.join(c)).find(|p| p.is_file());
            helpers.push(Helper {
                name: name.into(),
                path,
            });
        }
    }
    for (i, f) in files.iter().enumerate() {
        if f.source == "@SUBMISSION@" || matches!(f.name.as_str(), "submission.py" | "eval.py") {
            continue;
        }
        let path = folder.join(&f.source);
        if f.name == "reference.py" {
            reference = path;
            continue;
        }
        let Some(stem) = f.name.strip_suffix(".py") else {
            continue;
        };
        if path.is_file() {
            helpers.push(Helper {
                name: stem.into(),
                path: Some(path),
            });
        } else if matches!(stem, "task" | "utils") {
            helpers.push(Helper {
                name: stem.into(),
                path: None,
            });
        } else {
            return Err(bad(
                &format!("files[{i}].source"),
                format!("'{}' ({}) does not exist", f.source, path.display()),
            ));
        }
    }
    if !reference.is_file() {
        return Err(bad(
            "files",
            format!("the reference {} does not exist", reference.display()),
        ));
    }
    Ok((reference, helpers))
}

/// Stand-ins for task.py and utils.py when the folder lacks them.
pub(crate) fn stub(name: &str) -> &'static str {
    match name {
        "task" => "# ksearch's stub for GPU MODE's task.py: type names only.\nimport typing\n\ninput_t = typing.Any\noutput_t = typing.Any\n\n\ndef __getattr__(name):\n    if name.startswith(\"__\") and name.endswith(\"__\"):\n        raise AttributeError(name)\n    return typing.Any\n",
        _ => "# ksearch's stub for GPU MODE's utils.py: what reference files call when they load.\n\n\ndef make_match_reference(reference, **kwargs):\n    return lambda data, output: (True, \"\")\n\n\ndef set_seed(seed=42):\n    pass\n",
    }
}

/// The seed's entry point: ref_kernel itself, or for a nested generate_input a function that
/// rebuilds its value from the flat tuple of inputs the harness passes, or (`--entry`) the
/// reference function called on the inputs.
pub(crate) fn seed_entry(rebuild: Option<&str>, inputs: &[String], entry: Option<&str>) -> String {
    if let Some(function) = entry {
        return format!("def custom_kernel(data):\n    return {function}(*data)\n");
    }
    match rebuild {
        None => "custom_kernel = ref_kernel\n".into(),
        Some(expr) => format!(
            "def custom_kernel(data):\n    # ksearch passes the inputs flattened; ref_kernel gets generate_input's structure.\n    \
             ({},) = data\n    return ref_kernel({expr})\n",
            inputs.join(", ")
        ),
    }
}

/// The task folder's folder of GPU MODE helper modules (`[kernel].python_path`).
pub(crate) const MODULES: &str = "modules";

/// Python that registers the folder's helper modules under their names (the reference's
/// prelude: a definition's reference is self-contained, and is not a candidate).
pub(crate) fn prelude(helpers: &[(String, String)]) -> String {
    // `torch` at the top level: the harness hands a reference torch tensors when its module
    // holds torch (harness/ksearch_harness/reference.py), and GPU MODE's reference.py lives in a
    // module of its own, out of that sight; without it ref_kernel got NumPy arrays (on the H200:
    // "tensor(): argument 'dtype' must be torch.dtype, not numpy...").
    let mut p = String::from(
        "import sys as _ksearch_sys\nimport types as _ksearch_types\n\nimport torch as _ksearch_torch  # noqa: F401\n\n\n\
         def _ksearch_module(name, source):\n    \
         # The GPU MODE folder's helper module `name`, registered so that `from task import ...` works.\n    \
         module = _ksearch_sys.modules.get(name)\n    \
         if module is None or getattr(module, \"__ksearch_gpumode__\", None) != source:\n        \
         module = _ksearch_types.ModuleType(name)\n        module.__file__ = name + \".py\"\n        \
         module.__ksearch_gpumode__ = source\n        _ksearch_sys.modules[name] = module\n        \
         exec(compile(source, name + \".py\", \"exec\"), module.__dict__)\n    return module\n\n\n",
    );
    for (name, source) in helpers {
        p.push_str(&format!(
            "_ksearch_module({}, {})\n",
            emit::py_str(name),
            emit::py_str(source)
        ));
    }
    p
}
