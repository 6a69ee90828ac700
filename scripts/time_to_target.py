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
  fit@X      with --fit-at X ...: the final stage's training loss (the
             mean over its epoch's steps) of the last epoch ending at or
             before time X -- how fast each model fits, apart from the
             validation loss's noise ("–" while a run is still pretraining).

Time is the method's end-to-end wall time: every stage before the final one
(coarse, dense, fusion), the final stage's time outside its epochs (set-up,
BN re-estimation, checkpoints; all counted at its start), plus its epochs up
to that point.
On a shared or noisy machine, --epoch-cost replaces wall time with a fixed
cost per epoch at each resolution (e.g. measured once, quietly, with
`mrmf bench`): 1=1 2=0.53 4=0.28 counts time in full-resolution epochs,
and fusion costs nothing.

  scripts/time_to_target.py RUN_DIR [RUN_DIR ...] --targets 0.14 0.12 [--consecutive 2]
                            [--epoch-cost 1=1 2=0.53] [--fit-at 10 20] [--out FILE]

--relative 1.05 1.02 1.0 instead of --targets sets the targets from the
baseline itself: those multiples of its best validation loss (mean over
seeds of each seed's lowest), for experiments run before the baseline's
reach is known (the paper's target is its converged baseline's loss).

RUN_DIR is an `mrmf experiment --out` folder (summary.json and per-run
metrics.jsonl files, or, for runs without them, the histories recorded in
its experiment_state.json). With several, their runs are compared together (a
baseline from one experiment, a variant from another); a method found in an
earlier folder is renamed "<method>@<folder name>" in a later one. With
--pool, same-named methods of all folders are pooled instead (each folder's
seeds counted as runs of their own; ratios are then unpaired means), or
with --pool baseline only those named: for repeats of one configuration, or
baselines run with another experiment's settings. --final-epochs N keeps
only the first N epochs of every run's final stage (curves of different
lengths compared on one budget; a plateau schedule does not depend on the
length).
A run that diverged (summary.json: stop_reason "diverged") reaches no
target after its divergence, and none at all when it diverged before its
final stage; its final loss reads "diverged".
Standard library only.
"""
import argparse
import glob
import json
import math
import os
import statistics
import sys


def state_history(run_dir, method, seed):
    """The epoch records of a finished run kept in the folder's
    experiment_state.json (`mrmf experiment` records each run's stages with
    their histories there): enough when the run's own folders are gone, as
    for an experiment resumed in a new checkout from its state alone."""
    path = os.path.join(run_dir, "experiment_state.json")
    if not os.path.exists(path):
        return []
    state = read_json(path)
    for run in state.get("runs", []) if isinstance(state, dict) else []:
        if run["method"] == method and run["seed"] == seed:
            return [r for st in run["stages"] for r in st.get("history", [])]
    return []


def load_curves(run_dir, cost=None, rename=None, final_epochs=None, run_key=None, fits=None):
    """{(method, seed): [(t_end_of_epoch, val_loss), ...]} for the final stage,
    and the run order of the methods. `cost`: resolution -> cost of one epoch
    (None: wall seconds). `rename`: method -> the name to report it under.
    `final_epochs`: keep that many epochs of the final stage. `run_key`:
    seed -> the key a run is filed under (default: the seed). `fits`: a dict
    that receives the same keys with [(t_end_of_epoch, train_loss), ...]."""
    summary = read_summary(run_dir)
    rename = rename or {}
    curves, methods = {}, []
    for run in summary["runs"]:
        method, seed, stages = run["method"], run["seed"], run.get("stages") or []
        name = rename.get(method, method)
        if name not in methods:
            methods.append(name)
        run_dir_k = os.path.join(run_dir, method, "seed%d" % seed)
        # A run that diverged before its final stage (a coarse or dense
        # stage, or a concurrent run's split probe: no stage at all) has no
        # final-resolution curve: it never reaches a target. Its last
        # stage's curve is at another resolution and must not stand in for
        # one (it did: a coarse stage diverged in epoch 3 made its method
        # the fastest to every target its first epochs crossed).
        diverged_early = not stages or (stages[-1].get("stop_reason") == "diverged" and
                                        stages[-1].get("role", "finetune") not in ("baseline", "finetune"))
        final = None if diverged_early else stages[-1]["name"]
        recs = []
        if final is not None:
            for path in glob.glob(os.path.join(run_dir_k, "*", "metrics.jsonl")):
                recs += [r for r in read_jsonl(path) if r.get("tag") == final]
            if not recs:  # a run finished in another checkout: its record in the state
                recs = [r for r in state_history(run_dir, method, seed) if r.get("tag") == final]
            # A final stage that diverged in its first epoch wrote no epoch: not an error.
            if not recs and stages[-1].get("stop_reason") != "diverged":
                sys.exit("time_to_target: no metrics.jsonl with tag '%s' under %s (nor a history in %s)"
                         % (final, run_dir_k, os.path.join(run_dir, "experiment_state.json")))

        def epoch_cost(stage):
            res = str(stage.get("resolution", "1"))
            if res not in cost:
                sys.exit("time_to_target: --epoch-cost has no cost for resolution %s (stage %s in %s)"
                         % (res, stage["name"], run_dir))
            return cost[res]

        # Pre-fusion time. A concurrent run's coarse and dense groups train at
        # the same time, each on its share of the ranks: the slower group's
        # time counts (in epoch equivalents: an epoch on r of the R ranks the
        # final stage uses costs R / r of one on all of them; an extra epoch
        # cut short counts whole).
        pre = stages if diverged_early else stages[:-1]
        if cost is None:
            times = [s["time_s"] for s in pre]
            t = (max(times, default=0.0) if run.get("concurrent_groups") else sum(times)) + run.get("fusion_s", 0.0)
            t += run.get("split_probe_s", 0.0)  # concurrent training's probe that sized its groups
        elif run.get("concurrent_groups"):
            ranks = stages[-1].get("ranks", 1) if stages else 1
            t = max((s["epochs"] * epoch_cost(s) * ranks / s.get("ranks", ranks) for s in pre), default=0.0)
        else:
            t = sum(s["epochs"] * epoch_cost(s) for s in pre)
        pts, fit = [], []
        recs = sorted(recs, key=lambda x: x["epoch"])
        if cost is None and not diverged_early and "time_s" in stages[-1]:
            # The final stage's time outside its epochs (loader and model
            # set-up, BN re-estimation of a fused model, the checkpoints
            # between epochs), counted at its start as the earlier stages'
            # whole time_s is: each crossing is then at most that much late.
            t += max(0.0, stages[-1]["time_s"] - sum(r["epoch_s"] + r.get("earlier_s", 0.0) for r in recs))
        recs = recs[:final_epochs]
        for r in recs:
            # An epoch continued from a mid-epoch checkpoint: its time in the
            # earlier process (earlier_s) was spent too.
            t += r["epoch_s"] + r.get("earlier_s", 0.0) if cost is None else epoch_cost(stages[-1])
            pts.append((t, loss(r, "val_loss")))
            fit.append((t, loss(r, "train_loss")))
        if not pts or stages[-1].get("stop_reason") == "diverged":
            # Diverged: a non-finite point where the run ended (its only one
            # when no final-stage epoch finished), so that its final loss
            # reads as diverged, not as its last finite epoch's.
            pts.append((t, math.nan))
            fit.append((t, math.nan))
        key = (name, run_key(seed) if run_key else seed)
        curves[key] = pts
        if fits is not None:
            fits[key] = fit
    return curves, methods


def read_json(path):
    """A JSON file, or an error naming it (a folder that is no experiment, or
    a file cut short by a full disk or a killed process)."""
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        sys.exit("time_to_target: cannot read %s: %s" % (path, e.strerror or e))
    except ValueError as e:
        sys.exit("time_to_target: %s is not valid JSON (%s): empty or cut short?" % (path, e))


def read_summary(run_dir):
    """An experiment folder's summary.json, checked to list runs."""
    if not os.path.isdir(run_dir):
        sys.exit("time_to_target: %s is not a folder (give `mrmf experiment --out` folders)" % run_dir)
    path = os.path.join(run_dir, "summary.json")
    if not os.path.isfile(path):
        sys.exit("time_to_target: %s not found (an experiment folder has one after its first finished run)" % path)
    summary = read_json(path)
    if not isinstance(summary, dict) or not isinstance(summary.get("runs"), list):
        sys.exit("time_to_target: %s has no list of runs (not an `mrmf experiment` summary)" % path)
    if not summary["runs"]:
        sys.exit("time_to_target: %s lists no runs" % path)
    return summary


