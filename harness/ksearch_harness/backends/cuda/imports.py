"""What a compiled CUDA candidate may call outside itself: its objects' undefined symbols.

Backend `cuda` loads the candidate into the harness's own process (docs/threat-model.md), where
native code could reach the embedded interpreter (and through it the reference), start a host
thread that works after the call returned, or hide kernels on a stream of its own. The static
checks refuse the plain spellings in the source, but a macro (`J(dl, sym)`) gets around any
regular expression. The compiled objects cannot hide what they import: every function the host
code calls in another library is an undefined symbol, whatever macros built its name. So the
build compiles each source to an object first, lists the objects' undefined symbols with `nm`,
and refuses the candidate (status `rejected`) when one of them falls under a rule below, before
the library is linked or loaded.

The objects are checked, not the linked library, because the CUDA runtime that nvcc links
statically itself calls dlopen, dlsym and pthread_create (to load the driver); in the objects
only the candidate's own calls appear.

Beside the imports, the objects' host code is disassembled (`objdump -d`) for the instructions
that reach the kernel or the clock without any import: `syscall`, `sysenter`, `int $0x80`,
`rdtsc`, `rdtscp`, however they were written (`.byte 0x0f, 0x05` passes every name-based rule).
The device code is not x86 and is not looked at (inline PTX cannot make system calls).

What this cannot see: code that finds functions without importing them (walking the loader's
structures from the address of an allowed function), and the CUDA driver's own entry points
reached through `cudaGetDriverEntryPoint`, which is allowed because Hopper kernels use it to
encode TMA descriptors (CUTLASS does); streams made that way are left to the runtime defence
(the host clock around a device-wide synchronise). It raises the price of the attack from two
macros to a hand-written ELF walker; it does not make the process boundary that a worker would.

Set KSEARCH_IMPORT_CHECK=off to build without it (bench/adversarial_gpu.sh does, to test the
runtime defences behind it); the compile event then says `"import_check": "off"`.
"""

import hashlib
import os
import re
import shutil
import subprocess

from ...errors import SetupError

# (name of the rule, pattern over one undefined symbol's name, why it is refused). The names of
# C++ functions are matched in their mangled form, the form the object holds.
RULES = (
    ("dynamic lookup",
     r"dl(open|mopen|sym|vsym|addr1?|info|error|_iterate_phdr)|_r_debug|_dl_\w+|__libc_dl\w+"
     r"|getauxval",
     "looks up code at run time, which reaches the harness's interpreter and the reference "
     "living in the same process (libcu++'s cuda::devices, cuda::launch and cuda::stream load "
     "the driver this way: use the CUDA runtime API, and cudaGetDriverEntryPoint for TMA)"),
    ("python",
     r"_?Py[A-Z_]\w*",
     "calls into the Python interpreter that runs the harness"),
    ("thread",
     r"pthread_create|thrd_create|_ZNSt6thread\d+_M_start_thread\w*|timer_create",
     "starts a host thread (std::thread, std::async, pthread_create), which could work after "
     "the call returned; all work must be done inside the call"),
    ("process",
     r"_?_?fork|_Fork|vfork|clone3?|posix_spawnp?|execve(at)?|execvp?e?|execle?|execlp"
     r"|fexecve|system|popen|daemon",
     "starts a process; a kernel computes, it does not run programs"),
    ("files and network",
     r"(__)?(f?open|freopen|openat|creat)(64)?(_2)?|opendir|socket|connect|bind|listen"
     r"|accept4?|sendto|recvfrom|unlink(at)?|remove|rename(at2?)?|mkdir(at)?|rmdir"
     r"|f?truncate(64)?|symlink(at)?|link(at)?|f?chmod(at)?|f?chown(at)?"
     r"|mks?temps?(64)?|mkdtemp|tmpfile(64)?|memfd_create|shm_open|shm_unlink"
     r"|_ZNSt\d+basic_(i|o)?fstream\w*|_ZNSt\d+basic_filebuf\w*|_ZNSt12__basic_file\w*"
     r"|_ZNSt10filesystem\w*|_ZNSt7__cxx1110filesystem\w*",
     "opens files or network connections; a kernel reads only its arguments"),
    ("clock",
     r"clock_gettime|gettimeofday|clock|time|timespec_get|nanosleep|clock_nanosleep|usleep"
     r"|sleep|getrusage|times"
     r"|_ZNSt6chrono3_V212(steady|system)_clock3nowEv|_ZNSt11this_thread11__sleep_for\w*",
     "reads the clock or sleeps; a kernel has no reason to, and doing so can skew the timing"),
    ("signals and process state",
     r"signal|sigaction|sigset|__sysv_signal|bsd_signal|signalfd|sigqueue|pthread_sigqueue"
     r"|setitimer|alarm|raise|kill|tgkill|tkill|pthread_kill|ptrace|prctl"
     r"|setrlimit|setsid|setpgid|syscall|process_vm_(read|write)v",
     "manipulates signals, limits or the process; not allowed in a kernel"),
    ("memory mapping",
     r"(pkey_)?mprotect|mmap(64)?|munmap|mremap|madvise",
     "remaps memory, which can alter the harness or the reference; allocate with cudaMalloc"),
    ("environment",
     r"getenv|secure_getenv|environ|__environ|setenv|putenv|unsetenv",
     "reads or changes the environment; a kernel's behaviour must depend only on its arguments"),
    ("cuda streams",
     r"cudaStream(Create\w*|AddCallback|BeginCapture\w*)|cudaLaunchHostFunc|cudaGraph\w*"
     r"|cudaIpc\w*|\w+_pt(sz|ds)"
     r"|cu(Stream|Graph|Ipc|Ctx|Event)\w*|cuLaunchHostFunc\w*|cu(Module|Library)Load\w*"
     r"|cuGetProcAddress\w*",
     "works outside the default stream (another stream, a graph, a host callback, the "
     "per-thread default stream, another process's memory, the driver's contexts or code "
     "loading); launch on the default stream, which the harness times and synchronises"),
)

