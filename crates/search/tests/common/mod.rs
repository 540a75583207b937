//! Scripted pieces shared by the engine tests: a toy task, and "kernels" whose text says how
//! they measure (`SPEED=1.5` passes at 1.5x, `FAIL` fails).
#![allow(dead_code)]

use ksearch_search::engine::*;

pub fn brief(seed: bool) -> TaskBrief {
    TaskBrief {
        name: "toy".into(),
        text: "Compute y = x.".into(),
        language: "c".into(),
        convention: "void k(const float *x, float *y, int64_t n)".into(),
        default_file: "kernel.c".into(),
        target: String::new(),
        seed: seed.then(|| {
            vec![Source {
                path: "kernel.c".into(),
                content: "seed SPEED=1.0".into(),
            }]
        }),
    }
}

pub fn summary(text: &str) -> EvalSummary {
    let speed = text
        .split("SPEED=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse::<f64>().ok());
    let failed = text.contains("FAIL") || speed.is_none();
    EvalSummary {
        status: if failed { "incorrect_numerical" } else { "passed" }.into(),
        reason: failed.then(|| "output 'y': 12 of 64 elements differ".to_string()),
        speedup: if failed { None } else { speed },
        relative_noise: Some(0.02),
        workloads: vec![WorkloadSummary {
            uuid: "w".into(),
            status: if failed { "incorrect_numerical" } else { "passed" }.into(),
            speedup: speed.filter(|_| !failed),
            median_ns: speed.map(|s| 1000.0 / s),
            iqr_ns: Some(10.0),
            reference_median_ns: Some(1000.0),
        }],
        log_tail: if failed {
            "max abs error 0.5".into()
        } else {
            String::new()
        },
        suspicious: None,
    }
}

pub fn code(text: &str) -> String {
    format!("Here is the kernel:\n```c kernel.c\n{text}\n```\n")
}
