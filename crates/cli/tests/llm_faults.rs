//! Issue 8, item 4: a `ksearch run` whose LLM endpoint misbehaves. A real local HTTP server
//! speaks the OpenAI chat-completions protocol and, by a script of its answers, injects every
//! fault a real endpoint has: 429 with Retry-After, 500, 503, a body that is not JSON, a hang
//! past the client's timeout, a connection dropped in the middle of the answer. The run must
//! live through them, record each as what it was (run.sqlite: the exchange's error and the
//! `request_failed` event), lose nothing recorded before, and a run stopped while the endpoint
//! keeps failing must continue with `ksearch resume`.
//!
//! The server is raw TCP rather than axum (search_e2e.rs): dropping a connection after half an
//! answer needs control below the HTTP library. Timeouts and backoffs are made short through
//! the provider's own settings in ksearch.toml (timeout_s, max_retries, retry_*_delay_s).

mod common;
use common::*;
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// The client's timeout per attempt (providers.flaky.timeout_s): short, yet far above what a
/// local answer takes on a busy machine.
const TIMEOUT_S: u64 = 2;
/// How long a hanging answer holds its connection: well past the client's timeout.
const HANG: Duration = Duration::from_secs(3 * TIMEOUT_S);

/// What the server does with one HTTP request (one attempt of the client).
#[derive(Clone, Debug, PartialEq)]
enum Reply {
    /// A chat completion whose text is a correct kernel, marked `/* answer N */`.
    Kernel,
    /// 429 with `Retry-After: SECONDS` and OpenAI's rate-limit body.
    RateLimited(u32),
    /// A 5xx with a vendor error body.
    ServerError(u16),
    /// 200 whose body is a proxy's HTML page, not JSON.
    NotJson,
    /// 200 with an empty body.
    Empty,
    /// Reads the request and answers nothing until long after the client gave up.
    Hang,
    /// The status line, the headers and half of a correct answer, then the connection closes.
    DropMidAnswer,
}

struct Shared {
    /// Replies for the next requests, in order; then `default`.
    script: Mutex<VecDeque<Reply>>,
    default: Mutex<Reply>,
    /// Every request served: when it arrived and what it got.
    seen: Mutex<Vec<(Instant, Reply)>>,
    kernels: AtomicUsize,
    /// Told each time a request starts hanging.
    hanging: Mutex<Option<mpsc::Sender<()>>>,
}

struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Server {
    fn start(script: Vec<Reply>, default: Reply) -> (Server, mpsc::Receiver<()>) {
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(Shared {
            script: Mutex::new(script.into()),
            default: Mutex::new(default),
            seen: Mutex::new(Vec::new()),
            kernels: AtomicUsize::new(0),
            hanging: Mutex::new(Some(tx)),
        });
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let s = shared.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let s = s.clone();
                std::thread::spawn(move || serve(stream, &s));
            }
        });
        (Server { addr, shared }, rx)
    }

    fn seen(&self) -> Vec<(Instant, Reply)> {
        self.shared.seen.lock().unwrap().clone()
    }

    fn set_default(&self, reply: Reply) {
        *self.shared.default.lock().unwrap() = reply;
    }
}

