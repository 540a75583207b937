//! Translation layers and assertion families: the built-in ones load and are selected for the
//! right tasks, the three context levels cite what they should, and broken files are reported
//! as `file: field: problem`.

use ksearch_kb::{
    Context, ContextLevel, Kb, KbError, TargetKind, TaskQuery, MAX_LAYER_CHARS, MAX_SLICE_CHARS, MAX_TASK_CONTEXT_CHARS,
};
use std::path::{Path, PathBuf};

fn kb() -> Kb {
    match Kb::builtin() {
        Ok(kb) => kb,
        Err(e) => panic!("the built-in knowledge base is invalid:\n{e}"),
    }
}

fn query(device: &str, language: &str, op_type: Option<&str>) -> TaskQuery {
    TaskQuery {
        device: device.into(),
        language: language.into(),
        op_type: op_type.map(str::to_string),
        expertise_languages: Vec::new(),
    }
}

#[test]
fn builtin_layers_and_families() {
    let kb = kb();
    let ids: Vec<&str> = kb.translations().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["cuda-to-metal", "cuda-to-mlx-cuda"]);
    let families: Vec<&str> = kb.families().map(|f| f.family.as_str()).collect();
    assert_eq!(families, ["attention", "norm", "scan", "softmax"]);

    let metal = kb.translation("cuda-to-metal").unwrap();
    assert_eq!((metal.source.as_str(), metal.target.as_str()), ("cuda", "metal"));
    assert_eq!(metal.dialect, TargetKind::Metal);
    // The mappings the translation layer needs, each with the constraint that changes the design.
    for (from, to) in [
        ("__shared__", "threadgroup"),
        ("__syncthreads()", "threadgroup_barrier(mem_flags::mem_threadgroup)"),
        ("__shfl_xor_sync", "simd_shuffle_xor"),
        ("warp reductions", "simd_sum"),
        ("tensor-core MMA", "simdgroup_matrix"),
    ] {
        let row = metal
            .mappings
            .iter()
            .find(|m| m.from.contains(from) && m.to.contains(to))
            .unwrap_or_else(|| panic!("no mapping {from} -> {to}"));
        assert!(!row.constraint.trim().is_empty());
    }
    assert!(metal.mappings.iter().any(|m| m.constraint.contains("32 KB")));
    // The patterns the translation layer names are cited on Metal.
    for id in [
        "simd-reductions",
        "exp2-trick",
        "online-softmax",
        "k-transposition",
        "double-buffering",
        "loop-unrolling",
        "fp32-accumulation",
    ] {
        assert!(metal.patterns.iter().any(|p| p.id == id), "cuda-to-metal lacks {id}");
    }
    // Every layer applies to some device, and names only patterns that exist for its dialect.
    for layer in kb.translations() {
        assert!(!kb.devices_for(layer).is_empty(), "{}", layer.id);
        for p in &layer.patterns {
            assert!(kb.pattern(&p.id).unwrap().applies_to(layer.dialect));
        }
        assert_eq!(
            kb.source_file(&layer.id),
            Some(format!("kb/translation/{}.toml", layer.id).as_str())
        );
    }
    let mlx_cuda = kb.translation("cuda-to-mlx-cuda").unwrap();
    assert_eq!(mlx_cuda.dialect, TargetKind::Cuda);
    assert!(mlx_cuda.properties.iter().any(|p| p.contains("bounds-checks")));
    assert_eq!(kb.translations_into("metal").len(), 1);
    assert_eq!(kb.translations_into("mlx-cuda").len(), 1);
    assert!(kb.translations_into("hip").is_empty());
    // Task families are found by the definitions' op_type.
    for (op, family) in [
        ("attention", "attention"),
        ("gqa_paged", "attention"),
        ("selective_scan", "scan"),
        ("softmax", "softmax"),
        ("rmsnorm", "norm"),
    ] {
        assert_eq!(kb.family_for(op).unwrap().family, family, "{op}");
    }
    assert!(kb.family_for("gemm").is_none());
}