def read_jsonl(path):
    """The records of a metrics.jsonl; blank lines skipped (as mrmf does), a
    line that is not JSON an error naming the file and line."""
    recs = []
    try:
        with open(path) as f:
            for i, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    recs.append(json.loads(line))
                except ValueError as e:
                    sys.exit("time_to_target: %s, line %d: not JSON (%s); a run killed while writing it? "
                             "`mrmf experiment --resume` rewrites the file" % (path, i, e))
    except OSError as e:
        sys.exit("time_to_target: cannot read %s: %s" % (path, e.strerror or e))
    return recs


def parse_costs(items):
    cost = {}
    for it in items:
        res, sep, c = it.partition("=")
        try:
            value = float(c)
        except ValueError:
            value = -1.0
        if not sep or not res or value <= 0:
            sys.exit("time_to_target: --epoch-cost expects RESOLUTION=COST with COST > 0 (e.g. 2=0.53), got '%s'" % it)
        cost[res] = value
    return cost


def loss(record, key):
    """A loss of an epoch record; mrmf writes a non-finite loss as null."""
    v = record.get(key)
    return math.nan if v is None else float(v)


def first_time(pts, target, k):
    run = 0
    for t, v in pts:
        run = run + 1 if v <= target else 0
        if run >= k:
            return t
    return math.nan


