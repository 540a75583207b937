//! A FlashInfer-Bench-like task whose safetensors blobs are absent: the inputs are synthesised from
//! the definition's constraints, and the seed kernel passes against a reference that checks the
//! structure (offsets from 0 to the index count, distinct in-range page indices).

mod common;
use common::*;

use ksearch_spec::{Bound, Distribution, InputSpec, Task, Workload};

#[test]
fn absent_blobs_are_synthesised_with_the_structure_the_reference_checks() {
    let task = Task::load_folder(&fixture("flashinfer/paged_decode")).unwrap();
    assert_eq!(task.workloads.len(), 3);
    for w in &task.workloads {
        assert_eq!(
            w.inputs["kv_indptr"],
            InputSpec::Distributed(Distribution::Offsets {
                total: Bound::Axis("num_kv_indices".into())
            })
        );
        assert_eq!(
            w.inputs["kv_indices"],
            InputSpec::Distributed(Distribution::Unique {
                low: Bound::Value(0),
                high: Bound::Axis("num_pages".into())
            })
        );
        let missing: Vec<(&str, &str)> = w
            .synthesized
            .iter()
            .map(|s| (s.input.as_str(), s.path.as_str()))
            .collect();
        let path = format!("./blob/workloads/paged_decode/{}.safetensors", w.uuid);
        assert_eq!(missing, [("kv_indptr", path.as_str()), ("kv_indices", path.as_str())]);
    }
    let report = Workload::synthesis_report("workloads.jsonl", &task.workloads).unwrap();
    assert!(
        report.contains("6 safetensors input(s) of 3 workload(s) are absent"),
        "{report}"
    );
    assert!(report.contains("workload w-batch4: input 'kv_indices'"), "{report}");

    // The whole path: the harness draws the synthesised inputs, the NumPy reference asserts
    // their structure, and the C seed must match it.
    let seed = task.seed.clone().unwrap();
    let solution = ksearch_spec::Solution::from_source(&seed.path, &seed.path, seed.content, &task).unwrap();
    let eval = ksearch_eval::evaluate(&task, &solution, &ksearch_eval::EvalOptions::new(7), &|m| {
        eprintln!("{m}")
    })
    .unwrap();
    assert!(eval.passed(), "{:?}: {:?}\n{}", eval.status, eval.reason, eval.log);
    assert_eq!(eval.workloads.len(), 3);
}
