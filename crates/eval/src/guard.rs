//! A seccomp filter on the harness and everything it starts, applied between fork and exec.
//!
//! The candidate of a GPU backend runs inside the harness, and the C backend's worker has its
//! own, stricter filter only where the harness applies it (harness/ksearch_harness/sandbox.py).
//! This one stands behind both: a process of the evaluation cannot change another process's
//! resource limits (a prlimit of another process's CPU time to 0 kills it: ksearch, its shell),
//! priority, scheduling policy, I/O priority or memory placement, and cannot signal, ptrace,
//! read or write the memory of, or open a pidfd to ksearch itself, nor signal every process it
//! may (`kill(-1)`) or ksearch's process group. Such calls fail with EPERM, so the evaluation
//! goes on and the candidate is judged on what it computed. Everything else is allowed: this is
//! not the candidate's sandbox, only ksearch's guard.
//!
//! Installed without no_new_privs where the process may (root), so that set-user-ID helpers the
//! GPU stack runs (nvidia-modprobe) keep working; an ordinary user needs no_new_privs to install a
//! filter. A kernel that refuses the filter leaves the harness without it (best effort).

/// The filter's program, built before the fork; [`Filter::install`] only hands it to the
/// kernel.
pub(crate) struct Filter {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    program: Vec<libc::sock_filter>,
    /// Instructions that compare with the installing process's own pid (`false`) or its
    /// negation, its process group (`true`): filled in by [`Filter::patch_self`] after the
    /// fork, when that pid exists ([`Filter::protecting_self`]).
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    self_slots: Vec<(usize, bool)>,
}

/// Stands for the pid to come until [`Filter::patch_self`]; above any pid Linux hands out
/// (pid_max is at most 2^22), so it matches nothing meanwhile.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
const SELF_PLACEHOLDER: u32 = 0x7fff_fff0;

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod bpf {
    pub const LD_W_ABS: u16 = 0x20;
    pub const JEQ_K: u16 = 0x15;
    pub const RET_K: u16 = 0x06;
    pub const ALLOW: u32 = 0x7fff_0000;
    pub const ERRNO: u32 = 0x0005_0000;
    pub const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    pub const NR: u32 = 0;
    pub const ARCH: u32 = 4;
    pub fn arg(i: u32) -> u32 {
        16 + 8 * i // the low 32 bits, as the kernel reads a pid_t or an int
    }
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
impl Filter {
    pub(crate) fn new() -> Filter {
        // SAFETY: plain syscalls without preconditions.
        let (me, group) = unsafe { (libc::getpid(), libc::getpgrp()) };
        // Every thread of ksearch as of now: a signal to any of them reaches the whole
        // process (a thread started later is not covered: see docs/threat-model.md).
        let mut targets: Vec<u32> = std::fs::read_dir("/proc/self/task")
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
                    .collect()
            })
            .unwrap_or_default();
        targets.retain(|t| *t != me as u32);
        targets.insert(0, me as u32);
        targets.truncate(200);
        targets.push(u32::MAX); // -1: every process it may signal
        targets.push((group as u32).wrapping_neg()); // ksearch's process group
        Filter {
            program: program(&targets),
            self_slots: Vec::new(),
        }
    }

    /// A filter that also protects the process that installs it (the warm server) and its
    /// process group (its pid: it leads its own group), from everything it will fork.
    pub(crate) fn protecting_self() -> Filter {
        let mut filter = Filter::new();
        let mut targets = protected_targets(&filter.program);
        targets.push(SELF_PLACEHOLDER);
        targets.push(SELF_PLACEHOLDER.wrapping_neg());
        filter.program = program(&targets);
        filter.self_slots = filter
            .program
            .iter()
            .enumerate()
            .filter(|(_, i)| i.code == bpf::JEQ_K)
            .filter_map(|(n, i)| match i.k {
                SELF_PLACEHOLDER => Some((n, false)),
                k if k == SELF_PLACEHOLDER.wrapping_neg() => Some((n, true)),
                _ => None,
            })
            .collect();
        filter
    }

    /// Writes `pid` into the slots of [`Filter::protecting_self`]: runs between fork and
    /// exec, so it only stores into the program built before the fork.
    pub(crate) fn patch_self(&mut self, pid: libc::pid_t) {
        for &(n, group) in &self.self_slots {
            let k = if group { (pid as u32).wrapping_neg() } else { pid as u32 };
            if let Some(ins) = self.program.get_mut(n) {
                ins.k = k;
            }
        }
    }

    /// Installs the filter on the calling process (between fork and exec: no allocation,
    /// only getuid and prctl).
    pub(crate) fn install(&mut self) {
        // SAFETY: plain syscalls; the program outlives the prctl call, which copies it.
        unsafe {
            let prog = libc::sock_fprog {
                len: self.program.len() as libc::c_ushort,
                filter: self.program.as_mut_ptr(),
            };
            let install = || {
                libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                    &prog as *const libc::sock_fprog as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                )
            };
            if install() != 0 && libc::getuid() != 0 {
                // An ordinary user may install a filter only under no_new_privs.
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                install();
            }
        }
    }
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
impl Filter {
    pub(crate) fn new() -> Filter {
        Filter {}
    }
    pub(crate) fn protecting_self() -> Filter {
        Filter {}
    }
    pub(crate) fn patch_self(&mut self, _pid: libc::pid_t) {}
    pub(crate) fn install(&mut self) {}
}

