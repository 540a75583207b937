//! The four wire protocols and the shared retry machinery, against a real local HTTP server.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use ksearch_llm::providers::build_with_key;
use ksearch_llm::{
    ChatModel, ChatRequest, FinishReason, LlmError, Message, ProviderConfig, ProviderKind, Secret, Usage,
};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const KEY: &str = "sk-test-SECRET-0123456789abcdef";
const KEY_ENV: &str = "KSEARCH_TEST_PROVIDER_KEY";

/// What the server answers to one request.
#[derive(Clone)]
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
    delay: Duration,
}

fn ok(body: Value) -> Reply {
    reply(200, body.to_string())
}

fn reply(status: u16, body: impl Into<String>) -> Reply {
    Reply {
        status,
        headers: vec![("content-type", "application/json".into())],
        body: body.into(),
        delay: Duration::ZERO,
    }
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    headers: HeaderMap,
    body: Value,
    at: Instant,
}

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<Reply>>,
    seen: Mutex<Vec<Seen>>,
}

struct Server {
    base: String,
    shared: Arc<Shared>,
}

impl Server {
    fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }
    fn hits(&self) -> usize {
        self.shared.seen.lock().unwrap().len()
    }
}

/// Serves `replies` in order, repeating the last one.
async fn serve(replies: Vec<Reply>) -> Server {
    assert!(!replies.is_empty());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shared = Arc::new(Shared {
        script: Mutex::new(replies.into()),
        seen: Mutex::new(Vec::new()),
    });
    let app = Router::new().fallback(handle).with_state(shared.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Server {
        base: format!("http://{addr}"),
        shared,
    }
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    shared.seen.lock().unwrap().push(Seen {
        path: parts.uri.path().to_string(),
        headers: parts.headers.clone(),
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        at: Instant::now(),
    });
    let next = {
        let mut script = shared.script.lock().unwrap();
        if script.len() > 1 {
            script.pop_front().unwrap()
        } else {
            script.front().cloned().unwrap()
        }
    };
    tokio::time::sleep(next.delay).await;
    let mut response = (StatusCode::from_u16(next.status).unwrap(), next.body).into_response();
    for (name, value) in next.headers {
        response.headers_mut().insert(name, value.parse().unwrap());
    }
    response
}

fn config(kind: ProviderKind, base_url: &str, model: &str) -> ProviderConfig {
    ProviderConfig {
        name: "testprov".into(),
        kind,
        base_url: base_url.into(),
        model: model.into(),
        api_key_env: Some(KEY_ENV.into()),
        timeout_s: 5.0,
        connect_timeout_s: 2.0,
        temperature: None,
        max_tokens: None,
        reasoning_effort: None,
        max_retries: 3,
        retry_base_delay_s: 0.01,
        retry_max_delay_s: 0.05,
    }
}

fn model(config: &ProviderConfig) -> Box<dyn ChatModel> {
    build_with_key(config, Some(Secret::new(KEY))).unwrap()
}

fn conversation() -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::system("You write kernels."),
            Message::user("Write a sum."),
            Message::assistant("Which dtype?"),
            Message::system("Be brief."),
            Message::user("f32."),
        ],
        ..Default::default()
    }
}

fn header<'a>(seen: &'a Seen, name: &str) -> Option<&'a str> {
    seen.headers.get(name).map(|v| v.to_str().unwrap())
}

// ---------------------------------------------------------------------------------------------
// The four wire protocols: request bodies and realistic answers.

