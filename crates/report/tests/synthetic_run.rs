//! A run made by driving the real engine with scripted answers and made-up measurements, stored
//! as the driver stores it (rows before the event that announces them): LLM exchanges with
//! tokens and prices, a GPU's provenance, a format error, a too-hard node and a pruned one. The
//! report model must account for all of it, in progress and finished, and the pages must draw it.

use ksearch_report::{load, load_at, Renderer, RunReport, XAxis, STALLED_AFTER_S};
use ksearch_search::engine::{
    Engine, EngineConfig, EvalSummary, Event, KernelResources, Request, Source, TaskBrief, WorkloadSummary,
};
use ksearch_store::{CandidateRow, EvaluationRow, ExchangeRow, MetaKey, RunStore};
use serde_json::json;

const SEED: &str = "void k(float *x) {\n  x[0] = 1;\n  x[1] = 2;\n}\n";
const GOOD: &str = "void k(float *x) {\n  x[0] = 1;\n  x[1] = 3; /* </script><script>alert(1)</script> */\n}\n";

struct Script {
    store: RunStore,
    engine: Engine,
    coder_calls_on_a: u32,
    passed: u32,
    /// Exchanges recorded, answered ones only.
    answered: u32,
}

/// ptxas's report of a coder's build (the seed's and failed builds have none).
fn kernels() -> Vec<KernelResources> {
    vec![KernelResources {
        name: "_Z1kPf".into(),
        arch: "sm_90".into(),
        registers: 40,
        spill_store_bytes: Some(0),
        spill_load_bytes: Some(0),
        stack_frame_bytes: Some(0),
        shared_bytes: 2048,
        constant_bytes: None,
        barriers: Some(1),
    }]
}

fn summary(status: &str, speedup: Option<f64>, resources: Vec<KernelResources>) -> EvalSummary {
    EvalSummary {
        status: status.into(),
        reason: (status != "passed").then(|| "kernel.cu:3: error: expected ';'".to_string()),
        speedup,
        relative_noise: speedup.map(|_| 0.02),
        workloads: vec![WorkloadSummary {
            uuid: "w0".into(),
            status: status.into(),
            speedup,
            // The candidate's own time moves with its speedup (the reference stays at 1 us), as
            // in a real run: the engine compares candidates by their own times.
            median_ns: Some(speedup.map_or(1000.0, |s| 1000.0 / s)),
            iqr_ns: Some(speedup.map_or(20.0, |s| 20.0 / s)),
            reference_median_ns: speedup.map(|_| 1000.0),
        }],
        log_tail: String::new(),
        suspicious: None,
        resources,
        profile: None,
        harness: None,
    }
}

/// The whole evaluation record, as the evaluator writes it.
fn record(status: &str, speedup: Option<f64>, resources: &[KernelResources]) -> serde_json::Value {
    // w1's timings spread twice as much as w0's: 8%, above the report's noise flag.
    let workload = |uuid: &str, n: i64, s: Option<f64>| {
        json!({"uuid": uuid, "axes": {"N": n}, "status": status, "reason": null,
               "correctness": {"trials": 2, "max_abs_error": 1e-6, "matched_ratio": 1.0},
               "timing": s.map(|s| json!({"clock": "cuda_event",
                   "candidate": {"n": 30, "median_ns": 1000.0, "iqr_ns": if uuid == "w1" { 80.0 } else { 40.0 }},
                   "reference": {"n": 30, "median_ns": 1000.0 * s, "iqr_ns": 10.0},
                   "speedup": s, "achieved_gb_per_s": 2100.0, "achieved_gflop_per_s": null, "suspicious": null}))})
    };
    json!({"status": status, "speedup": speedup, "wall_seconds": 0.5,
           "workloads": [workload("w0", 1024, speedup), workload("w1", 4096, speedup)],
           "compile": {"ok": status != "compile_error", "command": ["nvcc", "-O3", "kernel.cu"], "arch": "sm_90",
                       "resources": resources},
           "provenance": {"device": "cuda:0", "backend": "cuda", "seed": 99, "harness_version": "0.2.0", "trials": 2,
               "environment": {"python": "3.11", "device": {"name": "NVIDIA H200", "driver": "570.1", "cuda_runtime": "12.8"}}},
           "leased_device": "0"})
}

