//! `ksearch mcp` spoken to as an MCP client would: JSON-RPC 2.0, one message a line, over the
//! child's stdin and stdout. A whole agent-driven search runs through the tools, and every line
//! the server writes must be a JSON-RPC message.

mod common;
use common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

struct McpClient {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
    stderr_log: std::path::PathBuf,
}

impl McpClient {
    /// Spawns `ksearch mcp` in `work`, with its config home there too.
    fn spawn(work: &std::path::Path) -> McpClient {
        let stderr_log = work.join("mcp-stderr.log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_ksearch"))
            .arg("mcp")
            .current_dir(work)
            .env("XDG_CONFIG_HOME", work)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr_log).unwrap())
            .spawn()
            .expect("cannot start ksearch mcp");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        McpClient {
            stdin: child.stdin.take(),
            child,
            lines,
            next_id: 1,
            stderr_log,
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_log).unwrap_or_default()
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request and returns its response, checking every line read on the way.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = match self.lines.recv_timeout(WAIT) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => panic!("no answer to {method} in {WAIT:?}\n{}", self.stderr()),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("ksearch mcp closed stdout during {method}\n{}", self.stderr())
                }
            };
            let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!(
                    "stdout carried a line that is not JSON ({e}): {line}\n{}",
                    self.stderr()
                )
            });
            assert_eq!(message["jsonrpc"], "2.0", "{line}");
            if message["id"] == json!(id) {
                return message;
            }
            // Anything else must be a notification from the server.
            assert!(
                message.get("id").is_none() && message["method"].is_string(),
                "unexpected message: {line}"
            );
        }
    }

    /// Calls a tool; returns whether it failed and its text.
    fn call(&mut self, tool: &str, arguments: Value) -> (bool, String) {
        let response = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        let result = response
            .get("result")
            .unwrap_or_else(|| panic!("{tool}: a protocol error instead of a tool result: {response}"));
        let text = result["content"][0]["text"].as_str().unwrap_or_default().to_string();
        (result["isError"] == json!(true), text)
    }

    /// Calls a tool that must succeed and returns its JSON.
    fn call_ok(&mut self, tool: &str, arguments: Value) -> Value {
        let (failed, text) = self.call(tool, arguments);
        assert!(!failed, "{tool} failed: {text}\n{}", self.stderr());
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{tool} returned no JSON ({e}): {text}"))
    }

    /// Closes stdin, as a client does at the end; the server must exit cleanly.
    fn close(mut self) {
        drop(self.stdin.take());
        for _ in 0..200 {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "ksearch mcp exited with {status}\n{}", self.stderr());
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.child.kill().unwrap();
        panic!("ksearch mcp did not exit when its stdin closed\n{}", self.stderr());
    }
}

fn planner_answer(prompt: &str) -> String {
    if prompt.contains("This is the start of the search") {
        let node = |id: &str, score: f64| {
            json!({"op": "insert_node", "node": {"node_id": id, "parent_id": "root", "decision": "row strategy",
                "choice": format!("option {id}"), "overall_rating": 6, "confidence": 0.5,
                "action": {"title": format!("implement {id}"), "description": "write the kernel", "rationale": "a start",
                           "difficulty": 2, "score": score}}})
        };
        let answer = json!({"kernel_summary": "row softmax", "ops": [node("a", 0.9), node("b", 0.5)]});
        format!("Here is my plan.\n```json\n{answer}\n```")
    } else {
        json!({"ops": []}).to_string()
    }
}

#[test]
fn an_agent_drives_a_search_through_the_mcp_tools() {
    let work = tempfile::tempdir().unwrap();
    // The fixture without its seed, so every candidate comes from the agent.
    let task = copy_fixture("tiny_softmax");
    let toml = "[evaluation]\ntrials = 2\niterations = 15\nmin_iterations = 5\nmax_timing_s = 0.3\n\n\
                [tolerance.float32]\natol = 1e-7\nrtol = 1e-4\n\n[kernel]\nlanguage = \"c\"\nentry = \"softmax\"\n";
    std::fs::write(task.path().join("task.toml"), toml).unwrap();

    let mut mcp = McpClient::spawn(work.path());
    let init = mcp.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "ksearch-test", "version": "0"}}),
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "ksearch", "{init}");
    assert!(init["result"]["capabilities"]["tools"].is_object(), "{init}");
    mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    let tools = mcp.request("tools/list", json!({}));
    let mut names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{tools}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "list_tasks",
            "next_request",
            "show_run",
            "start_search",
            "submit_answer"
        ]
    );
    for t in tools["result"]["tools"].as_array().unwrap() {
        assert!(t["description"].as_str().unwrap().len() > 80, "{t}");
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
    }
    let start_schema = &tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "start_search")
        .unwrap()["inputSchema"];
    assert!(start_schema["properties"]["task"].is_object(), "{start_schema}");
    assert_eq!(start_schema["required"], json!(["task"]), "{start_schema}");

    let listed = mcp.call_ok("list_tasks", json!({}));
    assert!(!listed["tasks"].as_array().unwrap().is_empty(), "{listed}");

    // Errors come back as tool errors, with the CLI's messages.
    let (failed, text) = mcp.call("start_search", json!({"task": "no_such_task"}));
    assert!(failed && text.contains("no_such_task"), "{text}");

    let run_dir = work.path().join("run");
    let started = mcp.call_ok(
        "start_search",
        json!({"task": task.path(), "rounds": 1, "seed": 5, "out": run_dir}),
    );
    assert_eq!(
        (started["status"].as_str(), started["role"].as_str()),
        (Some("awaiting_agent"), Some("planner")),
        "{started}"
    );
    let dir = started["run_dir"].as_str().unwrap().to_string();
    assert_eq!(std::path::Path::new(&dir), run_dir.canonicalize().unwrap());

    let mut answered = 0;
    let outcome = loop {
        let request = mcp.call_ok("next_request", json!({"run_dir": dir}));
        let id = request["id"].as_str().unwrap().to_string();
        let prompt = request["messages"][1]["content"].as_str().unwrap();
        let answer = match request["role"].as_str().unwrap() {
            "planner" => planner_answer(prompt),
            _ => format!("**kernel.c**\n```c\n{SOFTMAX_OK}```"),
        };
        if answered == 0 {
            let (failed, text) = mcp.call(
                "submit_answer",
                json!({"run_dir": dir, "request_id": "r99", "answer": answer}),
            );
            assert!(failed, "{text}");
            assert!(
                text.contains(&format!("request r99 is not pending; the pending request is {id}")),
                "{text}"
            );
        }
        let outcome = mcp.call_ok(
            "submit_answer",
            json!({"run_dir": dir, "request_id": id, "answer": answer}),
        );
        answered += 1;
        assert!(answered < 10, "the run does not end: {outcome}");
        match outcome["status"].as_str() {
            Some("awaiting_agent") => continue,
            _ => break outcome,
        }
    };
    assert_eq!(outcome["status"], "finished", "{outcome}");
    assert!(outcome["best_speedup"].as_f64().is_some(), "{outcome}");
    assert!(run_dir.join("best/kernel.c").is_file());
    assert!(answered >= 2, "a plan and a kernel at least");

    let (failed, text) = mcp.call("next_request", json!({"run_dir": dir}));
    assert!(failed && text.contains("the run is finished"), "{text}");
    let show = mcp.call_ok("show_run", json!({"run_dir": dir}));
    assert!(show["state"].as_str().unwrap().starts_with("finished"), "{show}");
    assert_eq!(show["candidates"].as_array().unwrap().len(), 1, "{show}");
    mcp.close();
}
