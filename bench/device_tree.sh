#!/usr/bin/env bash
# The device machine takes at most 64 MiB of working tree per call (tracked files and untracked
# ones that git does not ignore), and the run stores kept under results/ (run.sqlite, about 80 MB
# together by 2026-12-02) exceed it. Before a device call, `out` moves every results/*/run.sqlite
# except those of the runs named to a stash outside the checkout; after it, `in` moves them back.
# `status` prints what the call would carry.
#
# Usage: bench/device_tree.sh out [RUN_DIR...] | in | status
#   STASH: where they go (default: ../ksearch-run-stash beside the checkout)
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
stash=${STASH:-$(dirname "$root")/ksearch-run-stash}
size() { (git ls-files -z; git ls-files -z --others --exclude-standard) | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1; }
case "${1:-}" in
  out)
    shift
    if [ -d "$stash" ] && [ -n "$(find "$stash" -name run.sqlite -print -quit)" ]; then
      echo "$stash already holds run stores: run \`$0 in\` first" >&2; exit 1
    fi
    keep=" "
    for r in "$@"; do keep+="$(realpath -m "$r") "; done
    n=0
    for f in results/*/run.sqlite; do
      [ -e "$f" ] || continue
      case "$keep" in *" $(realpath -m "$(dirname "$f")") "*) continue;; esac
      mkdir -p "$stash/$(dirname "$f")"
      mv "$f" "$stash/$f"
      n=$((n + 1))
    done
    echo "moved $n run stores to $stash; the tree now carries $(( $(size) / 1048576 )) MiB (limit 64)";;
  in)
    n=0
    if [ -d "$stash" ]; then
      while IFS= read -r f; do
        rel=${f#"$stash"/}
        if [ -e "$rel" ]; then echo "not moving $f back: $rel exists" >&2; continue; fi
        mv "$f" "$rel"
        n=$((n + 1))
      done < <(find "$stash" -name run.sqlite)
    fi
    echo "moved $n run stores back";;
  status)
    echo "the tree carries $(( $(size) / 1048576 )) MiB (limit 64, before carried paths)";;
  *) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2;;
esac
