//! A real run driven step by step in agent mode with scripted answers (no LLM): the tests
//! decide when it advances. The script makes a tree worth drawing: one action too hard (a
//! format error, then compile errors), one pruned by the planner, one solved and refined. Node
//! texts and the best kernel carry markup that must stay inert in a browser.
#![allow(dead_code)]

use crate::common::*;
use std::path::PathBuf;

/// Markup in the planner's and coder's text: if any of it ran, `window.__xss` would be set.
pub const XSS_NODE: &str = "<img src=x onerror=\"window.__xss=1\">";
pub const XSS_CHOICE: &str = "</script><script>window.__xss=2</script>";
pub const XSS_KERNEL: &str = "</script><script>window.__xss=3</script>";

pub const SLOW: &str = r#"#include <stdint.h>
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

/// About 1.5x the seed on the fixture: four partial sums, and a multiply by the reciprocal.
const FAST: &str = r#"#include <stdint.h>
#include <math.h>
/* variant FAST MARKUP */
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    for (int64_t i = 0; i < M; i++) {
        const float *r = x + i * N; float *o = y + i * N;
        float m = r[0];
        for (int64_t j = 1; j < N; j++) m = r[j] > m ? r[j] : m;
        double s[4] = {0};
        int64_t j = 0;
        for (; j + 4 <= N; j += 4) {
            o[j] = expf(r[j] - m); s[0] += o[j];
            o[j + 1] = expf(r[j + 1] - m); s[1] += o[j + 1];
            o[j + 2] = expf(r[j + 2] - m); s[2] += o[j + 2];
            o[j + 3] = expf(r[j + 3] - m); s[3] += o[j + 3];
        }
        for (; j < N; j++) { o[j] = expf(r[j] - m); s[0] += o[j]; }
        const float inv = (float)(1.0 / (s[0] + s[1] + s[2] + s[3]));
        for (int64_t k = 0; k < N; k++) o[k] *= inv;
    }
}
"#;

/// The seed of the scripted run: correct, with the exponentials computed twice.
const SLOW_SEED: &str = r#"#include <stdint.h>
#include <math.h>
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    for (int64_t i = 0; i < M; i++) {
        const float *r = x + i * N; float *o = y + i * N;
        float m = r[0];
        for (int64_t j = 1; j < N; j++) m = r[j] > m ? r[j] : m;
        double s = 0;
        for (int64_t j = 0; j < N; j++) s += expf(r[j] - m);
        for (int64_t j = 0; j < N; j++) o[j] = (float)(expf(r[j] - m) / s);
    }
}
"#;

pub fn fast() -> String {
    FAST.replace("MARKUP", XSS_KERNEL)
}

fn node(id: &str, parent: &str, decision: &str, choice: &str, score: f64) -> serde_json::Value {
    serde_json::json!({"op": "insert_node", "node": {"node_id": id, "parent_id": parent, "decision": decision,
        "choice": choice, "overall_rating": 6, "confidence": 0.5,
        "action": {"title": format!("implement {id}"), "description": "write the kernel", "rationale": "a start",
                   "difficulty": 2, "score": score}}})
}

/// The scripted planner: `kind` is the request's kind object (`{"kind": "init"}`, ...).
fn planner(kind: &serde_json::Value, request_id: &str) -> String {
    let ops = match kind["kind"].as_str() {
        Some("init") => {
            let script = serde_json::json!({
            "kernel_summary": "row softmax <b>memory-bound</b>",
            "open_questions": ["is one pass enough?"],
            "ops": [
                node("a", "root", &format!("vector width {XSS_NODE}"), "hand-written AVX", 0.9),
                node("b", "root", "row strategy", "one pass, online max", 0.5),
                node("c", "root", "threads", XSS_CHOICE, 0.4),
            ]});
            return format!("Here is my plan.\n```json\n{script}\n```");
        }
        Some("too_hard") => serde_json::json!([{"op": "update_node", "node_id": "c",
            "set": {"status": "closed", "notes": "pruned: two cores give little"}}]),
        Some("refine") => {
            let parent = kind["node_id"].as_str().unwrap_or("root");
            let mut n = node(&format!("{parent}x{request_id}"), parent, "unroll", "by 4", 0.6);
            n["node"]["overall_rating"] = serde_json::json!(7);
            serde_json::json!([n])
        }
        _ => serde_json::json!([node(&format!("p{request_id}"), "root", "tiling", "rows in blocks", 0.3)]),
    };
    serde_json::json!({ "ops": ops }).to_string()
}

