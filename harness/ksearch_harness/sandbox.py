"""The sandbox of the process that runs a candidate's code (worker.py), Linux only.

Two layers, each applied when the kernel offers it and reported in `done.environment.sandbox`:

- Landlock (Linux 5.13+): the files the process may open. Read the files already mapped into
  the process (the interpreter and its libraries, and the libraries the candidate needs, loaded
  first), the candidate's build folder, the loader's cache, its own /proc/self and the CPU
  description in /proc and /sys; write nowhere. No other file of the machine (another run's
  store, the task's files, the interpreter's site-packages) can be opened. Landlock also keeps the process from ptracing, or
  (ABI 6+) signalling, any process outside its domain, so /proc/PID/mem and /proc/PID/fd of the
  harness and of ksearch are out of reach; ABI 4+ refuses TCP bind and connect.
- seccomp (x86_64): a filter that kills the process (SIGSYS) on the system calls a kernel has no
  use for and an attacker does: new processes (fork, vfork, clone without CLONE_THREAD, exec),
  sockets, ptrace and cross-process memory access, signals to other processes, leaving the
  process group, namespaces and mounts, io_uring (which bypasses this filter), BPF, and any change
  to the file system (opening a file for writing, creating, removing, renaming). clone3 and
  openat2 fail with ENOSYS instead, so the C library falls back to clone and openat, whose flags
  the filter can read.

Threads stay allowed (OpenMP). Nothing here runs in the harness's own process.
"""

import ctypes
import errno
import fcntl
import os
import platform
import resource
import signal
import struct

# ---- Landlock ---------------------------------------------------------------------------------

_SYS_LANDLOCK_CREATE_RULESET = 444  # the same on every architecture (new system calls)
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_FS_EXECUTE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 2, 1 << 3
# Every file-system right of each ABI version (all handled: what no rule grants is refused).
_FS_ALL = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1,
           5: (1 << 16) - 1}
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_READ = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
# Rights that make sense on a regular file (a rule beneath a file may only grant these).
_FILE_RIGHTS = _FS_EXECUTE | _FS_READ_FILE

# Beyond the files already mapped (allowed one by one) and the build folder: the loader's cache
# and what a runtime reads about the machine (OpenMP: the CPUs online). Not /usr or any other
# folder as a whole: the interpreter's site-packages (NumPy) must stay out of reach, or a
# candidate could run the framework's op through the embedded interpreter.
SYSTEM_READ = ("/etc/ld.so.cache", "/etc/localtime", "/proc/self", "/proc/cpuinfo",
               "/proc/meminfo", "/proc/stat", "/sys/devices/system/cpu",
               "/sys/devices/system/node")


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi():
    """The kernel's Landlock ABI version, or 0 when it has none (or it is disabled)."""
    if platform.system() != "Linux":
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    v = libc.syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                     ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    return max(int(v), 0)


def mapped_files():
    """The files mapped into this process (the interpreter, its libraries), one by one."""
    files = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                path = parts[5].strip() if len(parts) == 6 else ""
                # Real files only: memfd and SysV segments show as "/name (deleted)" or "/SYSV".
                if path.startswith("/") and not path.endswith("(deleted)") and \
                        os.path.dirname(path) not in ("", "/") and not path.startswith("/dev/"):
                    files.add(path)
    except OSError:
        pass
    return files


