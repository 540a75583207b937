//! The knob tuner's checks through the CLI: a knob file or template that cannot work on the
//! target is bad input naming the file at fault, before anything is evaluated, and a search
//! that has evaluated every assignment it can reach ends by saying so.

mod common;
use common::*;

/// A copy of the tunable fixture (its template folder too) with `edit` applied to one of its
/// template files.
fn tunable_with(file: &str, edit: impl Fn(&str) -> String) -> tempfile::TempDir {
    let task = tempfile::tempdir().unwrap();
    let from = fixture("tiny_softmax_tunable");
    for rel in [
        "definition.json",
        "workloads.jsonl",
        "task.toml",
        "template/knobs.toml",
        "template/kernel.c.j2",
    ] {
        std::fs::create_dir_all(task.path().join(rel).parent().unwrap()).unwrap();
        std::fs::copy(from.join(rel), task.path().join(rel)).unwrap();
    }
    let path = task.path().join("template").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = edit(&text);
    assert_ne!(edited, text, "the edit changes {file}");
    std::fs::write(&path, edited).unwrap();
    task
}

fn sweep(task: &tempfile::TempDir) -> Run {
    ksearch(&["sweep", task.path().to_str().unwrap(), "--grid"])
}

#[test]
fn an_unknown_tag_names_the_knob_file_the_knob_and_the_patterns() {
    let task = tunable_with("knobs.toml", |t| t.replace("\"loop-unrolling\"", "\"loop-unroling\""));
    let r = sweep(&task);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let knobs = task.path().join("template/knobs.toml");
    let want = format!(
        "error: {}: knob[0] (acc).tags: 'loop-unroling' is not a pattern of the knowledge base (patterns: ",
        knobs.display()
    );
    assert!(r.stderr.starts_with(&want), "{}", r.stderr);
    assert!(
        r.stderr.contains("loop-unrolling"),
        "lists the known patterns: {}",
        r.stderr
    );
}

#[test]
fn a_misspelt_knob_in_a_branch_the_defaults_skip_is_bad_input() {
    let task = tunable_with("knobs.toml", |t| {
        t.replace("acc <= hw.simd_width", "acc == 1 || accs > 0")
    });
    let r = sweep(&task);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let want = format!(
        "{}: constraint[0] (`acc == 1 || accs > 0`): unknown knob 'accs' (knobs: acc, recip)",
        task.path().join("template/knobs.toml").display()
    );
    assert!(r.stderr.contains(&want), "{}", r.stderr);
}

#[test]
fn a_figure_the_target_lacks_is_bad_input_naming_the_file() {
    let task = tunable_with("knobs.toml", |t| t.replace("hw.simd_width", "hw.simd_lanes"));
    let r = sweep(&task);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("constraint[0] (`acc <= hw.simd_lanes`): 'hw.simd_lanes' is not a hardware figure"),
        "{}",
        r.stderr
    );
    let task = tunable_with("kernel.c.j2", |t| {
        t.replacen("{{ acc }}", "{{ acc }} + 0 * {{ hw.nosuch }}", 1)
    });
    let r = sweep(&task);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let want = format!(
        "{}: uses `hw.nosuch`, which is not a hardware figure of this target",
        task.path().join("template/kernel.c.j2").display()
    );
    assert!(r.stderr.contains(&want), "{}", r.stderr);
}

#[test]
fn a_search_ends_cleanly_when_every_assignment_was_evaluated() {
    let work = tempfile::tempdir().unwrap();
    let run_dir = work.path().join("run");
    let task = fixture("tiny_softmax_tunable");
    let r = ksearch_in(
        work.path(),
        &[
            "run",
            task.to_str().unwrap(),
            "--brain",
            "tuner",
            "--rounds",
            "20",
            "--out",
            run_dir.to_str().unwrap(),
            "--json",
        ],
        &[("XDG_CONFIG_HOME", work.path().to_str().unwrap())],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let show = ksearch_in(work.path(), &["show", run_dir.to_str().unwrap(), "--json"], &[]).json();
    // acc in {1, 2, 4} x recip in {false, true}: six assignments, each evaluated once (the
    // engine's tests check that no two are the same), in fewer rounds than the budget.
    let candidates = show["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), 6, "{show}");
    assert!(show["round"].as_u64().unwrap() < 20, "{show}");
    let text = format!("{}{}{show}", r.stdout, r.stderr);
    assert!(
        text.contains("the knob space is exhausted") && text.contains("(6 of the 6 valid assignments)"),
        "{text}"
    );
}
