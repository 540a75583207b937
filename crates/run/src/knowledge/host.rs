//! The CPU of the machine ksearch runs on: its ISA extensions, vector width, caches and cores,
//! detected where the task brief is built (Linux: `/proc/cpuinfo` and
//! `/sys/devices/system/cpu/cpu0/cache`; macOS: `sysctl`), and what the c backend's compiler
//! makes of a small loop under the backend's flags (the width it vectorises with, whether it
//! fuses `a*b+c` into an FMA).
//!
//! A `c` task's candidates run on this machine's CPU (`target_of`), so its prompts and knob
//! limits use these figures in place of the knowledge base's generic CPU ([`overlay`]). The
//! eval harness records the same facts with every evaluation (harness/ksearch_harness/backends/c/cpu_info.py).

use crate::contract::c::{compiler_command, FLAGS as C_FLAGS};
use ksearch_kb::{Basis, DeviceKind, Figure, HardwareSpec, Kb, KbError};
use std::borrow::Cow;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// What was found out about this machine's CPU. Every field may be missing: what could not
/// be read is left out of the prompt rather than guessed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HostCpu {
    /// `AMD EPYC 9654 96-Core Processor`, `Apple M2 Max`.
    pub model: Option<String>,
    /// `amd`, `intel`, `arm`, `apple`.
    pub vendor: Option<String>,
    /// The instruction set: `x86-64`, `aarch64`.
    pub arch: String,
    /// ISA extensions in the kernel's spelling (`avx2`, `avx512f`, `avx512_vnni`, `asimd`, `sve`).
    pub flags: BTreeSet<String>,
    /// The SVE vector length in bits, where the kernel says (`/proc/sys/abi/sve_default_vector_length`).
    pub sve_bits: Option<u32>,
    /// cpu0's caches (on macOS, the performance cores').
    pub caches: Caches,
    /// The cores this process may use (its affinity and cgroup quota).
    pub cores: Option<usize>,
    /// Logical CPUs the machine lists.
    pub logical_cpus: Option<usize>,
    /// Where the facts come from, for the prompt and the figures' sources.
    pub source: String,
    /// What the c backend's compiler does with a probe loop; `None` when it could not be run.
    pub compiler: Option<CompilerProbe>,
}

/// Cache sizes of cpu0.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Caches {
    /// The L1 data cache, in KiB (sysfs's and sysctl's `K` is 1024 bytes).
    pub l1d_kb: Option<f64>,
    /// One L2, in KiB.
    pub l2_kb: Option<f64>,
    /// Logical CPUs sharing one L2.
    pub l2_shared_by: Option<usize>,
    /// One L3, in KiB.
    pub l3_kb: Option<f64>,
    /// Logical CPUs sharing one L3.
    pub l3_shared_by: Option<usize>,
    /// The cache line size, in bytes.
    pub line_bytes: Option<u32>,
}

/// The c backend's compiler on a stride-1 `y[i] = a[i] * b[i] + y[i]` loop under its flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompilerProbe {
    /// The first line of `cc --version`.
    pub version: String,
    /// Width of the vector registers of the vectorised loop (`None`: not vectorised).
    pub vector_bits: Option<u32>,
    /// Whether the multiply and add became one fused multiply-add.
    pub fma: bool,
}

/// x86 extensions worth naming, in the order prompts list them (the kernel's flag, a name).
const X86: &[(&str, &str)] = &[
    ("sse4_2", "SSE4.2"),
    ("avx", "AVX"),
    ("avx2", "AVX2"),
    ("fma", "FMA"),
    ("f16c", "F16C"),
    ("avx_vnni", "AVX-VNNI"),
    ("avx512f", "F"),
    ("avx512dq", "DQ"),
    ("avx512cd", "CD"),
    ("avx512bw", "BW"),
    ("avx512vl", "VL"),
    ("avx512ifma", "IFMA"),
    ("avx512vbmi", "VBMI"),
    ("avx512_vnni", "VNNI"),
    ("avx512_bf16", "BF16"),
    ("avx512_fp16", "FP16"),
    ("amx_tile", "AMX-TILE"),
    ("amx_bf16", "AMX-BF16"),
    ("amx_int8", "AMX-INT8"),
];

