//! Evaluations on a Ray cluster (`ksearch run --executor ray`, docs/ray.md).
//!
//! Mechanism: one Python client per drive (`ray_client.py`, shipped inside the binary and run
//! as `python3 -c`) connects to the cluster and, per job it reads on its stdin, submits a Ray
//! task (`num_gpus=1` for GPU tasks, `num_cpus=1` otherwise) that runs `ksearch eval --json` on
//! its node, in a temp dir holding the task and the candidate (both travel inside the job). So
//! every node needs the same ksearch binary (on PATH, or `--ray-ksearch PATH`); the client
//! checks each alive node's version at start. The record that comes back is `ksearch eval
//! --json`'s, read with the same [`Evaluation`] type as a local one.
//!
//! Faults: a Ray worker or node that dies mid-evaluation is re-run once by the client, then
//! reported as lost: an infrastructure failure ([`EvalError::Setup`]), never the candidate's.
//! A cluster that goes away (the head stops, its address refuses connections, the client
//! dies) makes every evaluation in flight, and every later one, [`Unavailable`]: none of them
//! is recorded, and the driver stops the run for `ksearch resume`. A watchdog tries the head's
//! address (its GCS port, or its Ray Client port for `ray://`) every second, so that a cluster whose head is gone is noticed in seconds rather than
//! after Ray's own reconnection timeout; a reply that is not a passing record is also checked
//! against the address before it is believed (a worker killed because the head went down is the
//! cluster's loss, not the node's).

use super::{EvalDone, EvalJob, ExecError, Leased, NodeInfo, Unavailable};
use ksearch_eval::{CudaGraph, EvalError, Evaluation};
use ksearch_spec::{Task, TaskOrigin};
use serde::Deserialize;
use serde_json::json;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const CLIENT: &str = include_str!("ray_client.py");

/// How long the client may take to connect and check the nodes before the address is
/// declared unreachable (a wrong address must fail fast, not hang the run).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);

/// Task files shipped with a job, at most (a task folder is small: definitions, workloads,
/// a seed, a template); a bigger folder is refused rather than pushed through the cluster.
const MAX_TASK_BYTES: usize = 16 << 20;

/// Why a Ray executor could not be set up; nothing has been evaluated when one is returned.
#[derive(Debug, thiserror::Error)]
pub enum RayError {
    /// Neither `--ray-address` nor `RAY_ADDRESS` names the cluster.
    #[error("--executor ray needs a cluster address: --ray-address ADDR or RAY_ADDRESS")]
    NoAddress,
    /// The Python interpreter for the client (`KSEARCH_PYTHON`, default `python3`) did not start.
    #[error("cannot start python3 for the Ray client: {0}")]
    Spawn(std::io::Error),
    /// The cluster cannot be reached or used: nothing answers at the address, the client failed
    /// to connect in time, or a node cannot run this ksearch.
    #[error("Ray cluster at {address}: {why}")]
    Connect {
        /// The cluster address as given.
        address: String,
        /// What went wrong, in words.
        why: String,
    },
    /// The task's files cannot travel with the jobs (over 16 MiB, a binary file, unreadable).
    #[error("cannot ship the task to the Ray cluster: {0}")]
    Task(String),
}

/// Where the cluster is and what the nodes run; recorded in the run (`ray`) so that `resume`
/// goes back to the same cluster.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct RaySettings {
    /// The cluster's address as `ray.init` takes it (`HOST:PORT` of the head, `ray://…`,
    /// `auto`).
    pub address: String,
    /// The ksearch binary on the nodes (default `ksearch`, found on each node's PATH).
    pub ksearch: String,
}

#[derive(Debug, Deserialize)]
struct Ready {
    nodes: Vec<NodeInfo>,
    cpus: usize,
    gpus: usize,
}

