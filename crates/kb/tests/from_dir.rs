//! The directory loader (tests and user overrides): malformed files are reported as
//! `file: field: problem`, and overrides replace built-in entries.

use ksearch_kb::{Context, ContextLevel, Kb, KbError, TargetKind, TaskQuery};
use std::path::Path;

const DEVICE: &str = r#"
schema = 1
name = "my-gpu"
display_name = "My GPU"
vendor = "acme"
kind = "gpu"
arch = "acme1"
aliases = ["acme-gpu"]
targets = ["cuda"]
compute_unit = "SM"

[figures.memory_bandwidth_gbs]
value = 1000
basis = "vendor-peak"
source = "Acme datasheet"

[figures.simd_width]
value = 32
basis = "vendor-spec"
source = "Acme programming guide"
"#;

const PATTERN: &str = r#"
schema = 1
id = "my-pattern"
title = "My pattern"
targets = ["cuda"]
summary = "Do the thing."
description = "Do the thing, at length."
risks = ["It may not help."]

[prior]
memory-bound = 0.5
"#;

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn problems(err: &KbError) -> Vec<String> {
    err.problems().iter().map(|p| p.to_string()).collect()
}

/// Loads `text` as `hardware/<stem>.toml` (or a pattern) in a fresh folder and returns the error.
fn load_err(rel: &str, text: &str) -> (tempfile::TempDir, KbError) {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), rel, text);
    let err = Kb::from_dir(dir.path()).expect_err("should be rejected");
    (dir, err)
}

#[test]
fn a_valid_folder_loads() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "hardware/my-gpu.toml", DEVICE);
    write(dir.path(), "patterns/my-pattern.toml", PATTERN);
    write(dir.path(), "patterns/README.md", "not data; ignored");
    write(dir.path(), "translation/README.md", "not data; ignored");
    let kb = Kb::from_dir(dir.path()).unwrap();
    assert_eq!(kb.hardware_names(), ["my-gpu"]);
    assert_eq!(kb.hardware("ACME GPU").unwrap().name, "my-gpu");
    assert_eq!(kb.patterns_for(TargetKind::Cuda, None).len(), 1);
    let full = kb.prompt_slice("my-gpu", Context::Full).unwrap();
    assert!(
        full.contains("My GPU") && full.contains("My pattern [M 0.5]: Do the thing."),
        "{full}"
    );
    assert!(full.contains("1000 GB/s (peak)"));
}

#[test]
fn malformed_toml_names_file_and_line() {
    let (dir, err) = load_err("hardware/my-gpu.toml", "schema = 1\nname = \"my-gpu\nvendor = 3\n");
    let msg = err.to_string();
    let file = dir.path().join("hardware/my-gpu.toml").display().to_string();
    assert!(msg.starts_with(&file), "{msg}");
    assert!(msg.contains("line 2"), "{msg}");
}

#[test]
fn wrong_type_names_file_and_field() {
    let text = DEVICE.replace("value = 1000", "value = \"fast\"");
    let (dir, err) = load_err("hardware/my-gpu.toml", &text);
    let file = dir.path().join("hardware/my-gpu.toml").display().to_string();
    let p = &err.problems()[0];
    assert_eq!(p.file, file);
    assert_eq!(p.field, "figures.memory_bandwidth_gbs.value", "{p}");
    assert!(err
        .to_string()
        .starts_with(&format!("{file}: figures.memory_bandwidth_gbs.value: ")));
}

#[test]
fn unknown_fields_are_rejected() {
    let text = DEVICE.replace(
        "source = \"Acme datasheet\"",
        "source = \"Acme datasheet\"\nsauce = \"x\"",
    );
    let (_dir, err) = load_err("hardware/my-gpu.toml", &text);
    let p = &err.problems()[0];
    assert_eq!(p.field, "figures.memory_bandwidth_gbs.sauce", "{p}");
    assert!(
        p.message.contains("unknown field `sauce`, expected one of `value`"),
        "{p}"
    );

    let text = DEVICE.replace("[figures.simd_width]", "[figures.warp_width]");
    let (_dir, err) = load_err("hardware/my-gpu.toml", &text);
    assert_eq!(err.problems()[0].field, "figures.warp_width", "{err}");
    assert!(err.to_string().contains("unknown field `warp_width`"), "{err}");

    let text = PATTERN.replace("memory-bound = 0.5", "memory-bound = 0.5\nio-bound = 0.2");
    let (_dir, err) = load_err("patterns/my-pattern.toml", &text);
    assert_eq!(err.problems()[0].field, "prior.io-bound", "{err}");

    let text = PATTERN.replace("targets = [\"cuda\"]", "targets = [\"opencl\"]");
    let (_dir, err) = load_err("patterns/my-pattern.toml", &text);
    assert!(err.problems()[0].field.starts_with("targets"), "{err}");
}

