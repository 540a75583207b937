//! `ksearch dashboard [RUN_DIR...] [--dir RUNS] [--port P] [--x-axis KIND]`: a local web server
//! showing runs live while they progress, several side by side (a comparison chart of the best
//! speedup by round or by what the runs spent, and a column per run).
//!
//! The page polls `api/state`, a stamp made from the run stores' file sizes and times, and
//! fetches the re-rendered body when it changes. Runs are addressed by name (`run/NAME`), so a
//! link keeps its run when another one appears. The comparison's axis is part of the address
//! (`?x=dollars`), so the page asks for it with every update and a reload keeps it. Reports are read through the run store (SQLite
//! in WAL mode, so reading never blocks the run that writes) and cached until the files change.

use anyhow::Context;
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use ksearch_report::{Renderer, RunReport, XAxis};
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// The arguments of `ksearch dashboard`.
#[derive(clap::Args)]
pub(crate) struct DashboardArgs {
    /// Run directories to show, side by side.
    run_dirs: Vec<PathBuf>,
    /// Also show every run in this folder; runs that start later appear too (default: `runs`
    /// when no RUN_DIR is given).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Port to listen on (0: any free port; the address is printed).
    #[arg(long, default_value_t = 8417)]
    port: u16,
    /// Address to listen on; the default serves this machine only.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// How often the page checks the runs for progress, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    refresh_ms: u64,
    /// What the comparison chart puts across until the page chooses otherwise: round,
    /// evaluations, device-seconds, wall-time, dollars or tokens.
    #[arg(long, value_name = "KIND", default_value = "round")]
    x_axis: XAxis,
}

/// What identifies a run store's content: sizes and modification times of the database and its
/// write-ahead log. Every committed write changes one of them.
type FileStamp = Vec<(u64, u128)>;

fn file_stamp(run_dir: &Path) -> FileStamp {
    ["run.sqlite", "run.sqlite-wal"]
        .iter()
        .map(|f| match std::fs::metadata(run_dir.join(f)) {
            Ok(m) => {
                let t = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos());
                (m.len(), t)
            }
            Err(_) => (0, 0),
        })
        .collect()
}

/// A run's report as last read, with the stamp it was read at (or why it could not be read).
type Cached = (FileStamp, Result<Arc<RunReport>, String>);

struct Dashboard {
    run_dirs: Vec<PathBuf>,
    watch: Option<PathBuf>,
    refresh_ms: u64,
    /// The comparison's axis when the address names none.
    x_axis: XAxis,
    renderer: Renderer,
    cache: Mutex<HashMap<PathBuf, Cached>>,
}

/// The runs shown now, with the stamp of everything on the page.
struct Snapshot {
    runs: Vec<Arc<RunReport>>,
    problems: Vec<String>,
    stamp: String,
}

impl Dashboard {
    /// The explicit runs, then every run in the watched folder (by name).
    fn dirs(&self) -> Vec<PathBuf> {
        let mut dirs = self.run_dirs.clone();
        if let Some(watch) = &self.watch {
            let mut found: Vec<PathBuf> = std::fs::read_dir(watch)
                .map(|rd| {
                    rd.flatten()
                        .map(|e| e.path())
                        .filter(|p| p.join(ksearch_store::DB_FILE).is_file())
                        .collect()
                })
                .unwrap_or_default();
            found.sort();
            dirs.extend(found.into_iter().filter(|p| !self.run_dirs.contains(p)));
        }
        dirs
    }

    fn snapshot(&self) -> Snapshot {
        let dirs = self.dirs();
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        let mut runs = Vec::new();
        let mut problems = Vec::new();
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        for dir in &dirs {
            let stamp = file_stamp(dir);
            (dir, &stamp).hash(&mut hasher);
            let fresh = matches!(cache.get(dir), Some((s, _)) if *s == stamp);
            if !fresh {
                let loaded = ksearch_report::load(dir).map(Arc::new).map_err(|e| e.to_string());
                cache.insert(dir.clone(), (stamp, loaded));
            }
            match cache.get(dir).map(|c| &c.1) {
                Some(Ok(r)) => runs.push(r.clone()),
                Some(Err(e)) => problems.push(e.clone()),
                None => {}
            }
        }
        Snapshot {
            runs,
            problems,
            stamp: format!("{:016x}", hasher.finish()),
        }
    }
}

type Shared = Arc<Dashboard>;

/// Runs blocking store reads off the async workers.
async fn with<T: Send + 'static>(d: Shared, f: impl FnOnce(&Dashboard) -> T + Send + 'static) -> Result<T, Response> {
    tokio::task::spawn_blocking(move || f(&d))
        .await
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response())
}