fn serve(mut stream: TcpStream, shared: &Shared) {
    let Some((path, body)) = read_request(&mut stream) else {
        return;
    };
    assert_eq!(path, "/v1/chat/completions");
    assert_eq!(body["model"], "scripted", "{body}");
    let reply = {
        let next = shared.script.lock().unwrap().pop_front();
        next.unwrap_or_else(|| shared.default.lock().unwrap().clone())
    };
    shared.seen.lock().unwrap().push((Instant::now(), reply.clone()));
    let _ = match reply {
        Reply::Kernel => {
            let n = shared.kernels.fetch_add(1, Ordering::SeqCst) + 1;
            respond(&mut stream, "200 OK", "", &completion(n))
        }
        Reply::RateLimited(s) => respond(
            &mut stream,
            "429 Too Many Requests",
            &format!("Retry-After: {s}\r\n"),
            r#"{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}"#,
        ),
        Reply::ServerError(code) => respond(
            &mut stream,
            &format!("{code} Server Error"),
            "",
            &format!(r#"{{"error":{{"message":"injected fault {code}","type":"server_error"}}}}"#),
        ),
        Reply::NotJson => respond(
            &mut stream,
            "200 OK",
            "",
            "<html><body><h1>upstream connect error</h1></body></html>",
        ),
        Reply::Empty => respond(&mut stream, "200 OK", "", ""),
        Reply::Hang => {
            if let Some(tx) = shared.hanging.lock().unwrap().as_ref() {
                let _ = tx.send(());
            }
            std::thread::sleep(HANG);
            Ok(())
        }
        Reply::DropMidAnswer => {
            let body = completion(0);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            let half = &body.as_bytes()[..body.len() / 2];
            stream
                .write_all(head.as_bytes())
                .and_then(|_| stream.write_all(half))
                .and_then(|_| stream.flush())
                .and_then(|_| stream.shutdown(Shutdown::Both))
        }
    };
}

/// The request's path and JSON body (`None` when the client went away first).
fn read_request(stream: &mut TcpStream) -> Option<(String, serde_json::Value)> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut buf).ok().filter(|n| *n > 0)?;
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&data[..head_end]).to_string();
    let path = head.split_whitespace().nth(1)?.to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())
                .flatten()
        })
        .unwrap_or(0);
    while data.len() < head_end + length {
        let n = stream.read(&mut buf).ok().filter(|n| *n > 0)?;
        data.extend_from_slice(&buf[..n]);
    }
    let body = serde_json::from_slice(&data[head_end..head_end + length]).ok()?;
    Some((path, body))
}

fn respond(stream: &mut TcpStream, status: &str, headers: &str, body: &str) -> std::io::Result<()> {
    let text = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n{body}",
        body.len()
    );
    stream.write_all(text.as_bytes())?;
    stream.flush()
}

/// A chat completion whose text is the correct softmax marked `/* answer n */`.
fn completion(n: usize) -> String {
    let kernel = SOFTMAX_OK.replace("#include <math.h>", &format!("#include <math.h>\n/* answer {n} */"));
    serde_json::json!({
        "id": format!("chatcmpl-{n}"), "object": "chat.completion", "model": "scripted",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": format!("**kernel.c**\n```c\n{kernel}```\n")},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200}
    })
    .to_string()
}

/// A working directory whose ksearch.toml points provider `flaky` at the server, with short
/// timeouts and backoffs and one retry, and a copy of the tiny softmax task (with its seed).
struct Setup {
    work: tempfile::TempDir,
    task: tempfile::TempDir,
}

impl Setup {
    fn new(server: &Server) -> Setup {
        let work = tempfile::tempdir().unwrap();
        let config = format!(
            "[providers.flaky]\nkind = \"openai-chat\"\nbase_url = \"http://{}/v1\"\nmodel = \"scripted\"\n\
             timeout_s = {TIMEOUT_S}\nconnect_timeout_s = 1\nmax_retries = 1\nretry_base_delay_s = 0.01\nretry_max_delay_s = 0.05\n",
            server.addr
        );
        std::fs::write(work.path().join("ksearch.toml"), config).unwrap();
        Setup {
            work,
            task: copy_fixture("tiny_softmax"),
        }
    }

    fn run_dir(&self) -> PathBuf {
        self.work.path().join("run")
    }

    /// The arguments of `ksearch run` of the refine strategy (one coder call and one evaluation
    /// per round) through the flaky endpoint.
    fn run_args(&self, rounds: u32) -> Vec<String> {
        let mut args: Vec<String> = ["run", self.task.path().to_str().unwrap(), "--strategy", "refine"]
            .map(String::from)
            .to_vec();
        args.extend(["--rounds".into(), rounds.to_string()]);
        args.extend(["--llm", "flaky", "--seed", "5", "--json", "--out"].map(String::from));
        args.push(self.run_dir().to_str().unwrap().to_string());
        args
    }

