//! Where evaluations run. Every evaluation of a run goes through one [`Executor`]: the driver
//! turns the engine's `Evaluate` request into an [`EvalJob`] (everything the evaluation needs:
//! the candidate as a solution, the options with its input seed) and hands it over; what comes
//! back is an [`EvalDone`] (the record, or why the evaluator could not run, and the device).
//!
//! - [`Local`] evaluates here, on the devices of a [`DevicePool`], one evaluation per device at a
//!   time (the default).
//! - [`Deferred`] evaluates nothing: the candidates stay pending in the run, and `ksearch
//!   evaluate RUN_DIR` evaluates them later, on the machine it runs on (with [`Local`]).
//!
//! - [`ray::Ray`] ships each job to a node of a Ray cluster and blocks the driver's worker
//!   until the record comes back (docs/ray.md).

pub mod ray;

use ksearch_devices::{DeviceLocks, DevicePool};
use ksearch_eval::{evaluate, EvalError, EvalOptions, Evaluation};
use ksearch_search::engine::Purpose;
use ksearch_spec::{Language, RunsOn, Solution, Task};
use serde::{Deserialize, Serialize};

/// One evaluation, self-contained.
#[derive(Debug, Clone)]
pub struct EvalJob {
    /// The engine's `Evaluate` request this job answers.
    pub request_id: String,
    /// The candidate evaluated (its id in the engine and the store).
    pub candidate_id: i64,
    /// A search evaluation or the final re-measurement.
    pub purpose: Purpose,
    /// The candidate as a solution of the task (its sources and build).
    pub solution: Solution,
    /// The evaluation's options, with its input seed (derived from the run's seed, the candidate
    /// and the purpose); [`Local`] fills in the leased device.
    pub opts: EvalOptions,
    /// Profile the candidate (Nsight Compute) once it passed (`ksearch run --profile`).
    pub profile: bool,
}

/// The device an evaluation ran on: the pool's label (`cuda:1`, `cpu:0`) and the GPU's UUID.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Leased {
    /// The device's label: the pool's here, `ray:IP:GPU` (or `ray:IP:cpu`) on a Ray node;
    /// empty when no device was leased.
    pub label: String,
    /// The GPU's UUID (`GPU-…`); `None` for CPU slots and when no device was leased.
    pub uuid: Option<String>,
    /// The cluster node it ran on (remote executors); `None` here.
    pub node: Option<NodeInfo>,
}

/// Where a remote evaluation ran: recorded in its record as `node`, so that a record says
/// which machine, GPU model and driver produced its numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// The node's Ray node id.
    #[serde(default)]
    pub node_id: String,
    /// The node's IP address, as Ray reports it.
    #[serde(default)]
    pub ip: String,
    /// The GPU's name, as `nvidia-smi` reports it; `None` without one (or without nvidia-smi).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    /// The NVIDIA driver version, as `nvidia-smi` reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// The GPU's UUID (`GPU-…`), as `nvidia-smi` reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_uuid: Option<String>,
    /// The node's `ksearch --version` (the start-up check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Tries it took (2: its first worker died and it was re-run once).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempts: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// What an evaluation produced.
#[derive(Debug)]
pub struct EvalDone {
    /// Where it ran (default, empty, when it never got a device).
    pub device: Leased,
    /// The evaluation's record (whatever the candidate did), or why there is none.
    pub result: Result<Evaluation, ExecError>,
}