fn node(id: &str, decision: &str, score: f64) -> serde_json::Value {
    json!({"op": "insert_node", "node": {"node_id": id, "parent_id": "root", "decision": decision,
        "choice": format!("option {id}"), "overall_rating": 6, "confidence": 0.5,
        "action": {"title": format!("implement {id}"), "difficulty": 2, "score": score}}})
}

impl Script {
    fn new(dir: &std::path::Path) -> Script {
        let store = RunStore::create(dir).unwrap();
        let provider = |model: &str| json!({"name": "openai", "model": model, "kind": "openai-chat"});
        store
            .set_meta(
                MetaKey::Brain,
                &json!({"kind": "llm", "planner": provider("gpt-p"), "coder": provider("gpt-c"),
                        "budget": {"max_calls": 400, "max_dollars": null}}),
            )
            .unwrap();
        store.set_meta(MetaKey::KsearchVersion, &json!("0.1.0")).unwrap();
        let mut s = Script {
            store,
            engine: Engine::new(),
            coder_calls_on_a: 0,
            passed: 0,
            answered: 0,
        };
        s.append(Event::Started {
            task: TaskBrief {
                name: "synthetic <task>".into(),
                text: "a task".into(),
                language: ksearch_spec::Language::Cuda,
                convention: String::new(),
                default_file: "kernel.cu".into(),
                target: "## Target hardware: NVIDIA H200 (`h200`)\n- 132 SMs".into(),
                expertise: String::new(),
                seed: Some(vec![Source {
                    path: "kernel.cu".into(),
                    content: SEED.into(),
                }]),
            },
            config: EngineConfig {
                rounds: 6,
                stagnation_window: 2,
                ..EngineConfig::default()
            },
        });
        s
    }

    fn append(&mut self, e: Event) {
        self.store
            .append_event(e.kind(), &serde_json::to_value(&e).unwrap())
            .unwrap();
        self.engine.apply(&e).unwrap();
    }

    fn exchange(&mut self, id: &str, role: &str, answer: Option<&str>) {
        self.store
            .record_exchange(&ExchangeRow {
                request_id: Some(id.into()),
                role: role.into(),
                provider: "openai".into(),
                model: if role == "planner" { "gpt-p" } else { "gpt-c" }.into(),
                answer: answer.map(|a| json!({"text": a})),
                error: answer
                    .is_none()
                    .then(|| "openai: no answer within 120 s, 3 attempt(s); raise `timeout_s`".to_string()),
                input_tokens: if answer.is_some() { 1000 } else { 0 },
                cached_input_tokens: if answer.is_some() { 400 } else { 0 },
                output_tokens: if answer.is_some() { 200 } else { 0 },
                cost_dollars: answer.map(|_| 0.01),
                latency_s: 1.5,
                attempts: 1,
                ..Default::default()
            })
            .unwrap();
        self.answered += answer.is_some() as u32;
    }

