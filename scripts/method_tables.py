"""Markdown tables that compare training methods by their curves, in
full-resolution epoch equivalents: mean first crossings of validation-loss
targets (and two epochs in a row) against the baseline's mean over the same
seeds, each seed's crossings, best losses, and the training loss at equal
times. The result folders' method_table.py scripts (docs/results/ni64k_*)
only say where each run's final-stage curve lies and what its pretraining
cost; the crossing rule is time_to_target.py's.

A `runs` mapping is {(method, seed): [(x, value), ...]} with x in epoch
equivalents, the pretraining included."""
import json
import math
import os
import statistics as st

from time_to_target import first_time, value_at


def records(path):
    """A run folder's metrics.jsonl, one record per epoch (a resumed epoch's
    last record wins), in epoch order."""
    mp = os.path.join(path, "metrics.jsonl")
    recs = {}
    with open(mp) as f:
        for i, line in enumerate(f, 1):
            if not line.strip():  # blank lines skipped, as mrmf does
                continue
            try:
                r = json.loads(line)
            except ValueError as e:  # a run killed while writing: named, not a traceback
                raise SystemExit("%s, line %d: not JSON (%s)" % (mp, i, e))
            recs[r["epoch"]] = r
    return [recs[e] for e in sorted(recs)]


def curve(path, offset, key="val_loss", budget=None):
    """(x, value) per epoch of a run folder, epoch e ending at offset + e + 1."""
    pts = [(offset + i + 1, math.nan if r.get(key) is None else r[key]) for i, r in enumerate(records(path))]
    return [p for p in pts if budget is None or p[0] <= budget + 1e-9]


def stage_cost(path, cost):
    """Epoch equivalents a finished pretraining stage took."""
    return len(records(path)) * cost


def cell(x):
    return "–" if x is None else "%.1f" % x if x != int(x) else "%d" % x


def _first(c, target, k):
    t = first_time(c, target, k)
    return None if math.isnan(t) else t


def _mean_first(runs, m, seeds, target, k):
    xs = [_first(runs[(m, s)], target, k) for s in seeds]
    return None if not xs or None in xs else st.mean(xs)


def seeds_of(runs, m):
    return sorted(s for (mm, s) in runs if mm == m)


def crossing_table(runs, methods, names, targets, k, baseline="baseline"):
    """Mean first time at or under each target (k epochs in a row), and each
    method's ratio to the baseline, both means over the seeds both have; '–'
    where some seed never gets there."""
    others = [m for m in methods if m != baseline]
    lines = ["| target (%s) | " % ("first crossing" if k == 1 else "%d epochs in a row" % k)
             + " | ".join("%s (%d)" % (names[m], len(seeds_of(runs, m))) for m in methods) + " | "
             + " | ".join("%s / %s" % (names[m], names[baseline]) for m in others) + " |",
             "|---" * (1 + len(methods) + len(others)) + "|"]
    for target in targets:
        row = ["%.3f" % target]
        for m in methods:
            v = _mean_first(runs, m, seeds_of(runs, m), target, k)
            row.append(cell(None if v is None else round(v, 1)))
        for m in others:
            # both over the seeds both have (a baseline seed may be missing:
            # failed or still running)
            common = [s for s in seeds_of(runs, m) if (baseline, s) in runs]
            a = _mean_first(runs, m, common, target, k)
            b = _mean_first(runs, baseline, common, target, k)
            row.append("–" if a is None or b is None else "%.2fx" % (a / b))
        lines.append("| " + " | ".join(row) + " |")
    return lines


def seed_table(runs, methods, names, targets, seed):
    have = [m for m in methods if (m, seed) in runs]
    lines = ["| target (first crossing), seed %d | " % seed + " | ".join(names[m] for m in have) + " |",
             "|---" * (len(have) + 1) + "|"]
    for target in targets:
        lines.append("| %.3f | " % target + " | ".join(cell(_first(runs[(m, seed)], target, 1)) for m in have) + " |")
    return lines


def best_lines(runs, methods, budget):
    lines = []
    for (m, s) in sorted(runs, key=lambda k: (k[1], methods.index(k[0]))):
        c = runs[(m, s)]
        if not c:  # a run still pretraining at the budget, or with no epoch yet: said, not an IndexError
            lines.append("%s seed %d: no epoch within %g epoch equivalents" % (m, s, budget))
            continue
        lines.append("%s seed %d: best %.4f within %g epoch equivalents (curve ends at %g)"
                     % (m, s, min((v for _, v in c if not math.isnan(v)), default=math.nan), budget, c[-1][0]))
    return lines


def fit_table(train, methods, names, xs):
    """Training loss (the epoch's mean over its steps) at whole epoch
    equivalents, mean over each method's seeds: how fast each model fits,
    apart from the validation loss's noise. A stage's last epoch at or
    before the point counts; '–' while some seed is still pretraining."""
    lines = ["| epoch equivalents | " + " | ".join("%s train loss" % names[m] for m in methods) + " |",
             "|---" * (len(methods) + 1) + "|"]
    for x in xs:
        vals = []
        for m in methods:
            v = [value_at(train[(m, s)], x) for s in seeds_of(train, m)]
            vals.append("–" if not v or any(math.isnan(y) for y in v) else "%.4f" % st.mean(v))
        lines.append("| %d | " % x + " | ".join(vals) + " |")
    return lines


def print_blocks(*blocks):
    """Prints line lists separated by blank lines."""
    print("\n\n".join("\n".join(b) for b in blocks))
