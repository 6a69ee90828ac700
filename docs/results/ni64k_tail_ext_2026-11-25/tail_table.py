#!/usr/bin/env python3
"""Times to targets of the 64 k-sample tail experiment with the runs carried
on to 48 full-resolution epoch equivalents (docs/results_mrmf.md, "Session
16"). Reads the metrics.jsonl files beside this script:
  baseline_seed{1,2,3}/         epochs 0-47 (0-31 from the experiment, 32-47 resumed)
  mrmf1_seed{1,2,3}_finetune/   the fused model's fine-tuning (seed 3 resumed to 48 equivalents)
Time is counted in full-resolution epoch equivalents: MRMF's pretraining is
10 coarse epochs at T = 400 (0.30 of a full epoch each on the 2-core CPU,
session 10) plus 3 dense epochs = 6.
Usage: tail_table.py [folder]"""
import json
import os
import statistics as st
import sys

HERE = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
PRE = 10 * 0.30 + 3
BUDGET = 48


def curve(sub, offset):
    with open(os.path.join(HERE, sub, "metrics.jsonl")) as f:
        recs = {r["epoch"]: r for r in map(json.loads, f)}
    pts = [(offset + e + 1, r["val_loss"], r["lr"]) for e, r in sorted(recs.items())]
    return [p for p in pts if p[0] <= BUDGET + 1e-9]


runs = {("baseline", s): curve("baseline_seed%d" % s, 0) for s in (1, 2, 3)}
runs.update({("mrmf1", s): curve("mrmf1_seed%d_finetune" % s, PRE) for s in (1, 2, 3)})


def first(c, target, k):
    """Epochs until the validation loss is <= target k epochs in a row."""
    run = 0
    for t, v, _ in c:
        run = run + 1 if v <= target else 0
        if run >= k:
            return t
    return None


print("| target | baseline: first (epochs) | MRMF one fusion: first | ratio | baseline: 2 in a row | MRMF: 2 in a row | ratio |")
print("|---|---|---|---|---|---|---|")
for target in [0.145, 0.140, 0.135, 0.133, 0.131, 0.130, 0.129, 0.125, 0.122, 0.120]:
    row = ["%.3f" % target]
    for k in (1, 2):
        b = [first(runs[("baseline", s)], target, k) for s in (1, 2, 3)]
        m = [first(runs[("mrmf1", s)], target, k) for s in (1, 2, 3)]
        cells = lambda xs: " / ".join("–" if x is None else "%g" % x for x in xs)
        ratio = "–" if None in b or None in m else "%.2f" % (st.mean(m) / st.mean(b))
        row += [cells(b), cells(m), ratio]
    print("| " + " | ".join(row) + " |")
print()
for budget in (38, BUDGET):
    for method in ("baseline", "mrmf1"):
        best = [min(v for t, v, _ in runs[(method, s)] if t <= budget) for s in (1, 2, 3)]
        print("best within %d epochs, %s: %.4f ± %.4f %s" % (budget, method, st.mean(best), st.stdev(best),
                                                              [round(x, 4) for x in best]))
for key, c in sorted(runs.items()):
    cut = next((t for t, _, lr in c if lr < 1e-3), None)
    print("%s seed %d: %g epochs, learning rate cut from epoch %s, last %.4f" % (key[0], key[1], c[-1][0], cut, c[-1][1]))
