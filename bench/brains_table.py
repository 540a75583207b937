#!/usr/bin/env python3
"""Tabulates agent-mode runs: the highest speedup measured in the search and in the final
re-measurement, the candidate the run chose (and its final re-measurement), the highest
speedup measured after given rounds, and how often a node's kept candidate (its solution) was
not the fastest candidate measured on that node. Speedups are against the reference as timed in
each candidate's own evaluation, so they carry the reference's drift; the run's choice is made
by the candidates' own times (docs/engine.md).

Usage: bench/brains_table.py KSEARCH_BIN RUN_DIR... [--at 5,10,15,20,25] [--json OUT]
"Fastest" is by the geometric mean of the candidate's own per-workload medians over the workloads
both candidates measured (the paired rule's quantity), beyond the larger relative IQR of the two
(so noise-level differences do not count).
"""
import json, math, subprocess, sys


def show(binary, run):
    out = subprocess.run([binary, "show", run, "--json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def times(c):
    return {w["uuid"]: (w["median_ns"], w.get("iqr_ns") or 0.0) for w in c.get("workloads") or []
            if w.get("median_ns") and w.get("status") == "passed"}


def faster(a, b):
    """True when a is faster than b beyond noise on their shared workloads."""
    ta, tb = times(a), times(b)
    shared = [u for u in ta if u in tb]
    if not shared:
        return False
    ratio = math.exp(sum(math.log(tb[u][0] / ta[u][0]) for u in shared) / len(shared))
    noise = max(max(ta[u][1] / ta[u][0], tb[u][1] / tb[u][0]) for u in shared)
    return ratio > 1 + max(noise, 0.01)


def main(argv):
    binary, rest = argv[1], argv[2:]
    at = [5, 10, 15, 20, 25]
    out_json = None
    runs = []
    i = 0
    while i < len(rest):
        if rest[i] == "--at":
            at = [int(x) for x in rest[i + 1].split(",")]; i += 2
        elif rest[i] == "--json":
            out_json = rest[i + 1]; i += 2
        else:
            runs.append(rest[i]); i += 1
    rows = []
    for run in runs:
        d = show(binary, run)
        cands = d["candidates"]
        passed = [c for c in cands if c["status"] == "passed" and c["speedup"]]
        best_at = []
        for r in at:
            s = [c["speedup"] for c in passed if c["round"] <= r]
            best_at.append(round(max(s), 2) if s else None)
        nodes = d["world_model"]["decision_tree"]["nodes"]
        kept_not_fastest = 0
        judged = 0
        for n in nodes:
            ref = n.get("solution_ref")
            if not ref or n["node_id"] == "root":
                continue
            kept = next((c for c in cands if c["id"] == ref["candidate_id"]), None)
            mine = [c for c in passed if c["node_id"] == n["node_id"]]
            if kept is None or not mine:
                continue
            judged += 1
            if any(faster(c, kept) for c in mine if c["id"] != kept["id"]):
                kept_not_fastest += 1
        final = [c.get("final_speedup") for c in cands if c.get("final_speedup")]
        chosen = next((c for c in cands if c["id"] == d.get("best_candidate")), None)
        chosen_final = chosen.get("final_speedup") if chosen else None
        rows.append({"run": run, "task": d["task"], "rounds": d["round"], "state": d["state"][:40],
                     "best_speedup": round(max((c["speedup"] for c in passed), default=0), 2),
                     "best_final": round(max(final), 2) if final else None,
                     "run_best": d.get("best_candidate"),
                     "run_best_final": round(chosen_final, 2) if chosen_final else None,
                     "best_at": dict(zip(at, best_at)),
                     "solved_nodes": judged, "kept_not_fastest": kept_not_fastest})
    head = ("| run | rounds | highest search speedup | highest final re-measurement | the run's best: candidate, "
            "final | " + " | ".join(f"@{r}" for r in at) + " | nodes kept not fastest |")
    print(head)
    print("|" + "---|" * (6 + len(at)))
    for r in rows:
        final = f"{r['best_final']}x" if r["best_final"] else "-"
        chosen = f"{r['run_best']}, {r['run_best_final']}x" if r["run_best_final"] else (str(r["run_best"]) if r["run_best"] else "-")
        print(f"| {r['run']} | {r['rounds']} | {r['best_speedup']}x | {final} | {chosen} | "
              + " | ".join(f"{v}x" if v else "-" for v in r["best_at"].values())
              + f" | {r['kept_not_fastest']} of {r['solved_nodes']} |")
    if out_json:
        json.dump(rows, open(out_json, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv)
