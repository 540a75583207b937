//! compute-sanitizer around the harness process ([`crate::EvalOptions::sanitize`]).
//!
//! The whole harness runs under `compute-sanitizer --tool memcheck --log-file sanitizer.log`,
//! so the report never mixes with the protocol on stdout. The harness reads the log after each
//! correctness call and blames the workload whose call produced errors (docs/protocol.md,
//! Sanitizer); here the log's summary is read once more after the process ends, so errors the
//! harness could not attribute (reported late, or after its last look) still fail the
//! evaluation.

use std::path::{Path, PathBuf};

/// `$KSEARCH_COMPUTE_SANITIZER`, else `compute-sanitizer` beside `$CUDA_HOME/bin` or on PATH,
/// else `/usr/local/cuda/bin/compute-sanitizer`.
pub fn find() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KSEARCH_COMPUTE_SANITIZER") {
        return Some(PathBuf::from(p));
    }
    let mut dirs: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(|d| PathBuf::from(d).join("bin"))
        .collect();
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/bin"));
    dirs.into_iter()
        .map(|d| d.join("compute-sanitizer"))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The arguments that put `python -m ksearch_harness` under memcheck.
pub fn arguments(python: &Path, log: &str) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = ["--tool", "memcheck", "--log-file", log]
        .iter()
        .map(Into::into)
        .collect();
    args.push(python.as_os_str().to_owned());
    args.push("-m".into());
    args.push("ksearch_harness".into());
    args
}

/// The error count of the log's "ERROR SUMMARY: N errors" line and its first error lines
/// (without the "=========" prefix), or `None` when the log has no summary.
pub fn summary(log: &str) -> Option<(u64, Vec<String>)> {
    let mut count = None;
    let mut lines = Vec::new();
    for line in log.lines() {
        let Some(text) = line.strip_prefix("=========") else {
            continue;
        };
        let text = text.trim();
        if let Some(rest) = text.strip_prefix("ERROR SUMMARY:") {
            count = rest.split_whitespace().next().and_then(|n| n.parse::<u64>().ok());
        } else if !text.is_empty() && !text.starts_with("COMPUTE-SANITIZER") && lines.len() < 12 {
            lines.push(text.to_string());
        }
    }
    count.map(|n| (n, lines))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_counts_errors_and_keeps_their_first_lines() {
        let log = "========= COMPUTE-SANITIZER\n\
                   ========= Invalid __global__ write of size 4 bytes\n\
                   =========     at softmax_rows(const float *, float *, long)+0x2f0 in kernel.cu:27\n\
                   =========     by thread (0,0,0) in block (0,0,0)\n\
                   unrelated program output\n\
                   ========= ERROR SUMMARY: 1 error\n";
        let (n, lines) = summary(log).unwrap();
        assert_eq!(n, 1);
        assert_eq!(lines[0], "Invalid __global__ write of size 4 bytes");
        assert!(lines[1].starts_with("at softmax_rows"));
        assert_eq!(lines.len(), 3);
        let clean = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n";
        assert_eq!(summary(clean), Some((0, vec![])));
        assert_eq!(summary("the process died before the summary"), None);
    }

    #[test]
    fn the_harness_runs_under_memcheck_with_a_log_file() {
        let args = arguments(Path::new("/usr/bin/python3"), "sanitizer.log");
        let args: Vec<String> = args.iter().map(|a| a.to_string_lossy().to_string()).collect();
        assert_eq!(
            args,
            [
                "--tool",
                "memcheck",
                "--log-file",
                "sanitizer.log",
                "/usr/bin/python3",
                "-m",
                "ksearch_harness"
            ]
        );
    }
}
