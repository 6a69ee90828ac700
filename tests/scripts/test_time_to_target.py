#!/usr/bin/env python3
"""scripts/time_to_target.py on a hand-made experiment folder whose answers
are known: stage times add up before the final stage, 'first' and 'K in a
row' find the right epochs, methods missing a target say so, a run without
its folders is read from the experiment state's history, and a missing
stage's metrics are an error naming the tag."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "time_to_target.py")


def write_run(d, method, seed, stages, fusion_s):
    """stages: [(name, subdir, [(epoch_s, val_loss), ...]), ...]"""
    for name, sub, epochs in stages:
        p = os.path.join(d, method, "seed%d" % seed, sub)
        os.makedirs(p, exist_ok=True)
        with open(os.path.join(p, "metrics.jsonl"), "w") as f:
            for e, (t, v) in enumerate(epochs):
                f.write(json.dumps({"epoch": e, "epoch_s": t, "val_loss": v, "train_loss": None if v is None else v + 0.01 * (e + 1),
                                    "tag": name}) + "\n")
    return {"method": method, "seed": seed, "fusion_s": fusion_s,
            "stages": [{"name": n, "time_s": sum(t for t, _ in ep), "epochs": len(ep),
                        "resolution": "2" if "coarse" in sub else "1"} for n, sub, ep in stages]}


def run(args):
    p = subprocess.run([sys.executable, SCRIPT] + args, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def row(text, method, target):
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 5 and cells[0] == method and cells[1] == "%.3f" % target:
            return cells
    raise AssertionError("no row for %s at %.3f in:\n%s" % (method, target, text))


def main():
    with tempfile.TemporaryDirectory() as d:
        runs = [
            # baseline: <= 0.12 first at 20 s, twice in a row at 50 s
            write_run(d, "baseline", 1, [("baseline/baseline@1", "baseline",
                                          [(10, 0.3), (10, 0.1), (10, 0.2), (10, 0.1), (10, 0.1)])], 0.0),
            # mrmf1: pre-fusion 5 + 10 s, fusion 1 s; then first at 16 + 20 = 36 s, in a row at 46 s
            write_run(d, "mrmf1", 1, [("m/coarse", "stage1_coarse", [(5, 0.05)]),
                                      ("m/dense", "stage1_dense", [(10, 0.5)]),
                                      ("m/finetune", "finetune", [(10, 0.15), (10, 0.11), (10, 0.11)])], 1.0),
        ]
        with open(os.path.join(d, "summary.json"), "w") as f:
            json.dump({"methods": {"mrmf1": {}, "baseline": {}}, "runs": runs}, f)
        code, out = run([d, "--targets", "0.12", "0.05"])
        assert code == 0, out
        b, m = row(out, "baseline", 0.12), row(out, "mrmf1", 0.12)
        assert b[2] == "20.0" and b[3] == "50.0", b
        # the coarse stage's 0.05 does not count: only the final stage is at full resolution
        assert m[2] == "36.0" and m[3] == "46.0", m
        assert m[4] == "1.80 / 0.92", m
        assert row(out, "mrmf1", 0.05)[2] == "not reached", out
        assert out.index("| baseline |") < out.index("| mrmf1 |"), "methods not in run order"
        # equal-time budget = the baseline's 50 s: mrmf1's best by then is 0.11 (at 46 s)
        assert "| mrmf1 | 0.1100 ± 0.0000 |" in out, out

        # Fixed epoch costs instead of wall time: the coarse epoch at
        # resolution 2 costs 0.5, the dense and fine-tuning ones 1; fusion 0.
        # mrmf1: 0.5 + 1 before fine-tuning, first <= 0.12 at 1.5 + 2 = 3.5.
        code, out = run([d, "--targets", "0.12", "--epoch-cost", "1=1", "2=0.5"])
        assert code == 0, out
        b, m = row(out, "baseline", 0.12), row(out, "mrmf1", 0.12)
        assert b[2] == "2.0" and m[2] == "3.5" and m[3] == "4.5", (b, m)
        assert "first ≤ T (epochs)" in out, out
        code, out = run([d, "--targets", "0.12", "--epoch-cost", "1=1"])
        assert code != 0 and "no cost for resolution 2" in out, out
        code, out = run([d, "--targets", "0.12", "--epoch-cost", "2=fast"])
        assert code != 0 and "RESOLUTION=COST" in out, out

        # A concurrent run: its coarse (5 s) and dense (10 s) groups train at
        # the same time, each on 1 of the 2 ranks its fine-tuning uses -- the
        # slower group counts: 10 + 1 s of fusion, first <= 0.12 at 31 s; in
        # epoch equivalents max(1 x 0.5, 1 x 1) x 2/1 = 2, first at 4.
        with tempfile.TemporaryDirectory() as d3:
            c = write_run(d3, "concurrent", 1, [("c/coarse", "stage1_coarse", [(5, 0.05)]),
                                                ("c/dense", "stage1_dense", [(10, 0.5)]),
                                                ("c/finetune", "finetune", [(10, 0.15), (10, 0.11)])], 1.0)
            c["concurrent_groups"] = True
            for st, ranks in zip(c["stages"], (1, 1, 2)):
                st["ranks"] = ranks
            # The probe that sized the groups (2.5 s the second time) is wall
            # time of the run; with epoch costs it costs nothing, as the fusion does.
            for probe_s, wall in ((None, "31.0"), (2.5, "33.5")):
                if probe_s is not None:
                    c["split_probe_s"] = probe_s
                with open(os.path.join(d3, "summary.json"), "w") as f:
                    json.dump({"runs": [c]}, f)
                code, out = run([d3, "--targets", "0.12"])
                assert code == 0 and row(out, "concurrent", 0.12)[2] == wall, out
                code, out = run([d3, "--targets", "0.12", "--epoch-cost", "1=1", "2=0.5"])
                assert code == 0 and row(out, "concurrent", 0.12)[2] == "4.0", out

        # Targets relative to the baseline's best (0.1): 1.2 x -> 0.12, as above.
        code, out = run([d, "--relative", "1.2"])
        assert code == 0, out
        assert row(out, "mrmf1", 0.12)[2] == "36.0" and "1.2 x the baseline's best validation loss (0.1000" in out, out
        # --fit-at: the final stage's training loss of its last epoch ending
        # by X. Baseline epochs end at 10..50 s (train 0.3+0.01, 0.1+0.02, ...);
        # mrmf1 pretrains until 16 s, its fine-tuning epochs end at 26, 36, 46.
        code, out = run([d, "--targets", "0.12", "--fit-at", "25", "40", "5"])
        assert code == 0, out
        fit_table = out[out.index("| method | X = 25 s | X = 40 s | X = 5 s |"):].splitlines()[2:]
        fit_rows = {c[0]: c[1:] for c in ([x.strip() for x in l.strip().strip("|").split("|")] for l in fit_table)}
        assert fit_rows["baseline"] == ["0.1200", "0.1400", "–"], out  # epochs 2 and 4; nothing by 5 s
        assert fit_rows["mrmf1"] == ["–", "0.1300", "–"], out  # still pretraining at 25 s; epoch 2 at 36 s
        code, out = run([d, "--relative", "1.2", "--targets", "0.1"])
        assert code != 0 and "not allowed with" in out, out
        code, out = run([d, "--relative", "0"])
        assert code != 0 and "must be > 0" in out, out

        # Two experiment folders compared together: the second one's mrmf1 is
        # reported as mrmf1@<folder>, against the first one's baseline.
        with tempfile.TemporaryDirectory() as d2:
            other = [write_run(d2, "mrmf1", 1, [("m/coarse", "stage1_coarse", [(5, 0.05)]),
                                                ("m/dense", "stage1_dense", [(10, 0.5)]),
                                                ("m/finetune", "finetune", [(10, 0.11), (10, 0.11)])], 1.0)]
            with open(os.path.join(d2, "summary.json"), "w") as f:
                json.dump({"runs": other}, f)
            code, out = run([d, d2, "--targets", "0.12"])
            assert code == 0, out
            m2 = row(out, "mrmf1@" + os.path.basename(d2), 0.12)
            assert m2[2] == "26.0" and m2[4] == "1.30 / 0.72", m2
            assert row(out, "mrmf1", 0.12)[2] == "36.0", out

            # The second folder's baseline pooled with the first's (--pool
            # baseline): one baseline of two runs, the mrmf1s kept apart.
            # Its curve reaches 0.12 at 10 s: the pooled first time is the
            # mean of 20 and 10; mrmf1's ratio is unpaired: 36 / 15.
            other.append(write_run(d2, "baseline", 1, [("baseline/baseline@1", "baseline",
                                                        [(10, 0.1), (10, 0.1), (10, 0.3)])], 0.0))
            with open(os.path.join(d2, "summary.json"), "w") as f:
                json.dump({"runs": other}, f)
            code, out = run([d, d2, "--targets", "0.12", "--pool", "baseline"])
            assert code == 0, out
            assert row(out, "baseline", 0.12)[2] == "15.0 ± 7.1" and "baseline 2;" in out, out
            assert row(out, "mrmf1", 0.12)[4] == "2.40 / 1.31", out  # in a row: 46 / mean(50, 20)
            assert row(out, "mrmf1@" + os.path.basename(d2), 0.12)[2] == "26.0", out
            code, out = run([d, d2, "--targets", "0.12", "--pool"])  # all methods pooled
            assert code == 0 and row(out, "mrmf1", 0.12)[2] == "31.0 ± 7.1" and "mrmf1@" not in out, out
            # --pool before the folders takes one value, not the folders too.
            code, out = run(["--pool", "baseline", d, d2, "--targets", "0.12"])
            assert code == 0 and row(out, "baseline", 0.12)[2] == "15.0 ± 7.1", out
            # --final-epochs 1: only the first epoch of each final stage. The
            # first folder's baseline (0.3 at 10 s) no longer reaches 0.12.
            code, out = run([d, d2, "--targets", "0.12", "--pool", "baseline", "--final-epochs", "1"])
            assert code == 0, out
            assert row(out, "baseline", 0.12)[2] == "10.0 (1 of 2 not reached)", out
            assert row(out, "mrmf1", 0.12)[2] == "not reached", out  # 0.15 in its first fine-tuning epoch
            code, out = run([d, "--targets", "0.12", "--final-epochs", "0"])
            assert code != 0 and "--final-epochs must be >= 1" in out, out

        # A run whose folders are gone (finished in another checkout, the
        # experiment resumed from its state): its history in the state counts.
        ft = os.path.join(d, "mrmf1", "seed1", "finetune", "metrics.jsonl")
        with open(ft) as f:
            history = [json.loads(line) for line in f]
        os.remove(ft)
        state = {"runs": [{"method": "mrmf1", "seed": 1,
                           "stages": [{"name": "m/finetune", "history": history}]}]}
        with open(os.path.join(d, "experiment_state.json"), "w") as f:
            json.dump(state, f)
        code, out = run([d, "--targets", "0.12"])
        assert code == 0 and row(out, "mrmf1", 0.12)[2] == "36.0", out
        state["runs"][0]["seed"] = 2  # another run's history does not stand in
        with open(os.path.join(d, "experiment_state.json"), "w") as f:
            json.dump(state, f)
        code, out = run([d, "--targets", "0.12"])
        assert code != 0 and "m/finetune" in out and "experiment_state.json" in out, out

    # A non-finite loss is written as null: an epoch that never reaches any
    # target, not a crash (nor the baseline's best for --relative).
    with tempfile.TemporaryDirectory() as d:
        runs = [write_run(d, "baseline", 1, [("baseline/baseline@1", "baseline",
                                              [(10, 0.3), (10, None), (10, 0.1)])], 0.0)]
        with open(os.path.join(d, "summary.json"), "w") as f:
            json.dump({"runs": runs}, f)
        code, out = run([d, "--targets", "0.12", "--consecutive", "1"])
        assert code == 0 and row(out, "baseline", 0.12)[2] == "30.0", out
        code, out = run([d, "--relative", "1.0", "--consecutive", "1"])
        assert code == 0 and row(out, "baseline", 0.1)[2] == "30.0", out

    # An epoch continued from a mid-epoch checkpoint (a job's time limit):
    # epoch_s is the resumed process's part, earlier_s the part before it.
    with tempfile.TemporaryDirectory() as d:
        runs = [write_run(d, "baseline", 1, [("baseline/baseline@1", "baseline", [(10, 0.3), (6, 0.1)])], 0.0)]
        p = os.path.join(d, "baseline", "seed1", "baseline", "metrics.jsonl")
        with open(p) as f:
            recs = [json.loads(line) for line in f]
        recs[1].update(earlier_s=4.0, resumed_at_step=3)
        with open(p, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in recs))
        with open(os.path.join(d, "summary.json"), "w") as f:
            json.dump({"runs": runs}, f)
        code, out = run([d, "--targets", "0.12", "--consecutive", "1"])
        assert code == 0 and row(out, "baseline", 0.12)[2] == "20.0", out

    # The final stage's time outside its epochs (set-up, BN re-estimation,
    # checkpoints) counts, at its start; and the ratio to the baseline does
    # not depend on the baseline's place in the run order.
    with tempfile.TemporaryDirectory() as d:
        m = write_run(d, "mrmf1", 1, [("m/coarse", "stage1_coarse", [(5, 0.05)]),
                                      ("m/finetune", "finetune", [(10, 0.15), (10, 0.11)])], 0.0)
        b = write_run(d, "baseline", 1, [("baseline/baseline@1", "baseline", [(10, 0.3), (10, 0.1)])], 0.0)
        m["stages"][-1]["time_s"] += 3.0
        b["stages"][-1]["time_s"] += 2.0
        with open(os.path.join(d, "summary.json"), "w") as f:
            json.dump({"runs": [m, b]}, f)  # the baseline second
        code, out = run([d, "--targets", "0.12", "--consecutive", "1"])
        assert code == 0, out
        assert row(out, "baseline", 0.12)[2] == "22.0", out  # 2 + 10 + 10
        assert row(out, "mrmf1", 0.12)[2] == "28.0", out  # 5 + 3 + 10 + 10
        assert row(out, "mrmf1", 0.12)[4] == "1.27 / 1.27", out  # 28 / 22
    # A run that diverged before its final stage (its coarse stage here, with
    # two finite epochs first; or a concurrent run's split probe: no stage)
    # never reaches a target: its coarse curve does not stand in for the
    # final one. Its final loss reads "diverged", not "nan".
    with tempfile.TemporaryDirectory() as d:
        b = write_run(d, "baseline", 1, [("baseline/baseline@1", "baseline", [(10, 0.3), (10, 0.1)])], 0.0)
        m = write_run(d, "mrt", 1, [("mrt/coarse@2", "coarse", [(5, 0.11), (5, 0.05)])], 0.0)
        m["stages"][-1].update(stop_reason="diverged", role="coarse")
        c = {"method": "concurrent", "seed": 1, "stages": [], "total_s": 2.0, "concurrent_groups": True}
        with open(os.path.join(d, "summary.json"), "w") as f:
            json.dump({"runs": [b, m, c]}, f)
        code, out = run([d, "--targets", "0.12", "--consecutive", "1"])
        assert code == 0, out
        assert row(out, "mrt", 0.12)[2] == "not reached", out
        assert row(out, "concurrent", 0.12)[2] == "not reached", out
        assert "| mrt | – | diverged |" in out, out
        code, out = run([d, "--targets", "0.12", "--epoch-cost", "1=1", "2=0.5"])
        assert code == 0 and row(out, "mrt", 0.12)[2] == "not reached", out
        # A metrics.jsonl cut short (a process killed while writing) is an
        # error naming the file and line, not a traceback; a blank line is skipped.
        p = os.path.join(d, "baseline", "seed1", "baseline", "metrics.jsonl")
        with open(p, "a") as f:
            f.write("\n")
        code, out = run([d, "--targets", "0.12"])
        assert code == 0, out
        with open(p, "a") as f:
            f.write('{"epoch": 2, "val_')
        code, out = run([d, "--targets", "0.12"])
        assert code == 1 and "metrics.jsonl, line 4: not JSON" in out and "Traceback" not in out, out
        with open(os.path.join(d, "summary.json"), "w") as f:
            f.write('{"runs": [')
        code, out = run([d, "--targets", "0.12"])
        assert code == 1 and "summary.json is not valid JSON" in out and "Traceback" not in out, out
        code, out = run([os.path.join(d, "nope"), "--targets", "0.12"])
        assert code == 1 and "is not a folder" in out and "Traceback" not in out, out

    # Three folders with one base name (runs/a/exp, runs/b/exp, runs/c/exp):
    # each keeps its own rows (the third replaced the second's).
    with tempfile.TemporaryDirectory() as top:
        for i, v in enumerate((0.3, 0.2, 0.1)):
            d = os.path.join(top, str(i), "exp")
            runs = [write_run(d, "baseline", 1, [("baseline/baseline@1", "baseline", [(10, v)])], 0.0)]
            with open(os.path.join(d, "summary.json"), "w") as f:
                json.dump({"runs": runs}, f)
        code, out = run([os.path.join(top, str(i), "exp") for i in range(3)] + ["--targets", "0.15"])
        assert code == 0, out
        assert row(out, "baseline@exp", 0.15)[2] == "not reached", out  # the second folder's 0.2
        assert row(out, "baseline@exp#3", 0.15)[2] == "10.0", out  # the third's 0.1
    print("time_to_target: ok")


if __name__ == "__main__":
    main()