def needed_libraries(path):
    """The DT_NEEDED names of a 64-bit little-endian ELF shared object ([] when unreadable)."""
    try:
        with open(path, "rb") as f:
            data = f.read(64 << 20)
    except OSError:
        return []
    try:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            return []
        phoff, = struct.unpack_from("<Q", data, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
        loads, dynamic = [], None
        for i in range(phnum):
            p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(
                "<IIQQQQ", data, phoff + i * phentsize)
            if p_type == 1:
                loads.append((p_vaddr, p_offset, p_filesz))
            elif p_type == 2:
                dynamic = (p_offset, p_filesz)
        if dynamic is None:
            return []
        needed, strtab = [], None
        for at in range(dynamic[0], dynamic[0] + dynamic[1], 16):
            tag, value = struct.unpack_from("<qQ", data, at)
            if tag == 0:
                break
            if tag == 1:
                needed.append(value)
            elif tag == 5:
                strtab = next((value - v + o for v, o, n in loads if v <= value < v + n), None)
        if strtab is None:
            return []
        names = []
        for offset in needed:
            end = data.index(b"\0", strtab + offset)
            names.append(data[strtab + offset:end].decode("utf-8", "replace"))
        return names
    except (struct.error, ValueError, IndexError):
        return []


def apply_landlock(read_paths):
    """Restrict this process to reading beneath `read_paths` and writing nowhere.

    Returns the ABI version applied, or raises OSError when the kernel refuses a step.
    """
    abi = landlock_abi()
    if abi < 1:
        raise OSError(errno.ENOSYS, "Landlock is not available in this kernel")
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    handled_fs = _FS_ALL.get(abi, _FS_ALL[5])
    fields = [handled_fs]
    if abi >= 4:
        fields.append(_NET_BIND_TCP | _NET_CONNECT_TCP)
    if abi >= 6:
        fields.append(_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL)
    attr = struct.pack(f"<{len(fields)}Q", *fields)
    buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = libc.syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), buf,
                           ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"landlock_create_ruleset: {os.strerror(e)}")
    try:
        for path in sorted(set(read_paths)):
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # absent on this system
            try:
                rights = _READ if os.path.isdir(path) else _FILE_RIGHTS
                rule = ctypes.create_string_buffer(struct.pack("<Qi", rights, fd), 12)
                if libc.syscall(ctypes.c_long(_SYS_LANDLOCK_ADD_RULE), ctypes.c_int(ruleset),
                                ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH), rule,
                                ctypes.c_uint32(0)) < 0:
                    e = ctypes.get_errno()
                    raise OSError(e, f"landlock_add_rule({path}): {os.strerror(e)}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(e)}")
        if libc.syscall(ctypes.c_long(_SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset),
                        ctypes.c_uint32(0)) < 0:
            e = ctypes.get_errno()
            raise OSError(e, f"landlock_restrict_self: {os.strerror(e)}")
    finally:
        os.close(ruleset)
    return abi


# ---- privileges --------------------------------------------------------------------------------

# The user and group a worker started as root becomes: nobody, which owns no file of the run and
# no process of ksearch's (a signal, a limit, a priority or a ptrace of root's processes needs a
# capability it no longer has).
UNPRIVILEGED = 65534
_PR_SET_KEEPCAPS = 8
_PR_CAPBSET_READ, _PR_CAPBSET_DROP = 23, 24
_PR_SET_SECUREBITS = 28
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE = 1, 4
# Locked so that nothing run later regains root's capabilities: uid 0 confers none
# (NOROOT), setuid keeps none (KEEP_CAPS off), no ambient capability can be raised.
_SECURE_BITS = ((1 << 0) | (1 << 1) | (1 << 5) | (1 << 6) | (1 << 7))
_CAPABILITY_VERSION_3 = 0x20080522
_CAP_SETPCAP = 8


def _last_capability():
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 40  # CAP_CHECKPOINT_RESTORE, the last one of Linux 5.9 to 6.x


def capabilities():
    """(effective, permitted, inheritable) of this process, as 64-bit masks (capget)."""
    libc = _libc()
    header = struct.pack("<Ii", _CAPABILITY_VERSION_3, 0)
    hbuf = ctypes.create_string_buffer(header, len(header))
    data = ctypes.create_string_buffer(24)
    if libc.capget(hbuf, data) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"capget: {os.strerror(e)}")
    e0, p0, i0, e1, p1, i1 = struct.unpack("<6I", data.raw)
    return e0 | e1 << 32, p0 | p1 << 32, i0 | i1 << 32


def _prctl(libc, what, *args, name):
    full = list(args) + [0] * (4 - len(args))
    if libc.prctl(what, *[ctypes.c_ulong(a) for a in full]) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"prctl({name}): {os.strerror(e)}")