/// The targets a program built by [`program`] compares with: those of its first chain (the
/// kill chain), between its load of the argument and its `allow`.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn protected_targets(p: &[libc::sock_filter]) -> Vec<u32> {
    p.iter()
        .skip(6) // arch load, arch test, allow, nr load, kill test, argument load
        .take_while(|i| i.code == bpf::JEQ_K)
        .map(|i| i.k)
        .collect()
}

/// x86_64 system call numbers (arch/x86/entry/syscalls/syscall_64.tbl).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod nr {
    pub const KILL: u32 = 62;
    pub const PTRACE: u32 = 101;
    pub const RT_SIGQUEUEINFO: u32 = 129;
    pub const SETPRIORITY: u32 = 141;
    pub const SCHED_SETPARAM: u32 = 142;
    pub const SCHED_SETSCHEDULER: u32 = 144;
    pub const TKILL: u32 = 200;
    pub const TGKILL: u32 = 234;
    pub const IOPRIO_SET: u32 = 251;
    pub const MIGRATE_PAGES: u32 = 256;
    pub const MOVE_PAGES: u32 = 279;
    pub const RT_TGSIGQUEUEINFO: u32 = 297;
    pub const PRLIMIT64: u32 = 302;
    pub const PROCESS_VM_READV: u32 = 310;
    pub const PROCESS_VM_WRITEV: u32 = 311;
    pub const SCHED_SETATTR: u32 = 314;
    pub const PIDFD_OPEN: u32 = 434;
}