/// What names each run in addresses: its name (the run directory's last component), with `~2`,
/// `~3` appended to later runs of the same name. Not its position, which changes when a new run
/// sorts before it: a link or a bookmark must keep pointing at the same run.
fn keys(runs: &[Arc<RunReport>]) -> Vec<String> {
    unique_names(runs.iter().map(|r| r.name.as_str()))
}

/// Each name as it is the first time, then with the first free `~N` (N from 2): a run literally
/// named `run~2` keeps that name, and the second `run` becomes `run~3`.
fn unique_names<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let names: Vec<&str> = names.collect();
    // Every name as given is taken by its first run, whichever comes first in the list.
    let mut taken: HashSet<String> = names.iter().map(|n| n.to_string()).collect();
    let mut first: HashSet<&str> = HashSet::new();
    // Per name, the next suffix to try.
    let mut next: HashMap<&str, usize> = HashMap::new();
    names
        .iter()
        .map(|&name| {
            if first.insert(name) {
                return name.to_string();
            }
            let n = next.entry(name).or_insert(2);
            loop {
                let key = format!("{name}~{n}");
                *n += 1;
                if taken.insert(key.clone()) {
                    return key;
                }
            }
        })
        .collect()
}

/// A path segment with everything but unreserved characters percent-encoded (run names are
/// folder names: spaces, `#`, `?` and `%` must not change the address).
fn encode_segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn links(runs: &[Arc<RunReport>]) -> Vec<String> {
    keys(runs)
        .iter()
        .map(|k| format!("run/{}", encode_segment(k)))
        .collect()
}

/// The comparison's axis the address asks for (`?x=KIND`; the last one when repeated), else
/// the dashboard's default.
fn x_axis(d: &Dashboard, uri: &Uri) -> Result<XAxis, ksearch_report::UnknownXAxis> {
    let asked = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .rfind(|(k, _)| *k == "x")
        .map(|(_, v)| v);
    match asked {
        None | Some("") => Ok(d.x_axis),
        // Axis names are plain ASCII words, so the raw query value needs no decoding: an
        // encoded one is no axis, and the message shows it as it came.
        Some(v) => v.parse(),
    }
}

/// An unknown axis is the reader's mistake: 400, with the kinds there are.
fn bad_axis(e: ksearch_report::UnknownXAxis) -> Response {
    (StatusCode::BAD_REQUEST, e.to_string()).into_response()
}

fn body(d: &Dashboard, s: &Snapshot, axis: XAxis) -> Result<String, String> {
    let runs: Vec<&RunReport> = s.runs.iter().map(|r| &**r).collect();
    d.renderer
        .dashboard_body(&runs, &links(&s.runs), &s.problems, axis)
        .map_err(|e| e.to_string())
}

async fn page(State(d): State<Shared>, uri: Uri) -> Response {
    let axis = match x_axis(&d, &uri) {
        Ok(a) => a,
        Err(e) => return bad_axis(e),
    };
    let result = with(d, move |d| {
        let s = d.snapshot();
        let body = body(d, &s, axis)?;
        d.renderer
            .dashboard_page(&body, &s.stamp, d.refresh_ms)
            .map_err(|e| e.to_string())
    })
    .await;
    match result {
        Ok(Ok(html)) => Html(html).into_response(),
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, e).into_response(),
        Err(r) => r,
    }
}

async fn fragment(State(d): State<Shared>, uri: Uri) -> Response {
    let axis = match x_axis(&d, &uri) {
        Ok(a) => a,
        Err(e) => return bad_axis(e),
    };
    let result = with(d, move |d| {
        let s = d.snapshot();
        body(d, &s, axis).map(|b| (b, s.stamp))
    })
    .await;
    match result {
        Ok(Ok((html, stamp))) => {
            let mut headers = HeaderMap::new();
            if let Ok(v) = HeaderValue::from_str(&stamp) {
                headers.insert("x-ksearch-stamp", v);
            }
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            (headers, Html(html)).into_response()
        }
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, e).into_response(),
        Err(r) => r,
    }
}

/// The stamp the page compares, and a line per run (for scripts too).
async fn state(State(d): State<Shared>) -> Response {
    match with(d, |d| d.snapshot()).await {
        Ok(s) => {
            let runs: Vec<_> = s
                .runs
                .iter()
                .zip(keys(&s.runs))
                .map(|(r, key)| {
                    serde_json::json!({
                        "name": r.name, "key": key, "run_dir": r.run_dir, "task": r.task, "strategy": r.strategy,
                        "state": r.state.text, "state_kind": r.state.kind, "finished": r.state.finished, "round": r.round,
                        "rounds": r.rounds, "attempts": r.attempts.len(), "events": r.events,
                        "best_speedup": r.best.as_ref().and_then(|b| b.speedup),
                        "nodes": r.tree.nodes.len(),
                    })
                })
                .collect();
            Json(serde_json::json!({"stamp": s.stamp, "runs": runs, "problems": s.problems})).into_response()
        }
        Err(r) => r,
    }
}

