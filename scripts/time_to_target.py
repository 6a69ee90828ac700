#!/usr/bin/env python3
"""Time to a target validation loss, re-read from an experiment's own curves.

`mrmf experiment` stops each method the first epoch its validation loss
touches the target. When the validation loss is noisy (a spike down is as
likely as one up), that first touch says more about the noise than about the
method. Run the experiment with an unreachable target and a fixed epoch budget
instead, so that every run records its whole curve, and let this script ask
the question several ways:

  first      the wall time at which the final-resolution model first has
             val_loss <= T (what the experiment itself measures);
  sustained  the time at the end of the first run of K consecutive epochs
             with val_loss <= T (K = --consecutive, default 2);
  best@B     the lowest val_loss reached within the baseline's mean total
             time B (equal-time comparison).

Time is the method's end-to-end wall time: every stage before the final one
(coarse, dense, fusion) plus the final stage's epochs up to that point.

  scripts/time_to_target.py RUN_DIR --targets 0.14 0.12 [--consecutive 2] [--out FILE]

RUN_DIR is an `mrmf experiment --out` folder (summary.json and per-run
metrics.jsonl files). Standard library only.
"""
import argparse
import glob
import json
import math
import os
import statistics
import sys


def load_curves(run_dir):
    """{(method, seed): [(t_end_of_epoch_s, val_loss), ...]} for the final stage."""
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    curves = {}
    for run in summary["runs"]:
        method, seed, stages = run["method"], run["seed"], run["stages"]
        final = stages[-1]["name"]
        run_dir_k = os.path.join(run_dir, method, "seed%d" % seed)
        recs = []
        for path in glob.glob(os.path.join(run_dir_k, "*", "metrics.jsonl")):
            with open(path) as f:
                recs += [r for r in map(json.loads, f) if r["tag"] == final]
        if not recs:
            sys.exit("time_to_target: no metrics.jsonl with tag '%s' under %s" % (final, run_dir_k))
        t = sum(s["time_s"] for s in stages[:-1]) + run.get("fusion_s", 0.0)
        pts = []
        for r in sorted(recs, key=lambda x: x["epoch"]):
            t += r["epoch_s"]
            pts.append((t, r["val_loss"]))
        curves[(method, seed)] = pts
    return curves, summary


def first_time(pts, target, k):
    run = 0
    for t, v in pts:
        run = run + 1 if v <= target else 0
        if run >= k:
            return t
    return math.nan


def best_within(pts, budget):
    vals = [v for t, v in pts if t <= budget]
    return min(vals) if vals else math.nan


def mean_sd(xs):
    ok = [x for x in xs if not math.isnan(x)]
    if not ok:
        return "not reached"
    miss = len(xs) - len(ok)
    s = "%.1f" % statistics.mean(ok)
    if len(ok) > 1:
        s += " ± %.1f" % statistics.stdev(ok)
    if miss:
        s += " (%d of %d not reached)" % (miss, len(xs))
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--targets", type=float, nargs="+", required=True)
    ap.add_argument("--consecutive", type=int, default=2)
    ap.add_argument("--out", help="also write the table to this file")
    a = ap.parse_args()
    if a.consecutive < 1:
        sys.exit("time_to_target: --consecutive must be >= 1")
    curves, summary = load_curves(a.run_dir)
    methods = []  # in the order the experiment ran them
    for run in summary["runs"]:
        if run["method"] not in methods:
            methods.append(run["method"])
    seeds = sorted({k[1] for k in curves})
    base = [curves[("baseline", s)][-1][0] for s in seeds if ("baseline", s) in curves]
    budget = statistics.mean(base) if base else math.inf

    lines = ["| method | target | first ≤ T (s) | %d in a row ≤ T (s) | vs baseline (first / in a row) |" % a.consecutive,
             "|---|---|---|---|---|"]
    for target in a.targets:
        ref = {}
        for m in methods:
            run_seeds = [s for s in seeds if (m, s) in curves]
            f = {s: first_time(curves[(m, s)], target, 1) for s in run_seeds}
            k = {s: first_time(curves[(m, s)], target, a.consecutive) for s in run_seeds}
            if m == "baseline":
                ref = {"f": f, "k": k}

            def ratio(xs, ys):  # mean over the seeds both have, when every one reached T
                common = [s for s in xs if s in ys]
                if not common or any(math.isnan(xs[s]) or math.isnan(ys[s]) for s in common):
                    return "–"
                return "%.2f" % (statistics.mean(xs[s] for s in common) / statistics.mean(ys[s] for s in common))

            rel = "–" if m == "baseline" or not ref else "%s / %s" % (ratio(f, ref["f"]), ratio(k, ref["k"]))
            lines.append("| %s | %.3f | %s | %s | %s |" % (m, target, mean_sd(list(f.values())),
                                                         mean_sd(list(k.values())), rel))
    lines += ["", "Best validation loss within the baseline's mean total time (%.0f s):" % budget, "",
              "| method | best val_loss | final val_loss (whole budget of epochs) |", "|---|---|---|"]
    for m in methods:
        b = [best_within(curves[(m, s)], budget) for s in seeds if (m, s) in curves]
        fin = [curves[(m, s)][-1][1] for s in seeds if (m, s) in curves]
        lines.append("| %s | %.4f ± %.4f | %.4f ± %.4f |" % (
            m, statistics.mean(b), statistics.stdev(b) if len(b) > 1 else 0.0,
            statistics.mean(fin), statistics.stdev(fin) if len(fin) > 1 else 0.0))
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