#[test]
fn missing_required_fields_are_named() {
    let text = DEVICE.replace("vendor = \"acme\"\n", "");
    let (_dir, err) = load_err("hardware/my-gpu.toml", &text);
    assert!(err.to_string().contains("missing field `vendor`"), "{err}");

    let text = DEVICE.replace("source = \"Acme datasheet\"\n", "");
    let (_dir, err) = load_err("hardware/my-gpu.toml", &text);
    assert_eq!(err.problems()[0].field, "figures.memory_bandwidth_gbs", "{err}");
    assert!(err.to_string().contains("missing field `source`"), "{err}");
}

#[test]
fn validation_collects_every_problem() {
    let text = DEVICE
        .replace("schema = 1", "schema = 2")
        .replace("name = \"my-gpu\"", "name = \"other\"")
        .replace("value = 1000", "value = -5")
        .replace("value = 32", "value = 24")
        .replace("targets = [\"cuda\"]", "targets = [\"cpu\"]")
        .replace("source = \"Acme programming guide\"", "source = \"\"");
    let (_dir, err) = load_err("hardware/my-gpu.toml", &text);
    let found = problems(&err);
    let fields: Vec<&str> = err.problems().iter().map(|p| p.field.as_str()).collect();
    for field in [
        "schema",
        "name",
        "targets[0]",
        "figures.memory_bandwidth_gbs.value",
        "figures.simd_width.value",
        "figures.simd_width.source",
    ] {
        assert!(fields.contains(&field), "{field} not reported in {found:#?}");
    }
    assert!(
        found.iter().any(|p| p.contains("must be a power of two, got 24")),
        "{found:#?}"
    );
    assert!(
        found
            .iter()
            .any(|p| p.contains("a gpu device cannot run 'cpu' kernels")),
        "{found:#?}"
    );
}

#[test]
fn measured_figures_need_a_date() {
    let text = DEVICE.replace("basis = \"vendor-peak\"", "basis = \"measured\"");
    let (_dir, err) = load_err("hardware/my-gpu.toml", &text);
    assert_eq!(err.problems()[0].field, "figures.memory_bandwidth_gbs.source", "{err}");
    assert!(err.to_string().contains("YYYY-MM-DD"));
    let ok = text.replace(
        "source = \"Acme datasheet\"",
        "source = \"measured in our lab on 2026-11-29\"",
    );
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "hardware/my-gpu.toml", &ok);
    Kb::from_dir(dir.path()).unwrap();
}

#[test]
fn pattern_rules() {
    let cases = [
        (
            PATTERN.replace("memory-bound = 0.5", "memory-bound = 1.5"),
            "prior.memory-bound",
        ),
        (PATTERN.replace("[prior]\nmemory-bound = 0.5", "[prior]"), "prior"),
        (PATTERN.replace("risks = [\"It may not help.\"]", "risks = []"), "risks"),
        (PATTERN.replace("id = \"my-pattern\"", "id = \"My Pattern\""), "id"),
        (PATTERN.to_string() + "\n[hints]\nmetal = \"simd_sum\"\n", "hints.metal"),
        (
            PATTERN.replace(
                "summary = \"Do the thing.\"",
                &format!("summary = \"{}\"", "x".repeat(300)),
            ),
            "summary",
        ),
        (
            PATTERN.replace("risks = [", "knobs = [\"Unroll Factor\"]\nrisks = ["),
            "knobs[0]",
        ),
    ];
    for (text, field) in cases {
        let (_dir, err) = load_err("patterns/my-pattern.toml", &text);
        let fields: Vec<&str> = err.problems().iter().map(|p| p.field.as_str()).collect();
        assert!(fields.contains(&field), "expected {field}, got {:#?}", problems(&err));
    }
}

#[test]
fn names_must_match_files_and_be_unique() {
    let (_dir, err) = load_err("hardware/renamed.toml", DEVICE);
    assert_eq!(err.problems()[0].field, "name");
    assert!(
        err.to_string().contains("must equal the file name ('renamed.toml')"),
        "{err}"
    );

    // An alias that names another device.
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "hardware/my-gpu.toml", DEVICE);
    let twin = DEVICE
        .replace("name = \"my-gpu\"", "name = \"twin\"")
        .replace("aliases = [\"acme-gpu\"]", "aliases = [\"Acme GPU\"]");
    write(dir.path(), "hardware/twin.toml", &twin);
    let err = Kb::from_dir(dir.path()).unwrap_err();
    let p = &err.problems()[0];
    assert!(p.file.ends_with("twin.toml") && p.field == "aliases[0]", "{err}");
    assert!(p.message.contains("'acme-gpu' already names my-gpu"), "{err}");
}

