//! Bad input exits 2 with one clear line naming the file and the field at fault.

mod common;
use common::*;

fn eval_task_dir(dir: &std::path::Path) -> Run {
    ksearch(&["eval", dir.to_str().unwrap(), "--json"])
}

#[test]
fn malformed_definition_json_names_file_and_position() {
    let task = copy_fixture("tiny_softmax");
    let def = task.path().join("definition.json");
    let text = std::fs::read_to_string(&def).unwrap();
    std::fs::write(
        &def,
        text.replacen("\"op_type\": \"softmax\",", "\"op_type\": \"softmax\"", 1),
    )
    .unwrap();
    let r = eval_task_dir(task.path());
    assert_eq!(r.code, 2);
    assert!(r.stdout.is_empty());
    assert!(
        r.stderr.contains("definition.json: invalid JSON at line 4"),
        "{}",
        r.stderr
    );
}

#[test]
fn wrong_field_type_in_definition_names_the_field() {
    let task = copy_fixture("tiny_softmax");
    let def = task.path().join("definition.json");
    let text = std::fs::read_to_string(&def).unwrap();
    std::fs::write(
        &def,
        text.replacen(
            "\"dtype\": \"float32\"}},\n  \"outputs\"",
            "\"dtype\": \"float31\"}},\n  \"outputs\"",
            1,
        ),
    )
    .unwrap();
    let r = eval_task_dir(task.path());
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("definition.json: inputs.x.dtype: unknown variant `float31`"),
        "{}",
        r.stderr
    );
}

#[test]
fn workload_missing_an_axis_names_line_and_axis() {
    let task = copy_fixture("tiny_softmax");
    std::fs::write(
        task.path().join("workloads.jsonl"),
        "{\"uuid\": \"a\", \"axes\": {\"M\": 8, \"N\": 4}}\n{\"uuid\": \"b\", \"axes\": {\"M\": 8}}\n",
    )
    .unwrap();
    let r = eval_task_dir(task.path());
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("workloads.jsonl: line 2: axes.N: missing value for var axis 'N'"),
        "{}",
        r.stderr
    );
}