#[derive(Debug, Deserialize)]
struct Hello {
    ready: Option<Ready>,
    fatal: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Reply {
    id: u64,
    #[serde(default)]
    record: Option<serde_json::Value>,
    #[serde(default)]
    node: Option<NodeInfo>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    lost: Option<String>,
    #[serde(default)]
    cluster_lost: Option<String>,
    #[serde(default)]
    attempts: u32,
}

/// Jobs waiting for their reply; `None` once the client is gone (nothing more will come).
type Waiters = Arc<Mutex<Option<HashMap<u64, Sender<Reply>>>>>;

/// How often the watchdog tries the head's address, and the failed tries in a row after which
/// the cluster is declared gone.
const WATCH_EVERY: Duration = Duration::from_secs(1);
const WATCH_FAILURES: u32 = 2;

/// Whether the task's evaluations take a GPU on the cluster (anything but a C kernel, as a
/// local run's default devices say: [`ksearch_spec::Language::gpu_by_default`]).
pub fn wants_gpu(task: &Task) -> bool {
    task.config.kernel.language.gpu_by_default()
}

/// Evaluations on a Ray cluster, through one client process.
pub struct Ray {
    address: String,
    stdin: Mutex<ChildStdin>,
    child: Arc<Mutex<Child>>,
    waiters: Waiters,
    /// Why the watchdog declared the cluster gone, once it did.
    gone: Arc<Mutex<Option<String>>>,
    /// Tells the watchdog to end (the executor is dropped).
    done: Arc<AtomicBool>,
    next: AtomicU64,
    gpu: bool,
    nodes: Vec<NodeInfo>,
    slots: usize,
    task: serde_json::Value,
}

/// The TCP endpoint whose answer says the cluster is there: the head's GCS for a plain
/// `HOST:PORT`, the head's Ray Client server for `ray://HOST[:PORT]` (port 10001, Ray's default,
/// when none is given). `auto`, `local` and other schemes have none: they are left to Ray.
pub fn tcp_endpoint(address: &str) -> Option<String> {
    if let Some(rest) = address.strip_prefix("ray://") {
        let host_port = rest.split(['/', '?']).next().unwrap_or("");
        if host_port.is_empty() {
            return None;
        }
        // A port follows the last ':' unless that ':' is inside an IPv6 literal's brackets.
        let has_port = match host_port.rfind(':') {
            Some(i) => !host_port[i..].contains(']'),
            None => false,
        };
        return Some(if has_port {
            host_port.to_string()
        } else {
            format!("{host_port}:{RAY_CLIENT_PORT}")
        });
    }
    if address.contains("://") || address == "auto" || address == "local" {
        return None;
    }
    Some(address.to_string())
}

/// Ray's default port for the Ray Client server on the head (`ray://HOST` without a port).
const RAY_CLIENT_PORT: u16 = 10001;

/// Fails fast on an address nothing listens at: its [`tcp_endpoint`] (the head's GCS for
/// `HOST:PORT`, its Ray Client server for `ray://HOST:PORT`) is tried over TCP for a few
/// seconds, where `ray.init` would retry for a minute. `auto` and `local` are left to Ray.
pub fn check_address(address: &str) -> Result<(), RayError> {
    use std::net::{TcpStream, ToSocketAddrs};
    let Some(endpoint) = tcp_endpoint(address) else {
        return Ok(());
    };
    let unreachable = |why: String| RayError::Connect {
        address: address.to_string(),
        why,
    };
    let addrs: Vec<_> = endpoint
        .to_socket_addrs()
        .map_err(|e| unreachable(format!("{endpoint} is not a HOST:PORT address ({e})")))?
        .collect();
    let mut last = String::from("the name resolves to no address");
    for a in addrs {
        match TcpStream::connect_timeout(&a, Duration::from_secs(5)) {
            Ok(_) => return Ok(()),
            Err(e) => last = format!("nothing answers at {a}: {e}"),
        }
    }
    Err(unreachable(last))
}

impl Ray {
    /// Connects to the cluster and checks that every alive node runs this ksearch; a wrong
    /// address or a node that cannot run it fails here, before anything is evaluated.
    pub fn connect(settings: &RaySettings, task: &Task, gpu: bool) -> Result<Ray, RayError> {
        check_address(&settings.address)?;
        let version = format!("ksearch {}", env!("CARGO_PKG_VERSION"));
        let task_json = task_payload(task)?;
        let mut child = Command::new(std::env::var("KSEARCH_PYTHON").unwrap_or_else(|_| "python3".into()))
            .arg("-c")
            .arg(CLIENT)
            .args([&settings.address, &settings.ksearch, &version])
            .env("RAY_ADDRESS", &settings.address)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(RayError::Spawn)?;
        let connect = |why: String| RayError::Connect {
            address: settings.address.clone(),
            why,
        };
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err(connect("the client's pipes are missing".into()));
        };
        let mut lines = BufReader::new(stdout).lines();
        let (tx, rx) = channel();
        // The first line, read on a thread so that a client stuck connecting can be timed out.
        let first = std::thread::spawn(move || {
            let line = lines.next();
            let _ = tx.send(line);
            lines
        });
        let hello = match rx.recv_timeout(CONNECT_TIMEOUT) {
            Ok(Some(Ok(line))) => serde_json::from_str::<Hello>(&line).map_err(|e| connect(format!("{e}: {line}"))),
            Ok(_) => Err(connect("the Ray client exited without connecting".into())),
            Err(_) => Err(connect(format!("no answer within {}s", CONNECT_TIMEOUT.as_secs()))),
        };
        let ready = match hello {
            Ok(Hello { ready: Some(r), .. }) => r,
            Ok(Hello { fatal, .. }) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(connect(fatal.unwrap_or_else(|| "the client said nothing".into())));
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        let lines = first.join().map_err(|_| connect("the client reader crashed".into()))?;
        let waiters: Waiters = Arc::new(Mutex::new(Some(HashMap::new())));
        let reader_waiters = waiters.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let Ok(reply) = serde_json::from_str::<Reply>(&line) else {
                    continue;
                };
                let waiter = reader_waiters
                    .lock()
                    .ok()
                    .and_then(|mut w| w.as_mut().and_then(|w| w.remove(&reply.id)));
                if let Some(w) = waiter {
                    let _ = w.send(reply);
                }
            }
            // The client is gone (the cluster went away and took it along, the watchdog ended
            // it, or it crashed): everyone still waiting hears so, dropping their senders, and
            // no job waits on it from now on.
            if let Ok(mut w) = reader_waiters.lock() {
                *w = None;
            }
        });
        let child = Arc::new(Mutex::new(child));
        let gone: Arc<Mutex<Option<String>>> = Arc::default();
        let done = Arc::new(AtomicBool::new(false));
        if watchable(&settings.address) {
            let (address, child, gone, done) = (settings.address.clone(), child.clone(), gone.clone(), done.clone());
            std::thread::spawn(move || watch(&address, &child, &gone, &done));
        }
        let slots = if gpu { ready.gpus } else { ready.cpus };
        Ok(Ray {
            address: settings.address.clone(),
            stdin: Mutex::new(stdin),
            child,
            waiters,
            gone,
            done,
            next: AtomicU64::new(0),
            gpu,
            nodes: ready.nodes,
            slots,
            task: task_json,
        })
    }

    /// Evaluations the cluster can run at once: its GPUs for GPU tasks, its CPUs otherwise.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The cluster's alive nodes as the client found them at connection (each checked to run
    /// this ksearch).
    pub fn nodes(&self) -> &[NodeInfo] {
        &self.nodes
    }

    /// The cluster is gone: this evaluation, and every later one, is not judged.
    fn lost_cluster(&self, why: &str) -> ExecError {
        let why = match self.gone.lock().ok().and_then(|g| g.clone()) {
            Some(watched) => watched,
            None => why.to_string(),
        };
        ExecError::Unavailable(Unavailable {
            what: format!("the Ray cluster at {}", self.address),
            why,
        })
    }

    /// `Some(why)` when the head's address no longer answers (or the watchdog said so).
    fn cluster_gone(&self) -> Option<String> {
        if let Some(why) = self.gone.lock().ok().and_then(|g| g.clone()) {
            return Some(why);
        }
        if !watchable(&self.address) {
            return None;
        }
        check_address(&self.address).err().map(|e| match e {
            RayError::Connect { why, .. } => why,
            other => other.to_string(),
        })
    }

    pub(crate) fn run(&self, job: EvalJob) -> EvalDone {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = channel();
        let fail = |e: ExecError| EvalDone {
            device: Leased::default(),
            result: Err(e),
        };
        match self.waiters.lock() {
            Ok(mut w) => match w.as_mut() {
                Some(w) => {
                    w.insert(id, tx);
                }
                None => return fail(self.lost_cluster("the Ray client exited")),
            },
            Err(_) => {
                return fail(ExecError::Eval(EvalError::Setup(
                    "internal: the Ray executor's state is poisoned".into(),
                )))
            }
        }
        let mut line = json!({
            "id": id,
            "gpu": self.gpu,
            "solution": job.solution,
            "args": eval_args(&job.opts),
        });
        for (k, v) in self.task.as_object().into_iter().flatten() {
            line[k] = v.clone();
        }
        let sent = match self.stdin.lock() {
            Ok(mut stdin) => writeln!(stdin, "{line}").and_then(|_| stdin.flush()).is_ok(),
            Err(_) => false,
        };
        if !sent {
            return fail(self.lost_cluster("the Ray client no longer takes jobs"));
        }
        let Ok(reply) = rx.recv() else {
            return fail(self.lost_cluster("the Ray client exited"));
        };
        if let Some(why) = reply.cluster_lost {
            return fail(self.lost_cluster(&why));
        }
        // Anything but a passing record may be the cluster going down under it (its workers
        // die with the head): believed only while the head still answers.
        let passed = reply
            .record
            .as_ref()
            .and_then(|v| Evaluation::deserialize(v).ok())
            .is_some_and(|e| e.passed());
        if !passed {
            if let Some(why) = self.cluster_gone() {
                return fail(self.lost_cluster(&why));
            }
        }
        if let Some(why) = reply.lost {
            return fail(ExecError::Eval(EvalError::Setup(format!(
                "the Ray worker evaluating it died {} times ({why}); the candidate was not judged",
                reply.attempts
            ))));
        }
        let node = reply.node.unwrap_or_default();
        let device = Leased {
            label: match &node.gpu {
                Some(gpu) => format!("ray:{}:{gpu}", node.ip),
                None => format!("ray:{}:cpu", node.ip),
            },
            uuid: node.gpu_uuid.clone(),
            node: Some(NodeInfo {
                attempts: reply.attempts,
                ..node
            }),
        };
        let result = match reply.record {
            Some(v) => serde_json::from_value::<Evaluation>(v)
                .map_err(|e| EvalError::Setup(format!("the node's `ksearch eval --json` record is unreadable: {e}"))),
            None => Err(EvalError::Setup(
                reply.error.unwrap_or_else(|| "the node returned no record".into()),
            )),
        };
        EvalDone {
            device,
            result: result.map_err(ExecError::from),
        }
    }
}

