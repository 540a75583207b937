//! Knob sweeps of written kernels: after a coder's kernel with annotated knobs passes and
//! improves its cycle, the engine measures neighbouring knob values itself, within its share of
//! the round budget (engine/knob_sweep.rs).

mod common;
use common::*;
use ksearch_search::engine::*;
use serde_json::json;

fn planner(plan: &PlanKind, _m: &[ksearch_messages::Message], n: usize) -> String {
    let insert = |id: &str, parent: &str| {
        json!({"op": "insert_node", "node": {"node_id": id, "parent_id": parent, "decision": "d", "choice": id,
            "overall_rating": 6, "confidence": 0.5,
            "action": {"title": id, "description": "d", "rationale": "r", "difficulty": 2, "score": 0.5}}})
    };
    match plan {
        PlanKind::Init => json!({"ops": [insert("a", "root"), insert("b", "root"), insert("c", "root")]}),
        PlanKind::Refine { node_id } | PlanKind::TooHard { node_id } => {
            json!({"ops": [insert(&format!("{node_id}x{n}"), node_id)]})
        }
        PlanKind::Propose => json!({"ops": [insert(&format!("p{n}"), "root")]}),
    }
    .to_string()
}

/// What the coder always writes: BLOCK and UNROLL annotated, at values that are not the best.
const KERNEL: &str = "#define BLOCK 64 // ksearch: knob values=[32, 64, 128, 256]\n\
                      #define UNROLL 1 // ksearch: knob values=[1, 2, 4]\n\
                      void k(const float *x, float *y, int64_t n) { /* ... */ }\n";

fn value(src: &str, name: &str) -> u32 {
    let at = src.find(&format!("#define {name} ")).unwrap() + 9 + name.len();
    src[at..].split_whitespace().next().unwrap().parse().unwrap()
}

/// The speed of a kernel as a function of its knobs; BLOCK=128, UNROLL=2 is the best (1.65x).
fn measure(sources: &[Source]) -> EvalSummary {
    let src = &sources[0].content;
    if src.starts_with("seed") {
        return summary(src);
    }
    let block = match value(src, "BLOCK") {
        32 => 1.0,
        64 => 1.2,
        128 => 1.5,
        _ => 1.3,
    };
    let unroll = match value(src, "UNROLL") {
        1 => 1.0,
        2 => 1.1,
        _ => 1.05,
    };
    summary(&format!("SPEED={}", block * unroll))
}

fn run(knob_share: f64, rounds: u32, kernel: &'static str) -> (Engine, Vec<Event>, usize) {
    let config = EngineConfig {
        rounds,
        stagnation_window: 2,
        knob_share,
        ..EngineConfig::default()
    };
    let mut coder_calls = 0;
    let (engine, events) = drive_with(
        true,
        config,
        planner,
        |_, _| {
            coder_calls += 1;
            code(kernel)
        },
        measure,
        1000,
    );
    (engine, events, coder_calls)
}

fn variants(engine: &Engine) -> Vec<&Candidate> {
    engine
        .candidates()
        .iter()
        .filter(|c| {
            c.note
                .as_deref()
                .is_some_and(|n| n.starts_with("knob sweep of candidate"))
        })
        .collect()
}

#[test]
fn a_sweep_climbs_from_the_coders_values_within_its_share_of_rounds() {
    let (engine, events, coder_calls) = run(0.5, 12, KERNEL);
    assert!(engine.is_finished());
    assert_eq!(engine.round(), 12);
    // Half the rounds at most: the hill climb (128,1) (256,1) (128,2) (256,2) (64,2) (128,4).
    let v = variants(&engine);
    assert_eq!(v.len(), 6, "{:#?}", v.iter().map(|c| &c.note).collect::<Vec<_>>());
    assert_eq!(coder_calls, 12 - 6);
    let notes: Vec<&str> = v.iter().filter_map(|c| c.note.as_deref()).collect();
    assert_eq!(notes[0], "knob sweep of candidate 2: BLOCK=128");
    assert!(notes[2].ends_with(": UNROLL=2"), "{notes:?}");
    // Each variant descends from the best kernel of the sweep at the time it was made.
    assert_eq!(v[0].parent, Some(2));
    assert_eq!(v[2].parent, Some(v[0].id));
    // The best kernel is the climb's end, and it is what the cycle's node holds.
    let Some(Request::Finished { best_candidate, .. }) = engine.pending() else {
        panic!("not finished")
    };
    let best = engine.candidate(best_candidate.unwrap()).unwrap();
    let src = &best.sources[0].content;
    assert!(
        src.starts_with("#define BLOCK 128 // ksearch: knob values=[32, 64, 128, 256]\n#define UNROLL 2 //"),
        "{src}"
    );
    assert!((best.speedup().unwrap() - 1.65).abs() < 1e-9);
    let a = engine.world_model().node("a").unwrap();
    assert_eq!(a.solution_ref.as_ref().map(|s| s.candidate_id), Some(best.id));
    // The engine stays a pure function of its log.
    let again = Engine::replay(&events).unwrap();
    assert_eq!(again.candidates(), engine.candidates());
    assert_eq!(again.world_model().to_json(), engine.world_model().to_json());
}