/// Arm extensions worth naming (the kernel's `Features` spelling, a name).
const ARM: &[(&str, &str)] = &[
    ("asimd", "NEON"),
    ("asimdhp", "NEON FP16"),
    ("asimddp", "DotProd"),
    ("i8mm", "I8MM"),
    ("bf16", "BF16"),
    ("sve", "SVE"),
    ("sve2", "SVE2"),
    ("sme", "SME"),
];

/// macOS `sysctl` names of the same extensions, in the kernel's spelling above.
const SYSCTL_FLAGS: &[(&str, &str)] = &[
    ("hw.optional.sse4_2", "sse4_2"),
    ("hw.optional.avx1_0", "avx"),
    ("hw.optional.avx2_0", "avx2"),
    ("hw.optional.fma", "fma"),
    ("hw.optional.f16c", "f16c"),
    ("hw.optional.avx512f", "avx512f"),
    ("hw.optional.avx512dq", "avx512dq"),
    ("hw.optional.avx512cd", "avx512cd"),
    ("hw.optional.avx512bw", "avx512bw"),
    ("hw.optional.avx512vl", "avx512vl"),
    ("hw.optional.avx512ifma", "avx512ifma"),
    ("hw.optional.avx512vbmi", "avx512vbmi"),
    ("hw.optional.avx512vnni", "avx512_vnni"),
    ("hw.optional.neon", "asimd"),
    ("hw.optional.AdvSIMD", "asimd"),
    ("hw.optional.neon_fp16", "asimdhp"),
    ("hw.optional.arm.FEAT_FP16", "asimdhp"),
    ("hw.optional.arm.FEAT_DotProd", "asimddp"),
    ("hw.optional.arm.FEAT_I8MM", "i8mm"),
    ("hw.optional.arm.FEAT_BF16", "bf16"),
    ("hw.optional.arm.FEAT_SME", "sme"),
];

/// What `/proc/cpuinfo` says.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CpuInfo {
    /// The first processor's `model name`; on Arm, made up from `CPU implementer` and `CPU part`
    /// when there is none.
    pub model: Option<String>,
    /// `amd`, `intel` (from `vendor_id`), or the Arm implementer's name (`arm`, `apple`,
    /// `ampere`, ...; the raw code when unknown).
    pub vendor: Option<String>,
    /// The first processor's `flags` (x86) or `Features` (Arm), as the kernel spells them.
    pub flags: BTreeSet<String>,
    /// The `processor` entries listed (logical CPUs).
    pub processors: usize,
}

/// Parses `/proc/cpuinfo` (x86: `model name`, `vendor_id`, `flags`; Arm: `Features`,
/// `CPU implementer`, `CPU part`). The first processor's model and flags are taken.
pub fn parse_cpuinfo(text: &str) -> CpuInfo {
    let mut info = CpuInfo::default();
    let (mut implementer, mut part) = (None, None);
    let mut flags_seen = false;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        match key {
            "processor" => info.processors += 1,
            "model name" | "Model name" if info.model.is_none() && !value.is_empty() => {
                info.model = Some(value.to_string())
            }
            "vendor_id" if info.vendor.is_none() => {
                info.vendor = Some(
                    match value {
                        "AuthenticAMD" => "amd",
                        "GenuineIntel" => "intel",
                        other => other,
                    }
                    .to_string(),
                )
            }
            "flags" | "Features" if !flags_seen => {
                flags_seen = true;
                info.flags = value.split_whitespace().map(str::to_string).collect();
            }
            "CPU implementer" if implementer.is_none() => implementer = Some(value.to_string()),
            "CPU part" if part.is_none() => part = Some(value.to_string()),
            _ => {}
        }
    }
    if let Some(imp) = &implementer {
        if info.vendor.is_none() {
            info.vendor = Some(
                match imp.as_str() {
                    "0x41" => "arm",
                    "0x61" => "apple",
                    "0x48" => "hisilicon",
                    "0xc0" => "ampere",
                    "0x51" => "qualcomm",
                    "0x4e" => "nvidia",
                    other => other,
                }
                .to_string(),
            );
        }
        if info.model.is_none() {
            let part = part.as_deref().unwrap_or("?");
            info.model = Some(format!("Arm CPU (implementer {imp}, part {part})"));
        }
    }
    info
}

