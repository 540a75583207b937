//! `ksearch dashboard`: a finished tuner run beside a scripted agent run that the test advances
//! step by step. The page (in headless Chromium) shows both side by side with a comparison chart
//! whose x axis the reader chooses, and shows each new attempt without being reloaded (and
//! without losing that choice); its JSON endpoint follows the run too.

mod browser;
mod common;
mod scripted;

use common::*;
use scripted::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The dashboard server, stopped when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_dashboard(run_dirs: &[&str]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ksearch"))
        .arg("dashboard")
        .args(run_dirs)
        .args(["--port", "0", "--refresh-ms", "200"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    Server { child, url }
}

/// GET `path` from the server: the status line and the body.
fn get(server: &Server, path: &str) -> (String, String) {
    let host = server.url.trim_start_matches("http://").trim_end_matches('/');
    let mut s = std::net::TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap_or("").to_string(), body.to_string())
}

/// GET `path` from the server; the body as JSON.
fn get_json(server: &Server, path: &str) -> serde_json::Value {
    let (status, body) = get(server, path);
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// Chooses the comparison chart's x axis in the page's selector, as a reader does.
fn choose_axis(b: &mut browser::Browser, axis: &str) {
    b.eval(&format!(
        "(() => {{ const s = document.getElementById('x-axis'); s.value = {}; \
         s.dispatchEvent(new Event('change', {{ bubbles: true }})); }})()",
        serde_json::json!(axis)
    ));
}

/// The axis the comparison chart is drawn along, as its box says.
fn chart_axis(b: &mut browser::Browser) -> serde_json::Value {
    b.eval("document.getElementById('comparison-chart').dataset.xAxis")
}

/// The texts plotters drew on the comparison chart (axis labels, ticks, the legend).
fn chart_texts(b: &mut browser::Browser) -> Vec<String> {
    let texts =
        b.eval("Array.from(document.querySelectorAll('#comparison-chart text')).map(t => t.textContent.trim())");
    texts
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect()
}

/// Waits until `f` holds, for up to 30 s.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_dashboard_shows_runs_side_by_side_and_follows_a_run_as_it_advances() {
    let mut agent = AgentRun::start(8);
    assert!(agent.step(), "the planner's first plan");
    // The agent run by name, and the folder it is in: it is shown once, and a run started in
    // that folder later appears beside it.
    let work = agent.work.path().to_str().unwrap().to_string();
    // Runs of different brains are compared by evaluations, not rounds, unless the page says.
    let server = start_dashboard(&[agent.dir(), "--dir", &work, "--x-axis", "evaluations"]);
    let state = get_json(&server, "/api/state");
    assert_eq!(state["runs"].as_array().unwrap().len(), 1, "{state}");
    let tuner = agent.work.path().join("tuner-run");
    let r = agent.ksearch(&[
        "run",
        fixture("tiny_softmax_tunable").to_str().unwrap(),
        "--rounds",
        "4",
        "--seed",
        "3",
        "--json",
        "--out",
        tuner.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);

    // The JSON endpoint: both runs; the agent run has its seed evaluated and waits on the coder.
    let state = get_json(&server, "/api/state");
    assert_eq!(state["runs"].as_array().unwrap().len(), 2, "{state}");
    assert_eq!(state["runs"][0]["attempts"], 1, "{state}");
    assert_eq!(state["runs"][0]["nodes"], 4, "{state}");
    assert_eq!(state["runs"][1]["name"], "tuner-run", "{state}");
    assert_eq!(state["runs"][1]["finished"], true, "{state}");
    // Runs are addressed by name, not by position.
    let run0 = get_json(&server, "/api/run/scripted-agent");
    assert_eq!(run0["tree"]["nodes"].as_array().unwrap().len(), 4);
    assert_eq!(state["runs"][1]["key"], "tuner-run", "{state}");
    // The axis is the address's to choose; an unknown one is refused with the kinds there are.
    let (status, body) = get(&server, "/fragment?x=tokens");
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert!(body.contains("data-x-axis=\"tokens\""), "{body}");
    assert!(get(&server, "/fragment").1.contains("data-x-axis=\"evaluations\""));
    let (status, body) = get(&server, "/?x=cost");
    assert!(status.starts_with("HTTP/1.1 400"), "{status}");
    assert!(body.contains("no x axis `cost`; one of round, evaluations,"), "{body}");

    let Some(mut b) =
        browser::browser_or_skip("the_dashboard_shows_runs_side_by_side_and_follows_a_run_as_it_advances")
    else {
        // Without a browser, the endpoint alone must follow the run.
        agent.step();
        assert_eq!(get_json(&server, "/api/state")["runs"][0]["attempts"], 2);
        return;
    };
    b.goto(&server.url);
    assert_eq!(b.count("section.run"), 2, "a column per run");
    assert_eq!(b.count("#comparison-chart > svg"), 1, "the comparison chart");
    // A marker at each step of each run's best so far: the agent run has only its seed, and
    // still shows.
    assert!(b.count("#comparison-chart g.best-point") >= 2);
    // Side by side, the trees are drawn to fit their columns.
    let too_wide = b.eval(
        "Array.from(document.querySelectorAll('.columns .tree svg')).filter(s => s.getBoundingClientRect().width > s.parentElement.clientWidth).length",
    );
    assert_eq!(too_wide, 0, "a tree wider than its column");
    assert_eq!(
        b.eval("document.querySelector('#run-1 h2 a').getAttribute('href')"),
        "run/tuner-run"
    );
    let points = "#run-0 .progress-chart circle";
    assert_eq!(b.count(points), 1, "the seed's evaluation");
    assert_eq!(b.count("#run-0-wm-tree g.wm-node"), 4);
    let tuner_attempts = get_json(&server, "/api/state")["runs"][1]["attempts"].as_u64().unwrap();
    assert_eq!(b.count("#run-1 .progress-chart circle"), tuner_attempts);
    // Anything set now disappears if the page is reloaded.
    b.eval("window.__still_here = 42");

    // The comparison's x axis: --x-axis's until the reader picks another, which the page
    // draws in place (no reload) and keeps in its address; every run stays on the chart.
    let series = "#comparison-chart g.series";
    assert_eq!(chart_axis(&mut b), "evaluations");
    assert_eq!(b.count(series), 2, "a series per run");
    assert!(
        chart_texts(&mut b).iter().any(|t| t == "evaluations"),
        "{:?}",
        chart_texts(&mut b)
    );
    choose_axis(&mut b, "wall-time");
    eventually("the chart is drawn along wall time", || {
        chart_axis(&mut b) == "wall-time"
    });
    let texts = chart_texts(&mut b);
    assert!(
        texts.iter().any(|t| t.starts_with("wall time since start (")),
        "{texts:?}"
    );
    assert!(!texts.iter().any(|t| t == "evaluations"), "{texts:?}");
    assert_eq!(b.count(series), 2, "a series per run, whatever is across");
    assert_eq!(b.count("#comparison-chart g.series.missing"), 0);
    assert_eq!(b.eval("location.search"), "?x=wall-time");
    assert_eq!(b.eval("document.getElementById('x-axis').value"), "wall-time");
    assert_eq!(b.eval("window.__still_here"), 42, "choosing an axis reloaded the page");

    // A box scrolled by the reader stays where it was when the page updates (a style the
    // test adds to the page's head, which updates do not replace, makes the tree scroll).
    b.eval("document.head.insertAdjacentHTML('beforeend', '<style>#run-0-wm-tree { max-height: 80px; }</style>')");
    b.eval("document.getElementById('run-0-wm-tree').scrollTop = 40");
    assert_eq!(b.eval("document.getElementById('run-0-wm-tree').scrollTop"), 40);

    // The coder's first answer for node a has no code: an attempt without a candidate.
    assert!(agent.step());
    eventually("the page shows the second attempt", || b.count(points) == 2);
    assert_eq!(
        b.eval("document.getElementById('run-0-wm-tree').scrollTop"),
        40,
        "the update reset a scroll position"
    );
    // The update kept the reader's axis.
    assert_eq!(chart_axis(&mut b), "wall-time", "a live update lost the chosen axis");
    assert!(chart_texts(&mut b)
        .iter()
        .any(|t| t.starts_with("wall time since start (")));
    assert_eq!(b.count(series), 2);
    assert_eq!(b.eval("document.getElementById('x-axis').value"), "wall-time");

    // Dollars: neither run called an LLM of ksearch's (an agent, the tuner). Both stay on the
    // chart, each with a note saying why it has no line.
    choose_axis(&mut b, "dollars");
    eventually("the chart is drawn along dollars", || chart_axis(&mut b) == "dollars");
    assert_eq!(b.count(series), 2);
    assert_eq!(b.count("#comparison-chart g.series.missing"), 2);
    let texts = chart_texts(&mut b);
    assert!(texts.iter().any(|t| t == "LLM dollars"), "{texts:?}");
    assert!(
        texts.iter().any(|t| t == "no LLM (agent)") && texts.iter().any(|t| t == "no LLM (knob tuner)"),
        "{texts:?}"
    );
    // The next one does not compile: a third attempt.
    assert!(agent.step());
    eventually("the page shows the third attempt", || b.count(points) == 3);
    assert_eq!(chart_axis(&mut b), "dollars", "a live update lost the chosen axis");
    assert_eq!(b.count(series), 2);
    assert_eq!(
        b.eval("window.__still_here"),
        42,
        "the page was reloaded instead of updated"
    );
    assert_eq!(get_json(&server, "/api/state")["runs"][0]["attempts"], 3);

    // To the end: the page follows it, the state says finished.
    agent.finish();
    let attempts = get_json(&server, "/api/state")["runs"][0]["attempts"].as_u64().unwrap();
    eventually("the page shows the whole run", || {
        b.count(points) == attempts && b.eval("document.querySelector('#run-0 .badge.state-finished') !== null") == true
    });
    let nodes = agent.show()["world_model"]["decision_tree"]["nodes"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(b.count("#run-0-wm-tree g.wm-node") as usize, nodes);
    assert_eq!(b.eval("typeof window.__xss"), "undefined", "markup from the run ran");
    assert_eq!(b.errors(), Vec::<String>::new(), "console errors");

    // A run's full report from the dashboard.
    b.goto(&format!("{}run/scripted-agent", server.url));
    assert_eq!(b.count("#wm-tree g.wm-node") as usize, nodes);
    assert_eq!(b.errors(), Vec::<String>::new(), "console errors");
    if let Some(path) = browser::screenshot_path("dashboard-screenshot.png") {
        b.goto(&server.url);
        b.screenshot(&path, 1400, 1000);
    }

    // A run that sorts before the tuner run appears: the tuner run's link still leads to it.
    b.goto(&server.url);
    let r = agent.ksearch(&[
        "run",
        fixture("tiny_softmax_tunable").to_str().unwrap(),
        "--rounds",
        "1",
        "--seed",
        "4",
        "--json",
        "--out",
        agent.work.path().join("a-later-run").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    eventually("the page shows the third run", || b.count("section.run") == 3);
    assert_eq!(b.eval("document.querySelector('#run-2 h2 a').textContent"), "tuner-run");
    assert_eq!(
        b.eval("document.querySelector('#run-2 h2 a').getAttribute('href')"),
        "run/tuner-run"
    );
    assert_eq!(get_json(&server, "/api/run/tuner-run")["name"], "tuner-run");
}

#[test]
fn a_dashboard_of_a_folder_that_is_not_a_run_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let r = ksearch(&["dashboard", dir.path().to_str().unwrap(), "--port", "0"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("not a run directory"), "{}", r.stderr);
    // So is an axis that does not exist: said with the ones that do.
    let r = ksearch(&["dashboard", "--x-axis", "cost", "--port", "0"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("no x axis `cost`; one of round, evaluations, device-seconds, wall-time, dollars, tokens"),
        "{}",
        r.stderr
    );
}