/// The run whose key (see [`keys`]) is `key`.
fn run_by_key(d: &Dashboard, key: &str) -> Option<Arc<RunReport>> {
    let runs = d.snapshot().runs;
    let i = keys(&runs).iter().position(|k| k == key)?;
    runs.get(i).cloned()
}

/// One run as JSON: everything its report shows.
async fn run_json(State(d): State<Shared>, UrlPath(key): UrlPath<String>) -> Response {
    let wanted = key.clone();
    match with(d, move |d| run_by_key(d, &wanted)).await {
        Ok(Some(r)) => Json(serde_json::to_value(&*r).unwrap_or_default()).into_response(),
        Ok(None) => (StatusCode::NOT_FOUND, format!("no run named {key}")).into_response(),
        Err(r) => r,
    }
}

/// One run's full report page.
async fn run_page(State(d): State<Shared>, UrlPath(key): UrlPath<String>) -> Response {
    let wanted = key.clone();
    let result = with(d, move |d| {
        run_by_key(d, &wanted).map(|r| d.renderer.report(&r).map_err(|e| e.to_string()))
    })
    .await;
    match result {
        Ok(Some(Ok(html))) => Html(html).into_response(),
        Ok(Some(Err(e))) => (StatusCode::INTERNAL_SERVER_ERROR, e).into_response(),
        Ok(None) => (StatusCode::NOT_FOUND, format!("no run named {key}")).into_response(),
        Err(r) => r,
    }
}

/// Serves the dashboard until it is stopped; returns the exit status.
pub(crate) fn run(args: &DashboardArgs) -> anyhow::Result<u8> {
    for dir in &args.run_dirs {
        // A typo is better reported now than as an empty column.
        ksearch_store::RunStore::open(dir)?;
    }
    let watch = match (&args.dir, args.run_dirs.is_empty()) {
        (Some(d), _) => Some(d.clone()),
        (None, true) => Some(PathBuf::from("runs")),
        (None, false) => None,
    };
    if let Some(w) = &watch {
        if !w.is_dir() {
            anyhow::bail!(
                "{}: no such folder of runs; pass run directories or --dir FOLDER",
                w.display()
            );
        }
    }
    let dashboard = Arc::new(Dashboard {
        run_dirs: args.run_dirs.clone(),
        watch,
        refresh_ms: args.refresh_ms.max(100),
        x_axis: args.x_axis,
        renderer: Renderer::new(),
        cache: Mutex::new(HashMap::new()),
    });
    let app = Router::new()
        .route("/", get(page))
        .route("/fragment", get(fragment))
        .route("/api/state", get(state))
        .route("/api/run/{name}", get(run_json))
        .route("/run/{name}", get(run_page))
        // The pages declare an empty icon; this answers browsers that ask anyway, so their
        // consoles stay free of 404s.
        .route("/favicon.ico", get(|| async { axum::http::StatusCode::NO_CONTENT }))
        .with_state(dashboard);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async move {
        let addr = SocketAddr::new(args.host, args.port);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr} (choose another --port)"))?;
        let local = listener.local_addr()?;
        println!("dashboard: http://{local}/  (Ctrl-C stops it)");
        use std::io::Write;
        std::io::stdout().flush().ok();
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                tokio::signal::ctrl_c().await.ok();
            })
            .await
            .context("the dashboard server failed")
    })?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(encode_segment("softmax-20250601-1200"), "softmax-20250601-1200");
        assert_eq!(encode_segment("a b#c?d%/é"), "a%20b%23c%3Fd%25%2F%C3%A9");
    }

    #[test]
    fn runs_of_the_same_name_get_distinct_keys() {
        let names = ["run", "other", "run", "run"];
        assert_eq!(unique_names(names.into_iter()), ["run", "other", "run~2", "run~3"]);
    }

    #[test]
    fn a_run_named_like_a_suffixed_one_keeps_its_name() {
        // `run~2` is a run of its own, before or after the runs named `run`.
        let names = ["run", "run~2", "run", "run"];
        assert_eq!(unique_names(names.into_iter()), ["run", "run~2", "run~3", "run~4"]);
        let names = ["run", "run", "run~2", "run~3"];
        assert_eq!(unique_names(names.into_iter()), ["run", "run~4", "run~2", "run~3"]);
        // Its own duplicates are suffixed in turn.
        let names = ["run~2", "run", "run", "run~2"];
        assert_eq!(unique_names(names.into_iter()), ["run~2", "run", "run~3", "run~2~2"]);
        let keys = unique_names(["a", "a~2", "a", "a~2", "a~2~2", "a"].into_iter());
        assert_eq!(keys.iter().collect::<HashSet<_>>().len(), keys.len(), "{keys:?}");
    }
}
