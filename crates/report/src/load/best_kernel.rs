//! The best kernel: its sources with their diff against the seed, its speedups, its kernels'
//! resources and its per-workload numbers from the latest evaluation record.

use super::noise_flag;
use super::provenance::scalar;
use crate::diff::diff_against_seed;
use crate::model::*;
use ksearch_search::engine::{kernel_name, Engine, KernelResources};
use ksearch_store::EvaluationRow;
use serde_json::Value;
use std::collections::HashMap;

/// The candidate's latest evaluation record: the final re-measurement if there is one.
pub(super) fn latest_record(evaluations: &[EvaluationRow], candidate: i64) -> Option<&Value> {
    let of = |purpose: &str| {
        evaluations
            .iter()
            .rev()
            .find(|e| e.candidate_id == candidate && e.purpose == purpose)
            .map(|e| &e.record)
    };
    of("final").or_else(|| of("search"))
}

pub(super) fn best_kernel(
    engine: &Engine,
    id: i64,
    evaluations: &[EvaluationRow],
    origins: &HashMap<i64, String>,
) -> Option<BestKernel> {
    let c = engine.candidate(id)?;
    let summary = c.final_result.as_ref().or(c.result.as_ref());
    let measured = if c.final_result.is_some() { "final" } else { "search" };
    let speedup = summary.filter(|s| s.passed()).and_then(|s| s.speedup);
    let seed_sources = engine.task().and_then(|t| t.seed.clone()).unwrap_or_default();
    // The seed's speedup, measured the same way as the best's where possible.
    let seed = engine
        .candidates()
        .iter()
        .find(|s| origins.get(&s.id).map(String::as_str) == Some("seed") || (s.round == 0 && s.cycle == 0));
    let seed_speedup = seed.and_then(|s| {
        let r = if measured == "final" {
            s.final_result.as_ref().or(s.result.as_ref())
        } else {
            s.result.as_ref()
        };
        r.filter(|r| r.passed()).and_then(|r| r.speedup)
    });
    let files = c
        .sources
        .iter()
        .map(|s| {
            let (diff, versus_seed) = diff_against_seed(&s.path, &s.content, &seed_sources);
            SourceFile {
                path: s.path.clone(),
                content: s.content.clone(),
                diff,
                versus_seed,
            }
        })
        .collect();
    let record = latest_record(evaluations, id);
    let workloads = record
        .and_then(|r| r["workloads"].as_array())
        .map(|ws| ws.iter().map(workload_row).collect())
        .unwrap_or_default();
    // The record's report, else the summary's (the same figures, also in the event log).
    let resources = record
        .and_then(|r| serde_json::from_value::<Vec<KernelResources>>(r["compile"]["resources"].clone()).ok())
        .filter(|k| !k.is_empty())
        .or_else(|| summary.map(|s| s.resources.clone()))
        .unwrap_or_default();
    Some(BestKernel {
        candidate: id,
        node_id: c.node_id.clone(),
        round: c.round,
        speedup,
        over_seed: match (speedup, seed_speedup) {
            (Some(b), Some(s)) if s > 0.0 => Some(b / s),
            _ => None,
        },
        measured: measured.into(),
        files,
        has_seed: !seed_sources.is_empty(),
        workloads,
        kernels: resources.iter().map(kernel_row).collect(),
    })
}

fn kernel_row(k: &KernelResources) -> KernelRow {
    KernelRow {
        short_name: kernel_name(&k.name),
        resources: k.clone(),
    }
}

fn workload_row(w: &Value) -> WorkloadRow {
    let t = &w["timing"];
    let axes = w["axes"]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| format!("{k}={}", scalar(v)))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    let median = t["candidate"]["median_ns"].as_f64();
    let iqr = t["candidate"]["iqr_ns"].as_f64();
    let relative_noise = match (median, iqr) {
        (Some(m), Some(q)) if m > 0.0 => Some(q / m),
        _ => None,
    };
    WorkloadRow {
        uuid: scalar(&w["uuid"]),
        axes,
        status: w["status"].as_str().unwrap_or("unknown").to_string(),
        reason: w["reason"].as_str().map(str::to_string),
        speedup: t["speedup"].as_f64(),
        median_ns: median,
        iqr_ns: iqr,
        reference_median_ns: t["reference"]["median_ns"].as_f64(),
        reference_iqr_ns: t["reference"]["iqr_ns"].as_f64(),
        relative_noise,
        noisy: noise_flag(t["speedup"].as_f64(), relative_noise),
        samples: t["candidate"]["n"].as_u64(),
        max_abs_error: w["correctness"]["max_abs_error"].as_f64(),
        gb_per_s: t["achieved_gb_per_s"].as_f64(),
        gflop_per_s: t["achieved_gflop_per_s"].as_f64(),
        suspicious: t["suspicious"].as_str().map(str::to_string),
    }
}
