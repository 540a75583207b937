//! Every command's exit status by cause, as the README promises: 0 done as asked, 1 the input
//! was right but the work failed (a candidate that does not pass, a run with nothing to export,
//! copies that diverged, the machine: no temp dir for an evaluation), 2 bad input (an unknown
//! task, a directory that is not a run, a value out of range, a missing file, a KSEARCH_PYTHON
//! that cannot run the harness). `dashboard` and `mcp` serve until stopped, so only their bad
//! input is checked; `doctor` reports this machine, so its status depends on it and is not held
//! here.

mod common;
use common::*;
use std::path::Path;

const FAILING_KERNEL: &str = "#include <stddef.h>\nvoid softmax(const float *x, float *y, size_t m, size_t n) {\n  for (size_t i = 0; i < m * n; i++) y[i] = 0.0f;\n}\n";

struct Case<'a> {
    what: &'a str,
    args: Vec<String>,
    env: Vec<(&'a str, &'a str)>,
    code: i32,
}

fn case<'a>(what: &'a str, args: &[&str], code: i32) -> Case<'a> {
    Case {
        what,
        args: args.iter().map(|s| s.to_string()).collect(),
        env: Vec::new(),
        code,
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn every_command_exits_0_1_or_2_by_cause() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let tunable = fixture("tiny_softmax_tunable");
    let tiny = fixture("tiny_softmax");
    let env_cfg = [("XDG_CONFIG_HOME", s(w))];
    let run_with = |dir: &Path, seed: &str| {
        let args = [
            "run",
            s(&tunable),
            "--brain",
            "tuner",
            "--rounds",
            "1",
            "--seed",
            seed,
            "--out",
            s(dir),
        ];
        let r = ksearch_in(w, &args, &env_cfg);
        assert_eq!(r.code, 0, "setting up {}: {}\n{}", dir.display(), r.stdout, r.stderr);
    };
    // A finished tuner run, its copy, and another run made apart from it.
    let finished = w.join("finished");
    run_with(&finished, "3");
    let copy = w.join("copy");
    std::fs::create_dir_all(&copy).unwrap();
    for f in std::fs::read_dir(&finished).unwrap() {
        let f = f.unwrap();
        if f.path().is_file() {
            std::fs::copy(f.path(), copy.join(f.file_name())).unwrap();
        }
    }
    let other = w.join("other");
    run_with(&other, "4");
    // An agent run waiting for its first answer, and a deferred one with nothing evaluated.
    let agent = w.join("agent");
    let r = ksearch_in(
        w,
        &["run", s(&tiny), "--brain", "agent", "--rounds", "1", "--out", s(&agent)],
        &env_cfg,
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let deferred = w.join("deferred");
    let r = ksearch_in(
        w,
        &[
            "run",
            s(&tiny),
            "--brain",
            "agent",
            "--executor",
            "deferred",
            "--rounds",
            "1",
            "--out",
            s(&deferred),
        ],
        &env_cfg,
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let (_k, failing) = write_temp("kernel.c", FAILING_KERNEL);
    let not_a_run = w.join("not-a-run");
    std::fs::create_dir_all(&not_a_run).unwrap();
    let missing = w.join("missing.py");

    let mut cases = vec![
        case("tasks", &["tasks"], 0),
        case("eval of the seed", &["eval", s(&tiny)], 0),
        case(
            "eval of a kernel that writes zeros",
            &["eval", s(&tiny), s(&failing)],
            1,
        ),
        case("eval of an unknown task", &["eval", "no_such_task"], 2),
        case("eval --sanitize of a C kernel", &["eval", s(&tiny), "--sanitize"], 2),
        case("run with --rounds 0", &["run", s(&tunable), "--rounds", "0"], 2),
        case("run of an unknown task", &["run", "no_such_task"], 2),
        case("resume of a finished run", &["resume", s(&finished)], 0),
        case("resume of a directory that is not a run", &["resume", s(&not_a_run)], 2),
        case(
            "evaluate of a directory that is not a run",
            &["evaluate", s(&not_a_run)],
            2,
        ),
        case("evaluate with --max 0", &["evaluate", s(&deferred), "--max", "0"], 2),
        case(
            "sync of a copy that is up to date",
            &["sync", s(&copy), s(&finished)],
            0,
        ),
        case("sync of runs that diverged", &["sync", s(&other), s(&finished)], 1),
        case(
            "sync from a directory that is not a run",
            &["sync", s(&not_a_run), s(&finished)],
            2,
        ),
        case("show", &["show", s(&finished)], 0),
        case("show of a directory that is not a run", &["show", s(&not_a_run)], 2),
        case("export", &["export", s(&finished), "--out", s(&w.join("best.json"))], 0),
        case("export of a run where nothing passed yet", &["export", s(&deferred)], 1),
        case("export of a directory that is not a run", &["export", s(&not_a_run)], 2),
        case("report", &["report", s(&finished)], 0),
        case("report of a directory that is not a run", &["report", s(&not_a_run)], 2),
        case(
            "dashboard of a directory that is not a run",
            &["dashboard", s(&not_a_run)],
            2,
        ),
        case("agent next", &["agent", "next", s(&agent)], 0),
        case(
            "agent next of a directory that is not a run",
            &["agent", "next", s(&not_a_run)],
            2,
        ),
        case(
            "agent submit to a run without an agent",
            &["agent", "submit", s(&finished), "--file", "/dev/null"],
            2,
        ),
        case("sweep", &["sweep", s(&tunable), "--random", "1", "--seed", "3"], 0),
        case("sweep of a task without a template", &["sweep", s(&tiny)], 2),
        case("kb list", &["kb", "list"], 0),
        case("kb show of an unknown device", &["kb", "show", "no_such_device"], 2),
        case(
            "import of a missing file",
            &["import", "kernelbench", s(&missing), "--out", s(&w.join("imp"))],
            2,
        ),
        case("an unknown command", &["no_such_command"], 2),
    ];
    // The machine's failure: no temp dir for the evaluation. A KSEARCH_PYTHON that does not exist
    // is a setting to fix: bad input.
    let no_tmp = w.join("no-such-tmp");
    let mut c = case("eval without a temp dir", &["eval", s(&tiny)], 1);
    c.env.push(("TMPDIR", s(&no_tmp)));
    cases.push(c);
    // A run whose evaluator cannot start is made and then stopped (resumable once the setting is
    // fixed): the search failed, 1.
    let mut c = case(
        "run with a KSEARCH_PYTHON that does not exist",
        &["run", s(&tunable), "--rounds", "1"],
        1,
    );
    c.env.push(("KSEARCH_PYTHON", "/nonexistent/python3"));
    c.args.extend(["--out".into(), s(&w.join("no-python")).into()]);
    cases.push(c);
    let mut c = case("eval with a KSEARCH_PYTHON that does not exist", &["eval", s(&tiny)], 2);
    c.env.push(("KSEARCH_PYTHON", "/nonexistent/python3"));
    cases.push(c);

    let mut wrong = Vec::new();
    for c in &cases {
        let args: Vec<&str> = c.args.iter().map(String::as_str).collect();
        let mut env = c.env.clone();
        env.extend(env_cfg);
        let r = ksearch_in(w, &args, &env);
        if r.code != c.code {
            wrong.push(format!(
                "{}: exit {} (expected {})\n  stdout: {}\n  stderr: {}",
                c.what,
                r.code,
                c.code,
                r.stdout.trim(),
                r.stderr.trim()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