#[test]
fn the_share_caps_every_sweep_of_the_run_together() {
    let (engine, _, coder_calls) = run(0.25, 12, KERNEL);
    assert_eq!(variants(&engine).len(), 3);
    assert_eq!(coder_calls, 9);
}

#[test]
fn no_share_no_sweep_and_no_annotation_in_the_instructions() {
    let (engine, _, coder_calls) = run(0.0, 6, KERNEL);
    assert!(variants(&engine).is_empty());
    assert_eq!(coder_calls, 6);
    let system_of = |share: f64| {
        let mut e = Engine::new();
        let config = EngineConfig {
            knob_share: share,
            ..EngineConfig::default()
        };
        e.apply(&Event::Started {
            task: brief(false),
            config,
        })
        .unwrap();
        // Answer the init plan to reach a code request and read the coder's instructions.
        let Some(Request::Plan { id, plan, messages }) = e.pending().cloned() else {
            panic!("no plan request first")
        };
        e.apply(&Event::PlannerAnswered {
            request_id: id,
            text: planner(&plan, &messages, 1),
        })
        .unwrap();
        let Some(Request::Code { messages, .. }) = e.pending() else {
            panic!("no code request")
        };
        messages[0].content.clone()
    };
    assert!(system_of(0.25).contains("#define BLOCK 128  // ksearch: knob values=[64, 128, 256]"));
    assert!(!system_of(0.0).contains("ksearch: knob"));
}

#[test]
fn malformed_annotations_cost_the_sweep_not_the_kernel() {
    const BAD: &str = "#define BLOCK 48 // ksearch: knob values=[32, 64]\n#define UNROLL 1\nvoid k(void) {}\n";
    let (engine, _, coder_calls) = run(0.5, 6, BAD);
    assert!(variants(&engine).is_empty());
    assert_eq!(coder_calls, 6);
    assert!(
        engine.candidates().iter().skip(1).all(|c| c.passed()),
        "the kernels themselves were measured"
    );
    // The kernel that improved its cycle (and would have been swept) says why it was not.
    let first = &engine.candidates()[1];
    assert_eq!(
        first.note.as_deref(),
        Some(
            "knob annotations not swept (fix them to have the values tried): kernel.c:1: knob BLOCK: the source \
             holds '48', which is not among the listed values [32, 64]"
        )
    );
    // The coder hears of it when asked to improve that kernel.
    let (_, events, _) = run(0.5, 6, BAD);
    let mut e = Engine::new();
    let mut improve_prompts = Vec::new();
    for event in &events {
        e.apply(event).unwrap();
        if let Some(Request::Code {
            code: CodeKind::Improve,
            messages,
            ..
        }) = e.pending()
        {
            improve_prompts.push(messages.last().unwrap().content.clone());
        }
    }
    assert!(!improve_prompts.is_empty(), "no improve request in the run");
    assert!(
        improve_prompts
            .iter()
            .any(|p| p.contains("What ksearch noticed about this code: knob annotations not swept")),
        "{improve_prompts:#?}"
    );
    // Without a share, annotations are not offered, so nothing is said about them.
    let (engine, _, _) = run(0.0, 6, BAD);
    assert!(engine.candidates().iter().all(|c| c.note.is_none()));
}
