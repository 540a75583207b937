//! The directory loader (tests and user overrides): malformed files are reported as
//! `file: field: problem`, and overrides replace built-in entries.

use ksearch_kb::{Context, Kb, KbError, TargetKind};
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
