//! `ksearch report`: a scripted agent run (a too-hard node, a pruned one, a solved one, a coder
//! answer without code, markup in node texts and in the best kernel) becomes one HTML page that
//! headless Chromium opens without console errors, with one tree node per node in the store,
//! one chart point per attempt, and none of the markup running.

mod browser;
mod common;
mod scripted;

use common::*;
use scripted::*;

fn scripted_report() -> (AgentRun, std::path::PathBuf, serde_json::Value) {
    let mut run = AgentRun::start(8);
    run.finish();
    let show = run.show();
    assert!(show["state"].as_str().unwrap().starts_with("finished"), "{show}");
    let out = run.work.path().join("page.html");
    let r = run.ksearch(&["report", run.dir(), "--out", out.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.stdout.trim(), out.to_str().unwrap());
    (run, out, show)
}

#[test]
fn the_report_draws_every_node_and_attempt_and_keeps_markup_inert() {
    let (run, out, show) = scripted_report();
    let html = std::fs::read_to_string(&out).unwrap();
    let nodes = show["world_model"]["decision_tree"]["nodes"].as_array().unwrap();
    let statuses: Vec<&str> = nodes.iter().map(|n| n["status"].as_str().unwrap()).collect();
    assert!(
        statuses.contains(&"too_hard") && statuses.contains(&"closed") && statuses.contains(&"solved"),
        "{statuses:?}"
    );
    let evaluated = show["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| !c["status"].is_null())
        .count();
    assert_eq!(run.format_errors, 1);
    let attempts = evaluated + run.format_errors as usize;

    // Self-contained and script-free: nothing to fetch, nothing to run.
    assert!(!html.contains("<script"), "the report has a script");
    assert!(!html.contains("<img") && !html.contains("<link") && !html.contains(" src=\""));
    assert!(
        // (minijinja escapes `/` too.)
        html.contains("&lt;&#x2f;script&gt;&lt;script&gt;window.__xss=3"),
        "the kernel's text is shown escaped"
    );

    let Some(mut b) = browser::browser_or_skip("the_report_draws_every_node_and_attempt_and_keeps_markup_inert") else {
        return;
    };
    let mark = b.events_seen();
    let url = format!("file://{}", out.display());
    b.goto(&url);
    assert_eq!(b.errors(), Vec::<String>::new(), "console errors");
    // Self-contained, as the browser sees it: the page itself is the only request, and it
    // loaded no resource (no font, picture, style sheet or script).
    assert_eq!(
        b.requests_since(mark),
        vec![url.clone()],
        "requests made by opening the report"
    );
    assert_eq!(b.eval("performance.getEntriesByType('resource').length"), 0);
    assert_eq!(b.eval("typeof window.__xss"), "undefined", "markup from the run ran");
    assert_eq!(b.count("script"), 0);
    assert_eq!(
        b.count("#wm-tree g.wm-node") as usize,
        nodes.len(),
        "one drawn node per node in the store"
    );
    assert_eq!(b.count("#wm-tree g.wm-too_hard"), 1);
    assert_eq!(b.count("#wm-tree g.wm-closed"), 1);
    assert_eq!(
        b.count("#progress-chart circle") as usize,
        attempts,
        "one point per attempt"
    );
    // Each point says which attempt it is (shown on hover).
    let titles =
        b.eval("Array.from(document.querySelectorAll('#progress-chart g.attempt title')).map(t => t.textContent)");
    let titles: Vec<&str> = titles.as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert_eq!(titles.len(), attempts);
    assert!(
        titles[0].starts_with("candidate 1 (seed), node root, round 0\npassed, "),
        "{titles:?}"
    );
    assert_eq!(
        titles
            .iter()
            .filter(|t| t.starts_with("coder answer without a candidate"))
            .count(),
        run.format_errors as usize
    );
    // The final re-measurements are drawn apart (not circles), the best one's in gold.
    let finals = b.count("#progress-chart g.final");
    assert!(finals >= 1, "the finished run re-measured its best");
    assert_eq!(b.count("#progress-chart g.final path[stroke='#d4a000']"), 1);
    // An agent answered: no LLM card of $0 and "every call priced".
    let llm = b.eval("document.getElementById('no-llm').textContent");
    assert!(llm.as_str().unwrap().contains("an external agent answered"), "{llm}");
    let state = b.eval("document.querySelector('header .badge').textContent");
    assert!(state.as_str().unwrap().starts_with("finished: "), "{state}");
    // The untrusted texts are there, as text.
    let source = b.eval("document.querySelector('#best pre.code').textContent");
    assert!(source.as_str().unwrap().contains(XSS_KERNEL), "{source}");
    let tree_text = b.eval("document.getElementById('wm-tree').textContent");
    assert!(
        tree_text
            .as_str()
            .unwrap()
            .contains(XSS_CHOICE.split('<').nth(1).unwrap()),
        "{tree_text}"
    );
    // The node table lists the node whose decision carries an <img> tag, as text.
    let row = b.eval("document.getElementById('node-a').textContent");
    assert!(row.as_str().unwrap().contains(XSS_NODE), "{row}");
    if let Some(path) = browser::screenshot_path("report-screenshot.png") {
        // The whole page: the diff, the workloads and the provenance too.
        b.screenshot_full_page(&path, 1100, 9000);
    }
}

#[test]
fn a_run_that_could_not_start_says_why_instead_of_looking_live() {
    // An LLM run whose API key is not set: the run directory is made, then the run stops before
    // its first request. Its report must say so, not "in progress, waiting on the evaluator".
    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        work.path().join("ksearch.toml"),
        "[providers.nokey]\nkind = \"openai-chat\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n\
         api_key_env = \"KSEARCH_TEST_KEY_THAT_IS_NEVER_SET_4711\"\n",
    )
    .unwrap();
    let run_dir = work.path().join("no-key");
    let r = ksearch_in(
        work.path(),
        &[
            "run",
            fixture("tiny_softmax_tunable").to_str().unwrap(),
            "--llm",
            "nokey",
            "--rounds",
            "2",
            "--out",
            run_dir.to_str().unwrap(),
        ],
        &[("XDG_CONFIG_HOME", work.path().to_str().unwrap())],
    );
    assert_ne!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(run_dir.join("run.sqlite").is_file(), "{}", r.stderr);
    let out = work.path().join("no-key.html");
    let r = ksearch(&["report", run_dir.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.contains("class=\"badge state-stopped\""), "{html}");
    assert!(html.contains(">stopped: ksearch failed at 20"), "{html}");
    assert!(
        html.contains("KSEARCH_TEST_KEY_THAT_IS_NEVER_SET_4711"),
        "the reason is shown"
    );
    assert!(!html.contains("in progress"), "{html}");
}

#[test]
fn report_of_a_folder_that_is_not_a_run_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let r = ksearch(&["report", dir.path().to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("not a run directory"), "{}", r.stderr);
}

#[test]
fn an_evolve_run_is_drawn_as_the_lineage_of_its_candidates() {
    // Strategies without a planner keep no world model: the report shows which candidate each
    // one was made from instead, one drawn row per candidate in the store.
    let work = tempfile::tempdir().unwrap();
    let run_dir = work.path().join("evolve");
    let r = ksearch_in(
        work.path(),
        &[
            "run",
            fixture("tiny_softmax_tunable").to_str().unwrap(),
            "--rounds",
            "6",
            "--strategy",
            "evolve",
            "--seed",
            "5",
            "--out",
            run_dir.to_str().unwrap(),
            "--json",
        ],
        &[("XDG_CONFIG_HOME", work.path().to_str().unwrap())],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let show = ksearch(&["show", run_dir.to_str().unwrap(), "--json"]).json();
    let candidates = show["candidates"].as_array().unwrap();
    assert!(candidates.len() >= 4, "{show}");
    let children = candidates.iter().filter(|c| !c["parent"].is_null()).count();
    assert!(children >= 1, "the run made candidates from others: {show}");
    let out = work.path().join("evolve.html");
    let r = ksearch(&["report", run_dir.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.contains("Candidate lineage") && !html.contains("id=\"wm-tree\""));
    assert_eq!(html.matches("class=\"lineage-node\"").count(), candidates.len());
    assert_eq!(html.matches("◀ best").count(), 1, "the best candidate is marked once");

    let Some(mut b) = browser::browser_or_skip("an_evolve_run_is_drawn_as_the_lineage_of_its_candidates") else {
        return;
    };
    b.goto(&format!("file://{}", out.display()));
    assert_eq!(b.errors(), Vec::<String>::new(), "console errors");
    assert_eq!(b.count("#lineage-tree g.lineage-node") as usize, candidates.len());
    // Every connector joins a child to its parent: one per candidate made from another.
    assert_eq!(b.count("#lineage-tree path") as usize, children);
}
