#!/usr/bin/env bash
# Where a fresh GPU evaluation's "startup" stage goes (issue 16): the interpreter's imports
# (python -X importtime), the device's first use, and a cProfile of one harness evaluation of a
# built-in seed run in this process from the saved request.
#
# Usage: bench/startup_profile.sh KSEARCH_BIN OUTDIR [TASK...]   (default: rmsnorm_llm)
# The harness profiled is this checkout's (harness/); the request comes from KSEARCH_BIN.
set -u
bin=$(realpath "$1"); out=$(realpath -m "$2"); shift 2
tasks=${*:-rmsnorm_llm}
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$out"
py=$(command -v python3)
echo "# bench/startup_profile.sh $bin $out $tasks ; date: $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "## interpreter start alone"
for i in 1 2 3; do /usr/bin/time -f "python3 -c pass: %e s" "$py" -c pass; done 2>&1
echo "## imports, one process each (wall s)"
for mods in "numpy" "torch" "numpy, torch" "triton" "torch; import torch.utils.cpp_extension"; do
  /usr/bin/time -f "import $mods: %e s" "$py" -c "import $mods" 2>&1 | tail -1
done
"$py" -X importtime -c "import numpy, torch" 2> "$out/importtime.txt"
echo "## slowest imports (cumulative us, top 25)"
sort -t'|' -k2 -n -r "$out/importtime.txt" | head -25
echo "## device first use, in one process"
"$py" - <<'PY'
import time
t = time.perf_counter(); import torch; a = time.perf_counter()
torch.cuda.init(); b = time.perf_counter()
x = torch.zeros(1, device="cuda"); torch.cuda.synchronize(); c = time.perf_counter()
y = (x + 1).sum().item(); d = time.perf_counter()
torch.cuda.Event(enable_timing=True); e = time.perf_counter()
g = torch.Generator(device="cuda"); g.manual_seed(1); torch.randn(1024, device="cuda", generator=g); torch.cuda.synchronize(); f = time.perf_counter()
print(f"import torch {a-t:.3f} s; cuda.init {b-a:.3f}; first tensor {c-b:.3f}; first kernel+item {d-c:.3f}; event {e-d:.3f}; generator+randn {f-e:.3f}")
PY
for t in $tasks; do
  echo; echo "## $t: one fresh evaluation (KSEARCH_WARM=0), then the harness profiled on its request"
  KSEARCH_WARM=0 KSEARCH_SAVE_REQUEST="$out/$t.request.json" /usr/bin/time -f "ksearch eval wall: %e s" \
    "$bin" eval "$t" --json > "$out/$t.eval.json" 2> "$out/$t.eval.log"
  tail -1 "$out/$t.eval.log"
  "$py" -c "import json,sys; r=json.load(open(sys.argv[1])); print('status', r.get('status'), 'wall', r.get('wall_seconds'), 'stages', {k: round(v, 2) for k, v in (r.get('stage_seconds') or {}).items()})" "$out/$t.eval.json" 2>&1 | head -3
  ( cd "$(mktemp -d)" && PYTHONPATH="$here/../harness" PYTHONDONTWRITEBYTECODE=1 "$py" - "$out/$t.request.json" "$out/$t.cprofile.txt" <<'PY'
import cProfile, io, os, pstats, sys, time
req, dest = sys.argv[1], sys.argv[2]
fd = os.open(req, os.O_RDONLY); os.dup2(fd, 0)
t0 = time.perf_counter()
pr = cProfile.Profile(); pr.enable()
import ksearch_harness.__main__ as m
m._exit = lambda: None
m.main()
pr.disable()
s = io.StringIO(); st = pstats.Stats(pr, stream=s)
st.sort_stats("cumulative").print_stats(60)
st.sort_stats("tottime").print_stats(30)
open(dest, "w").write(f"wall {time.perf_counter()-t0:.2f} s\n" + s.getvalue())
PY
  ) > "$out/$t.profiled.out" 2>&1
  echo "profiled run: $(grep -c . "$out/$t.profiled.out") lines of output; top of the profile:"
  head -75 "$out/$t.cprofile.txt" | cut -c1-160
done