    /// Serves the pending request; false once finished.
    fn step(&mut self) -> bool {
        let Some(request) = self.engine.pending().cloned() else {
            return false;
        };
        match request {
            Request::Finished { .. } => return false,
            Request::Evaluate {
                id,
                candidate_id,
                purpose,
                language,
                sources,
            } => {
                let c = self.engine.candidate(candidate_id).unwrap().clone();
                self.store
                    .add_candidate(&CandidateRow {
                        id: candidate_id,
                        parent_id: c.parent,
                        node_id: Some(c.node_id.clone()),
                        round: c.round,
                        cycle: c.cycle,
                        origin: if c.round == 0 { "seed" } else { "coder" }.into(),
                        language,
                        sources: serde_json::to_value(&sources).unwrap(),
                    })
                    .unwrap();
                let (status, speedup) = if sources[0].content.contains("BAD") {
                    ("compile_error", None)
                } else if sources[0].content == SEED {
                    ("passed", Some(1.0))
                } else {
                    self.passed += 1;
                    ("passed", Some(1.0 + 0.25 * self.passed as f64))
                };
                let resources = if status == "passed" && sources[0].content != SEED {
                    kernels()
                } else {
                    vec![]
                };
                let purpose_name = serde_json::to_value(purpose).unwrap().as_str().unwrap().to_string();
                self.store
                    .add_evaluation(&EvaluationRow {
                        id: None,
                        candidate_id,
                        purpose: purpose_name,
                        status: status.into(),
                        speedup,
                        record: record(status, speedup, &resources),
                    })
                    .unwrap();
                self.append(Event::Evaluated {
                    request_id: id,
                    candidate_id,
                    summary: summary(status, speedup, resources),
                });
            }
            Request::Plan { id, plan, .. } => {
                let ops = match serde_json::to_value(&plan).unwrap()["kind"].as_str() {
                    Some("init") => json!([
                        node("a", "vector <width>", 0.9),
                        node("b", "row strategy", 0.5),
                        node("c", "threads", 0.4)
                    ]),
                    Some("too_hard") => json!([{"op": "update_node", "node_id": "c", "set": {"status": "closed"}}]),
                    _ => json!([node(&format!("p{id}"), "tiling", 0.3)]),
                };
                let text = json!({"kernel_summary": "a <b>summary</b>", "ops": ops}).to_string();
                if id == "r2" {
                    self.exchange(&id, "planner", None);
                }
                self.exchange(&id, "planner", Some(&text));
                self.append(Event::PlannerAnswered { request_id: id, text });
            }
            Request::Code { id, node_id, .. } => {
                let text = if node_id == "a" {
                    self.coder_calls_on_a += 1;
                    if self.coder_calls_on_a == 1 {
                        "no code here".to_string()
                    } else {
                        "```cuda kernel.cu\nBAD\n```".to_string()
                    }
                } else {
                    format!("```cuda kernel.cu\n{GOOD}```")
                };
                self.exchange(&id, "coder", Some(&text));
                self.append(Event::CoderAnswered { request_id: id, text });
            }
        }
        true
    }
}

fn statuses(r: &RunReport) -> Vec<(String, String)> {
    r.tree.nodes.iter().map(|n| (n.id.clone(), n.status.clone())).collect()
}