#[test]
fn selection_follows_device_language_and_expertise() {
    let kb = kb();
    // An MLX task on an Apple GPU is translated to Metal; on an NVIDIA GPU to MLX's CUDA backend.
    let s = kb.select(&query("m4-max", "mlx", Some("attention"))).unwrap();
    assert_eq!(s.dialect, TargetKind::Metal);
    assert_eq!(
        s.layers.iter().map(|l| l.id.as_str()).collect::<Vec<_>>(),
        ["cuda-to-metal"]
    );
    assert_eq!(s.family.unwrap().family, "attention");
    let s = kb.select(&query("h200", "mlx", Some("selective_scan"))).unwrap();
    assert_eq!(s.dialect, TargetKind::Cuda);
    assert_eq!(
        s.layers.iter().map(|l| l.id.as_str()).collect::<Vec<_>>(),
        ["cuda-to-mlx-cuda"]
    );
    // A plain CUDA, Triton or C task needs no translation.
    for (device, language) in [("h200", "cuda"), ("h100", "triton"), ("cpu", "c")] {
        let s = kb.select(&query(device, language, Some("softmax"))).unwrap();
        assert!(s.layers.is_empty(), "{device} {language}");
        assert_eq!(s.family.unwrap().family, "softmax");
    }
    assert_eq!(
        kb.select(&query("h200", "triton", None)).unwrap().dialect,
        TargetKind::Triton
    );
    // Expertise in another language selects no CUDA layer.
    let mut q = query("m1-max", "mlx", None);
    q.expertise_languages = vec!["triton".into()];
    assert!(kb.select(&q).unwrap().layers.is_empty());
    q.expertise_languages = vec!["triton".into(), "cuda".into()];
    assert_eq!(kb.select(&q).unwrap().layers.len(), 1);
    // A dialect the device does not run, and an unknown device, are errors.
    let err = kb.select(&query("m4-max", "cuda", None)).unwrap_err();
    assert!(matches!(err, KbError::Unsupported(_)), "{err}");
    assert!(
        err.to_string()
            .contains("apple-m4-max does not run cuda kernels (it runs: metal)"),
        "{err}"
    );
    assert!(matches!(
        kb.select(&query("tpu", "mlx", None)).unwrap_err(),
        KbError::UnknownHardware { .. }
    ));
}

#[test]
fn the_three_context_levels() {
    let kb = kb();
    let q = query("m4-max", "mlx", Some("attention"));
    let none = kb.task_context(&q, ContextLevel::None).unwrap();
    let hardware = kb.task_context(&q, ContextLevel::Hardware).unwrap();
    let full = kb.task_context(&q, ContextLevel::Full).unwrap();
    assert!(none.is_empty());
    // hardware: the figures only.
    assert_eq!(hardware, kb.hardware("m4-max").unwrap().to_markdown());
    assert!(hardware.contains("546 GB/s") && hardware.contains("threadgroup memory 32 KB"));
    for absent in [
        "Primitive mapping",
        "Optimisation patterns",
        "Properties every candidate",
    ] {
        assert!(!hardware.contains(absent), "hardware level contains {absent:?}");
    }
    // full: figures, patterns, the mapping table, the patterns to carry over, the properties.
    assert!(full.starts_with(&kb.prompt_slice("m4-max", Context::Full).unwrap()));
    for needle in [
        "546 GB/s",
        "Optimisation patterns for metal",
        "Translation layer: CUDA to Metal",
        "Primitive mapping (cuda -> metal",
        "__syncthreads() -> threadgroup_barrier(mem_flags::mem_threadgroup) -- ",
        "__shfl_xor_sync / __shfl_down_sync / __shfl_sync -> simd_shuffle_xor",
        "Patterns that carry over to metal:",
        "- K transposed in on-chip memory: ",
        "## Properties every candidate must keep: Attention",
        "sum to 1",
        "MLX allocates outputs uninitialised",
        "Tile sizes come from the 32 KB budget",
    ] {
        assert!(full.contains(needle), "missing {needle:?} in\n{full}");
    }
    // Properties of other families stay out.
    assert!(!full.contains("decay product and input term"));
    assert!(!full.contains("mlx-cuda"));
    // The parse the CLI flag uses.
    assert_eq!("none".parse::<ContextLevel>().unwrap(), ContextLevel::None);
    assert_eq!(" Full ".parse::<ContextLevel>().unwrap(), ContextLevel::Full);
    let err = "partial".parse::<ContextLevel>().unwrap_err();
    assert_eq!(err, "unknown context level 'partial'; expected none, hardware or full");
}

