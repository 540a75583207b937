//! The compiler's resource report (registers, spills, shared memory per kernel) in the planner's
//! and coder's prompts: one line per kernel where a build reported them, nothing where none did
//! (CPU tasks), and optional in recorded runs.

mod common;
use common::*;
use ksearch_search::engine::*;
use serde_json::json;

fn kernel() -> KernelResources {
    KernelResources {
        name: "_Z12softmax_rowsPKfPfl".into(),
        arch: "sm_90a".into(),
        registers: 30,
        spill_store_bytes: Some(8),
        spill_load_bytes: Some(8),
        stack_frame_bytes: Some(0),
        shared_bytes: 1024,
        constant_bytes: None,
        barriers: Some(1),
    }
}

const LINES: &str =
    "Compiler resources per kernel (ptxas, sm_90a; static shared memory only, not the dynamic size set at \
    launch):\n\
    - softmax_rows: 30 registers, 1 KiB static shared memory, spills 8 B stored and 8 B loaded per thread";

fn insert(id: &str) -> serde_json::Value {
    json!({"op": "insert_node", "node": {"node_id": id, "parent_id": "root", "decision": format!("decide {id}"),
        "choice": format!("choice {id}"), "overall_rating": 6, "confidence": 0.5,
        "action": {"title": format!("do {id}"), "description": "change it", "rationale": "faster", "difficulty": 2, "score": 0.5}}})
}

/// Runs the world-model strategy for a few rounds (the first coder answer fails, the next pass)
/// and returns every prompt asked, labelled `plan <kind>` or `code <kind>`.
fn prompts(with_resources: bool) -> Vec<(String, String)> {
    let mut engine = Engine::new();
    engine
        .apply(&Event::Started {
            task: brief(true),
            config: EngineConfig {
                rounds: 5,
                stagnation_window: 2,
                ..EngineConfig::default()
            },
        })
        .unwrap();
    let mut out = Vec::new();
    let mut codes = 0;
    for _ in 0..40 {
        let event = match engine.pending().cloned().unwrap() {
            Request::Plan { id, plan, messages } => {
                out.push((
                    format!("plan {plan:?}"),
                    messages.iter().map(|m| m.content.clone()).collect(),
                ));
                let ops = match plan {
                    PlanKind::Init => json!([insert("a"), insert("b"), insert("c")]),
                    _ => json!([insert(&format!("n{id}"))]),
                };
                Event::PlannerAnswered {
                    request_id: id,
                    text: json!({"kernel_summary": "softmax", "ops": ops}).to_string(),
                }
            }
            Request::Code { id, code, messages, .. } => {
                out.push((
                    format!("code {code:?}"),
                    messages.iter().map(|m| m.content.clone()).collect(),
                ));
                codes += 1;
                Event::CoderAnswered {
                    request_id: id,
                    text: common::code(if codes == 1 { "FAIL" } else { "SPEED=1.5" }),
                }
            }
            Request::Evaluate {
                id,
                candidate_id,
                sources,
                ..
            } => {
                let mut summary = summary(&sources[0].content);
                if with_resources {
                    summary.resources = vec![kernel()];
                }
                Event::Evaluated {
                    request_id: id,
                    candidate_id,
                    summary,
                }
            }
            Request::Finished { .. } => break,
        };
        engine.apply(&event).unwrap();
    }
    out
}

fn find<'a>(prompts: &'a [(String, String)], label: &str) -> &'a str {
    &prompts
        .iter()
        .find(|(l, _)| l == label)
        .unwrap_or_else(|| {
            panic!(
                "no {label} prompt in {:?}",
                prompts.iter().map(|p| &p.0).collect::<Vec<_>>()
            )
        })
        .1
}

#[test]
fn planner_and_coder_see_registers_spills_and_shared_memory() {
    let p = prompts(true);
    // The planner's first request shows the seed's report under its workloads.
    let init = find(&p, "plan Init");
    assert!(
        init.contains(&format!(
            "- w: 1.00x (1.00 us +/- 0.010 us; reference 1.00 us)\n{LINES}"
        )),
        "{init}"
    );
    // The coder's: under the best so far (the seed), and under a failure it is to fix.
    let action = find(&p, "code Action");
    assert!(action.contains(LINES), "{action}");
    let debug = find(&p, "code Debug");
    assert!(
        debug.contains(&format!("```\nmax abs error 0.5\n```\n\n{LINES}\n")),
        "{debug}"
    );
    // The planner's refinement after a passing candidate shows that candidate's report.
    let refine = p.iter().find(|(l, _)| l.starts_with("plan Refine")).unwrap();
    assert!(refine.1.matches(LINES).count() >= 2, "{}", refine.1);
}

#[test]
fn nothing_is_said_without_a_report() {
    for (label, text) in prompts(false) {
        assert!(!text.contains("Compiler resources"), "{label}: {text}");
        assert!(!text.contains("registers"), "{label}: {text}");
    }
}

#[test]
fn a_summary_recorded_without_resources_still_loads() {
    // An `evaluated` event as runs recorded it before summaries carried the compiler's report.
    let recorded = r#"{"event": "evaluated", "request_id": "r1", "candidate_id": 0,
        "summary": {"status": "passed", "reason": null, "speedup": 1.25, "relative_noise": 0.02,
                    "workloads": [{"uuid": "w", "status": "passed", "speedup": 1.25, "median_ns": 800.0,
                                   "iqr_ns": 10.0, "reference_median_ns": 1000.0}],
                    "log_tail": "", "suspicious": null}}"#;
    let event: Event = serde_json::from_str(recorded).unwrap();
    let Event::Evaluated { summary, .. } = &event else {
        panic!("{event:?}")
    };
    assert!(summary.resources.is_empty());
    assert_eq!(summary.speedup, Some(1.25));
    // Written back, it is what it was: no `resources` key where there are none.
    let written = serde_json::to_value(&event).unwrap();
    assert_eq!(written, serde_json::from_str::<serde_json::Value>(recorded).unwrap());

    // With a report, the key is written and read back.
    let mut with = summary.clone();
    with.resources = vec![kernel()];
    let json = serde_json::to_value(&with).unwrap();
    assert_eq!(json["resources"][0]["registers"], 30);
    assert_eq!(serde_json::from_value::<EvalSummary>(json).unwrap(), with);
}