#[test]
fn solution_for_another_definition_is_refused() {
    let solution = serde_json::json!({
        "name": "mine", "definition": "rmsnorm", "author": "me",
        "spec": {"language": "c", "target_hardware": ["cpu"], "entry_point": "k.c::softmax"},
        "sources": [{"path": "k.c", "content": SOFTMAX_OK}]
    });
    let (_d, path) = write_temp("solution.json", &solution.to_string());
    let r = ksearch(&[
        "eval",
        fixture("tiny_softmax").to_str().unwrap(),
        path.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("solution.json: definition: names definition 'rmsnorm' but the task is 'tiny_softmax'"),
        "{}",
        r.stderr
    );
}

#[test]
fn solution_json_that_is_right_is_evaluated() {
    let solution = serde_json::json!({
        "name": "mine", "definition": "tiny_softmax", "author": "me",
        "spec": {"language": "c", "target_hardware": ["cpu"], "entry_point": "k.c::softmax", "destination_passing_style": true},
        "sources": [{"path": "k.c", "content": SOFTMAX_OK}]
    });
    let (_d, path) = write_temp("solution.json", &solution.to_string());
    let r = ksearch(&[
        "eval",
        fixture("tiny_softmax").to_str().unwrap(),
        path.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["solution"], "mine");
}

#[test]
fn unknown_task_lists_the_built_in_ones() {
    let r = ksearch(&["eval", "no_such_task"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("no built-in task named 'no_such_task'"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("softmax"), "{}", r.stderr);
}

#[test]
fn degenerate_reference_is_rejected_as_a_task_problem() {
    // A reference whose outputs are all below atol cannot tell a correct kernel from zeros.
    let task = copy_fixture("tiny_softmax");
    let def = task.path().join("definition.json");
    let text = std::fs::read_to_string(&def).unwrap();
    std::fs::write(
        &def,
        text.replace(".astype(np.float32)", ".astype(np.float32) * np.float32(1e-9)"),
    )
    .unwrap();
    let r = eval_task_dir(task.path());
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("definition.json: reference:"), "{}", r.stderr);
    assert!(r.stderr.contains("for its author"), "{}", r.stderr);
}

#[test]
fn bad_task_toml_names_the_key() {
    let task = copy_fixture("tiny_softmax");
    std::fs::write(task.path().join("task.toml"), "[evaluation]\ntrials = \"three\"\n").unwrap();
    let r = eval_task_dir(task.path());
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("task.toml: evaluation.trials: invalid type"),
        "{}",
        r.stderr
    );
}

#[test]
fn absurd_limits_are_refused_not_panicked_on() {
    let task = fixture("tiny_softmax");
    let r = ksearch(&["eval", task.to_str().unwrap(), "--timeout", "1e20"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("--timeout: must be a number of seconds between 0 and 86400"),
        "{}",
        r.stderr
    );
    let r = ksearch(&["eval", task.to_str().unwrap(), "--memory-limit", "50"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("--memory-limit: 50 MiB is too little"),
        "{}",
        r.stderr
    );
    let copy = copy_fixture("tiny_softmax");
    std::fs::write(copy.path().join("task.toml"), "[evaluation]\ntimeout_s = inf\n").unwrap();
    let r = eval_task_dir(copy.path());
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("task.toml: evaluation.timeout_s: must be between 0 and 86400 seconds"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_json_error_in_a_workload_line_gives_that_line_and_its_column() {
    let task = copy_fixture("tiny_softmax");
    std::fs::write(
        task.path().join("workloads.jsonl"),
        "{\"uuid\": \"a\", \"axes\": {\"M\": 8, \"N\": 4}}\n{\"uuid\": \"b\", \"axes\": {\"M\": 8 \"N\": 4}}\n",
    )
    .unwrap();
    let r = eval_task_dir(task.path());
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("workloads.jsonl: line 2: invalid JSON at column 31: expected `,` or `}`"),
        "{}",
        r.stderr
    );
}

#[test]
fn source_paths_a_compiler_could_misread_are_bad_input() {
    for path in ["./k.c", "-k.c", "candidate.so", "../k.c"] {
        let solution = serde_json::json!({
            "name": "mine", "definition": "tiny_softmax", "author": "me",
            "spec": {"language": "c", "entry_point": format!("{path}::softmax")},
            "sources": [{"path": path, "content": SOFTMAX_OK}]
        });
        let (_d, file) = write_temp("solution.json", &solution.to_string());
        let r = ksearch(&[
            "eval",
            fixture("tiny_softmax").to_str().unwrap(),
            file.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 2, "{path}: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!("solution.json: sources[0].path: '{path}'")),
            "{path}: {}",
            r.stderr
        );
    }
}

#[test]
fn a_failure_asked_for_json_prints_json_on_stdout() {
    let r = ksearch(&["run", "no_such_task", "--json"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let j = r.json();
    assert_eq!(j["status"], "error");
    assert_eq!(j["exit"], 2);
    assert!(j["error"].as_str().unwrap().contains("no_such_task"), "{j}");
    // Without --json stdout stays empty: the error is on stderr only.
    let plain = ksearch(&["run", "no_such_task"]);
    assert!(plain.stdout.is_empty() && plain.stderr.contains("no_such_task"));
}

#[test]
fn a_task_folder_with_several_problems_names_them_all() {
    let task = copy_fixture("tiny_softmax");
    let toml = task.path().join("task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        text.replace("seed = \"seed.c\"", "seed = \"missing_seed.c\"")
            + "\n[[baselines]]\nname = \"naive\"\nfile = \"missing_baseline.c\"\nentry = \"softmax\"\n",
    )
    .unwrap();
    std::fs::write(task.path().join("workloads.jsonl"), "{\"uuid\": \"w\", \"axes\": {}}\n").unwrap();
    let r = eval_task_dir(task.path());
    assert_eq!(r.code, 2, "{}", r.stderr);
    for needle in ["missing_seed.c", "missing_baseline.c", "workloads.jsonl"] {
        assert!(r.stderr.contains(needle), "{needle}: {}", r.stderr);
    }
}