def drop_privileges(parent):
    """Leave this process no capability and, started as root, no root: every capability out of
    the bounding, ambient, effective, permitted and inheritable sets, no_new_privs, the user
    and group nobody, no supplementary groups. No real-time scheduling or raised priority
    either (RLIMIT_RTPRIO, RLIMIT_NICE: 0), so the candidate cannot starve the harness from its
    own process. A credential change clears the parent-death signal: it is set again, and the
    process ends at once if `parent` (the harness) is already gone.

    Returns what it did, for `done.environment.sandbox.privileges`; raises OSError when a step
    the kernel should allow fails (the caller records it as a missing layer).
    """
    libc = _libc()
    notes = []
    for limit in (resource.RLIMIT_RTPRIO, resource.RLIMIT_NICE):
        resource.setrlimit(limit, (0, 0))
    root = os.geteuid() == 0
    last = _last_capability()
    _, permitted, _ = capabilities()
    _prctl(libc, _PR_SET_KEEPCAPS, 0, name="PR_SET_KEEPCAPS")
    if permitted >> _CAP_SETPCAP & 1:
        for cap in range(last + 1):
            if libc.prctl(_PR_CAPBSET_READ, ctypes.c_ulong(cap), 0, 0, 0) == 1:
                _prctl(libc, _PR_CAPBSET_DROP, cap, name=f"PR_CAPBSET_DROP {cap}")
        _prctl(libc, _PR_SET_SECUREBITS, _SECURE_BITS, name="PR_SET_SECUREBITS")
    else:
        notes.append("bounding set kept (no CAP_SETPCAP to drop it; no_new_privs stands in)")
    user = os.geteuid()
    if root:
        try:
            os.setgroups([])
            os.setresgid(UNPRIVILEGED, UNPRIVILEGED, UNPRIVILEGED)
            os.setresuid(UNPRIVILEGED, UNPRIVILEGED, UNPRIVILEGED)
            user = UNPRIVILEGED
        except OSError as e:
            # A user namespace without nobody mapped (rootless containers): uid 0 stays, with
            # no capability.
            notes.append(f"still uid 0 (setresuid({UNPRIVILEGED}): {e.strerror or e})")
    # Whatever is left (a process that was not root, or stayed uid 0): nothing in any set.
    header = struct.pack("<Ii", _CAPABILITY_VERSION_3, 0)
    hbuf = ctypes.create_string_buffer(header, len(header))
    zero = ctypes.create_string_buffer(24)
    if libc.capset(hbuf, zero) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"capset: {os.strerror(e)}")
    _prctl(libc, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, name="PR_CAP_AMBIENT_CLEAR_ALL")
    _prctl(libc, _PR_SET_NO_NEW_PRIVS, 1, name="PR_SET_NO_NEW_PRIVS")
    # Not dumpable: other processes of the same user cannot open its /proc files or ptrace it.
    _prctl(libc, _PR_SET_DUMPABLE, 0, name="PR_SET_DUMPABLE")
    _prctl(libc, _PR_SET_PDEATHSIG, signal.SIGKILL, name="PR_SET_PDEATHSIG")
    if os.getppid() != parent:
        os._exit(0)  # the harness died meanwhile
    effective, permitted, inheritable = capabilities()
    if effective or permitted or inheritable:
        raise OSError(errno.EPERM, f"capabilities left after dropping them: effective "
                                   f"{effective:x}, permitted {permitted:x}")
    return {"uid": os.getuid(), "gid": os.getgid(), "capabilities": 0, "notes": notes}


def library_copy(library):
    """A path to a private, sealed copy of `library` (a memfd: /proc/self/fd/N), for a process
    about to lose the right to open the build folder (nobody cannot enter root's 0700 temporary
    folder). Landlock allows it: a memfd lives in no folder of the machine."""
    flags = os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING
    try:
        fd = os.memfd_create("candidate", flags | _MFD_EXEC)
    except OSError as e:
        if e.errno != errno.EINVAL:
            raise
        fd = os.memfd_create("candidate", flags)  # a kernel before MFD_EXEC (6.3)
    with open(library, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            os.write(fd, chunk)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW |
                fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL)
    os.set_inheritable(fd, False)
    return f"/proc/self/fd/{fd}"


