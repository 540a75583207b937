//! `ksearch show` and `ksearch report` break a run's evaluations down by device model and node
//! when they came from more than one (a mixed Ray cluster), and say nothing of it when one
//! machine did them all. The mixed run is a real local run whose records are then given the
//! provenance two Ray nodes with different GPUs would have written (no GPU, no cluster needed).

mod common;
use common::*;
use std::path::Path;

fn local_run(work: &Path, run_dir: &Path) {
    let task = fixture("tiny_softmax_tunable");
    let r = ksearch_in(
        work,
        &[
            "run",
            task.to_str().unwrap(),
            "--brain",
            "tuner",
            "--rounds",
            "2",
            "--seed",
            "3",
            "--json",
            "--out",
            run_dir.to_str().unwrap(),
        ],
        &[("XDG_CONFIG_HOME", work.to_str().unwrap())],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
}

/// Gives each evaluation the `node` a Ray node writes: even candidates on an A100 at 10.0.0.1,
/// odd ones on an H200 at 10.0.0.2. Returns the evaluations per model (A100, H200).
fn spread_over_two_nodes(run_dir: &Path) -> (usize, usize) {
    let db = rusqlite::Connection::open(run_dir.join("run.sqlite")).unwrap();
    let rows: Vec<(i64, i64, String)> = db
        .prepare("SELECT id, candidate_id, record FROM evaluations")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let (mut a100, mut h200) = (0, 0);
    for (id, candidate, text) in rows {
        let mut record: serde_json::Value = serde_json::from_str(&text).unwrap();
        let (gpu, ip, driver) = if candidate % 2 == 0 {
            a100 += 1;
            ("NVIDIA A100-SXM4-80GB", "10.0.0.1", "535.54")
        } else {
            h200 += 1;
            ("NVIDIA H200", "10.0.0.2", "580.1")
        };
        record["node"] = serde_json::json!({"node_id": format!("node-{ip}"), "ip": ip, "gpu": gpu,
                                            "driver": driver, "attempts": 1});
        record["leased_device"] = serde_json::json!(format!("ray:{ip}:{gpu}"));
        db.execute(
            "UPDATE evaluations SET record = ?1 WHERE id = ?2",
            rusqlite::params![record.to_string(), id],
        )
        .unwrap();
    }
    (a100, h200)
}

#[test]
fn a_run_on_two_device_models_is_broken_down_by_device_in_show_and_the_report() {
    let work = tempfile::tempdir().unwrap();
    let run_dir = work.path().join("run");
    local_run(work.path(), &run_dir);
    let dir = run_dir.to_str().unwrap();

    // One machine: no device breakdown, no device on the candidates' lines.
    let show = ksearch(&["show", dir]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(!show.stdout.contains("devices ("), "{}", show.stdout);
    assert!(!show.stdout.contains(") on "), "{}", show.stdout);
    let page = work.path().join("one.html");
    let r = ksearch(&["report", dir, "--out", page.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!std::fs::read_to_string(&page).unwrap().contains("id=\"devices\""));

    let (a100, h200) = spread_over_two_nodes(&run_dir);
    assert!(a100 > 0 && h200 > 0, "the run has too few candidates: {a100} {h200}");

    let show = ksearch(&["show", dir]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    let text = &show.stdout;
    assert!(text.contains("devices (2):"), "{text}");
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    assert!(
        text.contains(&format!(
            "NVIDIA A100-SXM4-80GB (node 10.0.0.1): {a100} evaluation{}",
            plural(a100)
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "NVIDIA H200 (node 10.0.0.2): {h200} evaluation{}",
            plural(h200)
        )),
        "{text}"
    );
    assert!(text.contains("driver 535.54"), "{text}");
    // Each evaluated candidate's line names its device.
    for line in text.lines().filter(|l| l.trim_start().starts_with("candidate ")) {
        let id: i64 = line.trim_start()["candidate ".len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let want = if id % 2 == 0 {
            ") on NVIDIA A100-SXM4-80GB (node 10.0.0.1): "
        } else {
            ") on NVIDIA H200 (node 10.0.0.2): "
        };
        assert!(line.contains(want), "{line}");
    }

    let j = ksearch(&["show", dir, "--json"]).json();
    let devices = j["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2, "{j}");
    let count = |model: &str| {
        devices
            .iter()
            .find(|d| d["model"] == model)
            .map(|d| d["evaluations"].as_u64().unwrap() as usize)
    };
    assert_eq!(count("NVIDIA A100-SXM4-80GB"), Some(a100), "{j}");
    assert_eq!(count("NVIDIA H200"), Some(h200), "{j}");
    for c in j["candidates"].as_array().unwrap() {
        let want = if c["id"].as_i64().unwrap() % 2 == 0 {
            "NVIDIA A100-SXM4-80GB (node 10.0.0.1)"
        } else {
            "NVIDIA H200 (node 10.0.0.2)"
        };
        assert_eq!(c["device"], want, "{c}");
    }

    let page = work.path().join("two.html");
    let r = ksearch(&["report", dir, "--out", page.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("id=\"devices\""), "no devices section");
    assert!(html.contains("Devices (2)"), "no devices heading");
    assert!(
        html.contains(&format!(
            "<td>NVIDIA H200</td><td>10.0.0.2</td><td>580.1</td><td class=\"n\">{h200}</td>"
        )),
        "the H200 row is missing"
    );
    // The attempts table names each attempt's device.
    assert!(html.contains("<th>device</th>"));
    assert!(html.contains("<td class=\"device\">NVIDIA A100-SXM4-80GB (node 10.0.0.1)</td>"));
}
