//! API keys never reach the run store, the output or error messages, even when a server echoes
//! them back.

mod common;
use common::*;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const KEY: &str = "sk-test-DO-NOT-LEAK-0123456789";

/// A server that first fails with the caller's Authorization header in its error body, then
/// answers (the planner once, the coder with a correct kernel).
fn start_echoing_server() -> SocketAddr {
    let calls = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = axum::Router::new().route(
                "/v1/chat/completions",
                axum::routing::post(move |headers: axum::http::HeaderMap, axum::Json(body): axum::Json<serde_json::Value>| {
                    let calls = calls.clone();
                    async move {
                        let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
                        if calls.fetch_add(1, Ordering::SeqCst).is_multiple_of(2) {
                            let err = serde_json::json!({"error": {"message": format!("upstream hiccup for {auth}")}});
                            return (axum::http::StatusCode::INTERNAL_SERVER_ERROR, axum::Json(err));
                        }
                        let system = body["messages"][0]["content"].as_str().unwrap_or("").to_string();
                        let text = if system.starts_with("You are the planner") {
                            serde_json::json!({"ops": [{"op": "insert_node", "node": {"node_id": "a", "parent_id": "root",
                                "decision": "d", "choice": "c", "overall_rating": 5, "confidence": 0.5,
                                "action": {"title": "t", "difficulty": 1, "score": 0.5}}}]})
                            .to_string()
                        } else {
                            format!("```c kernel.c\n{SOFTMAX_OK}```")
                        };
                        let ok = serde_json::json!({"model": "m", "choices": [{"message": {"role": "assistant", "content": text},
                            "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 10}});
                        (axum::http::StatusCode::OK, axum::Json(ok))
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
fn a_key_echoed_by_the_server_is_nowhere_in_the_run() {
    let addr = start_echoing_server();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        work.path().join("ksearch.toml"),
        format!(
            "[providers.echo]\nkind = \"openai-chat\"\nbase_url = \"http://{addr}/v1\"\nmodel = \"m\"\n\
             api_key_env = \"KSEARCH_TEST_KEY\"\nretry_base_delay_s = 0.01\n"
        ),
    )
    .unwrap();
    let run_dir = work.path().join("run");
    let r = ksearch_in(
        work.path(),
        &[
            "run",
            fixture("tiny_softmax").to_str().unwrap(),
            "--llm",
            "echo",
            "--rounds",
            "1",
            "--out",
            run_dir.to_str().unwrap(),
        ],
        &[
            ("KSEARCH_TEST_KEY", KEY),
            ("XDG_CONFIG_HOME", work.path().to_str().unwrap()),
        ],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(!r.stdout.contains(KEY) && !r.stderr.contains(KEY));
    // Every file of the run directory, the database, its WAL and the best kernel included.
    let mut checked = 0;
    for entry in walk(&run_dir) {
        let bytes = std::fs::read(&entry).unwrap();
        assert!(
            !bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
            "{} holds the API key",
            entry.display()
        );
        checked += 1;
    }
    assert!(checked >= 2, "the run wrote files");
    // The retried calls were recorded, so the check above looked at real error text.
    let show = ksearch_in(work.path(), &["show", run_dir.to_str().unwrap(), "--json"], &[]).json();
    assert!(show["budget"]["llm_calls"].as_u64().unwrap() >= 2, "{show}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}
