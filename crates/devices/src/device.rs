//! Devices: discovery (`nvidia-smi`, `CUDA_VISIBLE_DEVICES`) and the user's `--devices` choice.

use crate::DeviceError;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The arguments ksearch passes to `nvidia-smi`; [`parse_nvidia_smi`] reads what they print.
pub const NVIDIA_SMI_QUERY: [&str; 2] = ["--query-gpu=index,name,uuid,memory.total", "--format=csv,noheader"];

/// How long `nvidia-smi` may take before discovery gives up on it (it can hang on a wedged
/// driver, and a search should say so rather than wait forever).
const NVIDIA_SMI_TIMEOUT: Duration = Duration::from_secs(20);

/// What kind of device a [`Device`] is: it decides how a child is pointed at it ([`Device::env`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// A slot on the host CPU (CPU kernels; the pool's size says how many run at once).
    Cpu,
    /// An NVIDIA GPU.
    Cuda,
}

/// One device an evaluation can lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// A GPU or a CPU slot.
    pub kind: DeviceKind,
    /// The GPU's index as `nvidia-smi` numbers it (PCI bus order); the slot number for CPUs.
    pub index: u32,
    /// The model as `nvidia-smi` prints it (e.g. `NVIDIA H200`); `host CPU` for CPU slots.
    pub name: String,
    /// The GPU's UUID (`GPU-...`): what a child process is pointed at, because it names the same
    /// GPU whatever `CUDA_DEVICE_ORDER` says.
    pub uuid: Option<String>,
    /// The GPU's total memory in MiB (`memory.total`); `None` for CPU slots or when not reported.
    pub memory_mib: Option<u64>,
    /// The GPU's CUDA ordinal in this process (and in children that inherit its environment):
    /// its position among the visible GPUs. `None` for CPU slots.
    pub ordinal: Option<u32>,
}

impl Device {
    /// `cuda:1` (the `nvidia-smi` index) or `cpu:0`: how logs name the device.
    pub fn label(&self) -> String {
        match self.kind {
            DeviceKind::Cpu => format!("cpu:{}", self.index),
            DeviceKind::Cuda => format!("cuda:{}", self.index),
        }
    }

    /// The device as this process's CUDA numbers it, for a child that inherits this process's
    /// environment (e.g. PyTorch's `cuda:1`): `None` for a CPU slot. It differs from
    /// [`label`](Self::label) when `CUDA_VISIBLE_DEVICES` reorders or hides GPUs.
    pub fn cuda_device(&self) -> Option<String> {
        match self.kind {
            DeviceKind::Cpu => None,
            DeviceKind::Cuda => Some(format!("cuda:{}", self.ordinal.unwrap_or(self.index))),
        }
    }

    /// The environment a child process needs to run on this device and only on it:
    /// `CUDA_VISIBLE_DEVICES=<uuid>` (or the index when the UUID is unknown) for a GPU, nothing
    /// for a CPU slot. Inside that child the GPU is CUDA device 0.
    pub fn env(&self) -> Vec<(String, String)> {
        match self.kind {
            DeviceKind::Cpu => Vec::new(),
            DeviceKind::Cuda => vec![(
                "CUDA_VISIBLE_DEVICES".to_string(),
                self.uuid.clone().unwrap_or_else(|| self.index.to_string()),
            )],
        }
    }
}

/// `n` CPU slots (`cpu:0` ... `cpu:n-1`).
pub fn cpu_slots(n: u32) -> Vec<Device> {
    (0..n)
        .map(|index| Device {
            kind: DeviceKind::Cpu,
            index,
            name: "host CPU".to_string(),
            uuid: None,
            memory_mib: None,
            ordinal: None,
        })
        .collect()
}

/// A GPU named on the command line: its `nvidia-smi` index or (a prefix of) its UUID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuSelector {
    /// The GPU's index as `nvidia-smi` numbers it, e.g. `0`.
    Index(u32),
    /// The GPU's UUID or a prefix of it, e.g. `GPU-1a2b`.
    Uuid(String),
}

impl std::fmt::Display for GpuSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuSelector::Index(i) => write!(f, "{i}"),
            GpuSelector::Uuid(u) => f.write_str(u),
        }
    }
}

impl GpuSelector {
    fn matches(&self, d: &Device) -> bool {
        match self {
            GpuSelector::Index(i) => d.index == *i,
            GpuSelector::Uuid(u) => d.uuid.as_deref().is_some_and(|x| x.starts_with(u.as_str())),
        }
    }
}