/// The program for a harness whose signals, ptrace and pidfds must not reach `protected`
/// (ksearch's pid and threads, -1, minus ksearch's process group), as `kill` reads them.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn program(protected: &[u32]) -> Vec<libc::sock_filter> {
    use bpf::*;
    let ins = |code: u16, k: u32, jt: u8, jf: u8| libc::sock_filter { code, jt, jf, k };
    let eperm = ins(RET_K, ERRNO | libc::EPERM as u32, 0, 0);
    let allow = ins(RET_K, ALLOW, 0, 0);
    let mut p = vec![
        ins(LD_W_ABS, ARCH, 0, 0),
        ins(JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        allow, // another ABI: not this filter's business
        ins(LD_W_ABS, NR, 0, 0),
    ];
    // Calls whose argument `arg` names a target that must not be ksearch (nor everything,
    // nor ksearch's group): EPERM for those, allowed otherwise.
    let aimed_at_ksearch = [
        (nr::KILL, 0),
        (nr::TKILL, 0),
        (nr::TGKILL, 0),
        (nr::RT_SIGQUEUEINFO, 0),
        (nr::RT_TGSIGQUEUEINFO, 0),
        (nr::PIDFD_OPEN, 0),
        (nr::PTRACE, 1),
        (nr::PROCESS_VM_READV, 0),
        (nr::PROCESS_VM_WRITEV, 0),
    ];
    let n = protected.len();
    for (number, arg) in aimed_at_ksearch {
        // number?, load, one test per target (jumping to the EPERM after the last), allow.
        p.push(ins(JEQ_K, number, 0, (n + 3) as u8));
        p.push(ins(LD_W_ABS, bpf::arg(arg), 0, 0));
        for (i, target) in protected.iter().enumerate() {
            p.push(ins(JEQ_K, *target, (n - i) as u8, 0));
        }
        p.extend([allow, eperm]);
    }
    // Calls on a process named by argument `arg`: only on the caller itself, named 0 (as the
    // C library does). A pid is refused even when it is the caller's own: the filter is
    // inherited by the harness's children, which must not reach the harness by its pid.
    let own_only = [
        (nr::PRLIMIT64, 0),
        (nr::SCHED_SETPARAM, 0),
        (nr::SCHED_SETSCHEDULER, 0),
        (nr::SCHED_SETATTR, 0),
        (nr::MIGRATE_PAGES, 0),
        (nr::MOVE_PAGES, 0),
        (nr::IOPRIO_SET, 1),
    ];
    for (number, arg) in own_only {
        p.extend([
            ins(JEQ_K, number, 0, 4),
            ins(LD_W_ABS, bpf::arg(arg), 0, 0),
            ins(JEQ_K, 0, 0, 1),
            allow,
            eperm,
        ]);
    }
    // setpriority(which, who): PRIO_PROCESS of the caller (0) only; a process group or a
    // user (every process of it, ksearch's too) is refused.
    p.extend([
        ins(JEQ_K, nr::SETPRIORITY, 0, 6),
        ins(LD_W_ABS, bpf::arg(0), 0, 0),
        ins(JEQ_K, 0, 0, 3),
        ins(LD_W_ABS, bpf::arg(1), 0, 0),
        ins(JEQ_K, 0, 0, 1),
        allow,
        eperm,
    ]);
    p.push(allow);
    p
}

#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn every_jump_lands_inside_the_program_and_it_ends_in_a_return() {
        let p = program(&[1234, 1235, u32::MAX, 1234u32.wrapping_neg()]);
        assert!(p.len() < 4096);
        for (i, ins) in p.iter().enumerate() {
            if ins.code == bpf::JEQ_K {
                assert!(i + 1 + (ins.jt.max(ins.jf) as usize) < p.len(), "jump at {i}");
            }
        }
        assert_eq!(p.last().map(|i| i.code), Some(bpf::RET_K));
    }

    #[test]
    fn the_self_slots_cover_every_chain_and_take_the_pid() {
        let mut filter = Filter::protecting_self();
        // Its targets are a plain filter's (this process's threads as of now, which other tests
        // start and end meanwhile, -1 and the group) plus the pid and the group to be patched.
        let targets = protected_targets(&filter.program);
        let slots = targets
            .iter()
            .filter(|&&k| k == SELF_PLACEHOLDER || k == SELF_PLACEHOLDER.wrapping_neg())
            .count();
        assert_eq!(slots, 2, "{targets:?}");
        // SAFETY: plain syscall without preconditions.
        let me = unsafe { libc::getpid() } as u32;
        assert!(targets.contains(&me) && targets.contains(&u32::MAX), "{targets:?}");
        // Nine chains aimed at ksearch, each with the pid and the group.
        assert_eq!(filter.self_slots.len(), 18);
        filter.patch_self(4321);
        let targets = protected_targets(&filter.program);
        assert!(targets.contains(&4321) && targets.contains(&4321u32.wrapping_neg()));
        assert!(!filter.program.iter().any(|i| i.k == SELF_PLACEHOLDER));
    }
}
