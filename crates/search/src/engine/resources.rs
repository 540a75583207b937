//! The compiler's resource report (registers, spills, shared memory per kernel) in words: the
//! lines the planner and coder read, and the short form tables use. Nothing is printed for an
//! evaluation without one (CPU backends, failed builds, runs recorded before it existed).

use super::protocol::KernelResources;

/// Kernels listed in full before the rest are only counted.
const MAX_KERNELS: usize = 12;

/// One line per kernel under a heading, e.g.
/// `- softmax_rows: 30 registers, 1 KiB static shared memory, no spills`; empty when there are none.
pub fn resource_lines(resources: &[KernelResources]) -> String {
    if resources.is_empty() {
        return String::new();
    }
    let arch = common_arch(resources);
    let names = display_names(resources);
    // ptxas counts only a kernel's static shared arrays: a kernel that takes its shared memory
    // dynamically (extern __shared__, the size set at launch) reads "0 B", which misled a brain
    // into thinking its tiles were not in shared memory at all.
    let mut out = vec![match arch {
        Some(a) => format!("Compiler resources per kernel (ptxas, {a}; static shared memory only, not the dynamic size set at launch):"),
        None => "Compiler resources per kernel (ptxas; static shared memory only, not the dynamic size set at launch):".to_string(),
    }];
    for (k, name) in resources.iter().zip(&names).take(MAX_KERNELS) {
        let mut parts = vec![
            format!("{} registers", k.registers),
            format!("{} static shared memory", bytes(k.shared_bytes)),
        ];
        parts.extend(spills(k));
        if let Some(stack) = k.stack_frame_bytes.filter(|&s| s > 0) {
            parts.push(format!("{} stack frame", bytes(stack)));
        }
        let arch = if arch.is_none() && !k.arch.is_empty() {
            format!(" [{}]", k.arch)
        } else {
            String::new()
        };
        out.push(format!("- {name}{arch}: {}", parts.join(", ")));
    }
    if resources.len() > MAX_KERNELS {
        out.push(format!("- ... and {} more kernels", resources.len() - MAX_KERNELS));
    }
    out.join("\n")
}