/// What `--devices` asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSpec {
    /// `cpu` (one slot) or `cpu:N`.
    Cpu {
        /// How many CPU slots the pool gets (at least 1).
        slots: u32,
    },
    /// `all` or `gpu`: every visible GPU.
    AllGpus,
    /// `0,1` or `GPU-1a2b...,GPU-3c4d...`: these GPUs, in this order.
    Gpus(Vec<GpuSelector>),
}

impl std::str::FromStr for DeviceSpec {
    type Err = DeviceError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |reason: String| DeviceError::Spec {
            spec: text.to_string(),
            reason,
        };
        let s = text.trim();
        if s.is_empty() {
            return Err(bad("empty; expected GPU indices (0,1), `all`, `cpu` or `cpu:N`".into()));
        }
        let lower = s.to_ascii_lowercase();
        if lower == "all" || lower == "gpu" {
            return Ok(DeviceSpec::AllGpus);
        }
        if lower == "cpu" {
            return Ok(DeviceSpec::Cpu { slots: 1 });
        }
        if let Some(n) = lower.strip_prefix("cpu:") {
            let slots: u32 = n
                .trim()
                .parse()
                .map_err(|_| bad(format!("'{n}' is not a number of CPU slots")))?;
            if !(1..=1024).contains(&slots) {
                return Err(bad(format!("{slots} CPU slots; expected 1 to 1024")));
            }
            return Ok(DeviceSpec::Cpu { slots });
        }
        let mut out: Vec<GpuSelector> = Vec::new();
        for part in s.split(',').map(str::trim) {
            let selector = if let Ok(i) = part.parse::<u32>() {
                GpuSelector::Index(i)
            } else if part.starts_with("GPU-") && part.len() > 4 {
                GpuSelector::Uuid(part.to_string())
            } else {
                return Err(bad(format!(
                    "'{part}' is neither a GPU index nor a GPU UUID (GPU-...); expected e.g. 0,1 or cpu:2"
                )));
            };
            if out.contains(&selector) {
                return Err(bad(format!("GPU {selector} is listed twice")));
            }
            out.push(selector);
        }
        Ok(DeviceSpec::Gpus(out))
    }
}

/// Reads `nvidia-smi --query-gpu=index,name,uuid,memory.total --format=csv,noheader`:
/// one `index, name, uuid, memory` line per GPU (memory as `81559 MiB`, or a bare number with
/// `nounits`). Blank lines are skipped.
pub fn parse_nvidia_smi(text: &str) -> Result<Vec<Device>, DeviceError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |reason: &str| DeviceError::Parse {
            line: n + 1,
            text: line.to_string(),
            reason: reason.to_string(),
        };
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if fields.len() < 4 {
            return Err(bad(
                "expected 4 comma-separated fields: index, name, uuid, memory.total",
            ));
        }
        let index: u32 = fields[0].parse().map_err(|_| bad("the index is not a number"))?;
        // A name may itself contain commas: it is everything between the index and the UUID.
        let uuid = fields[fields.len() - 2];
        if !uuid.starts_with("GPU-") {
            return Err(bad("the uuid does not start with GPU-"));
        }
        let name = fields[1..fields.len() - 2].join(", ");
        let memory = fields[fields.len() - 1];
        let memory_mib = match memory.trim_end_matches("MiB").trim() {
            "[N/A]" | "N/A" => None,
            m => Some(
                m.parse::<u64>()
                    .map_err(|_| bad("memory.total is not a number of MiB"))?,
            ),
        };
        if out.iter().any(|d: &Device| d.index == index) {
            return Err(bad("the index appears twice"));
        }
        // With no CUDA_VISIBLE_DEVICES, CUDA numbers the GPUs as nvidia-smi lists them (on a
        // machine of identical GPUs, or with CUDA_DEVICE_ORDER=PCI_BUS_ID).
        let ordinal = Some(out.len() as u32);
        out.push(Device {
            kind: DeviceKind::Cuda,
            index,
            name,
            uuid: Some(uuid.to_string()),
            memory_mib,
            ordinal,
        });
    }
    Ok(out)
}