#[tokio::test]
async fn openai_chat_request_and_answer() {
    let server = serve(vec![ok(json!({
        "id": "chatcmpl-123",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4.1-2025-04-14",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": "float sum(...) {}", "refusal": null},
            "logprobs": null,
            "finish_reason": "stop"
        }],
        "usage": {
            "prompt_tokens": 1200,
            "completion_tokens": 340,
            "total_tokens": 1540,
            "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 128, "audio_tokens": 0}
        }
    }))])
    .await;
    let mut cfg = config(ProviderKind::OpenaiChat, &format!("{}/v1", server.base), "gpt-4.1");
    cfg.temperature = Some(0.2);
    cfg.max_tokens = Some(1000);
    let mut request = conversation();
    request.max_tokens = Some(123); // the request wins over the configuration
    let answer = model(&cfg).complete(&request).await.unwrap();

    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(
        header(&seen[0], "authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(
        seen[0].body,
        json!({
            "model": "gpt-4.1",
            "messages": [
                {"role": "system", "content": "You write kernels."},
                {"role": "user", "content": "Write a sum."},
                {"role": "assistant", "content": "Which dtype?"},
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "f32."}
            ],
            "max_tokens": 123,
            "temperature": 0.2
        })
    );

    assert_eq!(answer.text, "float sum(...) {}");
    assert_eq!(answer.finish_reason, FinishReason::Stop);
    assert_eq!(answer.model, "gpt-4.1-2025-04-14");
    assert_eq!(answer.attempts, 1);
    assert_eq!(
        answer.usage,
        Usage {
            input_tokens: 1200,
            output_tokens: 340,
            cached_input_tokens: 1024,
            reasoning_tokens: 128
        }
    );
}

#[tokio::test]
async fn openai_chat_without_key_sends_no_authorization() {
    let server = serve(vec![ok(json!({
        "model": "qwen",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 0, "total_tokens": 5}
    }))])
    .await;
    let mut cfg = config(ProviderKind::OpenaiChat, &server.base, "qwen");
    cfg.api_key_env = None;
    let answer = build_with_key(&cfg, None)
        .unwrap()
        .complete(&ChatRequest {
            messages: vec![Message::user("hi")],
            ..Default::default()
        })
        .await
        .unwrap();
    let seen = server.seen();
    assert_eq!(seen[0].path, "/chat/completions");
    assert_eq!(header(&seen[0], "authorization"), None);
    // Nothing configured, nothing sent.
    assert_eq!(
        seen[0].body,
        json!({"model": "qwen", "messages": [{"role": "user", "content": "hi"}]})
    );
    // An empty answer that stopped normally is an answer; the caller decides what it is worth.
    assert_eq!((answer.text.as_str(), answer.finish_reason), ("", FinishReason::Stop));
    assert_eq!(answer.usage.input_tokens, 5);
}

#[tokio::test]
async fn openai_responses_request_and_answer() {
    let server = serve(vec![ok(json!({
        "id": "resp_abc",
        "object": "response",
        "created_at": 1_741_476_542,
        "status": "completed",
        "error": null,
        "incomplete_details": null,
        "model": "o4-mini-2025-04-16",
        "output": [
            {"id": "rs_1", "type": "reasoning", "summary": []},
            {
                "id": "msg_1",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": "Part one. ", "annotations": []},
                    {"type": "refusal", "refusal": "not this"},
                    {"type": "output_text", "text": "Part two.", "annotations": []}
                ]
            }
        ],
        "usage": {
            "input_tokens": 2000,
            "input_tokens_details": {"cached_tokens": 1536},
            "output_tokens": 900,
            "output_tokens_details": {"reasoning_tokens": 640},
            "total_tokens": 2900
        }
    }))])
    .await;
    let mut cfg = config(
        ProviderKind::OpenaiResponses,
        &format!("{}/v1/", server.base),
        "o4-mini",
    );
    cfg.reasoning_effort = Some("medium".into());
    cfg.max_tokens = Some(4000);
    let mut request = conversation();
    request.reasoning_effort = Some("high".into());
    request.temperature = Some(1.0);
    let answer = model(&cfg).complete(&request).await.unwrap();

    let seen = server.seen();
    assert_eq!(seen[0].path, "/v1/responses");
    assert_eq!(
        header(&seen[0], "authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(
        seen[0].body,
        json!({
            "model": "o4-mini",
            "instructions": "You write kernels.\n\nBe brief.",
            "input": [
                {"role": "user", "content": "Write a sum."},
                {"role": "assistant", "content": "Which dtype?"},
                {"role": "user", "content": "f32."}
            ],
            "max_output_tokens": 4000,
            "reasoning": {"effort": "high"},
            "temperature": 1.0
        })
    );
    assert_eq!(answer.text, "Part one. Part two.");
    assert_eq!(answer.finish_reason, FinishReason::Stop);
    assert_eq!(answer.model, "o4-mini-2025-04-16");
    assert_eq!(
        answer.usage,
        Usage {
            input_tokens: 2000,
            output_tokens: 900,
            cached_input_tokens: 1536,
            reasoning_tokens: 640
        }
    );
}