/// Why an executor gave back no record.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The evaluation could not run (the task, the harness, the node's `ksearch eval`): an
    /// infrastructure failure of this evaluation, recorded as such.
    #[error(transparent)]
    Eval(#[from] EvalError),
    /// The executor itself is gone (a Ray cluster that went away): the evaluation was not
    /// judged, and no other can run through it. The driver stops the run with the candidate
    /// left pending, for `resume`.
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// An executor that became unavailable: which (`the Ray cluster at ADDR`) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} became unavailable: {why}")]
pub struct Unavailable {
    /// The executor, in words (`the Ray cluster at ADDR`).
    pub what: String,
    /// Why it is taken as gone, in words.
    pub why: String,
}

/// Which executor a run uses; recorded in the run's metadata (`executor`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutorKind {
    /// [`Local`]: this machine's devices (the default).
    #[default]
    Local,
    /// [`Deferred`]: candidates stay pending for `ksearch evaluate`.
    Deferred,
    /// [`ray::Ray`]: the nodes of a Ray cluster (the run's `ray` metadata says which).
    Ray,
}

impl std::str::FromStr for ExecutorKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "local" => Ok(ExecutorKind::Local),
            "deferred" => Ok(ExecutorKind::Deferred),
            "ray" => Ok(ExecutorKind::Ray),
            other => Err(format!(
                "unknown executor '{other}': expected `local`, `deferred` or `ray`"
            )),
        }
    }
}

impl std::fmt::Display for ExecutorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ExecutorKind::Local => "local",
            ExecutorKind::Deferred => "deferred",
            ExecutorKind::Ray => "ray",
        })
    }
}

/// Runs evaluations.
pub trait Executor: Sync {
    /// Whether this executor evaluates now; `false`: jobs stay pending in the run.
    fn evaluates(&self) -> bool;
    /// Evaluates one job to its end (on one of the driver's worker threads).
    fn evaluate(&self, task: &Task, job: EvalJob) -> EvalDone;
}

/// Evaluations on this machine's devices.
pub struct Local {
    /// The devices evaluations lease, one evaluation per device at a time (see
    /// [`crate::drive::device_pool`] for the default choice).
    pub pool: DevicePool,
}

impl Executor for Local {
    fn evaluates(&self) -> bool {
        true
    }

    /// Waits for a device (first come, first served within this process), locks it against
    /// other processes (two ksearch processes timing on one GPU or CPU slot would spoil both;
    /// the user is told once whom it waits for), points the evaluation at it, and frees it when
    /// done, whatever happens.
    fn evaluate(&self, task: &Task, job: EvalJob) -> EvalDone {
        let notify = |m: &str| eprintln!("ksearch: {m}");
        let lease = match self.pool.lease_locked(&DeviceLocks::from_env(), &notify) {
            Ok(lease) => lease,
            Err(e) => {
                return EvalDone {
                    device: Leased::default(),
                    result: Err(EvalError::Setup(e.to_string()).into()),
                }
            }
        };
        let mut opts = job.opts;
        let (device, env) = placement(lease.device(), job.solution.spec.language);
        if device.is_some() {
            opts.device = device;
        }
        opts.env = env;
        let mut result = evaluate(task, &job.solution, &opts, &notify);
        if let Ok(evaluation) = &mut result {
            if job.profile && evaluation.passed() {
                // On the same leased device, after the timing: the profiler's replays touch no
                // measurement. A profile that cannot be taken says why in its note.
                let popts = ksearch_eval::profile::ProfileOptions::default();
                evaluation.profile = Some(ksearch_eval::profile::profile(
                    task,
                    &job.solution,
                    &opts,
                    &popts,
                    &notify,
                ));
            }
        }
        EvalDone {
            device: Leased {
                label: lease.label(),
                uuid: lease.device().uuid.clone(),
                node: None,
            },
            result: result.map_err(ExecError::from),
        }
    }
}

impl Executor for ray::Ray {
    fn evaluates(&self) -> bool {
        true
    }

    fn evaluate(&self, _task: &Task, job: EvalJob) -> EvalDone {
        self.run(job)
    }
}

/// Evaluations left for later (`ksearch evaluate`).
pub struct Deferred;

impl Executor for Deferred {
    fn evaluates(&self) -> bool {
        false
    }

    fn evaluate(&self, _task: &Task, _job: EvalJob) -> EvalDone {
        EvalDone {
            device: Leased::default(),
            result: Err(EvalError::Setup(
                "internal: the deferred executor evaluates nothing; `ksearch evaluate` does".into(),
            )
            .into()),
        }
    }
}