    /// That run, started in the background.
    fn spawn_run(&self, rounds: u32) -> std::process::Child {
        std::process::Command::new(env!("CARGO_BIN_EXE_ksearch"))
            .args(self.run_args(rounds))
            .current_dir(self.work.path())
            .env("XDG_CONFIG_HOME", self.work.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// That run, to its end.
    fn run(&self, rounds: u32) -> Run {
        let args = self.run_args(rounds);
        self.ksearch(&args.iter().map(String::as_str).collect::<Vec<_>>())
    }

    fn ksearch(&self, args: &[&str]) -> Run {
        ksearch_in(
            self.work.path(),
            args,
            &[("XDG_CONFIG_HOME", self.work.path().to_str().unwrap())],
        )
    }

    fn show(&self) -> serde_json::Value {
        let r = self.ksearch(&["show", self.run_dir().to_str().unwrap(), "--json"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.json()
    }
}

fn finish(child: std::process::Child) -> Run {
    let start = Instant::now();
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: start.elapsed(),
    }
}

/// The candidates of `show --json` as (id, round, status, speedup).
fn candidates(show: &serde_json::Value) -> Vec<(i64, u64, String, Option<f64>)> {
    show["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_i64().unwrap(),
                c["round"].as_u64().unwrap(),
                c["status"].as_str().unwrap_or("").to_string(),
                c["speedup"].as_f64(),
            )
        })
        .collect()
}

/// The coder's exchanges in the store as (request id, attempts, error).
fn exchanges(run_dir: &Path) -> Vec<(String, u32, Option<String>)> {
    let store = ksearch_store::RunStore::open(run_dir).unwrap();
    store
        .exchanges()
        .unwrap()
        .into_iter()
        .map(|x| {
            assert_eq!(x.role, "coder");
            assert_eq!(x.provider, "flaky");
            assert_eq!(x.answer.is_some(), x.error.is_none(), "{x:?}");
            (x.request_id.unwrap_or_default(), x.attempts, x.error)
        })
        .collect()
}

/// The `request_failed` events of the log as (request id, error, fatal).
fn failed_events(run_dir: &Path) -> Vec<(String, String, bool)> {
    let store = ksearch_store::RunStore::open(run_dir).unwrap();
    store
        .events()
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "request_failed")
        .map(|e| {
            (
                e.body["request_id"].as_str().unwrap().to_string(),
                e.body["error"].as_str().unwrap().to_string(),
                e.body["fatal"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// `s` as minijinja's HTML escaping writes it in a report (which escapes `/` too).
fn html_escaped(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#x27;")
        .replace('/', "&#x2f;")
}

/// `ksearch report RUN_DIR`: the page it wrote, where it said it did.
fn report(setup: &Setup) -> String {
    let run_dir = setup.run_dir();
    let r = setup.ksearch(&["report", run_dir.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let out = run_dir.join("report.html");
    assert_eq!(r.stdout.trim(), out.to_str().unwrap());
    std::fs::read_to_string(&out).unwrap()
}

/// Every kernel the store holds a candidate for, by round: the `/* answer N */` it carries.
fn answers_by_round(run_dir: &Path) -> Vec<(u32, String)> {
    let store = ksearch_store::RunStore::open(run_dir).unwrap();
    store
        .candidates()
        .unwrap()
        .into_iter()
        .map(|c| {
            let text = c.sources.to_string();
            let marker = text
                .find("/* answer ")
                .map(|i| text[i..].split("*/").next().unwrap().to_string() + "*/")
                .unwrap_or_else(|| c.origin.clone());
            (c.round, marker)
        })
        .collect()
}

#[test]
fn a_run_lives_through_every_endpoint_fault_and_records_each_as_what_it_was() {
    use Reply::*;
    // One HTTP attempt per line, marked with the round whose coder request meets it (the client
    // retries once). Never three requests fail in a row: that stops the run (the test below).
    let script = vec![
        Kernel,           // 1: answered
        RateLimited(1),   // 2: waits the asked second, then answered
        Kernel,           //
        ServerError(500), // 3: fails twice
        ServerError(500), //
        ServerError(503), // 4: fails twice
        ServerError(503), //
        Kernel,           // 5: answered
        NotJson,          // 6: not JSON twice: the endpoint's fault, retried like a 5xx
        NotJson,          //
        Hang,             // 7: times out twice
        Hang,             //
        Kernel,           // 8: answered
        DropMidAnswer,    // 9: cut off twice
        DropMidAnswer,    //
        RateLimited(1),   // 10: still limited after the wait
        RateLimited(1),   //
        DropMidAnswer,    // 11: cut off, then answered
        Kernel,           //
        Kernel,           // 12: answered
    ];
    let scripted = script.clone();
    let (server, hanging) = Server::start(script, ServerError(599));
    let setup = Setup::new(&server);
    let child = setup.spawn_run(12);

    // While the endpoint hangs (round 7), the store already holds what came before.
    hanging
        .recv_timeout(Duration::from_secs(60))
        .expect("the run never reached the hanging endpoint");
    let during = setup.show();
    let r = finish(child);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["status"], "finished", "{j}");
    assert_eq!(j["rounds"], 12, "{j}");
    assert!(j["best_candidate"].is_i64(), "{j}");

    // The server saw exactly the scripted attempts: each retried fault once more (the body that
    // is not JSON too), and 429's Retry-After was waited for.
    let seen = server.seen();
    assert_eq!(
        seen.iter().map(|s| s.1.clone()).collect::<Vec<_>>(),
        scripted,
        "the attempts the server saw"
    );
    for i in [1, 15] {
        let waited = seen[i + 1].0 - seen[i].0;
        assert!(
            waited >= Duration::from_secs(1),
            "Retry-After: 1 but the retry came after {waited:?}"
        );
    }
    let hung = seen[11].0 - seen[10].0;
    assert!(
        hung >= Duration::from_secs(TIMEOUT_S),
        "the client gave up on the hang after {hung:?}"
    );

    // Each request's fate, as the store has it: the answered ones with their attempts, the
    // failed ones with what the fault was.
    let run_dir = setup.run_dir();
    let xs = exchanges(&run_dir);
    assert_eq!(xs.len(), 12, "one exchange per round: {xs:#?}");
    let timed_out =
        format!("flaky: no answer within {TIMEOUT_S} s, 2 attempt(s); raise `timeout_s` if the model is slow");
    let expected: [(u32, Option<&str>); 12] = [
        (1, None),
        // A fault retried away leaves only the count of attempts (see the report).
        (2, None),
        (
            2,
            Some("flaky: HTTP 500 after 2 attempt(s): injected fault 500 [server_error]"),
        ),
        (
            2,
            Some("flaky: HTTP 503 after 2 attempt(s): injected fault 503 [server_error]"),
        ),
        (1, None),
        (
            2,
            Some("answered HTTP 200 with a body that is not JSON, after 2 attempt(s): expected value at line 1 column 1; it was: <html><body><h1>upstream connect error"),
        ),
        (2, Some(&timed_out)),
        (1, None),
        (2, Some("after 2 attempt(s): error decoding response body")),
        (
            2,
            Some("flaky: HTTP 429 after 2 attempt(s): Rate limit reached for requests"),
        ),
        (2, None),
        (1, None),
    ];
    for (i, ((id, attempts, error), (want_attempts, want_error))) in xs.iter().zip(expected).enumerate() {
        let round = i + 1;
        match (error, want_error) {
            (None, None) => assert_eq!(*attempts, want_attempts, "round {round} ({id})"),
            // A failed exchange keeps its attempts where the error knows them (the retried
            // faults).
            (Some(e), Some(w)) => {
                assert!(e.contains(w), "round {round} ({id}): {e}\nexpected: {w}");
                assert!(
                    e.contains(&format!("{want_attempts} attempt(s)")) || want_attempts == 1,
                    "round {round} ({id}): {e}"
                );
                let recorded = if e.contains("attempt(s)") { want_attempts } else { 0 };
                assert_eq!(*attempts, recorded, "round {round} ({id}): {e}");
            }
            _ => panic!("round {round} ({id}): error {error:?}, expected {want_error:?}"),
        }
    }
    // The cut-off answer is an interrupted read of a server that answered, with the URL; not an
    // unreachable server (whose advice, "Check `base_url`", would send the user the wrong way).
    let cut = xs[8].2.as_deref().unwrap();
    assert!(
        cut.contains(&format!("http://{}/v1/chat/completions", server.addr)),
        "{cut}"
    );
    assert!(
        cut.contains("broke while its answer") && !cut.contains("base_url"),
        "{cut}"
    );

    // The event log has the same six failures, none fatal, for the same requests.
    let failed = failed_events(&run_dir);
    let failed_xs: Vec<(String, String)> = xs
        .iter()
        .filter_map(|(id, _, e)| e.clone().map(|e| (id.clone(), e)))
        .collect();
    assert_eq!(
        failed
            .iter()
            .map(|(id, e, _)| (id.clone(), e.clone()))
            .collect::<Vec<_>>(),
        failed_xs
    );
    assert!(
        failed.iter().all(|f| !f.2),
        "no endpoint fault ends the run: {failed:?}"
    );

    // `show --json` counts them, and nothing recorded before the faults is lost: the candidates
    // seen while the endpoint hung are still there, unchanged, and the run went on after them.
    let after = setup.show();
    assert!(after["state"].as_str().unwrap().starts_with("finished"), "{after}");
    assert_eq!(after["budget"]["llm_calls"], 6, "{}", after["budget"]);
    assert_eq!(after["budget"]["failed_llm_calls"], 6, "{}", after["budget"]);
    assert_eq!(
        during["budget"]["failed_llm_calls"], 3,
        "500, 503, not JSON: {}",
        during["budget"]
    );
    let (before, now) = (candidates(&during), candidates(&after));
    assert_eq!(
        before.iter().map(|c| c.1).collect::<Vec<_>>(),
        vec![0, 1, 2, 5],
        "seed, rounds 1, 2 and 5: {during}"
    );
    assert_eq!(&now[..4], &before[..], "what was recorded before the faults changed");
    assert_eq!(
        now.iter().map(|c| c.1).collect::<Vec<_>>(),
        vec![0, 1, 2, 5, 8, 11, 12],
        "{after}"
    );
    assert!(now.iter().all(|c| c.2 == "passed"), "{now:?}");
    assert_eq!(
        answers_by_round(&run_dir),
        vec![
            (0, "seed".to_string()),
            (1, "/* answer 1 */".to_string()),
            (2, "/* answer 2 */".to_string()),
            (5, "/* answer 3 */".to_string()),
            (8, "/* answer 4 */".to_string()),
            (11, "/* answer 5 */".to_string()),
            (12, "/* answer 6 */".to_string()),
        ]
    );
}

#[test]
fn a_run_stopped_while_the_endpoint_keeps_failing_continues_with_resume() {
    use Reply::*;
    // Round 1 is answered; from round 2 on the endpoint hangs on every attempt.
    let (server, hanging) = Server::start(vec![Kernel], Hang);
    let setup = Setup::new(&server);
    let child = setup.spawn_run(4);
    hanging
        .recv_timeout(Duration::from_secs(60))
        .expect("the run never reached the hanging endpoint");
    // Ctrl-C: the run stops after the step in flight, which fails when its retries are spent.
    // SAFETY: kill has no memory preconditions; the pid is our own child's, not yet reaped.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) }, 0);
    let r = finish(child);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["status"], "interrupted", "{}", r.stdout);
    let run_dir = setup.run_dir();
    let stopped = setup.show();
    // Not "in progress": show says it was stopped, and how it continues.
    assert!(
        stopped["state"].as_str().unwrap().starts_with("stopped (interrupted)")
            && stopped["state"].as_str().unwrap().contains("ksearch resume"),
        "{}",
        stopped["state"]
    );
    let before = candidates(&stopped);
    assert_eq!(before.iter().map(|c| c.1).collect::<Vec<_>>(), vec![0, 1], "{stopped}");
    let xs = exchanges(&run_dir);
    assert_eq!(xs.len(), 2, "{xs:?}");
    let timeout = xs[1].2.clone().expect("round 2 failed");
    assert!(
        timeout.contains(&format!("no answer within {TIMEOUT_S} s, 2 attempt(s)")),
        "{timeout}"
    );
    let hung = server.seen().len();
    assert_eq!(hung, 3, "round 1, then round 2's two attempts");

    // The endpoint recovers: resume goes on from round 3 and asks nothing twice.
    server.set_default(Kernel);
    let r = setup.ksearch(&["resume", run_dir.to_str().unwrap(), "--json"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["status"], "finished", "{}", r.stdout);
    let after = setup.show();
    let now = candidates(&after);
    assert_eq!(&now[..2], &before[..], "what was recorded before the stop changed");
    assert_eq!(now.iter().map(|c| c.1).collect::<Vec<_>>(), vec![0, 1, 3, 4], "{after}");
    assert!(now.iter().all(|c| c.2 == "passed"), "{now:?}");
    assert_eq!(server.seen().len(), hung + 2, "rounds 3 and 4, once each");
    let xs_after = exchanges(&run_dir);
    assert_eq!(&xs_after[..2], &xs[..], "the failure of round 2 is still on record");
    assert_eq!(
        failed_events(&run_dir)
            .iter()
            .map(|f| (f.0.clone(), f.1.clone(), f.2))
            .collect::<Vec<_>>(),
        vec![(xs[1].0.clone(), timeout, false)]
    );
}

/// Issue 8, item 4: an endpoint that fails every attempt stops the run after three requests in
/// a row (each after its own retries) instead of letting the planner give up or the rounds run
/// out on it: exit 1, status `llm_unavailable` with the last error, every failed exchange kept,
/// the third request left unanswered; once the endpoint is back, `resume` asks it again and the
/// run goes on to the end.
#[test]
fn an_endpoint_that_keeps_failing_stops_the_run_and_resume_continues_it() {
    let (server, _hanging) = Server::start(vec![], Reply::ServerError(503));
    let setup = Setup::new(&server);
    let r = setup.run(5);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["status"], "llm_unavailable", "{j}");
    assert_eq!(j["failures"], 3, "{j}");
    assert!(
        j["error"].as_str().unwrap().contains("HTTP 503 after 2 attempt(s)"),
        "{j}"
    );
    let show = setup.show();
    assert_eq!(
        show["budget"]["failed_llm_calls"], 3,
        "three coder requests, each kept: {}",
        show["budget"]
    );
    // Two failures answered their requests (each cost its round); the third was held back.
    let failed = failed_events(&setup.run_dir());
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(failed.iter().all(|f| !f.2), "{failed:?}");
    assert_eq!(server.seen().len(), 6);
    assert_eq!(candidates(&show).len(), 1, "the seed only, so far");

    // The report says the run stopped because the endpoint was unavailable, with the last
    // error, and how to continue it once the endpoint is back.
    let html = report(&setup);
    let error = j["error"].as_str().unwrap();
    assert!(html.contains("class=\"badge state-stopped\""), "{html}");
    assert!(
        html.contains(">stopped: the LLM endpoint was unavailable at 20"),
        "{html}"
    );
    let detail = html
        .split("<p class=\"stop-detail\">")
        .nth(1)
        .and_then(|d| d.split("</p>").next())
        .unwrap_or_else(|| panic!("no stop detail: {html}"));
    assert!(
        detail.contains("3 requests failed in a row") && detail.contains(&html_escaped(error)),
        "the stop's detail has the last error: {detail}"
    );
    assert!(
        html.contains(&format!(
            "<b>Last error:</b> <span class=\"reason\">{}</span>",
            html_escaped(error)
        )),
        "the LLM section has the last error: {html}"
    );
    let resume = format!(
        "<p class=\"resume\">Continue it with <code>{}</code> once the endpoint answers again",
        html_escaped(&format!("ksearch resume {}", setup.run_dir().display()))
    );
    assert!(html.contains(&resume), "{resume}\nnot in\n{html}");

    server.set_default(Reply::Kernel);
    let r = setup.ksearch(&["resume", setup.run_dir().to_str().unwrap(), "--json"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["status"], "finished", "{}", r.stdout);
    assert_eq!(r.json()["rounds"], 5, "{}", r.stdout);
    // Rounds 3, 4 and 5: the held-back request asked again, then two more.
    assert_eq!(server.seen().len(), 9, "resume asked the recovered endpoint again");
    let rounds: Vec<u64> = candidates(&setup.show()).iter().map(|c| c.1).collect();
    assert_eq!(rounds, vec![0, 3, 4, 5], "the search went on where it stopped");
    // Resumed to its end, the report no longer says it stopped, nor asks to resume it; the
    // failures stay on record.
    let html = report(&setup);
    assert!(html.contains("class=\"badge state-finished\""), "{html}");
    assert!(
        !html.contains("class=\"badge state-stopped\"") && !html.contains("ksearch resume"),
        "{html}"
    );
    assert!(html.contains("<p><b>Failed calls (3):</b> HTTP 503 ×3.</p>"), "{html}");
}

/// Refused requests (HTTP 400) say nothing about whether the endpoint is up: they are failed
/// attempts, and however many come in a row the run goes on to its end.
#[test]
fn refused_requests_do_not_stop_the_run_as_an_outage() {
    let (server, _hanging) = Server::start(vec![], Reply::ServerError(400));
    let setup = Setup::new(&server);
    let r = setup.run(4);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(
        (j["status"].as_str(), j["rounds"].as_u64()),
        (Some("finished"), Some(4)),
        "{j}"
    );
    assert_eq!(failed_events(&setup.run_dir()).len(), 4, "one failed attempt per round");
}

/// Issue 19, item 6: an endpoint whose every answer is a 200 with a body that is not JSON (empty,
/// or a proxy's page) is down, not a model with a format problem: each request is retried and
/// fails as the endpoint's error, three in a row stop the run (exit 1, `llm_unavailable`)
/// instead of closing nodes as too hard and "finishing", and `resume` continues it once the
/// endpoint answers again.
#[test]
fn an_endpoint_answering_garbage_is_an_outage_not_a_format_error() {
    let (server, _hanging) = Server::start(
        vec![Reply::Empty, Reply::NotJson, Reply::Empty, Reply::Empty],
        Reply::NotJson,
    );
    let setup = Setup::new(&server);
    let r = setup.run(5);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["status"], "llm_unavailable", "{j}");
    assert_eq!(j["failures"], 3, "{j}");
    let error = j["error"].as_str().unwrap();
    assert!(
        error.contains("answered HTTP 200 with a body that is not JSON, after 2 attempt(s)"),
        "{j}"
    );
    // Three requests, each retried once.
    assert_eq!(server.seen().len(), 6);
    let xs = exchanges(&setup.run_dir());
    assert_eq!(xs.len(), 3, "{xs:#?}");
    // Each exchange keeps its last attempt's error: an HTML page, then an empty body.
    assert!(
        xs[0]
            .2
            .as_deref()
            .is_some_and(|e| e.contains("it was: <html><body><h1>upstream connect error")),
        "{xs:#?}"
    );
    assert!(
        xs[1].2.as_deref().is_some_and(|e| e.contains("the body was empty")),
        "{xs:#?}"
    );
    assert!(
        xs.iter().all(|x| x.1 == 2
            && x.2
                .as_deref()
                .is_some_and(|e| !e.contains("not in the expected format"))),
        "{xs:#?}"
    );
    assert_eq!(candidates(&setup.show()).len(), 1, "the seed only, so far");

    server.set_default(Reply::Kernel);
    let r = setup.ksearch(&["resume", setup.run_dir().to_str().unwrap(), "--json"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["status"], "finished", "{}", r.stdout);
    let rounds: Vec<u64> = candidates(&setup.show()).iter().map(|c| c.1).collect();
    assert_eq!(rounds, vec![0, 3, 4, 5], "the search went on where it stopped");
}