#[test]
fn missing_or_empty_folders() {
    let dir = tempfile::tempdir().unwrap();
    let err = Kb::from_dir(&dir.path().join("nope")).unwrap_err();
    assert!(matches!(err, KbError::Io { .. }), "{err}");
    let err = Kb::from_dir(dir.path()).unwrap_err();
    assert!(
        err.to_string()
            .contains("has none of the folders hardware/, patterns/, translation/, assertions/"),
        "{err}"
    );
    // One folder alone is enough (e.g. a user's extra patterns).
    write(dir.path(), "patterns/my-pattern.toml", PATTERN);
    let kb = Kb::from_dir(dir.path()).unwrap();
    assert!(kb.hardware_names().is_empty());
}

#[test]
fn overrides_replace_and_extend_builtin() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "hardware/my-gpu.toml", DEVICE);
    let h200 = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kb/hardware/h200.toml"))
        .unwrap()
        .replace("value = 4800", "value = 4900");
    write(dir.path(), "hardware/h200.toml", &h200);
    let kb = Kb::builtin()
        .unwrap()
        .with_overrides(Kb::from_dir(dir.path()).unwrap())
        .unwrap();
    assert!(kb.hardware_names().contains(&"my-gpu"));
    assert_eq!(
        kb.hardware_names().len(),
        Kb::builtin().unwrap().hardware_names().len() + 1
    );
    let bw = &kb.hardware("nvidia-h200").unwrap().figures.memory_bandwidth_gbs;
    assert_eq!(bw.as_ref().unwrap().value, 4900.0);
    assert!(kb
        .source_file("h200")
        .unwrap()
        .starts_with(&dir.path().display().to_string()));

    // An override whose alias collides with a built-in device is refused.
    let clash = DEVICE.replace("aliases = [\"acme-gpu\"]", "aliases = [\"h100\"]");
    let dir2 = tempfile::tempdir().unwrap();
    write(dir2.path(), "hardware/my-gpu.toml", &clash);
    let err = Kb::builtin()
        .unwrap()
        .with_overrides(Kb::from_dir(dir2.path()).unwrap())
        .unwrap_err();
    assert!(err.to_string().contains("'h100' already names h100-sxm"), "{err}");
}

/// A third translation pair, as a user would add it: one file naming built-in patterns and
/// families only.
const TRITON_TO_METAL: &str = include_str!("fixtures/triton-to-metal.toml");

#[test]
fn a_folder_laid_over_the_builtin_adds_a_translation_pair() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "translation/triton-to-metal.toml", TRITON_TO_METAL);
    // Alone it is incomplete (the pattern and family it names are built-in) ...
    let err = Kb::from_dir(dir.path()).unwrap_err();
    assert!(err.to_string().contains("'simd-reductions' is not a pattern"), "{err}");
    // ... laid over the built-in knowledge base it is a third pair.
    let kb = Kb::builtin().unwrap().with_dir(dir.path()).unwrap();
    let ids: Vec<&str> = kb.translations().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["cuda-to-metal", "cuda-to-mlx-cuda", "triton-to-metal"]);
    let file = dir
        .path()
        .join("translation/triton-to-metal.toml")
        .display()
        .to_string();
    assert_eq!(kb.source_file("triton-to-metal"), Some(file.as_str()));
    assert!(kb.files().contains(&file.as_str()) && kb.files().contains(&"kb/hardware/h200.toml"));
    assert_eq!(kb.translations_into("metal").len(), 2);
    // Selected like a built-in layer: by the expertise's language, or with every layer into the
    // target when the task names no expertise.
    let query = |expertise: &[&str]| TaskQuery {
        device: "m4-max".into(),
        language: "mlx".into(),
        op_type: Some("softmax".into()),
        expertise_languages: expertise.iter().map(|s| s.to_string()).collect(),
    };
    let text = kb.task_context(&query(&["triton"]), ContextLevel::Full).unwrap();
    assert!(text.contains("Primitive mapping (triton -> metal"), "{text}");
    assert!(text.contains("never truncated") && !text.contains("(cuda -> metal"));
    let text = kb.task_context(&query(&[]), ContextLevel::Full).unwrap();
    assert!(text.contains("(triton -> metal") && text.contains("(cuda -> metal"));
    // Not on a CUDA device.
    let mut on_h200 = query(&["triton"]);
    on_h200.device = "h200".into();
    assert!(!kb
        .task_context(&on_h200, ContextLevel::Full)
        .unwrap()
        .contains("triton -> metal"));
}