def value_at(pts, x):
    """The value of the last point at or before x (NaN if none is)."""
    vals = [v for t, v in pts if t <= x + 1e-9]
    return vals[-1] if vals else math.nan


def best_within(pts, budget):
    vals = [v for t, v in pts if t <= budget and not math.isnan(v)]
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
    ap.add_argument("run_dirs", nargs="+", metavar="run_dir")
    goal = ap.add_mutually_exclusive_group(required=True)
    goal.add_argument("--targets", type=float, nargs="+")
    goal.add_argument("--relative", type=float, nargs="+", metavar="F",
                      help="targets at these multiples of the baseline's best validation loss")
    ap.add_argument("--consecutive", type=int, default=2)
    ap.add_argument("--epoch-cost", nargs="+", metavar="RES=COST",
                    help="cost of one epoch per resolution (e.g. 1=1 2=0.53 4=0.28) instead of wall time")
    # One value at most (a comma list): nargs="*" swallowed the folders after it.
    ap.add_argument("--pool", nargs="?", const="", metavar="METHOD[,METHOD...]",
                    help="pool same-named methods (all, or those named) of all folders, their seeds as separate runs")
    ap.add_argument("--final-epochs", type=int, metavar="N",
                    help="only the first N epochs of each run's final stage")
    ap.add_argument("--fit-at", type=float, nargs="+", metavar="X",
                    help="also the final stage's training loss at these times (seconds, or epochs with --epoch-cost)")
    ap.add_argument("--out", help="also write the table to this file")
    a = ap.parse_args()
    if a.pool is not None:
        a.pool = [m for m in a.pool.split(",") if m]
    if a.consecutive < 1:
        sys.exit("time_to_target: --consecutive must be >= 1")
    if a.final_epochs is not None and a.final_epochs < 1:
        sys.exit("time_to_target: --final-epochs must be >= 1")
    cost = parse_costs(a.epoch_cost) if a.epoch_cost else None
    unit = "s" if cost is None else "epochs"
    curves, fits, methods = {}, {}, []  # methods in the order the experiments ran them
    pooled = lambda m: a.pool is not None and (not a.pool or m in a.pool)
    for i, d in enumerate(a.run_dirs):
        names = [r["method"] for r in read_summary(d)["runs"]]
        label = os.path.basename(os.path.normpath(d))
        # Unique names: a third folder with an earlier one's base name (runs/a/exp,
        # runs/b/exp, runs/c/exp) silently replaced that folder's runs.
        rename = {}
        for m in names:
            if m in methods and not pooled(m):
                new = "%s@%s" % (m, label)
                if new in methods:
                    new = "%s@%s#%d" % (m, label, i + 1)
                rename[m] = new
        key = (lambda seed, i=i: (i, seed)) if a.pool is not None else None
        c, ms = load_curves(d, cost, rename, a.final_epochs, key, fits)
        curves.update(c)
        methods += [m for m in ms if m not in methods]
    seeds = sorted({k[1] for k in curves})
    base = [curves[("baseline", s)][-1][0] for s in seeds if ("baseline", s) in curves]
    budget = statistics.mean(base) if base else math.inf
    if a.relative:
        best = [min((v for _, v in curves[("baseline", s)] if not math.isnan(v)), default=math.nan)
                for s in seeds if ("baseline", s) in curves]
        best = [b for b in best if not math.isnan(b)]
        if not best:
            if base:  # a baseline exists, but no epoch of it has a finite validation loss
                sys.exit("time_to_target: --relative: the baseline has no finite validation loss "
                         "(diverged?); give --targets instead")
            sys.exit("time_to_target: --relative needs a method named 'baseline' in the experiment folders")
        if any(f <= 0 for f in a.relative):
            sys.exit("time_to_target: --relative factors must be > 0")
        a.targets = [f * statistics.mean(best) for f in a.relative]

    lines = []
    if a.pool is not None or a.final_epochs:
        lines += ["Runs: %s%s." % ("; ".join("%s %d" % (m, sum(1 for k in curves if k[0] == m)) for m in methods),
                                   ", first %d epochs of each final stage" % a.final_epochs if a.final_epochs else ""), ""]
    if a.relative:
        lines += ["Targets: %s x the baseline's best validation loss (%.4f, mean over seeds)."
                  % (", ".join("%g" % f for f in a.relative), statistics.mean(best)), ""]
    lines += ["| method | target | first ≤ T (%s) | %d in a row ≤ T (%s) | vs baseline (first / in a row) |"
             % (unit, a.consecutive, unit),
             "|---|---|---|---|---|"]
    def crossings(m, target):  # per seed: first time <= target, and a.consecutive in a row
        run_seeds = [s for s in seeds if (m, s) in curves]
        return ({s: first_time(curves[(m, s)], target, 1) for s in run_seeds},
                {s: first_time(curves[(m, s)], target, a.consecutive) for s in run_seeds})

    for target in a.targets:
        # The baseline's crossings first: a method listed before it (its
        # folder given first, or a baseline added to an experiment later)
        # compares against it too.
        ref = dict(zip(("f", "k"), crossings("baseline", target))) if "baseline" in methods else {}
        for m in methods:
            f, k = crossings(m, target)

            def ratio(xs, ys):  # mean over the seeds both have (pooled: all runs), when every one reached T
                common = [s for s in xs if s in ys]
                if a.pool is not None:
                    if not xs or not ys or any(math.isnan(v) for v in list(xs.values()) + list(ys.values())):
                        return "–"
                    return "%.2f" % (statistics.mean(xs.values()) / statistics.mean(ys.values()))
                if not common or any(math.isnan(xs[s]) or math.isnan(ys[s]) for s in common):
                    return "–"
                return "%.2f" % (statistics.mean(xs[s] for s in common) / statistics.mean(ys[s] for s in common))

            rel = "–" if m == "baseline" or not ref else "%s / %s" % (ratio(f, ref["f"]), ratio(k, ref["k"]))
            lines.append("| %s | %.3f | %s | %s | %s |" % (m, target, mean_sd(list(f.values())),
                                                         mean_sd(list(k.values())), rel))
    lines += ["", ("Best validation loss within the baseline's mean total time (%.1f %s):" % (budget, unit))
              if base else "Best validation loss (no baseline: over each whole curve):", "",
              "| method | best val_loss | final val_loss (whole budget of epochs) |", "|---|---|---|"]
    for m in methods:
        b = [best_within(curves[(m, s)], budget) for s in seeds if (m, s) in curves]
        fin = [curves[(m, s)][-1][1] for s in seeds if (m, s) in curves]
        n = len(b)
        b = [x for x in b if not math.isnan(x)]  # a seed with no epoch ending within the budget
        best = "–" if not b else "%.4f ± %.4f" % (statistics.mean(b), statistics.stdev(b) if len(b) > 1 else 0.0)
        if b and len(b) < n:
            best += " (%d of %d seeds with an epoch inside the budget)" % (len(b), n)
        # A diverged run's final loss is not finite: said, not averaged in as "nan".
        ok = [x for x in fin if not math.isnan(x)]
        final = "diverged" if not ok else "%.4f ± %.4f" % (statistics.mean(ok), statistics.stdev(ok) if len(ok) > 1 else 0.0)
        if ok and len(ok) < len(fin):
            final += " (%d of %d runs diverged)" % (len(fin) - len(ok), len(fin))
        lines.append("| %s | %s | %s |" % (m, best, final))
    if a.fit_at:
        lines += ["", "Training loss of the final stage at time X (its last epoch ending by then; mean over runs, "
                  "'–' while some run is still pretraining):", "",
                  "| method | " + " | ".join("X = %g %s" % (x, unit) for x in a.fit_at) + " |",
                  "|---" * (len(a.fit_at) + 1) + "|"]
        for m in methods:
            cells = []
            for x in a.fit_at:
                v = [value_at(fits[(m, s)], x) for s in seeds if (m, s) in fits]
                cells.append("–" if not v or any(math.isnan(y) for y in v) else "%.4f" % statistics.mean(v))
            lines.append("| %s | %s |" % (m, " | ".join(cells)))
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if a.out:
        try:
            with open(a.out, "w") as f:
                f.write(text)
        except OSError as e:
            sys.exit("time_to_target: cannot write --out %s: %s" % (a.out, e.strerror or e))


if __name__ == "__main__":
    main()