_MFD_EXEC = 0x0010


# ---- seccomp ----------------------------------------------------------------------------------

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
_SECCOMP_RET_KILL_PROCESS = 0x80000000
_SECCOMP_RET_ERRNO = 0x00050000
_SECCOMP_RET_ALLOW = 0x7FFF0000
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_CLONE_THREAD = 0x00010000

# BPF opcodes (linux/filter.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06

# The filter is an allow-list: a system call named nowhere below fails with ENOSYS (as on a
# kernel that lacks it), so a call this list forgot cannot reach anything. The ones an attacker
# wants kill the process (SIGSYS), so the candidate fails with a clear reason. Numbers from
# arch/x86/entry/syscalls/syscall_64.tbl.
#
# Allowed whatever their arguments: the process's own memory, files it has or may read,
# threads and their synchronisation, clocks and sleeps, its own signals and limits, and what a
# kernel or its runtime (OpenMP, the C library, the interpreter serving the worker) asks about
# the machine.
X86_64_ALLOWED = {
    "read": 0, "write": 1, "close": 3, "stat": 4, "fstat": 5, "lstat": 6, "poll": 7,
    "lseek": 8, "mmap": 9, "mprotect": 10, "munmap": 11, "brk": 12, "rt_sigaction": 13,
    "rt_sigprocmask": 14, "rt_sigreturn": 15, "ioctl": 16, "pread64": 17, "pwrite64": 18,
    "readv": 19, "writev": 20, "access": 21, "pipe": 22, "select": 23, "sched_yield": 24,
    "mremap": 25, "msync": 26, "mincore": 27, "madvise": 28, "dup": 32, "dup2": 33, "pause": 34,
    "nanosleep": 35, "getitimer": 36, "alarm": 37, "setitimer": 38, "getpid": 39,
    "sendfile": 40, "sendto": 44, "recvfrom": 45, "sendmsg": 46, "recvmsg": 47, "shutdown": 48,
    "getsockname": 51, "getpeername": 52, "setsockopt": 54, "getsockopt": 55, "exit": 60,
    "wait4": 61, "uname": 63, "shmdt": 67, "fcntl": 72, "fsync": 74, "fdatasync": 75,
    "ftruncate": 77, "getdents": 78, "getcwd": 79, "chdir": 80, "fchdir": 81, "readlink": 89,
    "umask": 95, "gettimeofday": 96, "getrlimit": 97, "getrusage": 98, "sysinfo": 99,
    "times": 100, "getuid": 102, "getgid": 104, "geteuid": 107, "getegid": 108, "getppid": 110,
    "getpgrp": 111, "getgroups": 115, "getresuid": 118, "getresgid": 120, "getpgid": 121,
    "getsid": 124, "capget": 125, "rt_sigpending": 127, "rt_sigtimedwait": 128,
    "rt_sigsuspend": 130, "sigaltstack": 131, "statfs": 137, "fstatfs": 138,
    "getpriority": 140, "sched_getparam": 143, "sched_getscheduler": 145,
    "sched_get_priority_max": 146, "sched_get_priority_min": 147, "sched_rr_get_interval": 148,
    "mlock": 149, "munlock": 150, "mlockall": 151, "munlockall": 152, "prctl": 157,
    "arch_prctl": 158, "setrlimit": 160, "gettid": 186, "readahead": 187, "time": 201,
    "futex": 202, "sched_getaffinity": 204, "getdents64": 217, "set_tid_address": 218,
    "restart_syscall": 219, "fadvise64": 221, "timer_create": 222, "timer_settime": 223,
    "timer_gettime": 224, "timer_getoverrun": 225, "timer_delete": 226, "clock_gettime": 228,
    "clock_getres": 229, "clock_nanosleep": 230, "exit_group": 231, "epoll_wait": 232,
    "epoll_ctl": 233, "mbind": 237, "set_mempolicy": 238, "get_mempolicy": 239, "waitid": 247,
    "ioprio_get": 252, "newfstatat": 262, "readlinkat": 267, "faccessat": 269, "pselect6": 270,
    "ppoll": 271, "set_robust_list": 273, "splice": 275, "tee": 276, "vmsplice": 278,
    "epoll_pwait": 281, "signalfd": 282, "timerfd_create": 283, "eventfd": 284,
    "timerfd_settime": 286, "timerfd_gettime": 287, "signalfd4": 289, "eventfd2": 290,
    "epoll_create1": 291, "epoll_create": 213, "dup3": 292, "pipe2": 293, "preadv": 295,
    "pwritev": 296, "recvmmsg": 299, "sendmmsg": 307, "getcpu": 309, "sched_getattr": 315,
    "seccomp": 317, "getrandom": 318, "membarrier": 324, "mlock2": 325, "copy_file_range": 326,
    "preadv2": 327, "pwritev2": 328, "pkey_mprotect": 329, "pkey_alloc": 330, "pkey_free": 331,
    "statx": 332, "rseq": 334, "close_range": 436, "faccessat2": 439, "epoll_pwait2": 441,
    "landlock_create_ruleset": 444, "landlock_add_rule": 445, "landlock_restrict_self": 446,
    "futex_waitv": 449, "set_mempolicy_home_node": 450, "map_shadow_stack": 453,
    "futex_wake": 454, "futex_wait": 455, "futex_requeue": 456, "mseal": 462,
}
# Killed (SIGSYS): what a kernel has no use for and an attacker does.
X86_64_FORBIDDEN = {
    # New processes and programs, sockets, other processes' memory and handles.
    "socket": 41, "socketpair": 53, "fork": 57, "vfork": 58, "execve": 59, "ptrace": 101,
    "tkill": 200, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
    "execveat": 322, "pidfd_send_signal": 424, "pidfd_open": 434, "pidfd_getfd": 438,
    "process_madvise": 440, "process_mrelease": 448, "ioprio_set": 251,
    # Leaving the process group or session, namespaces, mounts.
    "setpgid": 109, "setsid": 112, "pivot_root": 155, "chroot": 161, "mount": 165,
    "umount2": 166, "unshare": 272, "setns": 308, "open_tree": 428, "move_mount": 429,
    "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
    "open_tree_attr": 467,
    # The machine: its clock, name, kernel, modules, swap, quotas, keys, kernel log, ports.
    "adjtimex": 159, "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305,
    "sethostname": 170, "setdomainname": 171, "reboot": 169, "kexec_load": 246,
    "kexec_file_load": 320, "init_module": 175, "delete_module": 176, "finit_module": 313,
    "acct": 163, "swapon": 167, "swapoff": 168, "quotactl": 179, "quotactl_fd": 443,
    "syslog": 103, "iopl": 172, "ioperm": 173, "add_key": 248, "request_key": 249,
    "keyctl": 250,
    # Kernel facilities that bypass this filter or watch other processes.
    "perf_event_open": 298, "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "fanotify_init": 300,
    "fanotify_mark": 301, "name_to_handle_at": 303, "open_by_handle_at": 304,
    # Changing the file system: the worker writes no file (Landlock refuses most of it too,
    # silently; not modes, owners, times or extended attributes of files it may read).
    "creat": 85, "truncate": 76, "rename": 82, "mkdir": 83, "rmdir": 84, "link": 86,
    "unlink": 87, "symlink": 88, "chmod": 90, "fchmod": 91, "chown": 92, "fchown": 93,
    "lchown": 94, "mknod": 133, "utime": 132, "utimes": 235, "futimesat": 261,
    "utimensat": 280, "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190,
    "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199, "mkdirat": 258,
    "mknodat": 259, "fchownat": 260, "unlinkat": 263, "renameat": 264, "linkat": 265,
    "symlinkat": 266, "fchmodat": 268, "renameat2": 316, "fchmodat2": 452, "setxattrat": 463,
    "removexattrat": 466, "file_setattr": 469,
}
# open(path, flags) and openat(dir, path, flags): killed when the flags ask to write.
_X86_64_OPEN = {2: 1, 257: 2}  # number: index of the flags argument
_OPEN_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_X86_64_OPENAT2 = 437  # its flags sit in a struct the filter cannot read: ENOSYS
# Calls that name a process (argument 0): allowed for this process only (its pid, or 0 where 0
# means the caller), killed for any other: signals, resource limits (prlimit of another
# process's CPU time kills it), scheduling (a priority or policy that starves the harness),
# memory placement.
X86_64_SIGNAL_SELF_ONLY = {"kill": 62, "rt_sigqueueinfo": 129, "tgkill": 234,
                           "rt_tgsigqueueinfo": 297}