/// The GPU an evaluation on `device` runs on, for a solution in `language`, as this process
/// numbers it (`cuda:K`); [`placement`] narrows the child to it with `CUDA_VISIBLE_DEVICES` and
/// then names it `cuda:0`. `None` keeps the backend's default: a CPU slot, or a candidate whose
/// backend cannot run on a GPU (a C kernel in a GPU task).
pub fn device_option(device: &ksearch_devices::Device, language: Language) -> Option<String> {
    let cuda = device.cuda_device()?;
    ksearch_eval::backend_for(language, Some(&cuda)).is_ok().then_some(cuda)
}

/// Where an evaluation on `device` runs, for a solution in `language`: the device to name
/// (`None`: the backend's default) and the child's extra environment. On a GPU the child sees
/// that GPU alone (`CUDA_VISIBLE_DEVICES=<uuid>`, whatever the numbering) and names it
/// `cuda:0`; MLX names no CUDA device (`mlx:gpu` is CUDA device 0 on Linux), so narrowing is
/// all it needs for the leased GPU to be the one it runs on.
pub fn placement(device: &ksearch_devices::Device, language: Language) -> (Option<String>, Vec<(String, String)>) {
    let env = device.env();
    match device_option(device, language) {
        Some(cuda) if env.is_empty() => (Some(cuda), env),
        Some(_) => (Some("cuda:0".to_string()), env),
        None if language.runs_on().contains(&RunsOn::MlxGpu) && device.cuda_device().is_some() => (None, env),
        None => (None, Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::{device_option, placement, Language};

    #[test]
    fn an_evaluation_is_told_its_gpu_as_this_process_numbers_it() {
        let text = "0, NVIDIA H200, GPU-aaaa, 143771 MiB\n1, NVIDIA H200, GPU-bbbb, 143771 MiB\n";
        let all = ksearch_devices::parse_nvidia_smi(text).unwrap();
        // nvidia-smi's GPU 1 is this process's cuda:0 under CUDA_VISIBLE_DEVICES=1.
        let seen = ksearch_devices::apply_cuda_visible_devices(all.clone(), Some("1"));
        assert_eq!(device_option(&all[1], Language::Python).as_deref(), Some("cuda:1"));
        assert_eq!(device_option(&seen[0], Language::Python).as_deref(), Some("cuda:0"));
        assert_eq!(device_option(&all[1], Language::Cuda).as_deref(), Some("cuda:1"));
        // A C kernel keeps its backend's default (the CPU), as does a CPU slot.
        assert_eq!(device_option(&all[1], Language::C), None);
        assert_eq!(device_option(&ksearch_devices::cpu_slots(1)[0], Language::Python), None);
    }

    #[test]
    fn an_evaluation_on_a_leased_gpu_sees_that_gpu_alone_mlx_too() {
        let text = "0, NVIDIA H200, GPU-aaaa, 143771 MiB\n1, NVIDIA H200, GPU-bbbb, 143771 MiB\n";
        let all = ksearch_devices::parse_nvidia_smi(text).unwrap();
        let visible = vec![("CUDA_VISIBLE_DEVICES".to_string(), "GPU-bbbb".to_string())];
        assert_eq!(
            placement(&all[1], Language::Cuda),
            (Some("cuda:0".into()), visible.clone())
        );
        // MLX's `mlx:gpu` is CUDA device 0: narrowed to the leased GPU, that is the one it uses.
        assert_eq!(placement(&all[1], Language::Mlx), (None, visible));
        // A C kernel in a GPU task, and anything on a CPU slot, keep the default and environment.
        assert_eq!(placement(&all[1], Language::C), (None, vec![]));
        assert_eq!(
            placement(&ksearch_devices::cpu_slots(1)[0], Language::Mlx),
            (None, vec![])
        );
    }
}
