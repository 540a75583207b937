//! Prompts carry the evidence of each attempt: its parent, the coder's description, per-workload
//! times, the first and last lines of its error, and for the latest ones the diff to its parent,
//! within the stated budget.

mod common;
use common::*;
use ksearch_search::engine::*;

fn planner(plan: &PlanKind, _m: &[ksearch_messages::Message], n: usize) -> String {
    scripted_plan(plan, n)
}

fn measure(sources: &[Source]) -> EvalSummary {
    let text = &sources[0].content;
    if text.contains("BROKEN") {
        let log: Vec<String> = (1..=30)
            .map(|i| format!("kernel.c:{i}:7: error: use of undeclared identifier 'v{i}'"))
            .collect();
        return EvalSummary::failure("compile_error", format!("compilation failed:\n{}", log.join("\n")));
    }
    summary(text)
}

fn answers(k: usize) -> String {
    match k {
        1 => "DESCRIPTION: one pass with a running sum\n```c kernel.c\nint a;\nint b;\nint c;\nSPEED=1.5\n```\n".into(),
        2 => {
            "DESCRIPTION: vectorised by 8 (it does not build)\n```c kernel.c\nint a;\nint b;\nBROKEN\nSPEED=2.0\n```\n"
                .into()
        }
        3 => "**Description:** unrolled by 4\n```c kernel.c\nint a;\nint b;\nint c;\nint unrolled;\nSPEED=2.0\n```\n"
            .into(),
        _ => format!("```c kernel.c\nint a;\nk{k} SPEED=0.5\n```\n"),
    }
}

fn prompts(events: &[Event]) -> Vec<(String, String)> {
    let mut engine = Engine::new();
    let mut out = Vec::new();
    for e in events {
        engine.apply(e).unwrap();
        match engine.pending() {
            Some(Request::Code { code, messages, .. }) => {
                out.push((code.as_str().to_string(), messages[1].content.clone()))
            }
            Some(Request::Plan { plan, messages, .. }) => out.push((format!("{plan:?}"), messages[1].content.clone())),
            _ => {}
        }
    }
    out
}

#[test]
fn prompts_show_what_each_attempt_changed_and_how_it_measured() {
    let config = EngineConfig {
        rounds: 7,
        stagnation_window: 2,
        knob_share: 0.0,
        ..EngineConfig::default()
    };
    let (engine, events) = drive_with(true, config, planner, |_, k| answers(k), measure, 500);
    let all = prompts(&events);
    // The coder's system prompt asks for the description.
    let Some(Event::Started { .. }) = events.first() else {
        panic!()
    };
    // The improve prompt of round 4 sees rounds 1-3.
    let (_, improve) = all
        .iter()
        .filter(|(k, _)| k == "improve")
        .nth(2)
        .expect("a third improve request");
    assert!(improve.contains("change: one pass with a running sum"), "{improve}");
    assert!(improve.contains("change: unrolled by 4"), "{improve}");
    assert!(
        improve.contains("improve of candidate 2"),
        "parents are named: {improve}"
    );
    // Per-workload medians and IQR.
    assert!(improve.contains("times: w 0.500+/-0.010 us"), "{improve}");
    // The compile error's first and last lines, not just "compilation failed:".
    assert!(
        improve.contains("compile_error: compilation failed: kernel.c:1:7: error: use of undeclared identifier 'v1'"),
        "{improve}"
    );
    assert!(improve.contains("kernel.c:30:7: error"), "{improve}");
    assert!(improve.contains("(24 more lines)"), "{improve}");
    // The diff of the latest attempt to its parent.
    assert!(improve.contains("diff to candidate 2:"), "{improve}");
    assert!(improve.contains("+int unrolled;"), "{improve}");
    // The gain over the parent by the paired rule.
    assert!(improve.contains("1.33x faster than candidate 2"), "{improve}");
    // The section stays within its budget.
    let section = improve
        .split("Recent attempts")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    assert!(section.len() <= ATTEMPTS_BUDGET + 100, "{}", section.len());
    // The planner's refine prompt carries the same evidence.
    let (_, refine) = all
        .iter()
        .find(|(k, _)| k.starts_with("Refine"))
        .expect("a refine request");
    assert!(refine.contains("change: unrolled by 4"), "{refine}");
    // The engine keeps the descriptions for show and the report; an answer without one says so.
    let unrolled = engine
        .candidates()
        .iter()
        .find(|c| c.sources[0].content.contains("unrolled"))
        .unwrap();
    assert_eq!(engine.description(unrolled.id), Some("unrolled by 4"));
    assert!(all
        .last()
        .is_some_and(|(_, p)| p.contains("change: (the coder gave no DESCRIPTION line)")));
    assert_eq!(engine.attempts().len(), 7);
}

#[test]
fn many_long_attempts_stay_within_the_budget() {
    let config = EngineConfig {
        rounds: 14,
        stagnation_window: 20,
        knob_share: 0.0,
        ..EngineConfig::default()
    };
    let long_answer = |_: CodeKind, k: usize| {
        let body: String = (0..400).map(|i| format!("int v{k}_{i};\n")).collect();
        format!(
            "DESCRIPTION: {}\n```c kernel.c\n{body}SPEED=1.{k}\n{}\n```\n",
            "a very long description ".repeat(40),
            if k.is_multiple_of(2) { "BROKEN" } else { "" }
        )
    };
    let (_, events) = drive_with(true, config, planner, long_answer, measure, 500);
    for (kind, prompt) in prompts(&events) {
        if let Some(section) = prompt.split("Recent attempts").nth(1) {
            let section = section.split("\n## ").next().unwrap();
            assert!(section.len() <= ATTEMPTS_BUDGET + 100, "{kind}: {}", section.len());
        }
    }
}

#[test]
fn a_profile_of_an_attempt_reaches_the_next_prompts() {
    let config = EngineConfig {
        rounds: 3,
        stagnation_window: 3,
        knob_share: 0.0,
        ..EngineConfig::default()
    };
    let profiled = |sources: &[Source]| {
        let mut s = measure(sources);
        if s.passed() {
            s.profile = Some(
                "Profile (ncu 2025.3, workload w, 1 kernel, 9.1 us of GPU time per call under ncu):\n- throughput, \
                 % of peak: memory 81%, compute (SM) 12%"
                    .into(),
            );
        }
        s
    };
    let (_, events) = drive_with(true, config, planner, |_, k| answers(k), profiled, 500);
    let all = prompts(&events);
    let (_, improve) = all.iter().find(|(k, _)| k == "improve").expect("an improve request");
    assert!(
        improve.contains("profile: Profile (ncu 2025.3, workload w"),
        "{improve}"
    );
    assert!(improve.contains("memory 81%, compute (SM) 12%"), "{improve}");
    // Without profiles (the default), no profile line.
    let (_, plain) = drive_with(
        true,
        EngineConfig {
            rounds: 3,
            knob_share: 0.0,
            ..EngineConfig::default()
        },
        planner,
        |_, k| answers(k),
        measure,
        500,
    );
    assert!(prompts(&plain).iter().all(|(_, p)| !p.contains("profile:")));
}
