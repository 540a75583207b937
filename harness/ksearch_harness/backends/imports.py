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

What this cannot see: code that finds functions without importing them (walking the loader's
structures from the address of an allowed function, or raw `syscall` instructions, which the
static checks refuse by name). It raises the price of the attack from two macros to a
hand-written ELF walker, it does not make the process boundary that a worker would.

Set KSEARCH_IMPORT_CHECK=off to build without it (bench/adversarial_gpu.sh does, to test the
runtime defences behind it).
"""

import hashlib
import os
import re
import shutil
import subprocess

from ..errors import SetupError

# (name of the rule, pattern over one undefined symbol's name, why it is refused). The names of
# C++ functions are matched in their mangled form, the form the object holds.
RULES = (
    ("dynamic lookup",
     r"dl(open|mopen|sym|vsym|addr1?|info|error|_iterate_phdr)|_r_debug|_dl_\w+|__libc_dl\w+",
     "looks up code at run time, which reaches the harness's interpreter and the reference "
     "living in the same process"),
    ("python",
     r"_?Py[A-Z_]\w*",
     "calls into the Python interpreter that runs the harness"),
    ("thread",
     r"pthread_create|thrd_create|_ZNSt6thread\d+_M_start_thread\w*",
     "starts a host thread (std::thread, std::async, pthread_create), which could work after "
     "the call returned; all work must be done inside the call"),
    ("process",
     r"fork|vfork|clone3?|posix_spawnp?|execve|execvpe?|execle?|execlp|fexecve|system|popen"
     r"|daemon",
     "starts a process; a kernel computes, it does not run programs"),
    ("files and network",
     r"(__)?(f?open|freopen|openat|creat)(64)?(_2)?|opendir|socket|connect|bind|listen"
     r"|accept4?|sendto|recvfrom|unlink|remove|rename|mkdir"
     r"|_ZNSt\d+basic_(i|o)?fstream\w*|_ZNSt\d+basic_filebuf\w*|_ZNSt12__basic_file\w*"
     r"|_ZNSt10filesystem\w*|_ZNSt7__cxx1110filesystem\w*",
     "opens files or network connections; a kernel reads only its arguments"),
    ("clock",
     r"clock_gettime|gettimeofday|clock|time|timespec_get|nanosleep|usleep|sleep"
     r"|_ZNSt6chrono3_V212(steady|system)_clock3nowEv|_ZNSt11this_thread11__sleep_for\w*",
     "reads the clock or sleeps; a kernel has no reason to, and doing so can skew the timing"),
    ("signals and process state",
     r"signal|sigaction|setitimer|alarm|raise|kill|tgkill|tkill|pthread_kill|ptrace|prctl"
     r"|setrlimit|setsid|setpgid|syscall",
     "manipulates signals, limits or the process; not allowed in a kernel"),
    ("memory mapping",
     r"mprotect|mmap(64)?|munmap|mremap|madvise",
     "remaps memory, which can alter the harness or the reference; allocate with cudaMalloc"),
    ("environment",
     r"getenv|secure_getenv|environ|__environ|setenv|putenv|unsetenv",
     "reads or changes the environment; a kernel's behaviour must depend only on its arguments"),
    ("cuda streams",
     r"cudaStream(Create\w*|AddCallback|BeginCapture\w*)|cudaLaunchHostFunc|cudaGraph\w*"
     r"|cudaIpc\w*|\w+_pt(sz|ds)",
     "works outside the default stream (another stream, a graph, a host callback, the "
     "per-thread default stream, another process's memory); launch on the default stream, "
     "which the harness times and synchronises"),
)

_COMPILED = tuple((name, re.compile(pattern), reason) for name, pattern, reason in RULES)

# Part of the build cache's key: a library stored under other rules is checked again.
RULES_DIGEST = hashlib.sha256(repr(RULES).encode("utf-8")).hexdigest()[:16]


def enabled():
    return os.environ.get("KSEARCH_IMPORT_CHECK", "on").lower() not in ("off", "0", "no")


def find_nm():
    """The `nm` of binutils (nvcc's host toolchain needs binutils to link, so it is there)."""
    found = os.environ.get("KSEARCH_NM") or shutil.which("nm")
    if not found:
        raise SetupError("backend cuda checks what the compiled candidate imports with `nm`, "
                         "which is not on PATH: install binutils (Debian: apt install binutils) "
                         "or set KSEARCH_NM")
    return found


def undefined_symbols(nm, obj, timeout=30):
    """The names of `obj`'s undefined symbols (strong and weak), as the object holds them."""
    try:
        out = subprocess.run([nm, "--undefined-only", "--format=posix", obj],
                             capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise SetupError(f"{nm} took over {timeout} s to list {obj}'s symbols") from None
    except OSError as e:
        raise SetupError(f"cannot run {nm!r}: {e}") from None
    if out.returncode != 0:
        text = out.stderr.decode("utf-8", "replace").strip()
        raise SetupError(f"{nm} could not read the compiled object {obj}: {text}")
    names = []
    for line in out.stdout.decode("utf-8", "replace").splitlines():
        fields = line.split()
        if fields:
            names.append(fields[0])
    return names


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
            entry = by_rule.setdefault(name, (reason, []))
            text = f"{symbol} ({source})"
            if text not in entry[1]:
                entry[1].append(text)
    for name, (reason, symbols) in by_rule.items():
        lines.append(f"the compiled code imports {', '.join(symbols)}: it {reason}")
    return "; ".join(lines)
