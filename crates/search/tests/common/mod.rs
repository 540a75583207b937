//! Scripted pieces shared by the engine tests: a toy task, and "kernels" whose text says how
//! they measure (`SPEED=1.5` passes at 1.5x, `FAIL` fails).
#![allow(dead_code)]

use ksearch_search::engine::*;

pub fn brief(seed: bool) -> TaskBrief {
    TaskBrief {
        name: "toy".into(),
        text: "Compute y = x.".into(),
        language: ksearch_spec::Language::C,
        convention: "void k(const float *x, float *y, int64_t n)".into(),
        default_file: "kernel.c".into(),
        target: String::new(),
        expertise: String::new(),
        seed: seed.then(|| {
            vec![Source {
                path: "kernel.c".into(),
                content: "seed SPEED=1.0".into(),
            }]
        }),
    }
}

pub fn summary(text: &str) -> EvalSummary {
    let speed = text
        .split("SPEED=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse::<f64>().ok());
    let failed = text.contains("FAIL") || speed.is_none();
    EvalSummary {
        status: if failed { "incorrect_numerical" } else { "passed" }.into(),
        reason: failed.then(|| "output 'y': 12 of 64 elements differ".to_string()),
        speedup: if failed { None } else { speed },
        relative_noise: Some(0.02),
        workloads: vec![WorkloadSummary {
            uuid: "w".into(),
            status: if failed { "incorrect_numerical" } else { "passed" }.into(),
            speedup: speed.filter(|_| !failed),
            median_ns: speed.map(|s| 1000.0 / s),
            iqr_ns: Some(10.0),
            reference_median_ns: Some(1000.0),
        }],
        log_tail: if failed {
            "max abs error 0.5".into()
        } else {
            String::new()
        },
        suspicious: None,
        resources: vec![],
        profile: None,
        harness: None,
    }
}

/// A planner answer for the `n`th plan request: three open actions under the root at init, one
/// child of the refined node at a refine step, one more under the root otherwise.
pub fn scripted_plan(plan: &PlanKind, n: usize) -> String {
    let insert = |id: String, parent: &str| {
        serde_json::json!({"op": "insert_node", "node": {"node_id": id, "parent_id": parent, "decision": "d", "choice": "c",
            "overall_rating": 6, "confidence": 0.5,
            "action": {"title": "t", "description": "d", "rationale": "r", "difficulty": 1, "score": 0.5}}})
    };
    match plan {
        PlanKind::Init => {
            serde_json::json!({"ops": [insert("a".into(), "root"), insert("b".into(), "root"), insert("c".into(), "root")]})
        }
        PlanKind::Refine { node_id } => serde_json::json!({"ops": [insert(format!("{node_id}{n}"), node_id)]}),
        _ => serde_json::json!({"ops": [insert(format!("p{n}"), "root")]}),
    }
    .to_string()
}

pub fn code(text: &str) -> String {
    format!("Here is the kernel:\n```c kernel.c\n{text}\n```\n")
}

/// Serves requests until the run finishes or `max_events`, returning the event log.
/// `planner` and `coder` get (request kind, how many times that kind was asked) and answer text.
pub fn drive(
    seed: bool,
    config: EngineConfig,
    planner: impl FnMut(&PlanKind, &[ksearch_messages::Message], usize) -> String,
    coder: impl FnMut(CodeKind, usize) -> String,
    max_events: usize,
) -> (Engine, Vec<Event>) {
    drive_with(
        seed,
        config,
        planner,
        coder,
        |s: &[Source]| summary(&s[0].content),
        max_events,
    )
}

/// `drive` with the measurement of a candidate's sources given by `measure`.
pub fn drive_with(
    seed: bool,
    config: EngineConfig,
    mut planner: impl FnMut(&PlanKind, &[ksearch_messages::Message], usize) -> String,
    mut coder: impl FnMut(CodeKind, usize) -> String,
    mut measure: impl FnMut(&[Source]) -> EvalSummary,
    max_events: usize,
) -> (Engine, Vec<Event>) {
    let mut engine = Engine::new();
    let mut events = vec![Event::Started {
        task: brief(seed),
        config,
    }];
    engine.apply(&events[0]).unwrap();
    let (mut plans, mut codes) = (0, 0);
    while events.len() < max_events {
        let event = match engine.pending().cloned().unwrap() {
            Request::Plan { id, plan, messages } => {
                plans += 1;
                Event::PlannerAnswered {
                    request_id: id,
                    text: planner(&plan, &messages, plans),
                }
            }
            Request::Code { id, code, .. } => {
                codes += 1;
                Event::CoderAnswered {
                    request_id: id,
                    text: coder(code, codes),
                }
            }
            Request::Evaluate {
                id,
                candidate_id,
                sources,
                ..
            } => Event::Evaluated {
                request_id: id,
                candidate_id,
                summary: measure(&sources),
            },
            Request::Finished { .. } => break,
        };
        engine.apply(&event).unwrap();
        events.push(event);
    }
    (engine, events)
}

/// A kernel's text says how it measures: `TIMES=a,b,c` (medians in us), `IQR=...` (us),
/// `REF=...` (the reference's medians in us in that evaluation).
pub fn timed(text: &str) -> EvalSummary {
    let list = |key: &str| -> Vec<f64> {
        text.split(&format!("{key}="))
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .map(|s| s.split(',').map(|x| x.parse::<f64>().unwrap()).collect())
            .unwrap_or_default()
    };
    let (times, iqr, reference) = (list("TIMES"), list("IQR"), list("REF"));
    if times.is_empty() {
        return summary(text);
    }
    let workloads: Vec<WorkloadSummary> = times
        .iter()
        .enumerate()
        .map(|(i, &m)| WorkloadSummary {
            uuid: format!("w{i}"),
            status: "passed".into(),
            speedup: Some(reference[i] / m),
            median_ns: Some(m * 1e3),
            iqr_ns: Some(iqr[i] * 1e3),
            reference_median_ns: Some(reference[i] * 1e3),
        })
        .collect();
    let n = workloads.len() as f64;
    let speedup = (workloads.iter().map(|w| w.speedup.unwrap().ln()).sum::<f64>() / n).exp();
    EvalSummary {
        status: "passed".into(),
        reason: None,
        speedup: Some(speedup),
        relative_noise: Some(times.iter().zip(&iqr).map(|(m, q)| q / m).fold(0.0, f64::max)),
        workloads,
        log_tail: String::new(),
        suspicious: None,
        resources: vec![],
        profile: None,
        harness: None,
    }
}