#[test]
fn every_task_context_fits_the_budget() {
    let kb = kb();
    let title_of = |id: &str| kb.pattern(id).map(|p| p.title.clone());
    for layer in kb.translations() {
        let text = layer.to_prompt(&title_of);
        let n = text.chars().count();
        assert!(n < MAX_LAYER_CHARS, "{}: {n} characters\n{text}", layer.id);
        assert!(text.is_ascii(), "{}: keep prompts ASCII", layer.id);
        let details = layer.details_markdown(&title_of);
        assert!(details.starts_with(&text) && details.contains("References:"));
    }
    let families: Vec<Option<String>> = std::iter::once(None)
        .chain(kb.families().map(|f| Some(f.op_types[0].clone())))
        .collect();
    for hw in kb.hardware_specs() {
        for language in ["c", "cuda", "triton", "python", "mlx"] {
            for op in &families {
                let q = query(&hw.name, language, op.as_deref());
                let Ok(s) = kb.select(&q) else {
                    // Only dialects the device cannot run are refused.
                    assert!(language == "c" || language == "cuda" || language == "triton");
                    continue;
                };
                let full = kb.selection_text(&s, ContextLevel::Full);
                let n = full.chars().count();
                assert!(
                    n < MAX_TASK_CONTEXT_CHARS,
                    "{} {language} {op:?}: {n} characters",
                    hw.name
                );
                assert!(full.is_ascii());
                if s.layers.is_empty() {
                    assert!(!full.contains("Primitive mapping"));
                }
                let hardware = kb.selection_text(&s, ContextLevel::Hardware);
                assert!(hardware.chars().count() < MAX_SLICE_CHARS);
                // Deterministic.
                assert_eq!(kb.task_context(&q, ContextLevel::Full).unwrap(), full);
            }
        }
    }
}

// --- broken files -------------------------------------------------------------------------

/// A copy of the built-in `kb/` in a temporary folder, so one file can be broken at a time.
fn copy_builtin() -> tempfile::TempDir {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kb");
    let dir = tempfile::tempdir().unwrap();
    for sub in ["hardware", "patterns", "translation", "assertions"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        for entry in std::fs::read_dir(root.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, dir.path().join(sub).join(path.file_name().unwrap())).unwrap();
        }
    }
    dir
}

fn layer_path(dir: &Path) -> PathBuf {
    dir.join("translation/cuda-to-metal.toml")
}

/// Loads a copy of the built-in knowledge base with `cuda-to-metal.toml` edited by `edit`.
fn broken_layer(edit: impl Fn(String) -> String) -> (tempfile::TempDir, KbError) {
    let dir = copy_builtin();
    let path = layer_path(dir.path());
    let text = edit(std::fs::read_to_string(&path).unwrap());
    std::fs::write(&path, text).unwrap();
    let err = Kb::from_dir(dir.path()).expect_err("should be rejected");
    (dir, err)
}

fn replace_once(text: String, old: &str, new: &str) -> String {
    assert!(text.contains(old), "test setup: {old:?} not in the file");
    text.replacen(old, new, 1)
}

/// Asserts that some problem names the layer file, `field`, and a message containing `message`.
fn assert_problem(dir: &Path, err: &KbError, field: &str, message: &str) {
    let file = layer_path(dir).display().to_string();
    assert!(
        err.problems()
            .iter()
            .any(|p| p.file == file && p.field == field && p.message.contains(message)),
        "expected {file}: {field}: ...{message}..., got:\n{err}"
    );
}