#[tokio::test]
async fn anthropic_request_and_answer() {
    let server = serve(vec![ok(json!({
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [
            {"type": "thinking", "thinking": "hidden musing", "signature": "sig"},
            {"type": "text", "text": "Here is "},
            {"type": "text", "text": "the kernel."}
        ],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {
            "input_tokens": 100,
            "cache_creation_input_tokens": 300,
            "cache_read_input_tokens": 2000,
            "output_tokens": 450
        }
    }))])
    .await;
    let mut cfg = config(ProviderKind::Anthropic, &server.base, "claude-sonnet-4-5");
    cfg.temperature = Some(0.7);
    let m = model(&cfg);
    let answer = m.complete(&conversation()).await.unwrap();

    // With thinking: the budget is derived from the effort and max_tokens leaves room after it;
    // no temperature (the API rejects one with thinking).
    let mut thinking = conversation();
    thinking.reasoning_effort = Some("high".into());
    thinking.max_tokens = Some(4096);
    m.complete(&thinking).await.unwrap();
    let mut roomy = conversation();
    roomy.reasoning_effort = Some("low".into());
    roomy.max_tokens = Some(32000);
    m.complete(&roomy).await.unwrap();

    let seen = server.seen();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0].path, "/v1/messages");
    assert_eq!(header(&seen[0], "x-api-key"), Some(KEY));
    assert_eq!(header(&seen[0], "anthropic-version"), Some("2023-06-01"));
    assert_eq!(header(&seen[0], "authorization"), None);
    assert_eq!(
        seen[0].body,
        json!({
            "model": "claude-sonnet-4-5",
            "system": "You write kernels.\n\nBe brief.",
            "messages": [
                {"role": "user", "content": "Write a sum."},
                {"role": "assistant", "content": "Which dtype?"},
                {"role": "user", "content": "f32."}
            ],
            "max_tokens": 8192,
            "temperature": 0.7
        })
    );
    assert_eq!(
        seen[1].body["thinking"],
        json!({"type": "enabled", "budget_tokens": 24576})
    );
    assert_eq!(seen[1].body["max_tokens"], json!(24576 + 4096));
    assert_eq!(seen[1].body.get("temperature"), None);
    assert_eq!(
        seen[2].body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(seen[2].body["max_tokens"], json!(32000));

    assert_eq!(answer.text, "Here is the kernel.");
    assert_eq!(answer.finish_reason, FinishReason::Stop);
    assert_eq!(answer.model, "claude-sonnet-4-5-20250929");
    assert_eq!(
        answer.usage,
        Usage {
            input_tokens: 2400,
            output_tokens: 450,
            cached_input_tokens: 2000,
            reasoning_tokens: 0
        }
    );
}

