#!/usr/bin/env python3
"""Write one candidate of a run out of its store into a folder, as the coder gave it.

    python3 bench/candidate_files.py RUN_DIR CANDIDATE DEST

CANDIDATE is a candidate id or `best` (the engine's best, as `ksearch show --json` reports it in
`best_candidate`; KSEARCH names the binary, default `ksearch`). Prints DEST and the files written.
The store is opened read-only, so a run being answered or evaluated elsewhere is not disturbed.
"""

import json
import os
import sqlite3
import subprocess
import sys


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    run, which, dest = sys.argv[1:]
    if which == "best":
        shown = subprocess.run([os.environ.get("KSEARCH", "ksearch"), "show", "--json", run],
                               check=True, capture_output=True, text=True)
        which = json.loads(shown.stdout).get("best_candidate")
        if which is None:
            print(f"{run}: the run has no best candidate yet", file=sys.stderr)
            return 1
    store = os.path.join(run, "run.sqlite")
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    row = db.execute("SELECT sources FROM candidates WHERE id = ?", (int(which),)).fetchone()
    if row is None:
        print(f"{store}: no candidate {which}", file=sys.stderr)
        return 1
    os.makedirs(dest, exist_ok=True)
    names = []
    for f in json.loads(row[0]):
        path = os.path.join(dest, f["path"])
        if os.path.commonpath([os.path.realpath(path), os.path.realpath(dest)]) != os.path.realpath(dest):
            print(f"candidate {which}: file name {f['path']!r} leaves {dest}", file=sys.stderr)
            return 1
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as out:
            out.write(f["content"])
        names.append(f["path"])
    print(f"candidate {which} -> {dest}: {' '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