/// The scripted coder: node `a` never compiles (its first answer has no code at all).
fn coder(kind: &serde_json::Value, attempts_on_a: &mut u32) -> String {
    match (kind["node_id"].as_str(), kind["kind"].as_str()) {
        (Some("a"), _) => {
            *attempts_on_a += 1;
            if *attempts_on_a == 1 {
                "I would rather not write code today.".to_string()
            } else {
                "```c kernel.c\nthis is not C\n```".to_string()
            }
        }
        (_, Some("action")) => format!("```c kernel.c\n{SLOW}```"),
        _ => format!("**kernel.c**\n```c\n{}```", fast()),
    }
}

pub struct AgentRun {
    pub work: tempfile::TempDir,
    pub run_dir: PathBuf,
    task: tempfile::TempDir,
    attempts_on_a: u32,
    /// Coder answers without code so far (each is an attempt with no candidate).
    pub format_errors: u32,
}

impl AgentRun {
    /// Starts the run: the seed is evaluated and the planner's first request waits.
    pub fn start(rounds: u32) -> AgentRun {
        let work = tempfile::tempdir().unwrap();
        let task = copy_fixture("tiny_softmax");
        // A seed that takes two expf per element, so that FAST (one, four partial sums, a
        // reciprocal) is clearly the run's best even on a loaded machine, where the paired rule
        // keeps the incumbent for differences within the noise.
        std::fs::write(task.path().join("seed.c"), SLOW_SEED).unwrap();
        let run_dir = work.path().join("scripted-agent");
        let run = AgentRun {
            work,
            run_dir,
            task,
            attempts_on_a: 0,
            format_errors: 0,
        };
        let rounds = rounds.to_string();
        let r = run.ksearch(&[
            "run",
            run.task.path().to_str().unwrap(),
            "--brain",
            "agent",
            "--rounds",
            &rounds,
            "--seed",
            "5",
            "--json",
            "--out",
            run.run_dir.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
        run
    }

    pub fn ksearch(&self, args: &[&str]) -> Run {
        ksearch_in(
            self.work.path(),
            args,
            &[("XDG_CONFIG_HOME", self.work.path().to_str().unwrap())],
        )
    }

    pub fn dir(&self) -> &str {
        self.run_dir.to_str().unwrap()
    }

    /// Answers the pending request; false once the run is finished.
    pub fn step(&mut self) -> bool {
        let next = self.ksearch(&["agent", "next", self.dir(), "--json"]);
        if next.code != 0 {
            assert!(next.stderr.contains("the run is finished"), "{}", next.stderr);
            return false;
        }
        let request = next.json();
        let id = request["id"].as_str().unwrap().to_string();
        let mut rejected = false;
        let answer = match request["role"].as_str() {
            Some("planner") => planner(&request["kind"], &id),
            _ => {
                let before = self.attempts_on_a;
                let text = coder(&request["kind"], &mut self.attempts_on_a);
                if before == 0 && self.attempts_on_a == 1 {
                    self.format_errors += 1;
                    rejected = true;
                }
                text
            }
        };
        let file = self.work.path().join(format!("answer-{id}.txt"));
        std::fs::write(&file, answer).unwrap();
        let s = self.ksearch(&["agent", "submit", self.dir(), &id, file.to_str().unwrap(), "--json"]);
        // The format error is the one answer the engine rejects: exit 1, its errors listed.
        if rejected {
            assert_eq!(s.code, 1, "{}\n{}", s.stdout, s.stderr);
            assert!(
                s.json()["answer_errors"][0]
                    .as_str()
                    .unwrap()
                    .starts_with("format_error"),
                "{}",
                s.stdout
            );
        } else {
            assert_eq!(s.code, 0, "{}\n{}", s.stdout, s.stderr);
        }
        true
    }

    /// Answers until the run is finished.
    pub fn finish(&mut self) {
        for _ in 0..40 {
            if !self.step() {
                return;
            }
        }
        panic!("the scripted run does not end");
    }

    pub fn show(&self) -> serde_json::Value {
        self.ksearch(&["show", self.dir(), "--json"]).json()
    }
}
