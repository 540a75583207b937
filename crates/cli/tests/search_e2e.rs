//! A whole search against a real local HTTP server that speaks the OpenAI chat-completions
//! protocol and plays a scripted planner and coder whose kernels are real C: the run must find
//! the faster kernel, measure it above the reference, and `show` must display the tree.

mod common;
use common::*;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const SLOW: &str = r#"#include <stdint.h>
#include <math.h>
/* variant SLOW: recomputes the row maximum for every element */
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    for (int64_t i = 0; i < M; i++) {
        const float *r = x + i * N; float *o = y + i * N;
        double s = 0;
        for (int64_t j = 0; j < N; j++) {
            float m = r[0];
            for (int64_t k = 1; k < N; k++) m = r[k] > m ? r[k] : m;
            o[j] = expf(r[j] - m); s += o[j];
        }
        for (int64_t j = 0; j < N; j++) o[j] = (float)(o[j] / s);
    }
}
"#;

fn fast() -> String {
    SOFTMAX_OK.replace("#include <math.h>", "#include <math.h>\n/* variant FAST */")
}

fn planner_answer(prompt: &str) -> String {
    if prompt.contains("This is the start of the search") {
        let node = |id: &str, score: f64| {
            serde_json::json!({"op": "insert_node", "node": {"node_id": id, "parent_id": "root", "decision": "row strategy",
                "choice": format!("option {id}"), "overall_rating": 6, "confidence": 0.5,
                "action": {"title": format!("implement {id}"), "description": "write the kernel", "rationale": "a start",
                           "difficulty": 2, "score": score}}})
        };
        let answer = serde_json::json!({"kernel_summary": "row softmax", "ops": [node("a", 0.9), node("b", 0.5), node("c", 0.4)]});
        format!("Here is my plan.\n```json\n{answer}\n```")
    } else {
        serde_json::json!({"ops": []}).to_string()
    }
}

/// Serves /v1/chat/completions on a background thread; returns its address and the coder's call count.
fn start_server() -> (SocketAddr, Arc<AtomicUsize>) {
    let coder_calls = Arc::new(AtomicUsize::new(0));
    let calls = coder_calls.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = axum::Router::new().route(
                "/v1/chat/completions",
                axum::routing::post(move |axum::Json(body): axum::Json<serde_json::Value>| {
                    let calls = calls.clone();
                    async move {
                        assert_eq!(body["model"], "scripted");
                        let messages = body["messages"].as_array().cloned().unwrap_or_default();
                        let system = messages[0]["content"].as_str().unwrap_or("").to_string();
                        let user = messages.last().and_then(|m| m["content"].as_str()).unwrap_or("").to_string();
                        let text = if system.starts_with("You are the planner") {
                            planner_answer(&user)
                        } else {
                            let n = calls.fetch_add(1, Ordering::SeqCst);
                            let kernel = if n == 0 { SLOW.to_string() } else { fast() };
                            format!("**kernel.c**\n```c\n{kernel}```\n")
                        };
                        axum::Json(serde_json::json!({
                            "id": "x", "object": "chat.completion", "model": "scripted",
                            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200}
                        }))
                    }
                }),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    (rx.recv().unwrap(), coder_calls)
}

#[test]
fn a_scripted_search_finds_the_faster_kernel_and_show_displays_it() {
    let (addr, coder_calls) = start_server();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        work.path().join("ksearch.toml"),
        format!("[providers.local]\nkind = \"openai-chat\"\nbase_url = \"http://{addr}/v1\"\nmodel = \"scripted\"\nretry_base_delay_s = 0.01\n"),
    )
    .unwrap();
    // The fixture without its seed, so every candidate comes from the coder.
    let task = copy_fixture("tiny_softmax");
    std::fs::write(task.path().join("task.toml"), "[evaluation]\ntrials = 2\niterations = 15\nmin_iterations = 5\nmax_timing_s = 0.3\n\n[tolerance.float32]\natol = 1e-7\nrtol = 1e-4\n\n[kernel]\nlanguage = \"c\"\nentry = \"softmax\"\n").unwrap();
    let run_dir = work.path().join("run");
    let env = [("XDG_CONFIG_HOME", work.path().to_str().unwrap())];
    let r = ksearch_in(
        work.path(),
        &[
            "run",
            task.path().to_str().unwrap(),
            "--llm",
            "local",
            "--rounds",
            "3",
            "--out",
            run_dir.to_str().unwrap(),
            "--json",
            "--seed",
            "5",
        ],
        &env,
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["status"], "finished");
    assert_eq!(coder_calls.load(Ordering::SeqCst), 3);
    let best = std::fs::read_to_string(run_dir.join("best/kernel.c")).unwrap();
    assert!(best.contains("variant FAST"), "the best is the faster kernel:\n{best}");
    assert!(j["best_speedup"].as_f64().unwrap() > 1.0, "{j}");

    let show = ksearch_in(work.path(), &["show", run_dir.to_str().unwrap()], &env);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(show.stdout.contains("a row strategy: option a"), "{}", show.stdout);
    assert!(show.stdout.contains("best: candidate"), "{}", show.stdout);
    assert!(
        show.stdout.contains("3 LLM calls") || show.stdout.contains("LLM calls"),
        "{}",
        show.stdout
    );
    let show_json = ksearch_in(work.path(), &["show", run_dir.to_str().unwrap(), "--json"], &env).json();
    assert_eq!(show_json["candidates"].as_array().unwrap().len(), 3);
    assert!(show_json["budget"]["llm_calls"].as_u64().unwrap() >= 4, "{show_json}");
    let nodes = show_json["world_model"]["decision_tree"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 4, "root and three actions");
}
