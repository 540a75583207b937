#!/usr/bin/env bash
# The README's main command on a machine as fresh as this one can be made: a fresh clone of the
# repository, an empty cargo home (every crate downloaded), an empty target folder, an empty
# ksearch cache, and a python3 that behaves as Debian's does without python3-venv and NumPy (its
# `-m venv` fails for lack of ensurepip; a virtual environment of this machine's Python without
# NumPy stands behind it). Prints the time of each part and the run's last lines.
#
# Usage: bench/quickstart.sh [WORKDIR]     (default: a new temporary folder; removed at the end)
# Needs: the network (crates.io, PyPI), Rust, python3 with the venv module, git.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${1:-}" ]; then
  work=$1
else
  work=$(mktemp -d)
  # Ours, with a cargo home and a target folder (gigabytes): removed on success and on failure alike.
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
echo "# command: bench/quickstart.sh $work; date: $(date -u +%FT%TZ); commit: $(git -C "$repo" rev-parse --short HEAD)"
echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# rustc: $(rustc --version); python3 behind the shim: $(python3 --version 2>&1)"

# python3 as Debian ships it without python3-venv (and NumPy).
python3 -m venv --without-pip "$work/bare"
mkdir -p "$work/shim"
# The interpreter's path in single quotes, for /bin/sh (printf %q may write bash-only $'...').
python_q="'$(printf '%s' "$work/bare/bin/python" | sed "s/'/'\\\\''/g")'"
cat >"$work/shim/python3" <<EOF
#!/bin/sh
if [ "\$1" = -m ] && [ "\$2" = venv ] && [ "\$3" != --without-pip ]; then
  echo 'The virtual environment was not created successfully because ensurepip is not' >&2
  echo 'available.  On Debian/Ubuntu systems, you need to install the python3-venv' >&2
  echo 'package using the following command.' >&2
  exit 1
fi
exec $python_q "\$@"
EOF
chmod +x "$work/shim/python3"

git clone -q "$repo" "$work/clone"
cd "$work/clone"
export CARGO_HOME="$work/cargo-home" KSEARCH_CACHE_DIR="$work/ksearch-cache" PATH="$work/shim:$PATH"
mkdir -p "$CARGO_HOME"
# rustup's proxies live in the old cargo home's bin folder, already on PATH; only the registry is new.
unset CARGO_TARGET_DIR
start=$(date +%s.%N)
cargo run -p ksearch-cli -- run softmax > "$work/run.out" 2> "$work/run.err" || { tail -20 "$work/run.err"; exit 1; }
end=$(date +%s.%N)
python3 - "$start" "$end" "$work/run.err" <<'PY'
import sys
start, end, err = float(sys.argv[1]), float(sys.argv[2]), open(sys.argv[3]).read()
print(f"total wall time of `cargo run -p ksearch-cli -- run softmax`: {end - start:.0f} s")
for line in err.splitlines():
    if line.strip().startswith("Finished") or "virtual environment" in line or "pip" in line:
        print("  " + line.strip())
PY
echo "--- the run's last lines:"
tail -6 "$work/run.out"