/// The GPUs a CUDA program would see under `CUDA_VISIBLE_DEVICES=value`, in its order, as CUDA
/// reads it: entries are indices or UUID prefixes (`GPU-...`), separated by commas; the list
/// ends at the first entry that names no GPU (or one already listed), and an empty value hides
/// every GPU. `None` (unset) leaves all of them. Indices are matched against `nvidia-smi`'s
/// numbering (PCI bus order), which is CUDA's too with `CUDA_DEVICE_ORDER=PCI_BUS_ID` and on a
/// machine of identical GPUs. Each GPU's [`Device::ordinal`] becomes its position in the list.
pub fn apply_cuda_visible_devices(all: Vec<Device>, value: Option<&str>) -> Vec<Device> {
    let Some(value) = value else { return all };
    let mut out: Vec<Device> = Vec::new();
    for entry in value.split(',').map(str::trim) {
        let selector = match entry.parse::<u32>() {
            Ok(i) => GpuSelector::Index(i),
            Err(_) if entry.starts_with("GPU-") => GpuSelector::Uuid(entry.to_string()),
            // Garbage, a negative number or a MIG instance (which ksearch does not lease): CUDA
            // stops reading here.
            Err(_) => break,
        };
        let mut matching = all.iter().filter(|d| selector.matches(d));
        let (Some(d), None) = (matching.next(), matching.next()) else {
            break; // no such GPU, or an ambiguous UUID prefix
        };
        if out.iter().any(|o| o.index == d.index) {
            break;
        }
        out.push(Device {
            ordinal: Some(out.len() as u32),
            ..d.clone()
        });
    }
    out
}

/// The GPUs this process may use: `nvidia-smi`'s list filtered by `CUDA_VISIBLE_DEVICES`.
/// No `nvidia-smi` on the PATH means no GPU (an empty list, not an error); an `nvidia-smi` that
/// fails or hangs is an error, because a GPU is probably there and something is wrong with it.
pub fn discover_gpus() -> Result<Vec<Device>, DeviceError> {
    let text = match run_nvidia_smi()? {
        Some(text) => text,
        None => return Ok(Vec::new()),
    };
    let all = parse_nvidia_smi(&text)?;
    let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    Ok(apply_cuda_visible_devices(all, visible.as_deref()))
}

/// `nvidia-smi`'s answer to [`NVIDIA_SMI_QUERY`], or `None` when it is not installed.
fn run_nvidia_smi() -> Result<Option<String>, DeviceError> {
    let err = |reason: String| DeviceError::NvidiaSmi { reason };
    let mut child = match Command::new("nvidia-smi")
        .args(NVIDIA_SMI_QUERY)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(err(format!("cannot start it: {e}"))),
    };
    // Read both pipes on threads so a chatty nvidia-smi cannot block on a full pipe.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() > NVIDIA_SMI_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(err(format!("no answer within {NVIDIA_SMI_TIMEOUT:?}")));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(err(format!("cannot wait for it: {e}"))),
        }
    };
    let out = stdout.join().unwrap_or_default();
    let errors = stderr.join().unwrap_or_default();
    if !status.success() {
        let said = format!("{} {}", out.trim(), errors.trim());
        return Err(err(format!("exited with {status}: {}", said.trim())));
    }
    Ok(Some(out))
}

/// The devices `spec` asks for, with `gpus` (usually [`discover_gpus`]) called only when GPUs
/// are asked for. Every named GPU must be visible.
pub fn select(
    spec: &DeviceSpec,
    gpus: impl FnOnce() -> Result<Vec<Device>, DeviceError>,
) -> Result<Vec<Device>, DeviceError> {
    let selectors = match spec {
        DeviceSpec::Cpu { slots } => return Ok(cpu_slots(*slots)),
        DeviceSpec::AllGpus => None,
        DeviceSpec::Gpus(s) => Some(s),
    };
    let visible = gpus()?;
    if visible.is_empty() {
        return Err(DeviceError::NoDevices {
            reason: "no GPU is visible (nvidia-smi is missing or lists none, or CUDA_VISIBLE_DEVICES hides them)"
                .into(),
        });
    }
    let Some(selectors) = selectors else {
        return Ok(visible);
    };
    let mut out: Vec<Device> = Vec::new();
    for s in selectors {
        let mut matching = visible.iter().filter(|d| s.matches(d));
        match (matching.next(), matching.next()) {
            (Some(d), None) if !out.iter().any(|o| o.index == d.index) => out.push(d.clone()),
            (Some(d), None) => {
                return Err(DeviceError::Spec {
                    spec: s.to_string(),
                    reason: format!("names GPU {} again", d.index),
                })
            }
            (Some(_), Some(_)) => {
                return Err(DeviceError::Spec {
                    spec: s.to_string(),
                    reason: "the UUID prefix matches several GPUs".into(),
                })
            }
            (None, _) => {
                return Err(DeviceError::NotVisible {
                    selector: s.to_string(),
                    visible: visible
                        .iter()
                        .map(|d| d.index.to_string())
                        .collect::<Vec<_>>()
                        .join(","),
                })
            }
        }
    }
    Ok(out)
}
