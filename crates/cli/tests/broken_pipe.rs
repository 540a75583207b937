//! Commands that only print end quietly when their reader goes away (`ksearch agent next RUN |
//! head`), as other Unix tools do, instead of panicking on the broken pipe.

mod common;
use common::*;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

/// Runs ksearch with its stdout on a pipe whose read end is already closed: every write fails.
fn into_a_closed_pipe(args: &[&str]) -> (std::process::ExitStatus, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_ksearch"))
        .args(args)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (out.status, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn agent_next_and_show_end_quietly_on_a_broken_pipe() {
    let work = tempfile::tempdir().unwrap();
    let task = copy_fixture("tiny_softmax");
    std::fs::write(
        task.path().join("task.toml"),
        "[kernel]\nlanguage = \"c\"\nentry = \"softmax\"\n",
    )
    .unwrap();
    let run_dir = work.path().join("run");
    let r = ksearch_in(
        work.path(),
        &[
            "run",
            task.path().to_str().unwrap(),
            "--brain",
            "agent",
            "--out",
            run_dir.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    for args in [["agent", "next"], ["show", "--"]] {
        let mut full: Vec<&str> = args.iter().copied().filter(|a| *a != "--").collect();
        full.push(run_dir.to_str().unwrap());
        let (status, stderr) = into_a_closed_pipe(&full);
        assert!(!stderr.contains("panicked"), "{full:?}: {stderr}");
        assert!(
            status.signal() == Some(libc::SIGPIPE) || status.code() == Some(0),
            "{full:?}: {status:?} {stderr}"
        );
    }
}
