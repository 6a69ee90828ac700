#!/usr/bin/env python3
"""scripts/method_tables.py on hand-made curves whose answers are known:
mean first crossings and ratios against the baseline's mean over the same
seeds (not all of the baseline's), '–' where a seed never gets there, the
'two in a row' rule, curves offset by their pretraining and cut at a
budget, and the training loss at equal times."""
import json
import math
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import method_tables as mt  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def cells(lines, first):
    for line in lines:
        c = [x.strip() for x in line.strip("|").split("|")]
        if c[0] == first:
            return c
    raise AssertionError("no row " + first)


with tempfile.TemporaryDirectory() as d:
    # A run folder: epochs written out of order and one epoch twice (a
    # resumed epoch's last record wins).
    with open(os.path.join(d, "metrics.jsonl"), "w") as f:
        for e, v in [(0, 0.5), (2, 0.3), (1, 0.9), (1, 0.4), (3, 0.2)]:
            f.write(json.dumps({"epoch": e, "val_loss": v, "train_loss": v + 0.1}) + "\n")
    check([r["val_loss"] for r in mt.records(d)] == [0.5, 0.4, 0.3, 0.2], "records: order, last record wins")
    check(mt.curve(d, 2.5) == [(3.5, 0.5), (4.5, 0.4), (5.5, 0.3), (6.5, 0.2)], "curve offset")
    check(mt.curve(d, 2.5, budget=5.5) == [(3.5, 0.5), (4.5, 0.4), (5.5, 0.3)], "curve budget")
    check(mt.stage_cost(d, 0.3) == 4 * 0.3, "stage cost")

runs = {
    ("baseline", 1): [(1, 0.5), (2, 0.4), (3, 0.3), (4, 0.2)],
    ("baseline", 2): [(1, 0.5), (2, 0.45), (3, 0.45), (4, 0.3)],
    ("fast", 1): [(1.5, 0.3), (2.5, 0.35), (3.5, 0.25), (4.5, 0.25)],  # seed 1 only
}
names = {"baseline": "B", "fast": "F"}
t1 = mt.crossing_table(runs, ["baseline", "fast"], names, [0.4, 0.3, 0.2], 1)
check(t1[0].startswith("| target (first crossing) | B (2) | F (1) | F / B |"), "header: " + t1[0])
check(t1[1] == "|---|---|---|---|", "separator: " + t1[1])
# 0.4: baseline 2 and 4 (mean 3); F 1.5 against the baseline's seed 1 alone (2).
check(cells(t1, "0.400") == ["0.400", "3", "1.5", "0.75x"], "0.4: %s" % cells(t1, "0.400"))
check(cells(t1, "0.300") == ["0.300", "3.5", "1.5", "0.50x"], "0.3: %s" % cells(t1, "0.300"))
# 0.2: baseline seed 2 never; F never: both '–', and so the ratio.
check(cells(t1, "0.200") == ["0.200", "–", "–", "–"], "0.2: %s" % cells(t1, "0.200"))
t2 = mt.crossing_table(runs, ["baseline", "fast"], names, [0.3], 2)
check(t2[0].startswith("| target (2 epochs in a row) |"), "k = 2 header")
# Two in a row at <= 0.3: F at 4.5 (0.35 breaks the first run), baseline seed 1 at 4.
check(cells(t2, "0.300") == ["0.300", "–", "4.5", "1.12x"], "k = 2: %s" % cells(t2, "0.300"))
s2 = mt.seed_table(runs, ["baseline", "fast"], names, [0.4], 2)
check(s2[0] == "| target (first crossing), seed 2 | B |", "seed table lists present methods: " + s2[0])
check(mt.best_lines(runs, ["baseline", "fast"], 48)[1] == "fast seed 1: best 0.2500 within 48 epoch equivalents "
      "(curve ends at 4.5)", "best lines in seed order")
fit = mt.fit_table(runs, ["baseline", "fast"], names, [1, 3])
# At 1 the fast run is still pretraining ('–'); at 3: mean(0.3, 0.45) and 0.35.
check(cells(fit, "1") == ["1", "0.5000", "–"], "fit at 1: %s" % cells(fit, "1"))
check(cells(fit, "3") == ["3", "0.3750", "0.3500"], "fit at 3: %s" % cells(fit, "3"))

# A baseline seed missing (failed, or still running): the ratio over the seeds both have, not a KeyError.
# Both sides over the common seeds: fast's seed 2 (never at 0.4) does not count against baseline seed 1.
never = [(x, 0.9) for x, _ in runs[("fast", 1)]]
partial = {("baseline", 1): runs[("baseline", 1)], ("fast", 1): runs[("fast", 1)], ("fast", 2): never}
t3 = mt.crossing_table(partial, ["baseline", "fast"], names, [0.4], 1)
check(cells(t3, "0.400") == ["0.400", "2", "–", "0.75x"], "missing baseline seed: %s" % cells(t3, "0.400"))
# A null (non-finite) loss in a run folder is NaN, never the best.
with tempfile.TemporaryDirectory() as d:
    with open(os.path.join(d, "metrics.jsonl"), "w") as f:
        for e, v in [(0, 0.5), (1, None), (2, 0.3)]:
            f.write(json.dumps({"epoch": e, "val_loss": v}) + "\n")
    c = mt.curve(d, 0)
    check(math.isnan(c[1][1]) and c[2] == (3, 0.3), "null loss: %s" % c)
    check(mt.best_lines({("b", 1): c}, ["b"], 3)[0].startswith("b seed 1: best 0.3000"), "best skips NaN")
    # A run with no epoch within the budget is said, not an IndexError.
    check(mt.best_lines({("b", 1): mt.curve(d, 0, budget=0.5)}, ["b"], 0.5) == ["b seed 1: no epoch within 0.5 epoch "
                                                                              "equivalents"], "empty curve")
    # A blank line is skipped; a line cut short is an error naming the file.
    with open(os.path.join(d, "metrics.jsonl"), "a") as f:
        f.write("\n")
    check(len(mt.records(d)) == 3, "blank line skipped")
    with open(os.path.join(d, "metrics.jsonl"), "a") as f:
        f.write('{"epoch": 3, "val_')
    try:
        mt.records(d)
        check(False, "a cut-short line is refused")
    except SystemExit as e:
        check("metrics.jsonl, line 5: not JSON" in str(e), "cut-short line named: %s" % e)

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("method_tables: all checks passed")
