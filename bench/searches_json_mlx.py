"""Refresh the MLX runs' entries of bench/results/searches.json from their run stores
(`ksearch show RUN --json`): rounds evaluated and answered, the engine's best and its in-run times
against the task's reference. Other keys of each entry (earlier sessions' notes) are kept.

Usage: python3 bench/searches_json_mlx.py [KSEARCH_BIN]   (default: ksearch on PATH)
"""
import json
import pathlib
import subprocess
import sys

RUNS = {
    "mlx_attention": "results/2026-12-02-h200-mlx_attention-agent",
    "mlx_attention_context_none": "results/2026-12-02-h200-mlx_attention-context-none-agent",
    "mlx_attention_context_hardware": "results/2026-12-02-h200-mlx_attention-context-hardware-agent",
    "mlx_mamba_scan": "results/2026-12-02-h200-mlx_mamba_scan-agent",
    "mlx_mamba_step": "results/2026-12-02-h200-mlx_mamba_step-agent",
}


def short(uuid, task):
    return uuid[len(task) + 1:] if uuid.startswith(task + "-") else uuid


def main():
    ksearch = sys.argv[1] if len(sys.argv) > 1 else "ksearch"
    root = pathlib.Path(__file__).resolve().parent.parent
    path = root / "bench/results/searches.json"
    table = json.loads(path.read_text())
    for key, run in RUNS.items():
        shown = subprocess.run([ksearch, "show", str(root / run), "--json"], capture_output=True,
                               text=True, check=True)
        d = json.loads(shown.stdout)
        cands = d["candidates"]
        evaluated = [c for c in cands if c.get("status") not in (None, "pending")]
        best = next((c for c in cands if c["id"] == d["best_candidate"]), None)
        entry = table.setdefault(key, {"run": run})
        entry.update({
            "rounds": max((c["round"] for c in evaluated), default=0),
            "rounds_answered": d["round"],
            "rounds_budget": d["rounds"],
            "evaluated_candidates": len(evaluated),
            "finished": d["state"] == "finished",
            "brain": d["brain"],
        })
        if best is not None:
            task = d["task"] if isinstance(d["task"], str) else d["task"].get("name", key)
            task = pathlib.Path(task).name
            entry["best_candidate"] = best["id"]
            entry["best_in_run_us"] = {short(w["uuid"], task): round(w["median_ns"] / 1e3, 1)
                                       for w in best["workloads"] if w.get("median_ns")}
            entry["reference_in_run_us"] = {short(w["uuid"], task):
                                            round(w["reference_median_ns"] / 1e3, 1)
                                            for w in best["workloads"]
                                            if w.get("reference_median_ns")}
            entry["ratios"] = {**entry.get("ratios", {}),
                               "best_candidate_reference_in_run": round(best["speedup"], 2)}
        print(f"{key}: {entry['rounds']} of {entry['rounds_budget']} rounds evaluated "
              f"({entry['rounds_answered']} answered), best {entry.get('best_candidate')} "
              f"{entry['ratios'].get('best_candidate_reference_in_run')}x")
    path.write_text(json.dumps(table, indent=1) + "\n")


if __name__ == "__main__":
    main()
