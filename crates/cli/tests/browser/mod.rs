//! Headless Chromium driven over the DevTools protocol (a websocket), for the report and
//! dashboard tests: load a page, collect console errors and uncaught exceptions, evaluate
//! JavaScript to count what was drawn, and take screenshots.
//!
//! Without Chromium the tests are skipped with a printed reason, unless
//! `KSEARCH_REQUIRE_CHROMIUM=1` (set by `.ci/run` once it has installed Chromium): then they fail.
#![allow(dead_code)]

use base64::Engine as _;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

/// The Chromium binary: `KSEARCH_CHROMIUM`, else the first of the usual names on PATH.
pub fn find_chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KSEARCH_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome", "chrome"] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// A browser, or `None` (after saying why) when the tests should be skipped.
pub fn browser_or_skip(test: &str) -> Option<Browser> {
    let required = std::env::var("KSEARCH_REQUIRE_CHROMIUM").is_ok_and(|v| v == "1");
    match find_chromium() {
        Some(bin) => Some(Browser::launch(&bin)),
        None if required => panic!("{test}: KSEARCH_REQUIRE_CHROMIUM=1 but no Chromium was found"),
        None => {
            eprintln!("SKIPPED {test}: no Chromium on PATH (install Debian's chromium, or set KSEARCH_CHROMIUM)");
            None
        }
    }
}

/// Where a test may keep its screenshot (`KSEARCH_SCREENSHOT_DIR`, e.g. `docs/` to refresh
/// the documentation's pictures); `None` keeps none.
pub fn screenshot_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("KSEARCH_SCREENSHOT_DIR").map(|d| PathBuf::from(d).join(name))
}

pub struct Browser {
    child: Child,
    ws: WebSocket<MaybeTlsStream<TcpStream>>,
    session: String,
    next_id: u64,
    /// Every protocol event received so far (console messages, exceptions, load events).
    events: Vec<Value>,
    _profile: tempfile::TempDir,
}

const TIMEOUT: Duration = Duration::from_secs(60);

