"""Checks every backend applies to a candidate's sources and entry point before building it,
and the helpers to write them and to run a compiler under a timeout."""

import os
import signal
import subprocess
import traceback

LIBRARY = "candidate.so"


class Candidate:
    """A checked candidate: sources as (path, content), the entry's file and symbol."""

    def __init__(self, sources, entry, entry_file, symbol, extra_flags, build):
        self.sources, self.entry, self.entry_file, self.symbol = sources, entry, entry_file, symbol
        self.extra_flags, self.build = extra_flags, build


def check(candidate, language, compiled, what, kind="a C identifier", example="kernel.c"):
    """Raise ValueError (the compile log's text) for anything wrong with the candidate.

    `compiled`: the suffixes of files that are compiled or loaded; at least one is required and
    the entry's file must be one. `what`: how the log names that kind of file (".c source").
    """
    if not isinstance(candidate, dict):
        raise ValueError("the request has no candidate to build")
    got = candidate.get("language", language)
    if got != language:
        raise ValueError(f"backend {language} cannot build a candidate in language {got!r}")
    sources = []
    seen = set()
    for i, s in enumerate(candidate.get("sources") or []):
        path = s.get("path") if isinstance(s, dict) else None
        content = s.get("content") if isinstance(s, dict) else None
        problem = path_problem(path, example)
        if problem:
            raise ValueError(f"source {i} path {path!r} is rejected: {problem}")
        if not isinstance(content, str):
            raise ValueError(f"source {path!r} has no text content")
        if path in seen:
            raise ValueError(f"source path {path!r} appears twice")
        seen.add(path)
        sources.append((path, content))
    if not any(p.endswith(compiled) for p, _ in sources):
        raise ValueError(f"the candidate has no {what} to compile")
    entry = candidate.get("entry_point")
    if not isinstance(entry, str) or not entry:
        raise ValueError(f"the candidate has no entry_point (expected '{example}::symbol')")
    file, sep, symbol = entry.rpartition("::")
    if sep and file not in seen:
        raise ValueError(f"entry_point {entry!r} names {file!r}, which is not among the sources")
    if not symbol.isidentifier() or not symbol.isascii():
        raise ValueError(f"entry_point {entry!r} does not end in {kind}")
    build = candidate.get("build") or {}
    extra = build.get("extra_flags") or []
    if not isinstance(extra, list) or not all(isinstance(f, str) for f in extra):
        raise ValueError("build.extra_flags must be a list of strings")
    return Candidate(sources, entry, file if sep else None, symbol, list(extra), build)


def path_problem(path, example="kernel.c"):
    if not isinstance(path, str) or not path:
        return "it must be a non-empty string"
    if path.startswith("/") or os.path.isabs(path):
        return f"absolute paths are not allowed; use a plain relative name like '{example}'"
    if "\\" in path or "\x00" in path or path.startswith("-") or path.startswith("~"):
        return f"it must be a plain relative name like '{example}'"
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "'..', '.' and empty components are not allowed; use a plain relative name"
    if path == LIBRARY:
        return f"{LIBRARY} is the name of the build output"
    return None


def check_python_syntax(sources):
    """Raises ValueError naming the file and the error for the first .py source that does not
    compile, before anything of it runs."""
    for path, content in sources:
        if path.endswith(".py"):
            try:
                compile(content, path, "exec")
            except (SyntaxError, ValueError) as e:
                detail = "".join(traceback.format_exception_only(type(e), e)).strip()
                raise ValueError(f"{path}: {detail}") from None


def write(sources, folder):
    """Write the sources under `folder`; a ValueError names one that cannot be written."""
    for path, content in sources:
        full = os.path.join(folder, path)
        try:
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as f:
                f.write(content)
        except (OSError, ValueError) as e:
            raise ValueError(f"source {path!r} cannot be written: {e}") from None


def compile_in_child(command, cwd, log_path, timeout, tool, env=None):
    """Run a compiler; (exit code or None when killed at the timeout, timed_out). `env`: its
    environment (None: this process's).

    The compiler stays in our process group, so the supervisor's group kill still reaches it;
    our own timeout kills its process tree (cc1, as, ld; cicc, ptxas), not just the driver.
    """
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, env=env)
        except FileNotFoundError:
            raise RuntimeError(f"{tool} {command[0]!r} not found") from None
        try:
            return proc.wait(timeout=timeout), False
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            return None, True


def outcome_text(text, rc, timed_out, timeout, output):
    """(ok, log) after a compiler ran: its log plus a line on how it ended."""
    ok = rc == 0 and not timed_out
    if timed_out:
        text += f"\ncompilation timed out after {timeout:g} s and was killed"
    elif ok and not os.path.exists(output):
        ok, text = False, text + f"\nthe compiler exited 0 but wrote no {os.path.basename(output)}"
    elif not ok:
        text += f"\nthe compiler exited with status {rc}" if rc > 0 else \
            f"\nthe compiler was killed by signal {-rc}"
    return ok, text


def kill_tree(proc):
    """SIGKILL a child and its descendants, found by their parent ids in /proc (Linux)."""
    for pid in [proc.pid] + _descendants(proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.wait()


def _descendants(root):
    children = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so cut at the last ')'.
        ppid = int(stat[stat.rfind(b")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def bounded(path, limit):
    """The log, or its head and tail around a note of what was cut when it exceeds `limit`."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        if size <= limit:
            return f.read().decode("utf-8", "replace")
        note = "\n[... {} bytes of compiler output omitted ...]\n"
        keep = max(limit - len(note) - 20, 0)
        head = f.read(keep // 2)
        f.seek(size - (keep - keep // 2))
        tail = f.read()
    omitted = size - len(head) - len(tail)
    return (head.decode("utf-8", "replace") + note.format(omitted)
            + tail.decode("utf-8", "replace"))
