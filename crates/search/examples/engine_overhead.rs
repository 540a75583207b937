//! Engine overhead per round: everything a round costs except waiting on the LLM and the
//! evaluator. Answers are scripted and instant, so the time measured is prompt rendering,
//! answer extraction, edit-script validation, selection, and appending each event to a real
//! run store (SQLite, WAL, synchronous=FULL) before applying it, as the driver does.
//!
//! Usage: cargo run --release -p ksearch-search --example engine_overhead -- [ROUNDS]

use ksearch_search::engine::*;
use ksearch_store::RunStore;
use serde_json::json;
use std::time::{Duration, Instant};

fn main() {
    let rounds: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let dir = tempfile::tempdir().expect("temp dir");
    let store = RunStore::create(dir.path()).expect("run store");
    let task = TaskBrief {
        name: "softmax".into(),
        text: "Row softmax of a float32 matrix. ".repeat(40),
        language: ksearch_spec::Language::C,
        convention: "void softmax(const float *x, float *y, int64_t M, int64_t N)".into(),
        default_file: "kernel.c".into(),
        target: String::new(),
        expertise: String::new(),
        seed: Some(vec![Source {
            path: "kernel.c".into(),
            content: kernel(0),
        }]),
    };
    let config = EngineConfig {
        rounds,
        stagnation_window: 3,
        ..EngineConfig::default()
    };
    let mut engine = Engine::new();
    let mut timings: Vec<(&'static str, Duration)> = Vec::new();
    let step = |engine: &mut Engine, event: Event, label: &'static str, timings: &mut Vec<(&'static str, Duration)>| {
        let t = Instant::now();
        store
            .append_event(event.kind(), &serde_json::to_value(&event).expect("event"))
            .expect("append");
        engine.apply(&event).expect("apply");
        timings.push((label, t.elapsed()));
    };
    step(&mut engine, Event::Started { task, config }, "start", &mut timings);
    let (mut n, start) = (0u32, Instant::now());
    loop {
        n += 1;
        match engine.pending().cloned().expect("pending") {
            Request::Plan { id, plan, .. } => {
                let text = planner_answer(&plan, n);
                step(
                    &mut engine,
                    Event::PlannerAnswered { request_id: id, text },
                    "planner",
                    &mut timings,
                );
            }
            Request::Code { id, .. } => {
                let text = format!("Here it is.\n```c kernel.c\n{}```\n", kernel(n));
                step(
                    &mut engine,
                    Event::CoderAnswered { request_id: id, text },
                    "coder",
                    &mut timings,
                );
            }
            Request::Evaluate { id, candidate_id, .. } => {
                let summary = summary(1.0 + (n % 7) as f64 / 10.0);
                step(
                    &mut engine,
                    Event::Evaluated {
                        request_id: id,
                        candidate_id,
                        summary,
                    },
                    "evaluation",
                    &mut timings,
                );
            }
            Request::Finished { .. } => break,
        }
    }
    let total = start.elapsed();
    let per_round = total / engine.round().max(1);
    println!(
        "rounds {}, cycles {}, events {}, candidates {}",
        engine.round(),
        engine.cycle_count(),
        timings.len(),
        engine.candidates().len()
    );
    println!();
    println!("| step | count | median ms | max ms |");
    println!("|---|---|---|---|");
    for label in ["planner", "coder", "evaluation"] {
        let mut v: Vec<f64> = timings
            .iter()
            .filter(|(l, _)| *l == label)
            .map(|(_, d)| d.as_secs_f64() * 1e3)
            .collect();
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            continue;
        }
        println!(
            "| {label} answer: append + apply + next prompt | {} | {:.3} | {:.3} |",
            v.len(),
            v[v.len() / 2],
            v[v.len() - 1]
        );
    }
    println!();
    println!(
        "engine + store overhead per round (all steps / rounds): {:.3} ms",
        per_round.as_secs_f64() * 1e3
    );
    println!(
        "world model at the end: {} nodes",
        engine.world_model().tree().nodes().len()
    );
}

fn kernel(n: u32) -> String {
    format!("#include <stdint.h>\n/* version {n} */\nvoid softmax(const float *x, float *y, int64_t M, int64_t N) {{\n{}}}\n", "    /* body */\n".repeat(60))
}

fn insert(id: String, parent: &str, score: f64) -> serde_json::Value {
    json!({"op": "insert_node", "node": {"node_id": id, "parent_id": parent, "decision": "a design decision with a long description",
        "choice": "one option among several", "overall_rating": 6, "confidence": 0.5, "notes": "notes ".repeat(20),
        "action": {"title": "an action", "description": "what to change ".repeat(10), "rationale": "why ".repeat(10), "difficulty": 2, "score": score}}})
}

fn planner_answer(plan: &PlanKind, n: u32) -> String {
    let ops = match plan {
        PlanKind::Init => vec![
            insert("a".into(), "root", 0.9),
            insert("b".into(), "root", 0.6),
            insert("c".into(), "root", 0.5),
        ],
        PlanKind::Refine { node_id } => vec![
            insert(format!("{node_id}r{n}"), node_id, 0.8),
            insert(format!("{node_id}s{n}"), node_id, 0.7),
        ],
        PlanKind::TooHard { .. } | PlanKind::Propose => vec![insert(format!("p{n}"), "root", 0.4)],
    };
    format!(
        "My reasoning...\n```json\n{}\n```\n",
        json!({"kernel_summary": "softmax", "ops": ops})
    )
}

fn summary(speedup: f64) -> EvalSummary {
    EvalSummary {
        status: "passed".into(),
        reason: None,
        speedup: Some(speedup),
        relative_noise: Some(0.02),
        workloads: (0..6)
            .map(|i| WorkloadSummary {
                uuid: format!("w{i}"),
                status: "passed".into(),
                speedup: Some(speedup),
                median_ns: Some(1e5 / speedup),
                iqr_ns: Some(2e3),
                reference_median_ns: Some(1e5),
            })
            .collect(),
        log_tail: String::new(),
        suspicious: None,
        resources: vec![],
        profile: None,
        harness: None,
    }
}