# Host instructions that need no import: (AT&T mnemonic as objdump prints it, why refused).
INSTRUCTIONS = (
    (r"syscall|sysenter|int\s+\$0x80", "makes a system call directly, bypassing every import"),
    (r"rdtscp?", "reads the time-stamp counter; a kernel reads no clock"),
)
# Anywhere in the instruction, so that prefixes (`data16 syscall`, `rex.W syscall`, `cs rdtsc`)
# do not hide it.
_INSTRUCTION = re.compile(r"^\s*[0-9a-f]+:\s+(?:.*\s)?(?P<insn>"
                          + "|".join(p for p, _ in INSTRUCTIONS) + r")\b")

_COMPILED = tuple((name, re.compile(pattern), reason) for name, pattern, reason in RULES)

# Part of the build cache's key: a library stored under other rules is checked again.
RULES_DIGEST = hashlib.sha256(repr((RULES, INSTRUCTIONS)).encode("utf-8")).hexdigest()[:16]


def enabled():
    return os.environ.get("KSEARCH_IMPORT_CHECK", "on").lower() not in ("off", "0", "no")


def _find(tool, variable):
    """binutils' `tool` (nvcc's host toolchain needs binutils to link, so it is there)."""
    found = os.environ.get(variable) or shutil.which(tool)
    if not found:
        raise SetupError(f"backend cuda checks the compiled candidate with `{tool}`, which is "
                         f"not on PATH: install binutils (Debian: apt install binutils) or set "
                         f"{variable}")
    return found


def find_tools():
    """(nm, objdump)."""
    return _find("nm", "KSEARCH_NM"), _find("objdump", "KSEARCH_OBJDUMP")


def _run(tool, args, obj, what, timeout=30):
    try:
        out = subprocess.run([tool, *args, obj], capture_output=True, timeout=timeout,
                             stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise SetupError(f"{tool} took over {timeout} s to {what} {obj}") from None
    except OSError as e:
        raise SetupError(f"cannot run {tool!r}: {e}") from None
    if out.returncode != 0:
        text = out.stderr.decode("utf-8", "replace").strip()
        raise SetupError(f"{tool} could not {what} the compiled object {obj}: {text}")
    return out.stdout.decode("utf-8", "replace")


def undefined_symbols(nm, obj):
    """The names of `obj`'s undefined symbols (strong and weak), as the object holds them."""
    text = _run(nm, ["--undefined-only", "--format=posix"], obj, "list the symbols of")
    return [line.split()[0] for line in text.splitlines() if line.split()]


def refused_instructions(objdump, obj):
    """[(instruction, function it is in, reason)] for the refused instructions of the host code."""
    found, function = [], "?"
    text = _run(objdump, ["-d", "--no-show-raw-insn"], obj, "disassemble")
    for line in text.splitlines():
        head = re.match(r"^[0-9a-f]+ <(?P<name>[^>]+)>:$", line)
        if head:
            function = head.group("name")
            continue
        m = _INSTRUCTION.match(line)
        if m:
            insn = re.sub(r"\s+", " ", m.group("insn"))
            why = next(r for p, r in INSTRUCTIONS if re.fullmatch(p, m.group("insn")))
            found.append((insn, function, why))
    return found


def check_object(tools, obj):
    """[(what, rule name, reason)]: refused imports, then refused instructions (as `insn in f`)."""
    nm, objdump = tools
    found = violations(undefined_symbols(nm, obj))
    found += [(f"the instruction {insn} in {function}", "instruction", why)
              for insn, function, why in refused_instructions(objdump, obj)]
    return found


def _plain(name):
    """The name without a symbol version (`dlsym@GLIBC_2.34`) or the `@plt` of some objects."""
    return name.split("@", 1)[0]


def violations(symbols):
    """[(symbol, rule name, reason)] for every imported symbol a rule refuses, in input order."""
    found = []
    for symbol in symbols:
        plain = _plain(symbol)
        for name, pattern, reason in _COMPILED:
            if pattern.fullmatch(plain):
                found.append((plain, name, reason))
                break
    return found


def describe(found_by_source):
    """The refusal's text: every refused import, grouped by rule, naming the source it came from.

    `found_by_source` is [(source path, [(symbol, rule name, reason)])].
    """
    lines = []
    by_rule = {}
    for source, found in found_by_source:
        for symbol, name, reason in found:
            entry = by_rule.setdefault((name, reason), [])
            text = f"{symbol} ({source})"
            if text not in entry:
                entry.append(text)
    for (name, reason), symbols in by_rule.items():
        verb = "has" if name == "instruction" else "imports"
        lines.append(f"the compiled code {verb} {', '.join(symbols)}: it {reason}")
    return "; ".join(lines)