#[test]
fn a_run_in_progress_and_finished_is_fully_accounted_for_and_drawn() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("synthetic");
    let mut s = Script::new(&run_dir);
    for _ in 0..4 {
        assert!(s.step());
    }
    // Read by another connection while the run is open, as the dashboard does.
    let partial = load(&run_dir).unwrap();
    assert!(!partial.state.finished, "{:?}", partial.state);
    assert!(
        partial.state.text.starts_with("in progress, waiting on the"),
        "{:?}",
        partial.state
    );
    assert_eq!(partial.tree.nodes.len(), 4);
    assert_eq!(partial.state.kind, "running");
    // The same run as it reads long after its last event, when nothing recorded a stop: not
    // live any more (the process was killed, most likely).
    let last = partial.state.last_event_at.unwrap();
    let silent = load_at(&run_dir, last + STALLED_AFTER_S + 60.0).unwrap();
    assert_eq!(silent.state.kind, "stalled", "{:?}", silent.state);
    assert!(
        silent
            .state
            .text
            .starts_with("no progress for 16 minutes, last event at 20")
            && silent.state.text.contains("was waiting on the"),
        "{:?}",
        silent.state
    );
    // What the driver records when it stops driving is shown instead, however long ago.
    s.store
        .set_meta(
            MetaKey::Stopped,
            &json!({"reason": "llm_unavailable", "at": last + 1.0,
                    "detail": "3 requests failed in a row; the last: openai: cannot reach http://x"}),
        )
        .unwrap();
    let stopped = load_at(&run_dir, last + 86_400.0).unwrap();
    assert_eq!(stopped.state.kind, "stopped");
    assert!(
        stopped
            .state
            .text
            .starts_with("stopped: the LLM endpoint was unavailable at 20"),
        "{:?}",
        stopped.state
    );
    let stopped_html = Renderer::new().report(&stopped).unwrap();
    assert!(stopped_html.contains("class=\"badge state-stopped\""));
    assert!(
        stopped_html.contains("cannot reach http:&#x2f;&#x2f;x"),
        "the detail is shown"
    );
    // An agent run that waits for its agent is waiting, not stopped.
    s.store
        .set_meta(MetaKey::Stopped, &json!({"reason": "awaiting_agent", "at": last}))
        .unwrap();
    assert_eq!(load(&run_dir).unwrap().state.kind, "waiting");
    // A drive that starts again clears the record.
    s.store.set_meta(MetaKey::Stopped, &serde_json::Value::Null).unwrap();
    assert_eq!(load(&run_dir).unwrap().state.kind, "running");

    // Only the seed so far, whose build reported no resources: no column, no table.
    let partial_html = Renderer::new().report(&partial).unwrap();
    assert!(!partial_html.contains("<th>resources</th>"));
    assert!(!partial_html.contains("Compiler resources"));

    let mut steps = 0;
    while s.step() {
        steps += 1;
        assert!(steps < 100, "the scripted run does not end");
    }
    let r = load(&run_dir).unwrap();
    assert!(r.state.finished, "{:?}", r.state);
    assert_eq!(r.state.kind, "finished");
    assert!(r.state.text.contains(" at 20"), "{:?}", r.state);
    assert_eq!(r.task, "synthetic <task>");
    assert_eq!(r.target, "NVIDIA H200 (h200)");
    assert_eq!(r.strategy, "world-model");
    assert_eq!(r.brain.planner.as_deref(), Some("openai:gpt-p"));
    assert_eq!(r.brain.coder.as_deref(), Some("openai:gpt-c"));
    assert_eq!(r.brain.limits.len(), 1, "unset limits are not listed");

    // Attempts: every candidate, and the coder answer without code, in order.
    let candidates = s.engine.candidates();
    assert_eq!(r.attempts.len(), candidates.len() + 1);
    let no_code: Vec<_> = r.attempts.iter().filter(|a| a.candidate.is_none()).collect();
    assert_eq!(no_code.len(), 1);
    assert_eq!(no_code[0].status.as_deref(), Some("format_error"));
    assert_eq!(no_code[0].node_id.as_deref(), Some("a"));
    assert_eq!(
        r.attempts[1].candidate, None,
        "after the seed, the first attempt had no code"
    );
    assert!(r.attempts.iter().any(|a| a.status.as_deref() == Some("compile_error")));
    // The compiler's resources of each passing coder build, in short; none for the others.
    for a in &r.attempts {
        let coder_pass = a.status.as_deref() == Some("passed") && a.origin == "coder";
        let want = if coder_pass { "40 regs, 2 KiB smem" } else { "" };
        assert_eq!(a.resources, want, "{a:?}");
    }

    let st = statuses(&r);
    assert!(st.contains(&("a".into(), "too_hard".into())), "{st:?}");
    assert!(st.contains(&("c".into(), "closed".into())), "{st:?}");
    assert!(st.contains(&("b".into(), "solved".into())), "{st:?}");
    assert_eq!(r.tree.nodes.len(), s.engine.world_model().tree().nodes().len());
    assert_eq!(r.tree.nodes[0].id, "root");
    assert!(r.tree.nodes.iter().filter(|n| n.best).count() == 1);

    // Budget and usage from the exchanges and evaluation records.
    assert_eq!(r.budget.llm_calls as u32, s.answered);
    assert_eq!(r.budget.failed_llm_calls, 1);
    assert_eq!(r.budget.input_tokens, 1000 * s.answered as u64);
    assert!((r.budget.dollars - 0.01 * s.answered as f64).abs() < 1e-9);
    assert_eq!(r.budget.device_kind, "GPU");
    let evaluations = s.store.evaluations().unwrap().len();
    assert_eq!(r.budget.evaluations, evaluations);
    assert!((r.budget.device_seconds - 0.5 * evaluations as f64).abs() < 1e-9);
    assert_eq!(r.models.len(), 2);
    assert_eq!(r.models.iter().map(|m| m.failed).sum::<usize>(), 1);
    // Why the failed call failed, and the provider's cache.
    assert_eq!(r.budget.llm_errors.len(), 1);
    assert_eq!(
        (r.budget.llm_errors[0].what.as_str(), r.budget.llm_errors[0].count),
        ("timeout", 1)
    );
    assert!(r
        .budget
        .last_llm_error
        .as_deref()
        .unwrap()
        .contains("no answer within 120 s"));
    assert_eq!(r.budget.cached_input_tokens, 400 * s.answered as u64);

    // What the run had spent when each attempt's outcome was known: the seed after one
    // evaluation and before any LLM call; each later attempt after the calls that led to it;
    // never less than the attempt before, never more than the run's totals (the final
    // re-measurements come after the last attempt).
    let spent: Vec<ksearch_report::Spent> = r.attempts.iter().map(|a| a.spent.unwrap()).collect();
    assert_eq!(
        (
            spent[0].evaluations,
            spent[0].device_seconds,
            spent[0].dollars,
            spent[0].tokens
        ),
        (1, 0.5, 0.0, 0)
    );
    // The answer without code: planner and coder answered (two calls, the planner's failed
    // attempt at r2 costing nothing), still one evaluation.
    assert_eq!((spent[1].evaluations, spent[1].tokens), (1, 2 * 1200));
    assert!((spent[1].dollars - 0.02).abs() < 1e-9, "{:?}", spent[1]);
    for w in spent.windows(2) {
        assert!(
            w[1].evaluations >= w[0].evaluations
                && w[1].device_seconds >= w[0].device_seconds
                && w[1].wall_seconds >= w[0].wall_seconds
                && w[1].dollars >= w[0].dollars
                && w[1].tokens >= w[0].tokens,
            "{w:?}"
        );
    }
    for (a, sp) in r.attempts.iter().zip(&spent) {
        if a.candidate.is_some() {
            assert!((sp.device_seconds - 0.5 * sp.evaluations as f64).abs() < 1e-9, "{sp:?}");
        }
    }
    let last = spent.last().unwrap();
    assert!(
        last.evaluations < r.budget.evaluations,
        "the final re-measurements come after"
    );
    assert!(last.dollars <= r.budget.dollars + 1e-12 && last.tokens <= r.budget.input_tokens + r.budget.output_tokens);
    assert!(last.wall_seconds <= r.budget.wall_seconds);

    // What came of the attempts: every status counted, the most common failure named.
    let by_status: usize = r.outcomes.by_status.iter().map(|c| c.count).sum();
    assert_eq!(by_status, r.attempts.len());
    let compile_errors = r
        .attempts
        .iter()
        .filter(|a| a.status.as_deref() == Some("compile_error"))
        .count();
    // One answer without code (first), then compile errors: the first of the most frequent.
    let top = r.outcomes.top_failure.as_ref().unwrap();
    let (want, count) = if compile_errors > 1 {
        ("compile_error: kernel.cu:3: error: expected ';'", compile_errors)
    } else {
        ("format_error: the answer had no usable code", 1)
    };
    assert_eq!((top.what.as_str(), top.count), (want, count));
    assert_eq!(r.outcomes.failed, compile_errors + 1);
    // Noise: the seed measured at 1.00x with 2% noise is within the noise of the reference.
    assert!(r.attempts[0].noisy.as_deref().unwrap().starts_with("within the noise"));
    assert!(r
        .attempts
        .iter()
        .filter(|a| a.speedup.is_some_and(|s| s > 1.1))
        .all(|a| a.noisy.is_none()));
    assert_eq!(r.attempts[0].origin, "seed");

    // The best kernel: its diff against the seed, per-workload numbers with noise, provenance.
    let best = r.best.as_ref().unwrap();
    assert_eq!(best.measured, "final");
    assert_eq!(best.files[0].versus_seed, "changed");
    assert!(best.files[0]
        .diff
        .iter()
        .any(|l| l.kind == "add" && l.text.contains("x[1] = 3")));
    assert!(best.files[0]
        .diff
        .iter()
        .any(|l| l.kind == "del" && l.text == "-  x[1] = 2;"));
    assert!(best.over_seed.unwrap() > 1.0);
    assert_eq!(best.workloads.len(), 2);
    assert_eq!(best.workloads[1].axes, "N=4096");
    assert!((best.workloads[0].relative_noise.unwrap() - 0.04).abs() < 1e-12);
    assert_eq!(best.workloads[0].noisy, None);
    assert!(best.workloads[1]
        .noisy
        .as_deref()
        .unwrap()
        .starts_with("noisy: the IQR is 8.0%"));
    assert_eq!(best.workloads[0].gb_per_s, Some(2100.0));
    assert_eq!(best.kernels.len(), 1);
    let kernel = &best.kernels[0];
    assert_eq!(
        (kernel.short_name.as_str(), kernel.resources.name.as_str()),
        ("k", "_Z1kPf")
    );
    assert_eq!((kernel.resources.registers, kernel.resources.shared_bytes), (40, 2048));
    let prov: Vec<(&str, &str)> = r
        .provenance
        .iter()
        .map(|p| (p.key.as_str(), p.value.as_str()))
        .collect();
    for want in [
        ("device.driver", "570.1"),
        ("device.name", "NVIDIA H200"),
        ("device.cuda_runtime", "12.8"),
        ("compile command", "nvcc -O3 kernel.cu"),
        ("evaluation seed", "99"),
        ("ksearch version", "0.1.0"),
    ] {
        assert!(prov.contains(&want), "{want:?} not in {prov:?}");
    }

    // The pages.
    let renderer = Renderer::new();
    let html = renderer.report(&r).unwrap();
    assert!(
        !html.contains("<script"),
        "markup from the run or a script in the report"
    );
    assert!(html.contains("synthetic &lt;task&gt;"));
    assert!(html.contains("<th>resources</th>"));
    assert!(html.contains("<td class=\"resources\">40 regs, 2 KiB smem</td>"));
    let kernels = &html[html.find("<h3>Compiler resources</h3>").unwrap()..];
    assert!(kernels.contains("<td title=\"_Z1kPf\">k</td><td>sm_90</td><td class=\"n\">40</td>"));
    assert!(kernels.contains("<td class=\"n\">2048 B</td>"));
    assert_eq!(html.matches("class=\"wm-node ").count(), r.tree.nodes.len());
    let chart = &html[html.find("id=\"progress-chart\"").unwrap()..];
    let chart = &chart[..chart.find("</div>").unwrap()];
    // One circle per attempt, each saying which it is; one diamond per final re-measurement,
    // the headline's in gold.
    assert_eq!(chart.matches("<circle").count(), r.attempts.len());
    assert_eq!(chart.matches("<g class=\"attempt\">").count(), r.attempts.len());
    let finals = r.attempts.iter().filter(|a| a.final_status.is_some()).count();
    assert!(finals >= 2, "{finals}");
    assert_eq!(chart.matches("<g class=\"final\">").count(), finals);
    assert_eq!(chart.matches("stroke=\"#d4a000\"").count(), 1);
    let best_id = r.best.as_ref().unwrap().candidate;
    assert!(chart.contains(&format!("candidate {best_id}, final re-measurement: ")));
    assert!(chart
        .contains("coder answer without a candidate, node a, round 1\nformat_error: the answer had no usable code"));
    assert!(
        chart.contains("\nfinal re-measurement\n</text>"),
        "the legend says what diamonds are"
    );
    // The budget: failures by kind, the device time named for what it is.
    assert!(html.contains("Failed calls (1):</b> timeout ×1."));
    assert!(html.contains("<th class=\"n\">of which cached</th>"));
    assert!(
        !html.contains("of which reasoning"),
        "no call reported reasoning tokens"
    );
    assert!(html.contains("Device-seconds") && html.contains("evaluation wall time (GPU), compiles included"));
    assert!(html.contains("<b>Most common failure</b> ("));
    assert!(html.contains("<span class=\"noisy\" title=\"noisy: the IQR is 8.0%"));

    // A knob-tuner run: one card says no LLM was involved, instead of $0 "every call priced".
    let mut tuned = r.clone();
    tuned.brain.kind = "tuner".into();
    tuned.models.clear();
    tuned.budget = ksearch_report::Budget::default();
    tuned.cycles = 1;
    tuned.budget.evaluations = 1;
    let tuned_html = renderer.report(&tuned).unwrap();
    // Counts of one are singular.
    assert!(tuned_html.contains("<div class=\"d\">1 cycle</div>"));
    assert!(tuned_html.contains("compiles included: 1 evaluation</div>"));
    assert!(!tuned_html.contains("1 cycles") && !tuned_html.contains(" 1 evaluations"));
    assert!(tuned_html.contains("<div class=\"v\">no LLM (knob tuner)</div>"));
    assert!(!tuned_html.contains("every call priced") && !tuned_html.contains(">LLM calls<"));
    assert!(tuned_html.contains("No LLM: the knob tuner answered the planner and the coder."));

    let body = renderer
        .dashboard_body(&[&r, &partial], &["run/0".into(), "run/1".into()], &[], XAxis::Round)
        .unwrap();
    assert_eq!(body.matches("<section class=\"run\"").count(), 2);
    assert!(body.contains("id=\"comparison-chart\""));
    // Side by side, the trees are drawn compact enough for their columns.
    for tree in body.split("class=\"wm-tree-svg\"").skip(1) {
        let width: f64 = tree
            .split("width=\"")
            .nth(1)
            .and_then(|w| w.split('"').next())
            .and_then(|w| w.parse().ok())
            .unwrap();
        assert!(width <= 520.0, "{width}");
    }
    // The comparison marks each run's best so far, and says when a run has none.
    let comparison = &body[body.find("id=\"comparison-chart\"").unwrap()..];
    let comparison = &comparison[..comparison.find("</div>").unwrap()];
    assert_eq!(
        comparison.matches("<g class=\"best-point\">").count(),
        ksearch_report::best_so_far(&r.attempts).len() + ksearch_report::best_so_far(&partial.attempts).len()
    );
    let mut failing = partial.clone();
    for a in &mut failing.attempts {
        a.status = Some("compile_error".into());
        a.speedup = None;
    }
    let all_fail = renderer
        .dashboard_body(&[&r, &failing], &[], &[], XAxis::Round)
        .unwrap();
    assert!(all_fail.contains("no passing candidate\n</text>"));
    // Along every axis, one series per run; a run without the quantity has its group, with
    // why, instead of vanishing from the chart.
    let mut tuner = partial.clone();
    tuner.brain.kind = "tuner".into();
    tuner.budget = ksearch_report::Budget {
        evaluations: 1,
        device_seconds: 0.5,
        ..Default::default()
    };
    for axis in XAxis::ALL {
        let body = renderer.dashboard_body(&[&r, &tuner], &[], &[], axis).unwrap();
        let comparison = &body[body.find("id=\"comparison-chart\"").unwrap()..];
        let comparison = &comparison[..comparison.find("</div>").unwrap()];
        assert_eq!(comparison.matches("<g class=\"series").count(), 2, "{axis}");
        assert!(
            comparison
                .split("<text")
                .any(|t| t.split("</text>").next().unwrap().contains(axis.title())),
            "{axis}: the axis says what is across"
        );
        assert!(body.contains(&format!("data-x-axis=\"{axis}\"")));
        assert!(body.contains(&format!("<option value=\"{axis}\" selected>")));
        let llm_only = matches!(axis, XAxis::Dollars | XAxis::Tokens);
        assert_eq!(
            comparison.matches("<g class=\"series missing\"").count(),
            llm_only as usize,
            "{axis}"
        );
        if llm_only {
            assert!(comparison.contains("no LLM (knob tuner)\n</text>"), "{axis}");
        }
        // The LLM run's markers: one per distinct place of a passing attempt.
        let line = ksearch_report::series(&r, axis).unwrap();
        assert_eq!(
            comparison.matches("<g class=\"best-point\">").count(),
            line.points.len() + if llm_only { 0 } else { 1 },
            "{axis}"
        );
    }
    let page = renderer.dashboard_page(&body, "ab12", 500).unwrap();
    assert!(page.contains("var stamp = \"ab12\";"));
    assert_eq!(page.matches("<script").count(), 1, "the dashboard's own script only");
}