#[test]
fn the_copy_loads() {
    let dir = copy_builtin();
    let copy = Kb::from_dir(dir.path()).unwrap();
    assert_eq!(
        copy.translations().collect::<Vec<_>>(),
        kb().translations().collect::<Vec<_>>()
    );
}

#[test]
fn unknown_keys_are_errors() {
    let (dir, err) = broken_layer(|t| replace_once(t, "dialect = \"metal\"", "dialect = \"metal\"\nflavour = \"x\""));
    assert_problem(dir.path(), &err, "flavour", "unknown field `flavour`");
    let (dir, err) = broken_layer(|t| {
        replace_once(
            t,
            "constraint = \"Must be reached",
            "hint = \"x\"\nconstraint = \"Must be reached",
        )
    });
    assert_problem(dir.path(), &err, "mappings[2].hint", "unknown field `hint`");
    let (dir, err) = broken_layer(|t| replace_once(t, "dialect = \"metal\"", "dialect = \"opencl\""));
    assert_problem(dir.path(), &err, "dialect", "unknown variant `opencl`");
}

#[test]
fn a_mapping_needs_a_constraint() {
    // Missing: the parser names the row.
    let (dir, err) = broken_layer(|t| {
        replace_once(
            t,
            "constraint = \"Must be reached by every thread of the threadgroup; use mem_flags::mem_device as well when threads exchange data through device memory.\"\n",
            "",
        )
    });
    assert_problem(dir.path(), &err, "mappings[2]", "missing field `constraint`");
    // Empty: validation names the field.
    let (dir, err) = broken_layer(|t| {
        replace_once(
            t,
            "constraint = \"The size is fixed when the kernel is compiled: pass tile sizes as MLX template arguments.\"",
            "constraint = \"  \"",
        )
    });
    assert_problem(dir.path(), &err, "mappings[1].constraint", "must not be empty");
}

#[test]
fn references_between_files_are_checked() {
    let (dir, err) = broken_layer(|t| replace_once(t, "id = \"simd-reductions\"", "id = \"warp-magic\""));
    assert_problem(
        dir.path(),
        &err,
        "patterns[0].id",
        "'warp-magic' is not a pattern of the knowledge base",
    );
    // A pattern that exists but not for the layer's dialect.
    let (dir, err) = broken_layer(|t| replace_once(t, "id = \"simd-reductions\"", "id = \"openmp-threads\""));
    assert_problem(
        dir.path(),
        &err,
        "patterns[0].id",
        "pattern 'openmp-threads' does not list 'metal' among its targets",
    );
    let (dir, err) = broken_layer(|t| replace_once(t, "family = \"scan\"", "family = \"sorting\""));
    assert_problem(
        dir.path(),
        &err,
        "assertions[1].family",
        "'sorting' is not a family of the knowledge base",
    );
}