X86_64_PROCESS_SELF_ONLY = {"sched_setparam": 142, "sched_setscheduler": 144,
                            "migrate_pages": 256, "move_pages": 279, "prlimit64": 302,
                            "sched_setattr": 314}
_X86_64_SETPRIORITY = 141  # (which, who): PRIO_PROCESS of this process only
_PRIO_PROCESS = 0
# sched_setaffinity(pid): a thread's affinity (OpenMP's binding, pthread_setaffinity_np) names
# the thread, which the filter cannot tell from another process: EPERM for anything but this
# process's own pid or 0, instead of a kill.
_X86_64_SCHED_SETAFFINITY = 203
_X86_64_CLONE, _X86_64_CLONE3 = 56, 435


def seccomp_supported():
    return platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")


def _stmt(code, k):
    return struct.pack("<HBBI", code, 0, 0, k & 0xFFFFFFFF)


def _jump(code, k, jt, jf):
    return struct.pack("<HBBI", code, jt, jf, k & 0xFFFFFFFF)


def seccomp_program(pid):
    """The BPF program (a list of 8-byte instructions) for process `pid` on x86_64.

    Every block tests the system call's number and, when it does not match, falls through to
    the next with the number still in the accumulator; a block that loads an argument returns
    on every path.
    """
    nr, arch, arg0_low, arg1_low = 0, 4, 16, 24
    kill, allow = _stmt(_RET_K, _SECCOMP_RET_KILL_PROCESS), _stmt(_RET_K, _SECCOMP_RET_ALLOW)
    enosys = _stmt(_RET_K, _SECCOMP_RET_ERRNO | errno.ENOSYS)
    prog = [_stmt(_LD_W_ABS, arch), _jump(_JEQ_K, _AUDIT_ARCH_X86_64, 1, 0), kill,
            _stmt(_LD_W_ABS, nr), _jump(_JGE_K, _X32_SYSCALL_BIT, 0, 1), kill]
    for number in sorted(X86_64_FORBIDDEN.values()):
        prog += [_jump(_JEQ_K, number, 0, 1), kill]
    for number in (_X86_64_CLONE3, _X86_64_OPENAT2):
        prog += [_jump(_JEQ_K, number, 0, 1), enosys]
    for number, arg in sorted(_X86_64_OPEN.items()):
        prog += [_jump(_JEQ_K, number, 0, 4), _stmt(_LD_W_ABS, arg0_low + 8 * arg),
                 _jump(_JSET_K, _OPEN_WRITE_FLAGS, 0, 1), kill, allow]
    # clone: a thread (CLONE_THREAD in the flags, argument 0) is fine, a process is not.
    prog += [_jump(_JEQ_K, _X86_64_CLONE, 0, 4), _stmt(_LD_W_ABS, arg0_low),
             _jump(_JSET_K, _CLONE_THREAD, 0, 1), allow, kill]
    # Pids compare on their low 32 bits, as the kernel reads them (pid_t is an int).
    for number in sorted(X86_64_SIGNAL_SELF_ONLY.values()):
        prog += [_jump(_JEQ_K, number, 0, 4), _stmt(_LD_W_ABS, arg0_low),
                 _jump(_JEQ_K, pid, 0, 1), allow, kill]
    for number in sorted(X86_64_PROCESS_SELF_ONLY.values()):
        prog += [_jump(_JEQ_K, number, 0, 5), _stmt(_LD_W_ABS, arg0_low),
                 _jump(_JEQ_K, 0, 1, 0), _jump(_JEQ_K, pid, 0, 1), allow, kill]
    prog += [_jump(_JEQ_K, _X86_64_SETPRIORITY, 0, 8), _stmt(_LD_W_ABS, arg0_low),
             _jump(_JEQ_K, _PRIO_PROCESS, 1, 0), kill, _stmt(_LD_W_ABS, arg1_low),
             _jump(_JEQ_K, 0, 1, 0), _jump(_JEQ_K, pid, 0, 1), allow, kill]
    prog += [_jump(_JEQ_K, _X86_64_SCHED_SETAFFINITY, 0, 5), _stmt(_LD_W_ABS, arg0_low),
             _jump(_JEQ_K, 0, 1, 0), _jump(_JEQ_K, pid, 0, 1), allow,
             _stmt(_RET_K, _SECCOMP_RET_ERRNO | errno.EPERM)]
    for number in sorted(X86_64_ALLOWED.values()):
        prog += [_jump(_JEQ_K, number, 0, 1), allow]
    prog.append(enosys)
    return prog