#[tokio::test]
async fn gemini_request_and_answer() {
    let server = serve(vec![ok(json!({
        "candidates": [{
            "content": {
                "role": "model",
                "parts": [
                    {"text": "Let me think about reductions...", "thought": true},
                    {"text": "__global__ void sum"},
                    {"text": "(...) {}"}
                ]
            },
            "finishReason": "STOP",
            "index": 0
        }],
        "usageMetadata": {
            "promptTokenCount": 1500,
            "candidatesTokenCount": 200,
            "thoughtsTokenCount": 800,
            "cachedContentTokenCount": 1024,
            "totalTokenCount": 2500
        },
        "modelVersion": "gemini-2.5-pro",
        "responseId": "abc"
    }))])
    .await;
    let mut cfg = config(
        ProviderKind::Gemini,
        &format!("{}/v1beta", server.base),
        "gemini-2.5-pro",
    );
    cfg.max_tokens = Some(30000);
    cfg.temperature = Some(0.5);
    cfg.reasoning_effort = Some("medium".into());
    let answer = model(&cfg).complete(&conversation()).await.unwrap();

    let seen = server.seen();
    assert_eq!(seen[0].path, "/v1beta/models/gemini-2.5-pro:generateContent");
    assert_eq!(header(&seen[0], "x-goog-api-key"), Some(KEY));
    assert_eq!(header(&seen[0], "authorization"), None);
    assert_eq!(
        seen[0].body,
        json!({
            "systemInstruction": {"parts": [{"text": "You write kernels.\n\nBe brief."}]},
            "contents": [
                {"role": "user", "parts": [{"text": "Write a sum."}]},
                {"role": "model", "parts": [{"text": "Which dtype?"}]},
                {"role": "user", "parts": [{"text": "f32."}]}
            ],
            "generationConfig": {
                "thinkingConfig": {"thinkingBudget": 8192},
                "maxOutputTokens": 30000,
                "temperature": 0.5
            }
        })
    );
    assert_eq!(answer.text, "__global__ void sum(...) {}");
    assert_eq!(answer.finish_reason, FinishReason::Stop);
    assert_eq!(answer.model, "gemini-2.5-pro");
    assert_eq!(
        answer.usage,
        Usage {
            input_tokens: 1500,
            output_tokens: 1000,
            cached_input_tokens: 1024,
            reasoning_tokens: 800
        }
    );
}

#[tokio::test]
async fn truncated_answers_are_length_for_every_protocol() {
    let cases = [
        (
            ProviderKind::OpenaiChat,
            json!({
                "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "half an ans"}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 64}
            }),
        ),
        (
            ProviderKind::OpenaiResponses,
            json!({
                "model": "m",
                "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"},
                "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "half an ans"}]}],
                "usage": {"input_tokens": 10, "output_tokens": 64}
            }),
        ),
        (
            ProviderKind::Anthropic,
            json!({
                "type": "message",
                "model": "m",
                "content": [{"type": "text", "text": "half an ans"}],
                "stop_reason": "max_tokens",
                "usage": {"input_tokens": 10, "output_tokens": 64}
            }),
        ),
        (
            ProviderKind::Gemini,
            json!({
                "candidates": [{"content": {"role": "model", "parts": [{"text": "half an ans"}]}, "finishReason": "MAX_TOKENS"}],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 64}
            }),
        ),
    ];
    for (kind, body) in cases {
        let server = serve(vec![ok(body)]).await;
        let answer = model(&config(kind, &server.base, "m"))
            .complete(&conversation())
            .await
            .unwrap();
        assert_eq!(answer.finish_reason, FinishReason::Length, "{kind:?}");
        assert!(answer.truncated(), "{kind:?}");
        assert_eq!(answer.text, "half an ans", "{kind:?}");
        assert_eq!(
            (answer.usage.input_tokens, answer.usage.output_tokens),
            (10, 64),
            "{kind:?}"
        );
    }
}

