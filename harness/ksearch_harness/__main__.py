"""Entry point: `python3 -m ksearch_harness < request.json` (see docs/protocol.md).

The worker that will run the candidate (backend c, Linux) is forked first, before anything of
the request exists in this process; then the protocol descriptor is secured, and `done` is
written last unless the process dies; the supervisor reads a missing `done` plus the last
`progress` as a crash.
"""

import faulthandler
import json
import os
import sys
import traceback

from . import __version__, protocol, worker
from .errors import SetupError, TaskError


def main():
    candidate_process = worker.spawn()
    channel = protocol.claim_stdout()
    if candidate_process is not None:
        candidate_process.channel = channel
    faulthandler.enable(file=sys.stderr)
    environment = {"compiler": None, "device": None}
    try:
        request = json.loads(sys.stdin.buffer.read())
        if not isinstance(request, dict):
            raise ValueError("the request is not a JSON object")
        channel.authenticate(request.pop("auth", None))
        if request.get("protocol") != 1:
            raise ValueError(f"unsupported protocol version {request.get('protocol')!r} "
                             f"(this harness speaks 1)")
        mode = request.get("mode")
        from . import evaluate  # NumPy is imported here, after the descriptors are in place
        if mode == "evaluate":
            evaluate.evaluate(request, channel, environment)
        elif mode == "check_task":
            evaluate.check_task(request, channel, environment)
        elif mode == "build":
            evaluate.build(request, channel, environment)
        elif mode == "profile":
            from . import profile  # the candidate called for a profiler (docs/protocol.md)
            profile.profile(request, channel, environment)
        else:
            raise ValueError(f"unknown mode {mode!r} "
                             f"(expected evaluate, check_task, build or profile)")
    except TaskError as e:
        channel.emit("task_error", field=e.field, message=e.message)
    except SetupError as e:
        fields = {"missing": e.missing} if e.missing else {}
        channel.emit("harness_error", message=e.message, **fields)
    except ModuleNotFoundError as e:
        # `missing` lets ksearch set up an interpreter that has the module, then retry.
        channel.emit("harness_error", message=f"{sys.executable} cannot import {e.name}",
                     missing=e.name)
    except BaseException as e:  # noqa: BLE001 - every failure must still end in `done`
        traceback.print_exc(file=sys.stderr)
        channel.emit("harness_error", message=_describe(e))
    from . import environment as env
    collected = env.collect(environment["compiler"], environment["device"])
    applied = None
    if candidate_process is not None:
        # Gone before `done`: nothing of the candidate runs once the record is complete.
        candidate_process.close()
        applied = candidate_process.sandbox
    # Where the candidate ran: its own sandboxed process, or this one (GPU backends, no Linux).
    collected["sandbox"] = {"worker": True, **applied} if applied else {"worker": False}
    channel.close_stage()
    channel.emit("done", environment=collected, harness_version=__version__,
                 stages=channel.stages)
    _exit()


def _describe(error):
    frames = traceback.extract_tb(error.__traceback__)
    where = f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {error}{where}"


def _exit():
    """Flush what candidates printed, then leave without running their destructors."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        import ctypes
        ctypes.CDLL(None).fflush(None)
    except Exception:  # noqa: BLE001
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
