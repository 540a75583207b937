//! `ksearch eval TASK --baseline NAME`: the task author's native implementation, evaluated like a
//! candidate but exempt from the static checks that would reject it as a candidate.

mod common;
use common::*;

/// The fixture with a task-level rule forbidding `expf` and a baseline that uses it.
fn task_with_baseline() -> tempfile::TempDir {
    let task = copy_fixture("tiny_softmax");
    let toml = std::fs::read_to_string(task.path().join("task.toml")).unwrap();
    let toml = format!(
        "{toml}\n[checks]\nforbidden = [{{ pattern = '\\bexpf\\b', reason = \"candidates must write their own exp\" }}]\n\n\
         [[baselines]]\nname = \"libm\"\nfile = \"baselines/libm.c\"\nentry = \"softmax\"\ndescription = \"expf from libm\"\n"
    );
    std::fs::write(task.path().join("task.toml"), toml).unwrap();
    std::fs::create_dir_all(task.path().join("baselines")).unwrap();
    std::fs::write(task.path().join("baselines/libm.c"), SOFTMAX_OK).unwrap();
    task
}

#[test]
fn a_baseline_skips_the_checks_that_reject_the_same_code_as_a_candidate() {
    let task = task_with_baseline();
    let dir = task.path().to_str().unwrap();
    let as_candidate = ksearch(&[
        "eval",
        dir,
        task.path().join("baselines/libm.c").to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(as_candidate.code, 1, "{}", as_candidate.stderr);
    let j = as_candidate.json();
    assert_eq!(j["status"], "rejected");
    assert!(
        j["reason"]
            .as_str()
            .unwrap()
            .contains("candidates must write their own exp"),
        "{j}"
    );

    let as_baseline = ksearch(&["eval", dir, "--baseline", "libm", "--json", "--trials", "1"]);
    assert_eq!(as_baseline.code, 0, "{}\n{}", as_baseline.stdout, as_baseline.stderr);
    assert_eq!(as_baseline.json()["status"], "passed");
}

#[test]
fn an_unknown_baseline_names_the_declared_ones() {
    let task = task_with_baseline();
    let r = ksearch(&["eval", task.path().to_str().unwrap(), "--baseline", "cudnn"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("has no baseline 'cudnn' (declared: libm)"),
        "{}",
        r.stderr
    );
}

#[test]
fn sanitize_is_refused_where_there_is_no_cuda_kernel_to_check() {
    let r = ksearch(&["eval", "softmax", "--sanitize"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("backend c on cpu has none"), "{}", r.stderr);
}