/// The short form for a table cell: `30 regs, 1 KiB smem` for one kernel, each kernel named
/// and separated by `; ` for several; empty when there are none.
pub fn resource_brief(resources: &[KernelResources]) -> String {
    let names = display_names(resources);
    let one = resources.len() == 1;
    resources
        .iter()
        .zip(&names)
        .map(|(k, name)| {
            let mut text = format!("{} regs, {} smem", k.registers, bytes(k.shared_bytes));
            let (st, ld) = (k.spill_store_bytes.unwrap_or(0), k.spill_load_bytes.unwrap_or(0));
            if st > 0 || ld > 0 {
                text.push_str(&format!(", spills {} st / {} ld", bytes(st), bytes(ld)));
            }
            if one {
                text
            } else {
                format!("{name}: {text}")
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn spills(k: &KernelResources) -> Option<String> {
    match (k.spill_store_bytes, k.spill_load_bytes) {
        (None, None) => None,
        (st, ld) if st.unwrap_or(0) == 0 && ld.unwrap_or(0) == 0 => Some("no spills".to_string()),
        (st, ld) => Some(format!(
            "spills {} stored and {} loaded per thread",
            bytes(st.unwrap_or(0)),
            bytes(ld.unwrap_or(0))
        )),
    }
}

fn common_arch(resources: &[KernelResources]) -> Option<&str> {
    let first = resources.first()?.arch.as_str();
    (!first.is_empty() && resources.iter().all(|k| k.arch == first)).then_some(first)
}

/// Each kernel's short name, or its symbol where two short names would read the same.
fn display_names(resources: &[KernelResources]) -> Vec<String> {
    let short: Vec<String> = resources.iter().map(|k| kernel_name(&k.name)).collect();
    short
        .iter()
        .zip(resources)
        .enumerate()
        .map(|(i, (s, k))| {
            let clash = resources
                .iter()
                .enumerate()
                .any(|(j, o)| j != i && short[j] == *s && o.arch == k.arch && o.name != k.name);
            if clash {
                k.name.clone()
            } else {
                s.clone()
            }
        })
        .collect()
}

fn bytes(n: u64) -> String {
    if n < 1024 {
        format!("{n} B")
    } else if n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else {
        format!("{:.1} KiB", n as f64 / 1024.0)
    }
}

/// A kernel's name without the C++ mangling, as far as a cheap reading goes: namespaces and
/// the function's name, integer and bool template arguments as they are and any other as
/// `<...>`, parameters left out (`_ZN2ns6matmulILi128EEEvPKfPf` -> `ns::matmul<128>`,
/// `_Z6reduceILi256E6float4EvPKT0_Pfi` -> `reduce<...>`). Symbols this does not understand,
/// and `extern "C"` names, come back as they are.
pub fn kernel_name(symbol: &str) -> String {
    demangle(symbol).unwrap_or_else(|| symbol.to_string())
}

fn demangle(symbol: &str) -> Option<String> {
    let mut p = Reader {
        b: symbol.strip_prefix("_Z")?.as_bytes(),
        i: 0,
    };
    p.eat(b'L'); // internal linkage
    let mut parts: Vec<String> = Vec::new();
    if p.eat(b'N') {
        while matches!(p.peek(), Some(b'r' | b'V' | b'K')) {
            p.i += 1;
        }
        loop {
            match p.peek()? {
                b'E' => break,
                b'I' => {
                    p.i += 1;
                    let args = p.template_args()?;
                    parts.last_mut()?.push_str(&args);
                }
                b'0'..=b'9' => parts.push(p.source_name()?),
                b'S' if p.b.get(p.i + 1) == Some(&b't') => {
                    p.i += 2;
                    parts.push("std".into());
                }
                _ => return None,
            }
        }
    } else {
        if p.b.starts_with(b"St") {
            p.i += 2;
            parts.push("std".into());
        }
        parts.push(p.source_name()?);
        if p.eat(b'I') {
            let args = p.template_args()?;
            parts.last_mut()?.push_str(&args);
        }
    }
    let parts: Vec<String> = parts
        .into_iter()
        // nvcc's prefix for kernels of internal linkage (`static __global__`).
        .filter(|s| !s.starts_with("_INTERNAL_"))
        .map(|s| {
            if s.starts_with("_GLOBAL__N_") {
                "(anonymous namespace)".to_string()
            } else {
                s
            }
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("::"))
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        let hit = self.peek() == Some(c);
        self.i += usize::from(hit);
        hit
    }

    /// `<length><identifier>`.
    fn source_name(&mut self) -> Option<String> {
        let start = self.i;
        while self.peek()?.is_ascii_digit() {
            self.i += 1;
        }
        let len: usize = std::str::from_utf8(&self.b[start..self.i]).ok()?.parse().ok()?;
        let name = self.b.get(self.i..self.i.checked_add(len)?)?;
        self.i += len;
        String::from_utf8(name.to_vec()).ok()
    }

    /// The template arguments after an `I`, through its `E`: `<4, 1>` when every argument is an
    /// integer or bool literal (`Li4ELi1E`; the instantiations a knob makes differ by these, so
    /// they tell them apart), else `<...>`.
    fn template_args(&mut self) -> Option<String> {
        let start = self.i;
        let mut args = Vec::new();
        while self.peek()? == b'L' {
            let ty = *self.b.get(self.i + 1)?;
            if !matches!(ty, b'i' | b'j' | b'l' | b'm' | b's' | b't' | b'x' | b'y' | b'b') {
                break;
            }
            self.i += 2;
            let negative = self.eat(b'n');
            let digits = self.i;
            while self.peek()?.is_ascii_digit() {
                self.i += 1;
            }
            let value = std::str::from_utf8(&self.b[digits..self.i]).ok()?.to_string();
            if value.is_empty() || !self.eat(b'E') {
                break;
            }
            args.push(match (ty, value.as_str()) {
                (b'b', "0") => "false".to_string(),
                (b'b', "1") => "true".to_string(),
                _ if negative => format!("-{value}"),
                _ => value,
            });
        }
        if !args.is_empty() && self.eat(b'E') {
            return Some(format!("<{}>", args.join(", ")));
        }
        self.i = start;
        self.skip_to_end()?;
        Some("<...>".to_string())
    }

    /// Skips what an opener (`I`, `N`, `J`, `X`, `L`) began, through its closing `E`.
    fn skip_to_end(&mut self) -> Option<()> {
        loop {
            match self.peek()? {
                b'E' => {
                    self.i += 1;
                    return Some(());
                }
                b'0'..=b'9' => {
                    self.source_name()?;
                }
                b'I' | b'N' | b'J' | b'X' => {
                    self.i += 1;
                    self.skip_to_end()?;
                }
                // A literal: its type, then its value up to `E` (`Li128E`).
                b'L' => {
                    self.i += 1;
                    if self.peek()?.is_ascii_digit() {
                        self.source_name()?;
                    } else {
                        self.i += 1;
                    }
                    while self.peek()? != b'E' {
                        self.i += 1;
                    }
                    self.i += 1;
                }
                // Substitutions and template parameters: `St`, `Sa`, `S_`, `S0_`, `T_`, `T1_`.
                b'S' | b'T' => {
                    self.i += 1;
                    if self.peek()?.is_ascii_lowercase() {
                        self.i += 1;
                    } else {
                        while self.peek()? != b'_' {
                            self.i += 1;
                        }
                        self.i += 1;
                    }
                }
                // `DF16_` and the like end with `_`; other `D` codes are two letters.
                b'D' => {
                    self.i += 1;
                    if self.peek()? == b'F' {
                        while self.peek()? != b'_' {
                            self.i += 1;
                        }
                    }
                    self.i += 1;
                }
                _ => self.i += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(name: &str, registers: u32, spills: u64, shared: u64) -> KernelResources {
        KernelResources {
            name: name.into(),
            arch: "sm_90a".into(),
            registers,
            spill_store_bytes: Some(spills),
            spill_load_bytes: Some(spills),
            stack_frame_bytes: Some(spills),
            shared_bytes: shared,
            constant_bytes: None,
            barriers: Some(1),
        }
    }

    #[test]
    fn names_lose_their_mangling() {
        assert_eq!(kernel_name("_Z12softmax_rowsPKfPfl"), "softmax_rows");
        // Integer and bool template arguments are read: a knob's instantiations differ by them.
        assert_eq!(
            kernel_name("_Z17mamba_scan_kernelILi4ELi1EEvPK6__halfS2_PKfS2_S2_S4_S2_S4_PS0_iiii"),
            "mamba_scan_kernel<4, 1>"
        );
        assert_eq!(kernel_name("_Z3fooILin2ELb1EEvv"), "foo<-2, true>");
        assert_eq!(kernel_name("_ZN2ns6matmulILi128EEEvPKfPf"), "ns::matmul<128>");
        // Type arguments are not read.
        assert_eq!(kernel_name("_Z3fooIfLi2EEvPT_"), "foo<...>");
        assert_eq!(kernel_name("softmax_rows"), "softmax_rows");
        assert_eq!(kernel_name("_Z6reduceILi256E6float4EvPKT0_Pfi"), "reduce<...>");
        assert_eq!(kernel_name("_ZN12_GLOBAL__N_14scanEPf"), "(anonymous namespace)::scan");
        assert_eq!(
            kernel_name("_ZN39_INTERNAL_3b5e2a1f_9_kernel_cu_a1b2c3d46kernelEPf"),
            "kernel"
        );
        // Not understood: as is, never a panic.
        for odd in ["_Z", "_Z99abc", "_ZN3abc", "_Z3fooIL", "_ZNSt"] {
            assert_eq!(kernel_name(odd), odd);
        }
    }

    #[test]
    fn one_line_per_kernel_and_nothing_without_a_report() {
        assert_eq!(resource_lines(&[]), "");
        assert_eq!(resource_brief(&[]), "");
        let lines = resource_lines(&[
            kernel("_Z12softmax_rowsPKfPfl", 30, 0, 1024),
            kernel("_Z4tilePf", 255, 96, 49152 + 512),
        ]);
        assert_eq!(
            lines,
            "Compiler resources per kernel (ptxas, sm_90a; static shared memory only, not the dynamic size set at \
             launch):\n\
             - softmax_rows: 30 registers, 1 KiB static shared memory, no spills\n\
             - tile: 255 registers, 48.5 KiB static shared memory, spills 96 B stored and 96 B loaded per thread, \
             96 B stack frame"
        );
        assert_eq!(resource_brief(&[kernel("_Z1kPf", 40, 0, 0)]), "40 regs, 0 B smem");
    }

    #[test]
    fn template_instances_that_read_the_same_keep_their_symbols() {
        // Instances that differ by an integer argument read apart.
        let brief = resource_brief(&[kernel("_Z1kILi64EEvPf", 32, 0, 0), kernel("_Z1kILi128EEvPf", 64, 8, 0)]);
        assert_eq!(
            brief,
            "k<64>: 32 regs, 0 B smem; k<128>: 64 regs, 0 B smem, spills 8 B st / 8 B ld"
        );
        // Instances that differ by a type argument read the same, so they keep their symbols.
        let a = kernel("_Z1kIfEvPT_", 32, 0, 0);
        let b = kernel("_Z1kIdEvPT_", 64, 8, 0);
        let mut c = kernel("_Z1kIfEvPT_", 40, 0, 0);
        c.arch = "sm_80".into();
        let brief = resource_brief(&[a.clone(), b]);
        assert_eq!(
            brief,
            "_Z1kIfEvPT_: 32 regs, 0 B smem; _Z1kIdEvPT_: 64 regs, 0 B smem, spills 8 B st / 8 B ld"
        );
        // Same kernel for two architectures: one name, the arch on each line.
        let lines = resource_lines(&[a, c]);
        assert!(lines.contains("- k<...> [sm_90a]: 32 registers"), "{lines}");
        assert!(lines.contains("- k<...> [sm_80]: 40 registers"), "{lines}");
    }
}