impl Browser {
    fn launch(bin: &Path) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new(bin)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-component-update",
                "--hide-scrollbars",
                "--mute-audio",
                "--remote-debugging-port=0",
                "--window-size=1280,900",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        // Chromium prints the browser's websocket address on stderr once it listens.
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent {
                    if let Some(url) = line.split_whitespace().find(|w| w.starts_with("ws://")) {
                        let _ = tx.send(url.to_string());
                        sent = true;
                    }
                }
            }
        });
        let url = match rx.recv_timeout(TIMEOUT) {
            Ok(url) => url,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "{} did not report its DevTools address within {TIMEOUT:?}",
                    bin.display()
                );
            }
        };
        let (ws, _) = tungstenite::connect(url.as_str()).unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"));
        if let MaybeTlsStream::Plain(s) = ws.get_ref() {
            s.set_read_timeout(Some(TIMEOUT)).unwrap();
        }
        let mut b = Browser {
            child,
            ws,
            session: String::new(),
            next_id: 0,
            events: Vec::new(),
            _profile: profile,
        };
        let targets = b.call("Target.getTargets", json!({}));
        let page = targets["targetInfos"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["type"] == "page"))
            .map(|t| t["targetId"].clone())
            .unwrap_or_else(|| panic!("no page target: {targets}"));
        let attached = b.call("Target.attachToTarget", json!({"targetId": page, "flatten": true}));
        b.session = attached["sessionId"].as_str().unwrap().to_string();
        // Network: every request the page makes is reported (`requests`).
        for domain in ["Page.enable", "Runtime.enable", "Log.enable", "Network.enable"] {
            b.call(domain, json!({}));
        }
        b
    }

    fn read(&mut self) -> Value {
        loop {
            match self.ws.read() {
                Ok(Message::Text(t)) => return serde_json::from_str(&t).unwrap(),
                Ok(_) => continue,
                Err(e) => panic!("the DevTools connection failed: {e}"),
            }
        }
    }

    /// Sends a command (to the page once attached) and waits for its answer; events that
    /// arrive meanwhile are kept.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            msg["sessionId"] = json!(self.session);
        }
        self.ws.send(Message::text(msg.to_string())).unwrap();
        let deadline = Instant::now() + TIMEOUT;
        loop {
            assert!(Instant::now() < deadline, "no answer to {method} within {TIMEOUT:?}");
            let m = self.read();
            if m["id"] == id {
                if let Some(err) = m.get("error") {
                    panic!("{method} failed: {err}");
                }
                return m["result"].clone();
            }
            if m.get("method").is_some() {
                self.events.push(m);
            }
        }
    }

    /// Opens `url` and waits until the page has loaded.
    pub fn goto(&mut self, url: &str) {
        let seen = self.events.len();
        let r = self.call("Page.navigate", json!({"url": url}));
        assert!(r.get("errorText").is_none(), "cannot open {url}: {r}");
        let deadline = Instant::now() + TIMEOUT;
        while !self.events[seen..].iter().any(|e| e["method"] == "Page.loadEventFired") {
            assert!(Instant::now() < deadline, "{url} did not finish loading");
            let m = self.read();
            if m.get("method").is_some() {
                self.events.push(m);
            }
        }
    }

    /// Evaluates an expression in the page (promises awaited) and returns its value.
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        if let Some(e) = r.get("exceptionDetails") {
            panic!("`{expression}` threw: {e}");
        }
        r["result"]["value"].clone()
    }

    /// The URLs of the requests the page made since the `events_seen`-th protocol event
    /// (`Network.requestWillBeSent`: the document itself, and anything it fetched).
    pub fn requests_since(&mut self, events_seen: usize) -> Vec<String> {
        // A round trip, so that what the page asked for up to now has been reported.
        self.eval("0");
        self.events[events_seen.min(self.events.len())..]
            .iter()
            .filter(|e| e["method"] == "Network.requestWillBeSent")
            .map(|e| e["params"]["request"]["url"].as_str().unwrap_or("").to_string())
            .collect()
    }

    /// How many protocol events were received so far (a mark for `requests_since`).
    pub fn events_seen(&self) -> usize {
        self.events.len()
    }

    pub fn count(&mut self, selector: &str) -> u64 {
        let expr = format!("document.querySelectorAll({}).length", json!(selector));
        self.eval(&expr).as_u64().unwrap()
    }

    /// Console errors, failed loads and uncaught exceptions seen so far.
    pub fn errors(&mut self) -> Vec<String> {
        // A round trip, so that what the page logged up to now has arrived.
        self.eval("0");
        let mut out = Vec::new();
        for e in &self.events {
            let p = &e["params"];
            match e["method"].as_str() {
                Some("Runtime.exceptionThrown") => out.push(format!("exception: {}", p["exceptionDetails"])),
                Some("Runtime.consoleAPICalled") if p["type"] == "error" || p["type"] == "assert" => {
                    out.push(format!("console.{}: {}", p["type"], p["args"]))
                }
                Some("Log.entryAdded") if p["entry"]["level"] == "error" => {
                    out.push(format!("log: {} {}", p["entry"]["text"], p["entry"]["url"]))
                }
                _ => {}
            }
        }
        out
    }

    /// A PNG of the page at `width` x `height` CSS pixels (the top of the page).
    pub fn screenshot(&mut self, path: &Path, width: u32, height: u32) {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        );
        let r = self.call("Page.captureScreenshot", json!({"format": "png"}));
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, png).unwrap();
    }
}

impl Browser {
    /// A PNG of the whole page, `width` CSS pixels wide and as tall as its content (up to
    /// `max_height`, so that a very long page stays a picture one can open).
    pub fn screenshot_full_page(&mut self, path: &Path, width: u32, max_height: u32) {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
        );
        let height = self
            .eval("document.documentElement.scrollHeight")
            .as_u64()
            .unwrap_or(900)
            .min(max_height as u64) as u32;
        self.screenshot(path, width, height);
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.ws.close(None);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
