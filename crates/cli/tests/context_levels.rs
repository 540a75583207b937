//! `ksearch run --context none|hardware|full`: what the prompts cite from the knowledge base,
//! read from the first request of an agent-mode run (no LLM, no evaluation needed before it).

mod common;
use common::*;

/// The planner's first prompt of a run started with `--context LEVEL`.
fn first_prompt(level: &str) -> String {
    let work = tempfile::tempdir().unwrap();
    let task = copy_fixture("tiny_softmax");
    // No seed: the planner is asked first, before any evaluation.
    std::fs::write(
        task.path().join("task.toml"),
        "[kernel]\nlanguage = \"c\"\nentry = \"softmax\"\n",
    )
    .unwrap();
    let run_dir = work.path().join("run");
    let r = ksearch_in(
        work.path(),
        &[
            "run",
            task.path().to_str().unwrap(),
            "--brain",
            "agent",
            "--context",
            level,
            "--out",
            run_dir.to_str().unwrap(),
            "--json",
        ],
        &[],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let next = ksearch_in(
        work.path(),
        &["agent", "next", run_dir.to_str().unwrap(), "--json"],
        &[],
    );
    assert_eq!(next.code, 0, "{}", next.stderr);
    next.json()["messages"][1]["content"].as_str().unwrap().to_string()
}

#[test]
fn each_level_cites_what_it_says() {
    let none = first_prompt("none");
    let hardware = first_prompt("hardware");
    let full = first_prompt("full");
    assert!(!none.contains("## Target"), "{none}");
    assert!(hardware.contains("## Target"), "{hardware}");
    assert!(full.contains("## Target"), "{full}");
    // Full adds the patterns to the hardware figures; nothing else in the prompt changes.
    assert!(full.len() > hardware.len() && hardware.len() > none.len());
    assert_eq!(none.lines().next(), full.lines().next());
}

#[test]
fn an_unknown_level_is_bad_input() {
    let r = ksearch(&["run", "softmax", "--context", "most", "--brain", "agent"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("unknown context level 'most'"), "{}", r.stderr);
}