/// A cache size as sysfs writes it (`32K`, `1024K`, `32768K`, `1M`), in KB.
fn size_kb(text: &str) -> Option<f64> {
    let t = text.trim();
    let (digits, scale) = match t.chars().last()? {
        'K' | 'k' => (&t[..t.len() - 1], 1.0),
        'M' | 'm' => (&t[..t.len() - 1], 1024.0),
        'G' | 'g' => (&t[..t.len() - 1], 1024.0 * 1024.0),
        _ => (t, 1.0 / 1024.0),
    };
    digits
        .trim()
        .parse::<f64>()
        .ok()
        .map(|v| v * scale)
        .filter(|v| *v > 0.0)
}

/// How many CPUs a list such as `0-3,8-11` or `0,2` names.
fn cpu_count(list: &str) -> Option<usize> {
    let mut n = 0;
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        n += match part.split_once('-') {
            Some((a, b)) => {
                b.trim()
                    .parse::<usize>()
                    .ok()?
                    .checked_sub(a.trim().parse::<usize>().ok()?)?
                    + 1
            }
            None => {
                part.trim().parse::<usize>().ok()?;
                1
            }
        };
    }
    (n > 0).then_some(n)
}

/// The caches sysfs lists for one CPU (`dir` is `/sys/devices/system/cpu/cpu0/cache`): one
/// `indexN` folder per cache with `level`, `type`, `size`, `shared_cpu_list` and
/// `coherency_line_size`.
pub fn read_sysfs_caches(dir: &Path) -> Caches {
    let mut caches = Caches::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return caches;
    };
    let mut indices: Vec<_> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
        .map(|e| e.path())
        .collect();
    indices.sort();
    for index in indices {
        let read = |name: &str| std::fs::read_to_string(index.join(name)).ok();
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size")) else {
            continue;
        };
        let Some(kb) = size_kb(&size) else { continue };
        let shared = read("shared_cpu_list").as_deref().and_then(cpu_count);
        if caches.line_bytes.is_none() {
            caches.line_bytes = read("coherency_line_size").and_then(|l| l.trim().parse().ok());
        }
        match (level.trim(), kind.trim()) {
            ("1", "Data" | "Unified") => caches.l1d_kb = Some(kb),
            ("2", "Data" | "Unified") => (caches.l2_kb, caches.l2_shared_by) = (Some(kb), shared),
            ("3", "Data" | "Unified") => (caches.l3_kb, caches.l3_shared_by) = (Some(kb), shared),
            _ => {}
        }
    }
    caches
}

/// What `sysctl hw machdep.cpu` prints on macOS (`name: value` lines) as a CPU.
pub fn from_sysctl(text: &str) -> HostCpu {
    let map: std::collections::BTreeMap<&str, &str> = text
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    let num = |k: &str| map.get(k).and_then(|v| v.parse::<f64>().ok()).filter(|v| *v > 0.0);
    // Apple silicon lists its performance cores' caches as perflevel0.
    let either = |a: &str, b: &str| num(a).or_else(|| num(b));
    let flags: BTreeSet<String> = SYSCTL_FLAGS
        .iter()
        .filter(|(k, _)| map.get(k) == Some(&"1"))
        .map(|(_, f)| f.to_string())
        .collect();
    let arm = map.contains_key("hw.optional.arm64") || flags.contains("asimd");
    let model = map.get("machdep.cpu.brand_string").map(|s| s.to_string());
    let vendor = model.as_deref().map(|m| {
        if m.starts_with("Apple") {
            "apple"
        } else if m.contains("Intel") {
            "intel"
        } else {
            "unknown"
        }
        .to_string()
    });
    HostCpu {
        model,
        vendor,
        arch: if arm { "aarch64" } else { "x86-64" }.to_string(),
        flags,
        sve_bits: None,
        caches: Caches {
            l1d_kb: either("hw.perflevel0.l1dcachesize", "hw.l1dcachesize").map(|b| b / 1024.0),
            l2_kb: either("hw.perflevel0.l2cachesize", "hw.l2cachesize").map(|b| b / 1024.0),
            l2_shared_by: num("hw.perflevel0.cpusperl2").map(|n| n as usize),
            l3_kb: num("hw.l3cachesize").map(|b| b / 1024.0),
            l3_shared_by: None,
            line_bytes: num("hw.cachelinesize").map(|n| n as u32),
        },
        cores: None,
        logical_cpus: num("hw.logicalcpu").map(|n| n as usize),
        source: "sysctl hw machdep.cpu".to_string(),
        compiler: None,
    }
}