#[tokio::test]
async fn content_filters_are_recognised() {
    let cases = [
        (
            ProviderKind::OpenaiChat,
            json!({"choices": [{"message": {"role": "assistant", "content": null}, "finish_reason": "content_filter"}]}),
        ),
        (
            ProviderKind::Gemini,
            json!({"candidates": [{"finishReason": "SAFETY"}], "usageMetadata": {"promptTokenCount": 3}}),
        ),
        // A blocked prompt: no candidates at all.
        (
            ProviderKind::Gemini,
            json!({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3}}),
        ),
    ];
    for (kind, body) in cases {
        let server = serve(vec![ok(body.clone())]).await;
        let answer = model(&config(kind, &server.base, "m"))
            .complete(&conversation())
            .await
            .unwrap();
        assert_eq!(answer.finish_reason, FinishReason::ContentFilter, "{body}");
        assert_eq!(answer.text, "", "{body}");
    }
}

// ---------------------------------------------------------------------------------------------
// The shared machinery: retries, waits, timeouts and errors.

fn chat_ok() -> Reply {
    ok(json!({
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1}
    }))
}

fn with_header(mut r: Reply, name: &'static str, value: &str) -> Reply {
    r.headers.push((name, value.to_string()));
    r
}

#[tokio::test]
async fn retry_after_is_honoured_on_429() {
    let limited = with_header(
        reply(429, r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#),
        "retry-after",
        "1",
    );
    let server = serve(vec![limited, chat_ok()]).await;
    let started = Instant::now();
    let answer = model(&config(ProviderKind::OpenaiChat, &server.base, "m"))
        .complete(&conversation())
        .await
        .unwrap();
    assert_eq!(answer.text, "done");
    assert_eq!(answer.attempts, 2);
    assert_eq!(server.hits(), 2);
    let seen = server.seen();
    let gap = seen[1].at - seen[0].at;
    // The backoff alone would be at most 10 ms.
    assert!(gap >= Duration::from_millis(950), "waited only {gap:?}");
    assert!(
        answer.latency >= Duration::from_millis(950),
        "latency {:?}",
        answer.latency
    );
    assert!(answer.latency <= started.elapsed());
}

#[tokio::test]
async fn retry_after_as_an_http_date_is_honoured_on_503() {
    let when = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(2));
    let busy = with_header(reply(503, "overloaded"), "retry-after", &when);
    let server = serve(vec![busy, chat_ok()]).await;
    let answer = model(&config(ProviderKind::OpenaiChat, &server.base, "m"))
        .complete(&conversation())
        .await
        .unwrap();
    assert_eq!(answer.attempts, 2);
    let seen = server.seen();
    // HTTP dates have whole-second precision: the wait is between 1 and 2 s.
    assert!(
        seen[1].at - seen[0].at >= Duration::from_millis(900),
        "{:?}",
        seen[1].at - seen[0].at
    );
}