#[test]
fn a_folder_laid_over_the_builtin_replaces_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let h200 = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kb/hardware/h200.toml"))
        .unwrap()
        .replace("value = 4800", "value = 4900");
    write(dir.path(), "hardware/h200.toml", &h200);
    write(dir.path(), "hardware/my-gpu.toml", DEVICE);
    write(dir.path(), "patterns/my-pattern.toml", PATTERN);
    let builtin = Kb::builtin().unwrap();
    let kb = Kb::builtin().unwrap().with_dir(dir.path()).unwrap();
    assert_eq!(kb.hardware_names().len(), builtin.hardware_names().len() + 1);
    assert_eq!(kb.patterns().count(), builtin.patterns().count() + 1);
    let bw = &kb.hardware("h200").unwrap().figures.memory_bandwidth_gbs;
    assert_eq!(bw.as_ref().unwrap().value, 4900.0);
}

#[test]
fn a_folder_laid_over_the_builtin_is_validated() {
    // A malformed file: its path and the key.
    let dir = tempfile::tempdir().unwrap();
    let bad = TRITON_TO_METAL.replace(
        "constraint = \"MLX's grid counts threads, not programs: the grid is programs times the threadgroup size.\"",
        "constraint = \"\"",
    );
    write(dir.path(), "translation/triton-to-metal.toml", &bad);
    let err = Kb::builtin().unwrap().with_dir(dir.path()).unwrap_err();
    let file = dir
        .path()
        .join("translation/triton-to-metal.toml")
        .display()
        .to_string();
    assert!(
        err.to_string()
            .starts_with(&format!("{file}: mappings[0].constraint: ")),
        "{err}"
    );
    // A syntax error: the path and the line.
    write(
        dir.path(),
        "translation/triton-to-metal.toml",
        "schema = 1\nid = \"triton-to-metal\n",
    );
    let err = Kb::builtin().unwrap().with_dir(dir.path()).unwrap_err();
    assert!(
        err.to_string().starts_with(&file) && err.to_string().contains("line 2"),
        "{err}"
    );
    // A reference to nothing, checked against the built-in entries and the folder's together.
    write(
        dir.path(),
        "translation/triton-to-metal.toml",
        &TRITON_TO_METAL.replace("family = \"softmax\"", "family = \"sorting\""),
    );
    let err = Kb::builtin().unwrap().with_dir(dir.path()).unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("{file}: assertions[0].family: 'sorting' is not a family")),
        "{err}"
    );
    // A layer competing with a built-in one for the same tasks.
    let twin = TRITON_TO_METAL
        .replace("\"triton-to-metal\"", "\"cuda-to-metal2\"")
        .replace("source = \"triton\"", "source = \"cuda\"")
        .replace("target = \"metal\"", "target = \"metal2\"");
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "translation/cuda-to-metal2.toml", &twin);
    let err = Kb::builtin().unwrap().with_dir(dir.path()).unwrap_err();
    assert!(
        err.to_string()
            .contains("already translated from cuda by cuda-to-metal"),
        "{err}"
    );
}

#[test]
fn misplaced_files_are_errors_not_ignored() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "hardware/my-gpu.toml", DEVICE);
    write(dir.path(), "README.md", "notes; ignored");
    write(dir.path(), ".git/config.toml", "hidden; ignored");
    write(dir.path(), "drafts/notes.md", "no data; ignored");
    Kb::builtin().unwrap().with_dir(dir.path()).unwrap();
    write(dir.path(), "translations/triton-to-metal.toml", TRITON_TO_METAL);
    write(dir.path(), "my-pattern.toml", PATTERN);
    let err = Kb::builtin().unwrap().with_dir(dir.path()).unwrap_err();
    let files: Vec<&str> = err.problems().iter().map(|p| p.file.as_str()).collect();
    assert_eq!(
        files,
        [
            dir.path().join("my-pattern.toml").display().to_string(),
            dir.path().join("translations").display().to_string()
        ],
        "{err}"
    );
    assert!(
        err.to_string().contains("is not a folder of the knowledge base"),
        "{err}"
    );
    assert!(err.to_string().contains("move it into the one for its kind"), "{err}");
    // A folder with none of the four (a misnamed one is named too).
    let empty = tempfile::tempdir().unwrap();
    let err = Kb::builtin().unwrap().with_dir(empty.path()).unwrap_err();
    assert!(err.to_string().contains("has none of the folders"), "{err}");
    write(empty.path(), "translations/triton-to-metal.toml", TRITON_TO_METAL);
    let err = Kb::builtin().unwrap().with_dir(empty.path()).unwrap_err();
    assert_eq!(err.problems().len(), 2, "{err}");
    assert!(
        err.to_string()
            .contains("translations: is not a folder of the knowledge base"),
        "{err}"
    );
    let err = Kb::builtin().unwrap().with_dir(&empty.path().join("nope")).unwrap_err();
    assert!(matches!(err, KbError::Io { .. }), "{err}");
}