#[test]
fn duplicates_are_errors() {
    let (dir, err) = broken_layer(|t| {
        replace_once(
            t,
            "from = \"extern __shared__ (size chosen at launch)\"",
            "from = \"__SyncThreads()\"",
        )
    });
    // Case and spacing do not make a new row; the later row is the one reported.
    assert!(
        err.to_string()
            .contains("mappings[2].from: '__syncthreads()' repeats mappings[1]"),
        "{err}"
    );
    assert_problem(dir.path(), &err, "mappings[2].from", "repeats mappings[1]");
    let (dir, err) = broken_layer(|t| replace_once(t, "id = \"exp2-trick\"", "id = \"simd-reductions\""));
    assert_problem(
        dir.path(),
        &err,
        "patterns[1].id",
        "'simd-reductions' repeats patterns[0]",
    );
    let (dir, err) = broken_layer(|t| replace_once(t, "family = \"norm\"", "family = \"softmax\""));
    assert_problem(
        dir.path(),
        &err,
        "assertions[3].family",
        "'softmax' repeats assertions[2]",
    );

    // Two layers from the same source for the same tasks and dialect.
    let dir = copy_builtin();
    let text = std::fs::read_to_string(layer_path(dir.path()))
        .unwrap()
        .replace("id = \"cuda-to-metal\"", "id = \"cuda-to-metal-2\"")
        .replace("target = \"metal\"", "target = \"metal-2\"");
    std::fs::write(dir.path().join("translation/cuda-to-metal-2.toml"), text).unwrap();
    let err = Kb::from_dir(dir.path()).unwrap_err();
    let p = &err.problems()[0];
    assert!(
        p.file.ends_with("cuda-to-metal-2.toml") && p.field == "languages",
        "{err}"
    );
    assert!(
        p.message
            .contains("'mlx' tasks on metal devices are already translated from cuda by cuda-to-metal"),
        "{err}"
    );

    // An op_type claimed by two families.
    let dir = copy_builtin();
    let path = dir.path().join("assertions/norm.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("op_types = [\"rmsnorm\"", "op_types = [\"softmax\", \"rmsnorm\"");
    std::fs::write(&path, text).unwrap();
    let err = Kb::from_dir(dir.path()).unwrap_err();
    // Families are checked in order (attention, norm, scan, softmax): the later one is reported.
    let p = &err.problems()[0];
    assert!(
        p.file.ends_with("assertions/softmax.toml") && p.field == "op_types[0]",
        "{err}"
    );
    assert!(
        p.message.starts_with("'softmax' already belongs to family 'norm' (") && p.message.ends_with("norm.toml)"),
        "{err}"
    );
}

#[test]
fn names_and_values_are_validated() {
    let (dir, err) = broken_layer(|t| replace_once(t, "id = \"cuda-to-metal\"", "id = \"cuda-metal\""));
    assert_problem(
        dir.path(),
        &err,
        "id",
        "must be '<source>-to-<target>', here 'cuda-to-metal'",
    );
    let (dir, err) = broken_layer(|t| replace_once(t, "languages = [\"mlx\"]", "languages = [\"swift\"]"));
    assert_problem(dir.path(), &err, "languages[0]", "unknown language 'swift'");
    let (dir, err) = broken_layer(|t| replace_once(t, "languages = [\"mlx\"]", "languages = []"));
    assert_problem(dir.path(), &err, "languages", "at least one");
    let (dir, err) = broken_layer(|t| replace_once(t, "schema = 1", "schema = 3"));
    assert_problem(dir.path(), &err, "schema", "unsupported version 3");
    let long = "x".repeat(400);
    let (dir, err) = broken_layer(|t| {
        replace_once(
            t,
            "note = \"Make trip counts",
            &format!("note = \"{long} Make trip counts"),
        )
    });
    assert_problem(dir.path(), &err, "patterns[5].note", "characters; at most 200");
    // A file named after another pair.
    let dir = copy_builtin();
    std::fs::rename(
        layer_path(dir.path()),
        dir.path().join("translation/cuda-to-apple.toml"),
    )
    .unwrap();
    let err = Kb::from_dir(dir.path()).unwrap_err();
    assert!(
        err.to_string()
            .contains("must equal the file name ('cuda-to-apple.toml')"),
        "{err}"
    );
    // A family file: properties required, the family named after its file.
    let dir = copy_builtin();
    let path = dir.path().join("assertions/scan.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text.find("properties = [").unwrap();
    std::fs::write(&path, format!("{}properties = []\n", &text[..start])).unwrap();
    let err = Kb::from_dir(dir.path()).unwrap_err();
    let p = &err.problems()[0];
    assert!(
        p.file.ends_with("assertions/scan.toml") && p.field == "properties",
        "{err}"
    );
}

#[test]
fn overrides_replace_layers() {
    let dir = copy_builtin();
    let path = layer_path(dir.path());
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("title = \"CUDA to Metal", "title = \"Our CUDA to Metal");
    std::fs::write(&path, text).unwrap();
    let kb = kb().with_overrides(Kb::from_dir(dir.path()).unwrap()).unwrap();
    assert!(kb.translation("cuda-to-metal").unwrap().title.starts_with("Our CUDA"));
    assert_eq!(kb.translations().count(), 2);
}
