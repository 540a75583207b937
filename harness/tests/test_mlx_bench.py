"""bench/mlx_mamba.py's check of a patched model, on MLX's CPU: `--self-test` runs the small
model's layer check with the tasks' baselines (launchers of MLX operations), which must pass,
and with broken copies of them (a scan whose output drops the recurrence, one with the decay
halved, one returning a zero state, a step without the old state), each of which must fail.

Needs MLX (`mlx[cpu]`) and mlx-lm's model code (`pip install --no-deps 'mlx-lm==0.32.2'`:
the bench imports mlx_lm.models.mamba without mlx_lm/__init__.py and its Hugging Face
dependencies); .ci/run installs both. Without them this skips, printing why, unless
KSEARCH_REQUIRE_MLX=1 makes that a failure.
"""

import json
import os
import subprocess
import sys
import unittest

from tests.mlx_support import has_mlx_lm, requires_mlx

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                     "bench", "mlx_mamba.py")


@requires_mlx(f"{sys.executable} lacks MLX or mlx-lm (pip install 'mlx[cpu]==0.32.4'; "
              f"pip install --no-deps 'mlx-lm==0.32.2')", available=has_mlx_lm)
class MambaBenchCheck(unittest.TestCase):
    def test_the_layer_check_passes_the_baselines_and_fails_broken_scans_and_steps(self):
        found = subprocess.run([sys.executable, BENCH, "--self-test"], capture_output=True,
                               text=True, timeout=600)
        self.assertEqual(found.returncode, 0, found.stdout + found.stderr)
        cases = [json.loads(line) for line in found.stdout.splitlines() if line.startswith("{")]
        self.assertEqual([c["expected"] for c in cases], [True, False, False, False, False])
        self.assertEqual([c["passed"] for c in cases], [c["expected"] for c in cases])
        self.assertIn("D * u only", cases[1]["case"])
        # The audit's case: the output is far outside the tolerance in the prefill check.
        self.assertGreater(float(cases[1]["worst_layer_errors"]["prefill"]["out"]), 0.05)
        self.assertLess(float(cases[0]["worst_layer_errors"]["prefill"]["out"]), 2e-3)


if __name__ == "__main__":
    unittest.main()
