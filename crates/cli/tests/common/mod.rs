//! Helpers shared by the CLI tests: run the real `ksearch` binary and read what it says.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}\nstderr:\n{}", self.stdout, self.stderr))
    }
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
        .join(name)
}

pub fn ksearch(args: &[&str]) -> Run {
    ksearch_env(args, &[])
}

pub fn ksearch_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    ksearch_in(Path::new("."), args, env)
}

/// Runs ksearch with `dir` as its working directory (where it looks for ksearch.toml).
///
/// Each run gets device locks of its own (`KSEARCH_DEVICE_LOCK_DIR`) unless the test names a
/// directory: the tests run at once, and the machine-wide locks would make each wait for the
/// others' evaluations, folding their time into its own (a 3 s timeout measured as 5 s). The
/// tests of the locks themselves name theirs.
pub fn ksearch_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let locks = tempfile::tempdir().expect("a temp dir for the device locks");
    let start = Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ksearch"));
    cmd.current_dir(dir);
    cmd.args(args);
    cmd.env("KSEARCH_DEVICE_LOCK_DIR", locks.path());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("cannot run ksearch");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: start.elapsed(),
    }
}

/// Writes `content` to a file named `name` in a fresh temp dir, which is returned with it.
pub fn write_temp(name: &str, content: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, content).unwrap();
    (dir, path)
}

/// Copies a fixture task into a temp dir so a test can break it.
pub fn copy_fixture(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixture(name)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

/// Evaluates a C kernel for the tiny softmax fixture and returns the run.
pub fn eval_tiny(kernel: &str, extra: &[&str]) -> Run {
    let (_dir, path) = write_temp("kernel.c", kernel);
    let task = fixture("tiny_softmax");
    let mut args = vec![
        "eval",
        task.to_str().unwrap(),
        path.to_str().unwrap(),
        "--json",
        "--seed",
        "7",
    ];
    args.extend_from_slice(extra);
    ksearch(&args)
}

/// True if some live process carries `marker` in its environment.
pub fn process_with_env_marker(marker: &str) -> Option<String> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let pid = entry.file_name().to_string_lossy().to_string();
        if !pid.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        if stat.contains(") Z ") {
            continue;
        }
        if environ.split(|b| *b == 0).any(|kv| kv == marker.as_bytes()) {
            return Some(pid);
        }
    }
    None
}

pub const SOFTMAX_OK: &str = r#"
#include <stdint.h>
#include <math.h>
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    for (int64_t i = 0; i < M; i++) {
        const float *r = x + i * N; float *o = y + i * N;
        float m = r[0];
        for (int64_t j = 1; j < N; j++) m = r[j] > m ? r[j] : m;
        double s = 0;
        for (int64_t j = 0; j < N; j++) { o[j] = expf(r[j] - m); s += o[j]; }
        for (int64_t j = 0; j < N; j++) o[j] = (float)(o[j] / s);
    }
}
"#;

/// A correct softmax that recomputes the row maximum for every element: far slower than the seed.
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

/// SOFTMAX_OK, marked as the FAST variant.
pub fn fast() -> String {
    SOFTMAX_OK.replace("#include <math.h>", "#include <math.h>\n/* variant FAST */")
}

/// A scripted planner: three first actions under the root, then no edits.
pub fn planner_answer(prompt: &str) -> String {
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