/// Whether the watchdog can try the address over TCP (it has a [`tcp_endpoint`]).
fn watchable(address: &str) -> bool {
    tcp_endpoint(address).is_some()
}

/// Tries the head's address every [`WATCH_EVERY`]; after [`WATCH_FAILURES`] failures in a row
/// it records why in `gone` and ends the client, so that every evaluation waiting on it hears
/// at once that the cluster is gone.
fn watch(address: &str, child: &Mutex<Child>, gone: &Mutex<Option<String>>, done: &AtomicBool) {
    let mut failures = 0;
    while !done.load(Ordering::SeqCst) {
        std::thread::sleep(WATCH_EVERY);
        match check_address(address) {
            Ok(()) => failures = 0,
            Err(e) => {
                failures += 1;
                if failures >= WATCH_FAILURES && !done.load(Ordering::SeqCst) {
                    let why = match e {
                        RayError::Connect { why, .. } => why,
                        other => other.to_string(),
                    };
                    if let Ok(mut g) = gone.lock() {
                        g.get_or_insert(why);
                    }
                    if let Ok(mut c) = child.lock() {
                        let _ = c.kill();
                        let _ = c.wait();
                    }
                    return;
                }
            }
        }
    }
}

impl Drop for Ray {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Ok(mut child) = self.child.lock() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The task as a job names it: a built-in by name (every node's ksearch has it, being the same
/// version), a folder by its files.
fn task_payload(task: &Task) -> Result<serde_json::Value, RayError> {
    match &task.origin {
        TaskOrigin::Builtin(name) => Ok(json!({"task": name, "files": null})),
        TaskOrigin::Folder(dir) => {
            let mut files = serde_json::Map::new();
            let mut total = 0usize;
            collect(dir, dir, &mut files, &mut total)?;
            Ok(json!({"task": null, "files": files}))
        }
        // A FlashInfer-Bench dataset's definition travels as the task folder it amounts to.
        TaskOrigin::Dataset(dataset) => {
            let mut files = serde_json::Map::new();
            let mut total = 0usize;
            let listed =
                ksearch_spec::dataset_folder_files(dataset, task).map_err(|e| RayError::Task(e.to_string()))?;
            for (rel, bytes) in listed {
                let text = String::from_utf8(bytes).map_err(|_| {
                    RayError::Task(format!(
                        "{rel}: a binary file cannot be sent with a job (as a task folder's cannot)"
                    ))
                })?;
                total += text.len();
                if total > MAX_TASK_BYTES {
                    return Err(RayError::Task(format!(
                        "{} holds more than {} MiB",
                        dataset.definition.display(),
                        MAX_TASK_BYTES >> 20
                    )));
                }
                files.insert(rel, json!(text));
            }
            Ok(json!({"task": null, "files": files}))
        }
    }
}

fn collect(
    root: &std::path::Path,
    dir: &std::path::Path,
    files: &mut serde_json::Map<String, serde_json::Value>,
    total: &mut usize,
) -> Result<(), RayError> {
    let err = |p: &std::path::Path, e: std::io::Error| RayError::Task(format!("{}: {e}", p.display()));
    for entry in std::fs::read_dir(dir).map_err(|e| err(dir, e))? {
        let path = entry.map_err(|e| err(dir, e))?.path();
        if path.is_dir() {
            collect(root, &path, files, total)?;
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|e| err(&path, e))?;
        *total += text.len();
        if *total > MAX_TASK_BYTES {
            return Err(RayError::Task(format!(
                "{} holds more than {} MiB",
                root.display(),
                MAX_TASK_BYTES >> 20
            )));
        }
        let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().into_owned();
        files.insert(rel, json!(text));
    }
    Ok(())
}

/// `ksearch eval` flags for the job's options (the device is Ray's: it narrows a GPU task to
/// the GPU it granted, which the node's ksearch sees as cuda:0).
fn eval_args(opts: &ksearch_eval::EvalOptions) -> Vec<String> {
    let mut args = vec!["--seed".to_string(), opts.seed.to_string()];
    if let Some(t) = opts.trials {
        args.extend(["--trials".into(), t.to_string()]);
    }
    if let Some(t) = opts.timeout {
        args.extend(["--timeout".into(), t.as_secs_f64().to_string()]);
    }
    if let Some(m) = opts.memory_bytes {
        args.extend(["--memory-limit".into(), (m >> 20).to_string()]);
    }
    if opts.fail_fast {
        args.push("--fail-fast".into());
    }
    if opts.sanitize {
        args.push("--sanitize".into());
    }
    if let Some(a) = &opts.arch {
        args.extend(["--arch".into(), a.clone()]);
    }
    let graph = match opts.cuda_graph {
        CudaGraph::Auto => "auto",
        CudaGraph::On => "on",
        CudaGraph::Off => "off",
    };
    args.extend(["--cuda-graph".into(), graph.into()]);
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eval_flags_carry_the_options_that_change_a_record() {
        let mut opts = ksearch_eval::EvalOptions::new(7);
        opts.trials = Some(2);
        opts.memory_bytes = Some(4096 << 20);
        opts.fail_fast = true;
        let args = eval_args(&opts).join(" ");
        assert_eq!(
            args,
            "--seed 7 --trials 2 --memory-limit 4096 --fail-fast --cuda-graph auto"
        );
    }

    #[test]
    fn the_endpoint_the_watchdog_tries_is_the_gcs_or_the_ray_client_server() {
        assert_eq!(tcp_endpoint("10.0.0.5:6379").as_deref(), Some("10.0.0.5:6379"));
        assert_eq!(tcp_endpoint("ray://head:10002").as_deref(), Some("head:10002"));
        assert_eq!(tcp_endpoint("ray://head").as_deref(), Some("head:10001"));
        assert_eq!(tcp_endpoint("ray://head:10001/").as_deref(), Some("head:10001"));
        assert_eq!(tcp_endpoint("ray://[::1]:10003").as_deref(), Some("[::1]:10003"));
        assert_eq!(tcp_endpoint("ray://[::1]").as_deref(), Some("[::1]:10001"));
        assert_eq!(tcp_endpoint("ray://"), None);
        assert_eq!(tcp_endpoint("auto"), None);
        assert_eq!(tcp_endpoint("local"), None);
        assert_eq!(tcp_endpoint("anyscale://x"), None);
    }

    #[test]
    fn a_ray_client_address_nothing_listens_at_fails_naming_it() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap();
        let address = format!("ray://127.0.0.1:{port}");
        match check_address(&address) {
            Err(RayError::Connect { address: a, why }) => {
                assert_eq!(a, address);
                assert!(why.contains(&format!("127.0.0.1:{port}")), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_reply_from_the_client_reads() {
        let r: Reply = serde_json::from_str(r#"{"id": 3, "lost": "WorkerCrashedError: x", "attempts": 2}"#).unwrap();
        assert_eq!(
            (r.id, r.attempts, r.lost.as_deref()),
            (3, 2, Some("WorkerCrashedError: x"))
        );
    }
}