impl HostCpu {
    /// This machine's CPU, detected once per process (with the compiler probe).
    pub fn here() -> &'static HostCpu {
        static HOST: OnceLock<HostCpu> = OnceLock::new();
        HOST.get_or_init(|| {
            let mut host = HostCpu::detect();
            host.compiler = probe_compiler(&host.arch);
            host
        })
    }

    /// [`HostCpu::here`] when `device` is a CPU of `kb` (whose figures detection replaces),
    /// else nothing detected: a GPU task's prompts need no compiler probe.
    pub fn for_device(kb: &Kb, device: &str) -> &'static HostCpu {
        static NONE: OnceLock<HostCpu> = OnceLock::new();
        match kb.hardware(device) {
            Ok(spec) if spec.kind == DeviceKind::Cpu => HostCpu::here(),
            _ => NONE.get_or_init(HostCpu::default),
        }
    }

    /// This machine's CPU, without the compiler probe.
    pub fn detect() -> HostCpu {
        let mut host = if cfg!(target_os = "macos") {
            let out = Command::new("sysctl")
                .args(["hw", "machdep.cpu"])
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .output();
            match out {
                Ok(o) => from_sysctl(&String::from_utf8_lossy(&o.stdout)),
                Err(_) => HostCpu::default(),
            }
        } else {
            let info = std::fs::read_to_string("/proc/cpuinfo")
                .map(|t| parse_cpuinfo(&t))
                .unwrap_or_default();
            let caches = read_sysfs_caches(Path::new("/sys/devices/system/cpu/cpu0/cache"));
            let sve_bits = std::fs::read_to_string("/proc/sys/abi/sve_default_vector_length")
                .ok()
                .and_then(|t| t.trim().parse::<u32>().ok())
                .map(|bytes| bytes * 8);
            HostCpu {
                model: info.model,
                vendor: info.vendor,
                arch: String::new(),
                flags: info.flags,
                sve_bits,
                caches,
                cores: None,
                logical_cpus: (info.processors > 0).then_some(info.processors),
                source: "/proc/cpuinfo and /sys/devices/system/cpu/cpu0/cache".to_string(),
                compiler: None,
            }
        };
        host.arch = match std::env::consts::ARCH {
            "x86_64" => "x86-64".to_string(),
            other => other.to_string(),
        };
        host.cores = std::thread::available_parallelism().ok().map(|n| n.get());
        host
    }

    fn has(&self, flag: &str) -> bool {
        self.flags.contains(flag)
    }

    fn is_arm(&self) -> bool {
        self.arch == "aarch64" || self.has("asimd")
    }

    /// Whether anything about the instruction set was found.
    pub fn detected(&self) -> bool {
        !self.flags.is_empty()
    }

    /// The widest fp32 vector registers and how many there are: 512-bit with AVX-512 (32
    /// registers), 256-bit with AVX (16), 128-bit with SSE; on Arm SVE's length where known,
    /// else NEON's 128 (32 registers).
    pub fn vector(&self) -> Option<(u32, u32)> {
        if self.is_arm() {
            return match (self.has("sve"), self.sve_bits) {
                (true, Some(bits)) => Some((bits, 32)),
                _ if self.has("asimd") => Some((128, 32)),
                _ => None,
            };
        }
        if self.has("avx512f") {
            Some((512, 32))
        } else if self.has("avx") {
            Some((256, 16))
        } else if self.has("sse2") || self.has("sse4_2") {
            Some((128, 16))
        } else {
            None
        }
    }

    /// The ISA extensions present, as prompts name them: `SSE4.2, AVX, AVX2, FMA, F16C, AVX-512
    /// F/DQ/CD/BW/VL/VNNI/BF16`.
    pub fn isa_present(&self) -> Vec<String> {
        let table = if self.is_arm() { ARM } else { X86 };
        let mut out = Vec::new();
        let mut avx512 = Vec::new();
        for (flag, name) in table {
            if !self.has(flag) {
                continue;
            }
            if flag.starts_with("avx512") {
                avx512.push(*name);
            } else {
                if !avx512.is_empty() {
                    out.push(format!("AVX-512 {}", avx512.join("/")));
                    avx512.clear();
                }
                out.push(name.to_string());
            }
        }
        if !avx512.is_empty() {
            out.push(format!("AVX-512 {}", avx512.join("/")));
        }
        out
    }

    /// Notable extensions this CPU lacks (so a kernel does not reach for them).
    pub fn isa_absent(&self) -> Vec<&'static str> {
        let notable: &[(&str, &str)] = if self.is_arm() {
            &[("sve", "SVE"), ("i8mm", "I8MM"), ("bf16", "BF16")]
        } else if !self.has("avx512f") {
            &[("avx2", "AVX2"), ("fma", "FMA"), ("avx512f", "AVX-512")]
        } else {
            &[
                ("avx512bw", "AVX-512BW"),
                ("avx512vl", "AVX-512VL"),
                ("avx512_vnni", "AVX-512VNNI"),
                ("avx512_bf16", "AVX-512BF16"),
                ("avx512_fp16", "AVX-512FP16"),
                ("amx_tile", "AMX"),
            ]
        };
        notable.iter().filter(|(f, _)| !self.has(f)).map(|(_, n)| *n).collect()
    }
}