#[tokio::test]
async fn retry_after_beyond_ten_minutes_ends_the_retries() {
    let quota = with_header(
        reply(429, r#"{"error":{"message":"daily quota exhausted"}}"#),
        "retry-after",
        "86400",
    );
    let server = serve(vec![quota, chat_ok()]).await;
    let started = Instant::now();
    let err = model(&config(ProviderKind::OpenaiChat, &server.base, "m"))
        .complete(&conversation())
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(server.hits(), 1);
    assert!(
        matches!(
            err,
            LlmError::Http {
                status: 429,
                attempts: 1,
                ..
            }
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("daily quota exhausted") && text.contains("86400"),
        "{text}"
    );
}

#[tokio::test]
async fn server_errors_are_retried() {
    let server = serve(vec![reply(500, "Internal Server Error"), chat_ok()]).await;
    let answer = model(&config(ProviderKind::OpenaiChat, &server.base, "m"))
        .complete(&conversation())
        .await
        .unwrap();
    assert_eq!(answer.attempts, 2);
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn persistent_server_errors_give_up_after_max_retries() {
    let server = serve(vec![reply(
        502,
        r#"{"type":"error","error":{"type":"api_error","message":"upstream is down"}}"#,
    )])
    .await;
    let mut cfg = config(ProviderKind::Anthropic, &server.base, "m");
    cfg.max_retries = 2;
    let err = model(&cfg).complete(&conversation()).await.unwrap_err();
    assert_eq!(server.hits(), 3);
    assert!(
        matches!(
            err,
            LlmError::Http {
                status: 502,
                attempts: 3,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_transient());
    assert!(err.to_string().contains("upstream is down"), "{err}");
}

#[tokio::test]
async fn slow_servers_time_out_after_retries() {
    let mut slow = chat_ok();
    slow.delay = Duration::from_secs(3);
    let server = serve(vec![slow]).await;
    let mut cfg = config(ProviderKind::OpenaiChat, &server.base, "m");
    cfg.timeout_s = 0.3;
    cfg.max_retries = 1;
    let started = Instant::now();
    let err = model(&cfg).complete(&conversation()).await.unwrap_err();
    let elapsed = started.elapsed();
    assert!(matches!(err, LlmError::Timeout { attempts: 2, .. }), "{err:?}");
    assert_eq!(server.hits(), 2);
    assert!(
        elapsed >= Duration::from_millis(550) && elapsed < Duration::from_secs(2),
        "{elapsed:?}"
    );
    assert!(err.to_string().contains("timeout_s"), "{err}");
}

#[tokio::test]
async fn malformed_bodies_are_reported_not_retried() {
    // JSON from the endpoint that lacks what the protocol promises: the same body would come
    // back, so it is the answer's format error, asked once.
    let cases = [
        (ProviderKind::OpenaiChat, json!({"id": "x", "choices": []}).to_string()),
        (ProviderKind::OpenaiResponses, json!({"id": "x"}).to_string()),
        (ProviderKind::Anthropic, json!({"type": "message"}).to_string()),
        (ProviderKind::Gemini, json!({"usageMetadata": {}}).to_string()),
        // A key echoed inside a malformed answer is redacted too.
        (
            ProviderKind::Gemini,
            json!({"usageMetadata": {"note": format!("key {KEY}")}}).to_string(),
        ),
    ];
    for (kind, body) in cases {
        let server = serve(vec![reply(200, body.clone())]).await;
        let err = model(&config(kind, &server.base, "m"))
            .complete(&conversation())
            .await
            .unwrap_err();
        assert!(matches!(err, LlmError::MalformedResponse { .. }), "{body}: {err:?}");
        assert!(!err.is_transient(), "{err:?}");
        assert_eq!(server.hits(), 1, "{body}");
        let text = err.to_string();
        assert!(!text.contains(KEY), "{text}");
        let probe = if body.contains(KEY) {
            "key ***"
        } else {
            &body[..body.len().min(10)]
        };
        assert!(text.contains(probe), "{text} lacks {probe}");
    }
}

/// Issue 19, item 6: a 200 whose body is not JSON at all (empty, a proxy's HTML page, garbage)
/// is the endpoint's fault, not the model's: it is retried like a 5xx and, when every attempt
/// gets one, fails as a transient endpoint error (which a run counts toward its outage stop),
/// never as the model's format error.
#[tokio::test]
async fn bodies_that_are_not_json_are_retried_like_server_errors() {
    let garbage = [
        (
            ProviderKind::OpenaiChat,
            "this is not json {".to_string(),
            "this is not json {",
        ),
        (ProviderKind::OpenaiChat, String::new(), "the body was empty"),
        (ProviderKind::Anthropic, "   \n".to_string(), "the body was empty"),
        (
            ProviderKind::OpenaiResponses,
            "<html>Bad Gateway</html>".to_string(),
            "<html>Bad Gateway",
        ),
        // A key echoed inside the garbage is redacted.
        (
            ProviderKind::Gemini,
            format!("<html>gateway saw key {KEY}</html>"),
            "gateway saw key ***",
        ),
    ];
    for (kind, body, probe) in garbage {
        // Once, then a good answer: the retry gets it.
        if kind == ProviderKind::OpenaiChat {
            let server = serve(vec![reply(200, body.clone()), chat_ok()]).await;
            let answer = model(&config(kind, &server.base, "m"))
                .complete(&conversation())
                .await
                .unwrap_or_else(|e| panic!("{body:?}: {e:?}"));
            assert_eq!(answer.attempts, 2, "{body:?}");
            assert_eq!(answer.text, "done");
            assert_eq!(server.hits(), 2, "{body:?}");
        }
        // Every time: a transient error after the retries, saying what came back.
        let server = serve(vec![reply(200, body.clone())]).await;
        let mut cfg = config(kind, &server.base, "m");
        cfg.max_retries = 2;
        let err = model(&cfg).complete(&conversation()).await.unwrap_err();
        assert_eq!(server.hits(), 3, "{body:?}");
        assert!(
            matches!(
                &err,
                LlmError::NotJson {
                    status: 200,
                    attempts: 3,
                    ..
                }
            ),
            "{body:?}: {err:?}"
        );
        assert!(err.is_transient(), "{err:?}");
        assert!(!err.is_auth(), "{err:?}");
        assert_eq!(err.attempts(), Some(3));
        let text = err.to_string();
        assert!(!text.contains(KEY), "{text}");
        assert!(text.contains(probe), "{text} lacks {probe}");
        assert!(
            text.contains("answered HTTP 200 with a body that is not JSON"),
            "{text}"
        );
        assert!(!text.contains("not in the expected format"), "{text}");
    }
}

#[tokio::test]
async fn auth_failures_are_not_retried_and_name_the_key_variable() {
    for status in [401, 403] {
        let server = serve(vec![reply(
            status,
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
        )])
        .await;
        let err = model(&config(ProviderKind::Anthropic, &server.base, "m"))
            .complete(&conversation())
            .await
            .unwrap_err();
        assert_eq!(server.hits(), 1);
        assert!(
            matches!(&err, LlmError::Auth { status: s, .. } if *s == status),
            "{err:?}"
        );
        assert!(err.is_auth() && !err.is_transient(), "{err:?}");
        let text = err.to_string();
        assert!(text.contains(KEY_ENV) && text.contains("invalid x-api-key"), "{text}");
    }
}

#[tokio::test]
async fn not_found_names_the_model_and_url() {
    let server = serve(vec![reply(
        404,
        r#"{"error":{"code":404,"message":"models/gemini-9 is not found for API version v1beta","status":"NOT_FOUND"}}"#,
    )])
    .await;
    let cfg = config(ProviderKind::Gemini, &format!("{}/v1beta", server.base), "gemini-9");
    let err = model(&cfg).complete(&conversation()).await.unwrap_err();
    assert_eq!(server.hits(), 1);
    assert!(matches!(err, LlmError::NotFound { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("'gemini-9'"), "{text}");
    assert!(
        text.contains(&format!("{}/v1beta/models/gemini-9:generateContent", server.base)),
        "{text}"
    );
    assert!(text.contains("is not found for API version"), "{text}");
}

#[tokio::test]
async fn bad_requests_carry_the_vendor_message_and_are_not_retried() {
    let server = serve(vec![reply(
        400,
        r#"{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}"#,
    )])
    .await;
    let err = model(&config(ProviderKind::OpenaiChat, &server.base, "o3"))
        .complete(&conversation())
        .await
        .unwrap_err();
    assert_eq!(server.hits(), 1);
    assert!(matches!(err, LlmError::BadRequest { status: 400, .. }), "{err:?}");
    assert!(err.to_string().contains("Unsupported parameter: 'max_tokens'"), "{err}");
    assert!(
        !err.to_string().contains("\"param\""),
        "the JSON should be unpacked: {err}"
    );

    // A huge error body is bounded.
    let server = serve(vec![reply(422, "x".repeat(100_000))]).await;
    let err = model(&config(ProviderKind::OpenaiChat, &server.base, "m"))
        .complete(&conversation())
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::BadRequest { status: 422, .. }), "{err:?}");
    assert!(err.to_string().len() < 700, "{} chars", err.to_string().len());
}

#[tokio::test]
async fn a_key_echoed_by_the_server_never_escapes() {
    let echoes = [
        (
            400,
            format!(r#"{{"error":{{"message":"Incorrect API key provided: {KEY}."}}}}"#),
        ),
        (401, format!(r#"{{"error":{{"message":"bad key {KEY}"}}}}"#)),
        (404, format!("no such route for Bearer {KEY}")),
        (500, format!("panic: header x-api-key={KEY}")),
    ];
    for (status, body) in echoes {
        for kind in [
            ProviderKind::OpenaiChat,
            ProviderKind::OpenaiResponses,
            ProviderKind::Anthropic,
            ProviderKind::Gemini,
        ] {
            let server = serve(vec![reply(status, body.clone())]).await;
            let mut cfg = config(kind, &server.base, "m");
            cfg.max_retries = 1;
            let err = model(&cfg).complete(&conversation()).await.unwrap_err();
            let text = err.to_string();
            assert!(!text.contains(KEY), "{status} {kind:?}: {text}");
            assert!(!format!("{err:?}").contains(KEY), "{status} {kind:?}: {err:?}");
            assert!(text.contains("***"), "{status} {kind:?}: the message was lost: {text}");
        }
    }
}

#[tokio::test]
async fn connection_refused_is_a_connect_error_after_retries() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/v1");
    let mut cfg = config(ProviderKind::OpenaiChat, &url, "m");
    cfg.max_retries = 2;
    let err = model(&cfg).complete(&conversation()).await.unwrap_err();
    match &err {
        LlmError::Connect { attempts, url: u, .. } => {
            assert_eq!(*attempts, 3);
            assert_eq!(u, &format!("{url}/chat/completions"));
        }
        other => panic!("expected a connection error, got {other:?}"),
    }
    assert!(err.is_transient());
    assert!(err.to_string().contains("base_url"), "{err}");
}

#[tokio::test]
async fn an_answer_cut_off_mid_body_is_an_interrupted_read_not_an_unreachable_server() {
    // A raw server: it promises 1000 bytes of body, sends 10, and closes the connection.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in listener.incoming().take(2) {
            let Ok(mut stream) = stream else { return };
            let mut request = [0u8; 65536];
            let _ = stream.read(&mut request);
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"id\": \"x",
            );
        }
    });
    let url = format!("http://127.0.0.1:{port}/v1");
    let mut cfg = config(ProviderKind::OpenaiChat, &url, "m");
    cfg.max_retries = 1;
    cfg.retry_base_delay_s = 0.01;
    cfg.retry_max_delay_s = 0.02;
    let err = model(&cfg).complete(&conversation()).await.unwrap_err();
    match &err {
        LlmError::Interrupted {
            attempts,
            status,
            url: u,
            ..
        } => {
            assert_eq!(*attempts, 2);
            assert_eq!(*status, 200);
            assert_eq!(u, &format!("{url}/chat/completions"));
        }
        other => panic!("expected an interrupted read, got {other:?}"),
    }
    assert!(err.is_transient(), "a retry may get the whole answer");
    let text = err.to_string();
    assert!(
        text.contains("The server was reached") && !text.contains("base_url"),
        "{text}"
    );
}

#[tokio::test]
async fn a_bad_effort_in_a_request_is_a_config_error() {
    let server = serve(vec![chat_ok()]).await;
    let mut request = conversation();
    request.reasoning_effort = Some("extreme".into());
    let err = model(&config(ProviderKind::Anthropic, &server.base, "m"))
        .complete(&request)
        .await
        .unwrap_err();
    assert!(matches!(&err, LlmError::Config(m) if m.contains("extreme")), "{err:?}");
    assert_eq!(server.hits(), 0);
}
