#!/usr/bin/env bash
# Prepares Ray for the GPU machine, which reaches no package registry and takes at most 64 MiB per
# call (working tree included). Ray's wheel is ~80 MB; unpacked without its Java jars and the
# dashboard's source maps, with its three binaries stripped, it compresses (xz) to ~28 MB.
# Run from the project root on a machine with pip access. Output (git-ignored):
#   .gpu-transfer/ray/  ray.tar.xz, deps/ (its pure requirements as wheels), install.sh
# On the GPU machine: carry .gpu-transfer/ray and `source .gpu-transfer/ray/install.sh` first in
# the same command (it puts a `ray` command on PATH); then e.g. bench/ray_gpu.sh.
set -euo pipefail
RAY_VERSION=${RAY_VERSION:-2.60.0}
root=$(git rev-parse --show-toplevel)
cd "$root"
grep -qx '/.gpu-transfer/' .git/info/exclude 2>/dev/null || echo '/.gpu-transfer/' >> .git/info/exclude
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  -d "$work/wheels" "ray==$RAY_VERSION"
mkdir -p "$work/pkg"
(cd "$work/pkg" && unzip -q "$work"/wheels/ray-"$RAY_VERSION"-*.whl)
rm -rf "$work/pkg/ray/jars" "$work"/pkg/ray/dashboard/client/build/static/js/*.map
for f in ray/_raylet.so ray/core/src/ray/raylet/raylet ray/core/src/ray/gcs/gcs_server; do
  strip --strip-unneeded "$work/pkg/$f"
done
rm -rf .gpu-transfer/ray && mkdir -p .gpu-transfer/ray/deps
(cd "$work/pkg" && tar cf - . | xz -6 -T2 > "$root/.gpu-transfer/ray/ray.tar.xz")
find "$work/wheels" -name '*.whl' ! -name 'ray-*' -exec mv {} .gpu-transfer/ray/deps/ \;
requires=$(grep '^Requires-Dist' "$work"/pkg/ray-"$RAY_VERSION".dist-info/METADATA | grep -v extra \
  | sed 's/^Requires-Dist: //; s/ *;.*//' | sed 's/.*/"&"/' | tr '\n' ' ')
cat > .gpu-transfer/ray/install.sh <<S
# source me on the GPU machine: Ray $RAY_VERSION (its files unpacked into site-packages, Java jars
# and source maps left out, binaries stripped) and the requirements it lacks from deps/.
SP=\$(python3 -c "import site; print(site.getsitepackages()[0])")
# requirements already installed are kept (no upgrade), missing ones come from deps/
python3 -m pip install -q --no-index --find-links .gpu-transfer/ray/deps --no-compile $requires 2>&1 | tail -2
xz -dc .gpu-transfer/ray/ray.tar.xz | tar xf - -C "\$SP"
mkdir -p \$HOME/bin
printf '#!/bin/sh\nexec python3 -m ray.scripts.scripts "\$@"\n' > \$HOME/bin/ray && chmod +x \$HOME/bin/ray
export PATH=\$HOME/bin:\$PATH
python3 -c "import ray; print('ray', ray.__version__)"
S
du -sh .gpu-transfer/ray
