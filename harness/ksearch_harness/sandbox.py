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
import os
import platform
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

# x86_64 system calls the worker is killed for (name: number). Numbers from
# arch/x86/entry/syscalls/syscall_64.tbl.
X86_64_FORBIDDEN = {
    "socket": 41, "socketpair": 53, "fork": 57, "vfork": 58, "execve": 59, "ptrace": 101,
    "setpgid": 109, "setsid": 112, "pivot_root": 155, "chroot": 161, "mount": 165,
    "umount2": 166, "tkill": 200, "unshare": 272, "perf_event_open": 298,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310,
    "process_vm_writev": 311, "kcmp": 312, "bpf": 321, "execveat": 322, "userfaultfd": 323,
    "pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "pidfd_open": 434, "pidfd_getfd": 438, "process_madvise": 440,
    # Changing the file system: the worker writes no file (Landlock refuses it too, silently).
    "creat": 85, "truncate": 76, "rename": 82, "mkdir": 83, "rmdir": 84, "link": 86,
    "unlink": 87, "symlink": 88, "chmod": 90, "chown": 92, "lchown": 94, "mknod": 133,
    "mkdirat": 258, "mknodat": 259, "fchownat": 260, "unlinkat": 263, "renameat": 264,
    "linkat": 265, "symlinkat": 266, "fchmodat": 268, "renameat2": 316,
}
# open(path, flags) and openat(dir, path, flags): killed when the flags ask to write.
_X86_64_OPEN = {2: 1, 257: 2}  # number: index of the flags argument
_OPEN_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_X86_64_OPENAT2 = 437  # its flags sit in a struct the filter cannot read: ENOSYS
# Signals: allowed only when the target (argument 0: pid or thread-group id) is this process.
X86_64_SIGNAL_SELF_ONLY = {"kill": 62, "rt_sigqueueinfo": 129, "tgkill": 234,
                           "rt_tgsigqueueinfo": 297}
_X86_64_CLONE, _X86_64_CLONE3 = 56, 435


def seccomp_supported():
    return platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")


def _stmt(code, k):
    return struct.pack("<HBBI", code, 0, 0, k & 0xFFFFFFFF)


def _jump(code, k, jt, jf):
    return struct.pack("<HBBI", code, jt, jf, k & 0xFFFFFFFF)


def seccomp_program(pid):
    """The BPF program (a list of 8-byte instructions) for process `pid` on x86_64."""
    nr, arch, arg0_low = 0, 4, 16
    kill, allow = _stmt(_RET_K, _SECCOMP_RET_KILL_PROCESS), _stmt(_RET_K, _SECCOMP_RET_ALLOW)
    prog = [_stmt(_LD_W_ABS, arch), _jump(_JEQ_K, _AUDIT_ARCH_X86_64, 1, 0), kill,
            _stmt(_LD_W_ABS, nr), _jump(_JGE_K, _X32_SYSCALL_BIT, 0, 1), kill]
    for number in sorted(X86_64_FORBIDDEN.values()):
        prog += [_jump(_JEQ_K, number, 0, 1), kill]
    for number in (_X86_64_CLONE3, _X86_64_OPENAT2):
        prog += [_jump(_JEQ_K, number, 0, 1), _stmt(_RET_K, _SECCOMP_RET_ERRNO | errno.ENOSYS)]
    for number, arg in sorted(_X86_64_OPEN.items()):
        prog += [_jump(_JEQ_K, number, 0, 4), _stmt(_LD_W_ABS, arg0_low + 8 * arg),
                 _jump(_JSET_K, _OPEN_WRITE_FLAGS, 0, 1), kill, allow]
    # clone: a thread (CLONE_THREAD in the flags, argument 0) is fine, a process is not.
    prog += [_jump(_JEQ_K, _X86_64_CLONE, 0, 4), _stmt(_LD_W_ABS, arg0_low),
             _jump(_JSET_K, _CLONE_THREAD, 0, 1), allow, kill]
    for number in sorted(X86_64_SIGNAL_SELF_ONLY.values()):
        # nr is still in the accumulator here: each block leaves it there when it does not match.
        prog += [_jump(_JEQ_K, number, 0, 4), _stmt(_LD_W_ABS, arg0_low),
                 _jump(_JEQ_K, pid, 0, 1), allow, kill]
    prog.append(allow)
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


def confine(build_dir, library):
    """Apply every layer this system offers; returns what was applied, for `done`.

    The libraries `library` needs are loaded first (from the system's usual places), so that
    loading the candidate afterwards needs no file but its own. A layer the kernel lacks is
    reported as such (with why), never silently assumed. KSEARCH_SANDBOX=off leaves both out:
    the tests use it to show what each layer stops.
    """
    applied = {"landlock": None, "seccomp": False, "notes": []}
    if platform.system() != "Linux":
        applied["notes"].append(f"no sandbox on {platform.system()}")
        return applied
    if os.environ.get("KSEARCH_SANDBOX") == "off":
        applied["notes"].append("disabled by KSEARCH_SANDBOX=off")
        return applied
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
    try:
        apply_seccomp()
        applied["seccomp"] = True
    except OSError as e:
        applied["notes"].append(f"seccomp: {e.strerror or e}")
    return applied
