"""Loading a Python candidate into the harness's process, for the backends whose candidate is a
Python module (python and triton, mlx's launchers): running its module once, finding its entry,
remembering a failure, and describing the candidate's exceptions."""

import importlib.util
import os
import sys
import traceback

from ...errors import CandidateError


def import_symbol(folder, file, module_name, symbol, python_path=()):
    """Run the module `folder/file` as `module_name`; its `symbol`, or None when it has none.
    `python_path`: the task's module folders (`[kernel].python_path`), searched after the
    candidate's own folder, so that a candidate's sibling of the same name wins."""
    for extra in reversed(list(python_path)):
        if extra not in sys.path:
            sys.path.insert(0, extra)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # its helper modules and files sit beside it, as siblings
    spec = importlib.util.spec_from_file_location(module_name, os.path.join(folder, file))
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)  # runs the candidate's module-level code
    return getattr(module, symbol, None)


class LoadOnce:
    """The entry that `load()` returns, loaded at the first `get`. A failure is remembered and
    raised again by every later `get`: the candidate's module-level code runs at most once."""

    def __init__(self, what, load):
        self._what = what  # what the failure says was loaded: "candidate", "launcher"
        self._load = load  # raises CandidateError for an entry it refuses
        self._entry = None
        self._error = None

    def get(self, folder):
        """The entry, or CandidateError (runtime_error); `folder` holds the candidate's files."""
        if self._entry is None and self._error is None:
            try:
                self._entry = self._load()
            except CandidateError as e:
                self._error = e.reason
            except (Exception, SystemExit) as e:  # noqa: BLE001 - its code ran and failed
                self._error = f"loading the {self._what} failed: {describe(e, folder)}"
        if self._error is not None:
            raise CandidateError("runtime_error", self._error)
        return self._entry


def describe(error, folder):
    """"Type: message (at file:line)", the line being the candidate's own innermost frame."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = " | ".join(lines[:4])[:600] or "(no message)"
    frames = traceback.extract_tb(error.__traceback__)
    own = [f for f in frames if folder and os.path.abspath(f.filename).startswith(folder)]
    frame = (own or frames or [None])[-1]
    at = f" (at {os.path.basename(frame.filename)}:{frame.lineno})" if frame else ""
    return f"{type(error).__name__}: {text}{at}"


def returned_values(raw, outputs, who):
    """What an entry returned, as one value per output in definition order (a tuple or list,
    or a single value for one output); `who` names it in the error ("the candidate")."""
    values = list(raw) if isinstance(raw, (tuple, list)) else [raw]
    names = [t.name for t in outputs]
    if len(values) != len(names):
        raise CandidateError("incorrect_shape", (
            f"{who} returned {len(values)} value(s) for {len(names)} output(s) "
            f"({', '.join(names)}); return them in definition order"))
    return values
