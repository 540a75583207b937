//! The task brief's `expertise` (existing implementations to adapt): shown beside the target's
//! knowledge when set, absent without changing a byte of the prompt when empty, and optional in
//! recorded runs.

mod common;
use common::*;
use ksearch_search::engine::*;

/// Every message of the planner's first request.
fn init_prompt(task: TaskBrief) -> String {
    let mut engine = Engine::new();
    engine
        .apply(&Event::Started {
            task,
            config: EngineConfig::default(),
        })
        .unwrap();
    match engine.pending() {
        Some(Request::Plan { messages, .. }) => messages.iter().map(|m| m.content.clone()).collect(),
        other => panic!("expected the planner's init request, got {other:?}"),
    }
}

#[test]
fn expertise_follows_the_target_section() {
    let mut task = brief(false);
    task.target = "## Target hardware: Apple M4 Max\n- translation table".into();
    let without = init_prompt(task.clone());
    assert!(!without.contains("Existing implementations"));
    // Nothing is added when empty: the target section is followed directly by what came after.
    assert!(
        without.contains("- translation table\n\n## What to do now"),
        "{without}"
    );

    task.expertise = "### 1. scan.cu (cuda): Mamba's CUDA scan\n```cuda\n__global__ void scan() {}\n```".into();
    let with = init_prompt(task);
    let target = with.find("- translation table").unwrap();
    let heading = with.find("## Existing implementations to adapt").unwrap();
    let code = with.find("__global__ void scan() {}").unwrap();
    assert!(target < heading && heading < code, "{with}");
    assert!(with.contains("Do not copy them line by line."));
    assert!(with.contains("```\n\n## What to do now"), "{with}");
}

#[test]
fn a_brief_recorded_without_expertise_still_loads() {
    let mut recorded = serde_json::to_value(brief(true)).unwrap();
    recorded.as_object_mut().unwrap().remove("expertise");
    let task: TaskBrief = serde_json::from_value(recorded).unwrap();
    assert_eq!(task.expertise, "");
    assert_eq!(task, brief(true));
}
