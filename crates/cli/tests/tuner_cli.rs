//! The knob tuner through the CLI: the brain used when no LLM is configured, the grid and
//! random sweeps it is compared with, and the knowledge-base and doctor commands.

mod common;
use common::*;

#[test]
fn without_an_llm_a_run_searches_with_the_tuner() {
    let work = tempfile::tempdir().unwrap();
    let run_dir = work.path().join("run");
    let task = fixture("tiny_softmax_tunable");
    let r = ksearch_in(
        work.path(),
        &[
            "run",
            task.to_str().unwrap(),
            "--rounds",
            "4",
            "--out",
            run_dir.to_str().unwrap(),
            "--json",
            "--seed",
            "3",
        ],
        &[("XDG_CONFIG_HOME", work.path().to_str().unwrap())],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["status"], "finished");
    let best = std::fs::read_to_string(run_dir.join("best/kernel.c")).unwrap();
    assert!(best.starts_with("/* ksearch knobs: {"), "{best}");
    // The run ends with its report written, and says where.
    let report = run_dir.join("report.html");
    assert_eq!(j["report"], report.to_str().unwrap(), "{j}");
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(
        html.contains("<svg") && html.contains("tiny_softmax_tunable"),
        "{}",
        html.chars().take(500).collect::<String>()
    );
    let show = ksearch_in(work.path(), &["show", run_dir.to_str().unwrap(), "--json"], &[]).json();
    // The seed (all defaults) plus 4 tuner rounds, each a distinct knob assignment.
    let candidates = show["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), 5, "{show}");
    assert_eq!(show["budget"]["llm_calls"], 0, "the tuner is not an LLM");
    let nodes = show["world_model"]["decision_tree"]["nodes"].as_array().unwrap();
    assert!(
        nodes
            .iter()
            .any(|n| n["decision"].as_str().unwrap_or("").starts_with("knob ")),
        "{show}"
    );
}

#[test]
fn a_grid_sweep_evaluates_every_valid_assignment() {
    let r = ksearch(&[
        "sweep",
        fixture("tiny_softmax_tunable").to_str().unwrap(),
        "--grid",
        "--json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let j = r.json();
    // acc in {1,2,4} x recip in {false,true}: all valid on a CPU with 8 SIMD lanes.
    assert_eq!(j["evaluations"].as_array().unwrap().len(), 6);
    assert!(
        j["evaluations"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["status"] == "passed"),
        "{j}"
    );
    let random = ksearch(&[
        "sweep",
        fixture("tiny_softmax_tunable").to_str().unwrap(),
        "--random",
        "2",
        "--json",
    ])
    .json();
    assert_eq!(random["evaluations"].as_array().unwrap().len(), 2);
}

#[test]
fn a_template_using_an_undeclared_knob_is_bad_input() {
    let task = copy_fixture("tiny_softmax");
    std::fs::create_dir_all(task.path().join("template")).unwrap();
    for f in ["knobs.toml", "kernel.c.j2"] {
        std::fs::copy(
            fixture("tiny_softmax_tunable").join("template").join(f),
            task.path().join("template").join(f),
        )
        .unwrap();
    }
    let text = std::fs::read_to_string(task.path().join("template/kernel.c.j2")).unwrap();
    std::fs::write(
        task.path().join("template/kernel.c.j2"),
        text.replace("{{ acc }}] = {0}", "{{ accs }}] = {0}"),
    )
    .unwrap();
    std::fs::write(
        task.path().join("task.toml"),
        "[kernel]\nlanguage = \"c\"\nentry = \"softmax\"\ntemplate = \"template/kernel.c.j2\"\nknobs = \"template/knobs.toml\"\n",
    )
    .unwrap();
    let r = ksearch(&["sweep", task.path().to_str().unwrap(), "--grid"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("kernel.c.j2: uses `accs`, which is not a declared knob"),
        "{}",
        r.stderr
    );
}

#[test]
fn kb_show_and_doctor_report() {
    let r = ksearch(&["kb", "show", "h200"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("## Sources") && r.stdout.contains("4800"),
        "{}",
        r.stdout
    );
    let bad = ksearch(&["kb", "show", "h900"]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("h200"), "names the known devices: {}", bad.stderr);
    let d = ksearch(&["doctor"]);
    assert!(
        d.stdout.contains("C compiler") && d.stdout.contains("NumPy"),
        "{}",
        d.stdout
    );
}

#[test]
fn strategies_are_chosen_on_the_command_line() {
    let work = tempfile::tempdir().unwrap();
    let task = fixture("tiny_softmax_tunable");
    for strategy in ["refine", "evolve"] {
        let run_dir = work.path().join(strategy);
        let r = ksearch_in(
            work.path(),
            &[
                "run",
                task.to_str().unwrap(),
                "--rounds",
                "3",
                "--strategy",
                strategy,
                "--out",
                run_dir.to_str().unwrap(),
                "--json",
            ],
            &[("XDG_CONFIG_HOME", work.path().to_str().unwrap())],
        );
        assert_eq!(r.code, 0, "{strategy}: {}\n{}", r.stdout, r.stderr);
        assert_eq!(r.json()["status"], "finished");
    }
    let bad = ksearch(&["run", task.to_str().unwrap(), "--strategy", "annealing"]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("--strategy annealing"), "{}", bad.stderr);
}
