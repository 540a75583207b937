//! An endpoint that refuses the run's key (HTTP 401) stops the run with exit status 1, the
//! request kept unanswered and the run not "finished"; once the key works, `resume` goes on from
//! that request and the run finishes.

mod common;
use common::*;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

fn plan() -> String {
    let node = serde_json::json!({"op": "insert_node", "node": {"node_id": "a", "parent_id": "root", "decision": "rows",
        "choice": "one pass", "overall_rating": 6, "confidence": 0.5,
        "action": {"title": "implement a", "description": "write it", "rationale": "a start", "difficulty": 2, "score": 0.9}}});
    format!(
        "```json\n{}\n```",
        serde_json::json!({"kernel_summary": "softmax", "ops": [node]})
    )
}

/// Serves chat completions: 401 while `refuse` is set, else a scripted planner and coder.
fn start_server(refuse: Arc<AtomicBool>, calls: Arc<AtomicUsize>) -> SocketAddr {
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
                    let (refuse, calls) = (refuse.clone(), calls.clone());
                    async move {
                        calls.fetch_add(1, Ordering::SeqCst);
                        if refuse.load(Ordering::SeqCst) {
                            return (
                                axum::http::StatusCode::UNAUTHORIZED,
                                axum::Json(serde_json::json!({"error": {"message": "invalid api key", "type": "auth"}})),
                            );
                        }
                        let system = body["messages"][0]["content"].as_str().unwrap_or("").to_string();
                        let user = body["messages"].as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str()).unwrap_or("").to_string();
                        let text = if system.starts_with("You are the planner") {
                            if user.contains("This is the start of the search") { plan() } else { "{\"ops\": []}".to_string() }
                        } else {
                            format!("**kernel.c**\n```c\n{SOFTMAX_OK}```\n")
                        };
                        (
                            axum::http::StatusCode::OK,
                            axum::Json(serde_json::json!({
                                "id": "x", "object": "chat.completion", "model": "scripted",
                                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                                "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}
                            })),
                        )
                    }
                }),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    rx.recv().unwrap()
}

#[test]
fn a_refused_key_stops_with_exit_1_and_resume_goes_on_once_it_works() {
    let refuse = Arc::new(AtomicBool::new(true));
    let calls = Arc::new(AtomicUsize::new(0));
    let addr = start_server(refuse.clone(), calls.clone());
    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        work.path().join("ksearch.toml"),
        format!(
            "[providers.local]\nkind = \"openai-chat\"\nbase_url = \"http://{addr}/v1\"\nmodel = \"scripted\"\n\
             api_key_env = \"KSEARCH_TEST_KEY\"\nretry_base_delay_s = 0.01\n"
        ),
    )
    .unwrap();
    let task = copy_fixture("tiny_softmax");
    let env = [
        ("KSEARCH_TEST_KEY", "k"),
        ("XDG_CONFIG_HOME", work.path().to_str().unwrap()),
    ];
    let run_dir = work.path().join("r");
    let r = ksearch_in(
        work.path(),
        &[
            "run",
            task.path().to_str().unwrap(),
            "--llm",
            "local",
            "--rounds",
            "2",
            "--seed",
            "3",
            "--json",
            "--out",
            run_dir.to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["status"], "llm_refused", "{j}");
    assert!(
        j["error"].as_str().unwrap().contains("401") || j["error"].as_str().unwrap().to_lowercase().contains("key"),
        "{j}"
    );
    let show = ksearch_in(work.path(), &["show", run_dir.to_str().unwrap(), "--json"], &env).json();
    assert!(!show["state"].as_str().unwrap().starts_with("finished"), "{show}");

    refuse.store(false, Ordering::SeqCst);
    let before = calls.load(Ordering::SeqCst);
    let r = ksearch_in(work.path(), &["resume", run_dir.to_str().unwrap(), "--json"], &env);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["status"], "finished");
    assert!(calls.load(Ordering::SeqCst) > before, "resume sent nothing");
}
