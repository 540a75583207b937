"""The two ways a run can end early, besides a bug in the harness (reported as harness_error)."""


class TaskError(Exception):
    """The task (definition, workloads, reference) is at fault, not the candidate.

    `field` points the task author at what to fix, e.g. "workloads[2].axes.N" or "reference".
    """

    def __init__(self, field, message):
        super().__init__(message)
        self.field = field
        self.message = message


class CandidateError(Exception):
    """The candidate failed in a way that fails one workload with `status` and `reason`."""

    def __init__(self, status, reason):
        super().__init__(reason)
        self.status = status
        self.reason = reason
