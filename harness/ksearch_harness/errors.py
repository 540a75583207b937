"""The two ways a run can end early, besides a bug in the harness (reported as harness_error)."""


class TaskError(Exception):
    """The task (definition, workloads, reference) is at fault, not the candidate.

    `field` points the task author at what to fix, e.g. "workloads[2].axes.N" or "reference".
    """

    def __init__(self, field, message):
        super().__init__(message)
        self.field = field
        self.message = message


class ReferenceRaised(TaskError):
    """The reference's run() raised an exception of type `error_type`.

    A task error while no candidate code has run. Once the candidate has been loaded it shares
    the process, so evaluate mode counts it against the candidate (which may have used up the
    memory or corrupted state). Only the type is kept: the traceback would keep the reference's
    arrays alive.
    """

    def __init__(self, message, error_type):
        super().__init__("reference", message)
        self.error_type = error_type


class CandidateError(Exception):
    """The candidate failed in a way that fails one workload with `status` and `reason`."""

    def __init__(self, status, reason):
        super().__init__(reason)
        self.status = status
        self.reason = reason


class SetupError(Exception):
    """The harness's environment cannot run this request (no torch, no CUDA device): reported
    as a harness_error naming what is missing, never blamed on the candidate or the task.

    `missing` names a Python module the interpreter lacks; ksearch creates an environment only
    for NumPy, so for torch the message tells the user what to install or point at.
    """

    def __init__(self, message, missing=None):
        super().__init__(message)
        self.message = message
        self.missing = missing