/// Compiles a small loop with the c backend's compiler and flags (to assembly) and reads what
/// became of it. `None` when the compiler cannot be run or takes longer than a few seconds.
fn probe_compiler(arch: &str) -> Option<CompilerProbe> {
    let cc = compiler_command();
    let (program, args) = cc.split_first()?;
    let dir = std::env::temp_dir().join(format!(
        "ksearch-cc-probe-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).ok()?;
    let result = (|| {
        let source = dir.join("probe.c");
        let asm = dir.join("probe.s");
        std::fs::write(
            &source,
            "void ksearch_probe(float *restrict y, const float *restrict a, const float *restrict b, long n)\n\
             { for (long i = 0; i < n; i++) y[i] = a[i] * b[i] + y[i]; }\n",
        )
        .ok()?;
        let version = Command::new(program)
            .args(args)
            .arg("--version")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        let version = String::from_utf8_lossy(&version.stdout)
            .lines()
            .next()?
            .trim()
            .to_string();
        let mut child = Command::new(program)
            .args(args)
            .args(C_FLAGS.iter().filter(|f| **f != "-shared" && **f != "-fPIC"))
            .arg("-S")
            .arg("-o")
            .arg(&asm)
            .arg(&source)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return None;
                }
            }
        };
        if !status.success() {
            return None;
        }
        let text = std::fs::read_to_string(&asm).ok()?;
        Some(read_probe(&text, arch, version))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// What the probe's assembly says: the widest vector registers its arithmetic uses, and
/// whether a fused multiply-add is among its instructions.
pub fn read_probe(asm: &str, arch: &str, version: String) -> CompilerProbe {
    let (vector_bits, fma) = if arch == "aarch64" {
        // An SVE register operand: z<N>.s.
        let sve = asm.split(|c: char| !(c.is_ascii_alphanumeric() || c == '.')).any(|t| {
            t.strip_prefix('z')
                .and_then(|r| r.strip_suffix(".s"))
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        });
        let neon = asm.contains(".4s");
        let fma = asm.lines().any(|l| {
            let op = l.split_whitespace().next().unwrap_or("");
            op == "fmla" || op == "fmadd" || op == "fmad"
        });
        (
            if sve {
                Some(0)
            } else if neon {
                Some(128)
            } else {
                None
            },
            fma,
        )
    } else {
        let bits = if asm.contains("%zmm") {
            Some(512)
        } else if asm.contains("%ymm") {
            Some(256)
        } else if asm.lines().any(|l| l.contains("ps\t%xmm") || l.contains("ps %xmm")) {
            Some(128)
        } else {
            None
        };
        let fma = asm.contains("vfmadd") || asm.contains("vfnmadd") || asm.contains("vfmsub");
        (bits, fma)
    };
    CompilerProbe {
        version,
        // 0 stands for SVE's scalable registers, whose length the assembly does not give.
        vector_bits,
        fma,
    }
}

fn figure(value: f64, source: &str) -> Option<Figure> {
    Some(Figure {
        value,
        basis: Basis::Measured,
        source: source.to_string(),
        up_to: false,
        note: None,
    })
}

/// The notes the prompt gets about this machine, before the knowledge base's own.
fn host_notes(host: &HostCpu) -> Vec<String> {
    let mut notes = Vec::new();
    if !host.detected() {
        notes.push(format!(
            "This machine's CPU could not be examined ({} unreadable), so these figures are generic: AVX2 + FMA \
             (8 fp32 lanes) is the portable x86-64 baseline, AVX-512 (16 fp32 lanes) exists on some CPUs only, and \
             -march=native uses what is present.",
            if host.source.is_empty() {
                "the system's CPU description"
            } else {
                &host.source
            }
        ));
        return notes;
    }
    notes.push(format!(
        "These figures are of the machine that built this brief (the one running `ksearch run`), detected from {}; \
         the c backend compiles and times candidates on the machine that evaluates them, this one unless the run's \
         evaluations are deferred to another (ksearch evaluate).",
        host.source
    ));
    let mut isa = format!("ISA extensions: {}", host.isa_present().join(", "));
    let absent = host.isa_absent();
    if !absent.is_empty() {
        isa.push_str(&format!("; absent: {}", absent.join(", ")));
    }
    if let Some((bits, regs)) = host.vector() {
        let sve = host.is_arm() && host.has("sve");
        isa.push_str(&format!(
            ". Widest vectors: {bits}-bit{} ({} fp32 lanes, {regs} registers); -march=native enables all of these{}.",
            if sve { " SVE" } else { "" },
            bits / 32,
            if host.is_arm() {
                " (arm_neon.h / arm_sve.h intrinsics compile)"
            } else {
                " (immintrin.h intrinsics for them compile)"
            }
        ));
    } else {
        isa.push('.');
    }
    notes.push(isa);
    if let Some(probe) = &host.compiler {
        let width = match probe.vector_bits {
            Some(0) => "scalable SVE registers".to_string(),
            Some(bits) => format!("{bits}-bit registers"),
            None => "no vector registers at all".to_string(),
        };
        let mut text = format!(
            "The compiler ({}) under the c backend's flags vectorises a stride-1 fp32 loop y[i] = a[i]*b[i] + y[i] with \
             {width} and {} (a probe compiled when this brief was built)",
            probe.version,
            if probe.fma {
                "fuses a*b+c into one FMA instruction"
            } else {
                "does not fuse a*b+c (separate multiply and add)"
            }
        );
        match (probe.vector_bits, host.vector()) {
            (Some(auto), Some((widest, _))) if auto > 0 && auto < widest => text.push_str(&format!(
                "; {widest}-bit code needs intrinsics or {}-byte vector types, as auto-vectorised loops stay at {auto} bits.",
                widest / 8
            )),
            _ => text.push('.'),
        }
        notes.push(text);
    }
    notes
}

/// `base` (the knowledge base's entry for the CPU a task targets) with this machine's detected
/// figures in place of its own (the vector width, caches and cores; a figure that was not
/// detected keeps the entry's value) and this machine's notes before the entry's. `date` is
/// the day of detection (YYYY-MM-DD), for the figures' sources.
pub fn overlay(base: &HardwareSpec, host: &HostCpu, date: &str) -> HardwareSpec {
    let mut spec = base.clone();
    let source = format!("detected on this machine from {} on {date}", host.source);
    let f = &mut spec.figures;
    if let Some(cores) = host.cores {
        f.compute_units = figure(
            cores as f64,
            &format!("the cores available to ksearch on this machine on {date}"),
        );
    }
    if let Some((bits, _)) = host.vector() {
        if bits.is_power_of_two() {
            f.vector_bits = figure(bits as f64, &source);
            f.simd_width = figure((bits / 32) as f64, &source);
        }
    }
    let c = &host.caches;
    if let Some(kb) = c.l1d_kb {
        f.l1_kb = figure(kb, &source);
    }
    match (c.l2_kb, c.l2_shared_by) {
        // An L2 shared by a cluster (Apple silicon) is no per-core figure; the note says it.
        (Some(kb), None | Some(1)) => f.l2_per_core_kb = figure(kb, &source),
        (Some(_), Some(_)) => f.l2_per_core_kb = None,
        _ => {}
    }
    if let Some(kb) = c.l3_kb {
        f.l3_mb = figure(kb / 1024.0, &source);
    }
    if let Some(line) = c.line_bytes.filter(|l| l.is_power_of_two()) {
        f.cache_line_bytes = figure(line as f64, &source);
    }
    if host.detected() {
        let model = host.model.clone().unwrap_or_else(|| format!("{} CPU", host.arch));
        spec.display_name = format!("{}, this machine", model.trim());
        if let Some(v) = &host.vendor {
            spec.vendor = v.clone();
        }
        if !host.arch.is_empty() {
            spec.arch = host.arch.clone();
        }
    }
    let mut notes = host_notes(host);
    if let (Some(kb), Some(n)) = (c.l2_kb, c.l2_shared_by.filter(|n| *n > 1)) {
        notes.push(format!("L2: {kb} KB shared by {n} logical CPUs."));
    }
    notes.extend(base.notes.iter().cloned());
    notes.truncate(8);
    spec.notes = notes;
    spec
}

/// Where an entry replaced by this machine's CPU says it comes from.
pub const ORIGIN: &str = "(this machine's CPU, detected)";

/// `kb` with `device`'s entry described by `host` when `device` is a CPU, since a CPU task's
/// candidates run on this machine's CPU; `kb` itself for any other device, or when nothing
/// about this CPU could be detected (the entry stays as the data has it, with a note added).
pub fn kb_here<'a>(kb: &'a Kb, device: &str, host: &HostCpu) -> Result<Cow<'a, Kb>, KbError> {
    let spec = kb.hardware(device)?;
    if spec.kind != DeviceKind::Cpu {
        return Ok(Cow::Borrowed(kb));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let date = chrono::DateTime::from_timestamp(now, 0)
        .map(|t| t.format("%Y-%m-%d").to_string())
        .unwrap_or_else(|| "an unknown date".to_string());
    Ok(Cow::Owned(
        kb.clone().with_hardware(overlay(spec, host, &date), ORIGIN)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// /proc/cpuinfo of the 2-core AMD EPYC (Zen 4, under KVM) development machine, recorded.
    const EPYC: &str = include_str!("fixtures/cpuinfo-epyc-zen4.txt");
    /// /proc/cpuinfo as Linux writes it on an Arm Neoverse V1 (AWS Graviton3: SVE, no model
    /// name), written after that format.
    const NEOVERSE: &str = include_str!("fixtures/cpuinfo-neoverse-v1.txt");
    /// A Haswell-era Intel CPU: AVX2 and FMA, no AVX-512.
    const HASWELL: &str =
        "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU E5-2680 v3 @ 2.50GHz\n\
                           flags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 avx f16c fma avx2 bmi2\n\n";
    /// `sysctl hw machdep.cpu` on an Apple M2 Max: an excerpt written after macOS's format.
    const M2_MAX: &str = include_str!("fixtures/sysctl-apple-m2-max.txt");

    fn host_of(info: CpuInfo, caches: Caches) -> HostCpu {
        HostCpu {
            model: info.model,
            vendor: info.vendor,
            arch: if info.flags.contains("asimd") {
                "aarch64"
            } else {
                "x86-64"
            }
            .to_string(),
            flags: info.flags,
            caches,
            cores: Some(2),
            logical_cpus: Some(info.processors),
            source: "/proc/cpuinfo".into(),
            ..HostCpu::default()
        }
    }

    #[test]
    fn isa_of_the_recorded_epyc() {
        let info = parse_cpuinfo(EPYC);
        assert_eq!(info.model.as_deref(), Some("AMD EPYC"));
        assert_eq!(info.vendor.as_deref(), Some("amd"));
        assert_eq!(info.processors, 2);
        let host = host_of(info, Caches::default());
        assert_eq!(host.vector(), Some((512, 32)));
        assert_eq!(
            host.isa_present(),
            [
                "SSE4.2",
                "AVX",
                "AVX2",
                "FMA",
                "F16C",
                "AVX-512 F/DQ/CD/BW/VL/IFMA/VBMI/VNNI/BF16"
            ]
        );
        assert_eq!(host.isa_absent(), ["AVX-512FP16", "AMX"]);
    }

    #[test]
    fn isa_of_other_cpus() {
        let haswell = host_of(parse_cpuinfo(HASWELL), Caches::default());
        assert_eq!(haswell.vector(), Some((256, 16)));
        assert_eq!(haswell.isa_present(), ["SSE4.2", "AVX", "AVX2", "FMA", "F16C"]);
        assert_eq!(haswell.isa_absent(), ["AVX-512"]);
        assert_eq!(haswell.vendor.as_deref(), Some("intel"));

        let arm = parse_cpuinfo(NEOVERSE);
        assert_eq!(arm.model.as_deref(), Some("Arm CPU (implementer 0x41, part 0xd40)"));
        assert_eq!(arm.vendor.as_deref(), Some("arm"));
        let mut arm = host_of(arm, Caches::default());
        assert_eq!(
            arm.isa_present(),
            ["NEON", "NEON FP16", "DotProd", "I8MM", "BF16", "SVE"]
        );
        assert_eq!(arm.isa_absent(), Vec::<&str>::new());
        // SVE's length comes from the kernel; without it, NEON's 128 bits.
        assert_eq!(arm.vector(), Some((128, 32)));
        arm.sve_bits = Some(256);
        assert_eq!(arm.vector(), Some((256, 32)));

        let mac = from_sysctl(M2_MAX);
        assert_eq!(mac.model.as_deref(), Some("Apple M2 Max"));
        assert_eq!(mac.arch, "aarch64");
        assert_eq!(mac.isa_present(), ["NEON", "NEON FP16", "DotProd", "I8MM", "BF16"]);
        assert_eq!(mac.vector(), Some((128, 32)));
        assert_eq!(mac.caches.l1d_kb, Some(128.0));
        assert_eq!((mac.caches.l2_kb, mac.caches.l2_shared_by), (Some(16384.0), Some(4)));
        assert_eq!(mac.caches.line_bytes, Some(128));
    }

    #[test]
    fn caches_from_sysfs() {
        let dir = tempfile::tempdir().unwrap();
        for (i, level, kind, size, shared) in [
            (0, "1", "Data", "48K", "0-1"),
            (1, "1", "Instruction", "32K", "0-1"),
            (2, "2", "Unified", "2048K", "0-1"),
            (3, "3", "Unified", "107520K", "0-55,112-167"),
        ] {
            let d = dir.path().join(format!("index{i}"));
            std::fs::create_dir_all(&d).unwrap();
            for (name, text) in [
                ("level", level),
                ("type", kind),
                ("size", size),
                ("shared_cpu_list", shared),
                ("coherency_line_size", "64"),
            ] {
                std::fs::write(d.join(name), format!("{text}\n")).unwrap();
            }
        }
        let c = read_sysfs_caches(dir.path());
        assert_eq!(c.l1d_kb, Some(48.0));
        assert_eq!((c.l2_kb, c.l2_shared_by), (Some(2048.0), Some(2)));
        assert_eq!((c.l3_kb, c.l3_shared_by), (Some(107520.0), Some(112)));
        assert_eq!(c.line_bytes, Some(64));
        assert_eq!(read_sysfs_caches(&dir.path().join("missing")), Caches::default());
        assert_eq!(size_kb("1M"), Some(1024.0));
        assert_eq!(cpu_count("0,2,4"), Some(3));
        assert_eq!(cpu_count("3-1"), None);
    }

    #[test]
    fn the_probe_reads_width_and_fusion() {
        let c11 = "\tvmulps\t(%rsi,%rax), %zmm0, %zmm0\n\tvaddps\t(%rdi,%rax), %zmm0, %zmm0\n";
        let fused = "\tvfmadd132ps\t(%rsi,%rax), %ymm1, %ymm0\n";
        assert_eq!(
            read_probe(c11, "x86-64", "cc".into()),
            CompilerProbe {
                version: "cc".into(),
                vector_bits: Some(512),
                fma: false
            }
        );
        let p = read_probe(fused, "x86-64", "cc".into());
        assert_eq!((p.vector_bits, p.fma), (Some(256), true));
        let neon = read_probe("\tfmla\tv0.4s, v1.4s, v2.4s\n", "aarch64", "cc".into());
        assert_eq!((neon.vector_bits, neon.fma), (Some(128), true));
    }

    #[test]
    fn this_machine_is_detected() {
        // A live smoke test: on Linux the kernel lists the CPU's flags and cpu0's caches.
        let host = HostCpu::detect();
        assert!(host.cores.is_some_and(|n| n >= 1));
        if cfg!(target_os = "linux") {
            assert!(host.detected(), "no ISA flags in /proc/cpuinfo: {host:?}");
            let (bits, _) = host.vector().expect("a vector width");
            assert!(bits >= 128, "{host:?}");
            assert!(host.caches.l1d_kb.is_some_and(|kb| kb >= 8.0), "{host:?}");
            if cfg!(target_arch = "x86_64") {
                // Every x86-64 CPU has SSE2; what the machine says about AVX-512 is what we say.
                let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
                let avx512 = cpuinfo.split_whitespace().any(|w| w == "avx512f");
                assert_eq!(bits == 512, avx512, "{host:?}");
            }
        }
    }
}
