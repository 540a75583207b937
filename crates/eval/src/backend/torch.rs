//! What the backends whose harness imports PyTorch ([`super::cuda`], [`super::triton`],
//! [`super::python`]) send alike: how the entry is called and constructed, the task's module
//! folders, the CUDA build's architecture and cache, and CUDA-graph timing (the harness's
//! `backends/torch_gpu/` is their common base).

use super::RequestParts;
use crate::request::calling_for;
use crate::CudaGraph;
use serde_json::json;

/// Adds the torch backends' fields to the request.
pub(super) fn extend_request(r: &mut RequestParts<'_>) {
    let cfg = &r.task.config;
    r.candidate["calling"] = json!(calling_for(r.solution, r.task));
    r.candidate["init"] = json!(cfg.kernel.init);
    // The task's module folders, absolute: the harness runs in a temp dir of its own.
    if !cfg.kernel.python_path.is_empty() {
        let base = r
            .task
            .dir()
            .map(|d| d.canonicalize().unwrap_or_else(|_| d.to_path_buf()));
        let paths: Vec<String> = cfg
            .kernel
            .python_path
            .iter()
            .map(|p| match &base {
                Some(b) => b.join(p).display().to_string(),
                None => p.clone(),
            })
            .collect();
        r.candidate["python_path"] = json!(paths);
    }
    r.candidate["build"]["arch"] = json!(r.opts.arch);
    r.candidate["build"]["cache_dir"] = json!(r.opts.build_cache);
    r.timing["cuda_graph"] = match r.opts.cuda_graph {
        CudaGraph::Auto => json!("auto"),
        CudaGraph::On => json!(true),
        CudaGraph::Off => json!(false),
    };
}
