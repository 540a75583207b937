#!/usr/bin/env bash
# The device machine takes at most 64 MiB of working tree per call (tracked files and untracked
# ones that git does not ignore), and the run stores kept under results/ (run.sqlite, about 80 MB
# together by 2026-12-02) exceed it. Before a device call, `out` leaves every results/*/run.sqlite
# except those of the runs named out of what the call carries, without moving any file: a tracked
# store is dropped from the index (`git rm --cached`) and every left-out store is listed in
# .git/info/exclude, so agents still reading and writing those runs keep working during the call.
# After it, `in` puts the index and the exclude file back as they were. Do not commit in between
# (the index then lacks the stores left out); `status` says whether stores are left out.
#
# The stores grow (22 MB for a 120-round CUDA run by 2026-12-03) and the 64 MiB also counts the
# carried paths (MLX's install parts take 35-40 MB), while a store compresses 10-50x (mostly
# kernel source). `pack RUN_DIR...` therefore leaves every store out, the named ones too, and
# writes the named ones into .gpu-transfer/stores/runs.tar.xz: carry .gpu-transfer/stores and
# begin the device command with `tar xJf .gpu-transfer/stores/runs.tar.xz` (it puts each store
# back at results/NAME/run.sqlite there). `in` undoes `pack` as it undoes `out`.
#
# Usage: bench/device_tree.sh out [RUN_DIR...] | pack RUN_DIR... | in | status
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
gitdir=$(git rev-parse --git-dir)
exclude=$gitdir/info/exclude
list=$gitdir/ksearch-device-tree.list   # the stores left out; "tracked" or "untracked" each
begin='# ksearch device_tree.sh: stores left out of a device call (bench/device_tree.sh in)'
end='# end ksearch device_tree.sh'
size() { (git ls-files -z; git ls-files -z --others --exclude-standard) | while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1; }
case "${1:-}" in
  pack)
    shift
    if [ $# -eq 0 ]; then echo "$0 pack: name the runs whose stores the call needs" >&2; exit 2; fi
    stores=()
    for r in "$@"; do
      if [ ! -f "$r/run.sqlite" ]; then echo "$0 pack: $r/run.sqlite does not exist" >&2; exit 1; fi
      stores+=("$(realpath --relative-to="$root" "$r")/run.sqlite")
    done
    mkdir -p .gpu-transfer/stores
    # sqlite3 .backup would be safer against a writer mid-copy; the stores are only written by
    # agents answering requests, which the caller does not run on these runs meanwhile.
    tar cf - "${stores[@]}" | xz -T2 -6 >.gpu-transfer/stores/runs.tar.xz
    "$0" out
    echo "packed ${#stores[@]} stores into .gpu-transfer/stores/runs.tar.xz ($(( $(stat -c %s .gpu-transfer/stores/runs.tar.xz) / 1024 )) KiB): carry .gpu-transfer/stores, begin with: tar xJf .gpu-transfer/stores/runs.tar.xz"
    ;;
  out)
    shift
    if [ -e "$list" ]; then
      echo "stores are already left out ($list): run \`$0 in\` first" >&2; exit 1
    fi
    keep=" "
    for r in "$@"; do keep+="$(realpath -m "$r") "; done
    : >"$list"
    mkdir -p "$(dirname "$exclude")"
    echo "$begin" >>"$exclude"
    n=0
    for f in results/*/run.sqlite; do
      [ -e "$f" ] || continue
      case "$keep" in *" $(realpath -m "$(dirname "$f")") "*) continue;; esac
      if git ls-files --error-unmatch -- "$f" >/dev/null 2>&1; then
        git rm -q --cached -- "$f"
        printf 'tracked\t%s\n' "$f" >>"$list"
      else
        printf 'untracked\t%s\n' "$f" >>"$list"
      fi
      echo "/$f" >>"$exclude"
      n=$((n + 1))
    done
    echo "$end" >>"$exclude"
    echo "left $n run stores out; the tree now carries $(( $(size) / 1048576 )) MiB (limit 64)";;
  in)
    if [ -e "$exclude" ]; then
      awk -v b="$begin" -v e="$end" '$0==b{skip=1;next} $0==e{skip=0;next} !skip' "$exclude" >"$exclude.tmp"
      mv "$exclude.tmp" "$exclude"
    fi
    n=0
    if [ -e "$list" ]; then
      while IFS=$'\t' read -r kind f; do
        if [ "$kind" = tracked ]; then git add -- "$f"; fi
        n=$((n + 1))
      done <"$list"
      rm -f "$list"
    fi
    echo "put $n run stores back in the tree";;
  status)
    if [ -e "$list" ]; then echo "$(wc -l <"$list") run stores are left out (run \`$0 in\` before committing)"; fi
    echo "the tree carries $(( $(size) / 1048576 )) MiB (limit 64, before carried paths)";;
  *) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2;;
esac
