"""The table of bench/tuner.sh from its raw records: best speedup so far against evaluations spent,
for the exhaustive grid, random search and the knob tuner at equal budgets.

Usage: python3 bench/tuner_table.py OUTDIR TASK REPEATS BUDGET
OUTDIR holds grid.json (`ksearch sweep --grid --json`), random-R.json (`ksearch sweep --random`)
and tuner-R.json (`ksearch show RUN --json` of a tuner run), R = 1..REPEATS. Where grid.json is
missing or incomplete (a grid too large for the time available), the shares are of the best
speedup any method found, and the table says so.
"""
import json
import sys


def curve(speedups):
    best, c = None, []
    for s in speedups:
        if s is not None:
            best = s if best is None else max(best, s)
        c.append(best)
    return c


def last(c):
    """The curve's final best so far: None when it is empty or no evaluation passed."""
    return c[-1] if c else None


def load(path, key, field="speedup"):
    try:
        with open(path) as f:
            return [e[field] for e in json.load(f)[key]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def main():
    out, task, repeats, budget = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rows = []
    grid = load(f"{out}/grid.json", "evaluations")
    if grid is not None:
        rows.append(("grid (exhaustive, enumeration order)", curve(grid)))
    for name, file, key in (("random", "random", "evaluations"), ("tuner (world model)", "tuner", "candidates")):
        for r in range(1, repeats + 1):
            speedups = load(f"{out}/{file}-{r}.json", key)
            if speedups is not None:
                rows.append((f"{name}, seed {r}", curve(speedups)[:budget]))
    if not rows:
        print(f"task {task}: nothing to tabulate: no readable grid.json, random-R.json or tuner-R.json "
              f"(R = 1..{repeats}) in {out}", file=sys.stderr)
        sys.exit(1)
    best = [last(c) for _, c in rows if last(c) is not None]
    if grid is not None and last(rows[0][1]) is not None:
        top, against = last(rows[0][1]), "grid best"
        print(f"task {task}: grid best {top:.3f}x over the reference ({len(grid)} valid assignments); "
              f"budget {budget} evaluations (a third of the grid)")
    elif best:
        top, against = max(best), "best found"
        why = ("no complete grid" if grid is None else "an empty grid" if not grid
               else "no passing candidate in the grid")
        print(f"task {task}: {why}; shares are of the best speedup any method below found, "
              f"{top:.3f}x; budget {budget} evaluations (a third of the valid assignments)")
    else:
        top, against = None, "best found"
        print(f"task {task}: no passing candidate in any record (every evaluation failed); "
              f"budget {budget} evaluations")
    marks = [max(1, round(budget * f)) for f in (0.1, 0.25, 0.5, 1.0)]

    def share(c, n):
        b = c[min(n, len(c)) - 1] if c else None
        return f"{100 * b / top:.0f}%" if b is not None and top else "-"

    def to90(c):
        if top is None:
            return "-"
        return next((i + 1 for i, b in enumerate(c) if b is not None and b >= 0.9 * top), "not reached")

    def speedup(c):
        b = last(c)
        return f"{b:.3f}x" if b is not None else "no passing candidate"

    print()
    print(f"| method | evaluations | best speedup | best so far after {' / '.join(map(str, marks))} "
          f"evaluations (% of {against}) | evaluations to 90% of {against} |")
    print("|---|---|---|---|---|")
    for name, c in rows:
        print(f"| {name} | {len(c)} | {speedup(c)} | {' / '.join(share(c, m) for m in marks)} | {to90(c)} |")


if __name__ == "__main__":
    main()
