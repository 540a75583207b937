"""Backend cpp is timed by the CPU's loop in this process (ksearch_harness/timing.py's
time_pairs), as backend c is outside its worker."""

from ...timing import time_pairs  # noqa: F401 - the CPU's loop