def apply_seccomp():
    """Install the filter on this process (all its threads, present and future)."""
    if not seccomp_supported():
        raise OSError(errno.ENOSYS, f"no seccomp filter for {platform.machine()}")
    libc = _libc()
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(e)}")
    code = b"".join(seccomp_program(os.getpid()))
    filters = ctypes.create_string_buffer(code, len(code))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = SockFprog(len(code) // 8, ctypes.cast(filters, ctypes.c_void_p))
    # SECCOMP_FILTER_FLAG_TSYNC is not needed: the worker has one thread when this runs.
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"prctl(PR_SET_SECCOMP): {os.strerror(e)}")


def confine(build_dir, library, parent):
    """Apply every layer this system offers; returns (what was applied, for `done`; the path to
    load the library from).

    The libraries `library` needs are loaded first (from the system's usual places), so that
    loading the candidate afterwards needs no file but its own. Then, in this order: Landlock
    (its rules are opened while the build folder can still be entered), a private copy of the
    library where the process is about to become nobody, the privileges dropped, seccomp. A
    layer the kernel lacks is reported as such (with why), never silently assumed.
    KSEARCH_SANDBOX=off leaves every layer out: the tests use it to show what they stop.
    """
    applied = {"landlock": None, "seccomp": False, "privileges": None, "notes": []}
    if platform.system() != "Linux":
        applied["notes"].append(f"no sandbox on {platform.system()}")
        return applied, library
    if os.environ.get("KSEARCH_SANDBOX") == "off":
        applied["notes"].append("disabled by KSEARCH_SANDBOX=off")
        return applied, library
    for name in needed_libraries(library):
        if "/" not in name:
            try:
                ctypes.CDLL(name)
            except OSError:
                pass  # loading the candidate will name it
    read = set(SYSTEM_READ) | mapped_files() | {build_dir}
    try:
        applied["landlock"] = apply_landlock(read)
    except OSError as e:
        applied["notes"].append(f"landlock: {e.strerror or e}")
    if os.geteuid() == 0:
        try:
            library = library_copy(library)
        except OSError as e:
            applied["notes"].append(f"library copy: {e.strerror or e}")
    try:
        applied["privileges"] = drop_privileges(parent)
    except OSError as e:
        applied["notes"].append(f"privileges: {e.strerror or e}")
    try:
        apply_seccomp()
        applied["seccomp"] = True
    except OSError as e:
        applied["notes"].append(f"seccomp: {e.strerror or e}")
    return applied, library
