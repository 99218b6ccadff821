"""Every member on one task in one command, within a wall-clock budget, then the plots:

    python -m glr.sweep --task mqar --out results/train/mqar --budget-min 7.5

Runs in priority order, each into its own folder under --out (named member-impl-pPAIRS-dWIDTH-sSEED):
  1. every member through glr (seed 0, the main setting: --pairs, --d-model)
  2. every member through the pure-PyTorch reference recurrence (same seed, same setting)
  3. every member through glr with seed 1 (the run-to-run noise the reference gap is judged against)
  4. (mqar) every member through glr at the other --sweep-pairs, then at --sweep-widths
A run is skipped when the runs of its kind so far say it would not finish inside the budget; a folder with
a summary.json is not run again (rerunning the command continues a sweep). sweep.json lists what ran,
what was skipped, and per member the mean |loss difference| glr vs reference and glr seed 0 vs seed 1.
"""
import argparse
import json
import os
import time

from . import plot, train
from .ops import MEMBERS


def parser():
    p = argparse.ArgumentParser(prog="python -m glr.sweep")
    p.add_argument("--task", required=True, choices=train.TASKS)
    p.add_argument("--out", required=True)
    p.add_argument("--members", default=",".join(MEMBERS), help="comma-separated subset of " + ",".join(MEMBERS))
    p.add_argument("--budget-min", type=float, default=7.5, help="wall-clock budget for all runs, minutes")
    p.add_argument("--steps", type=int, default=None, help="default: 400 (mqar), 600 (lm)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seq-len", type=int, default=None)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--pairs", type=int, default=16)
    p.add_argument("--sweep-pairs", default="4,8,16,32")
    p.add_argument("--sweep-widths", default="64,128")
    p.add_argument("--lr", type=float, default=None, help="default: 3e-3 (mqar), 1e-3 (lm)")
    p.add_argument("--lm-bytes", type=int, default=None)
    p.add_argument("--device", default=None)
    p.add_argument("--eval-every", type=int, default=50)
    return p


def plan(a):
    members = [m for m in a.members.split(",") if m]
    for m in members:
        if m not in MEMBERS:
            raise SystemExit(f"glr.sweep: unknown member {m!r}")
    main = (a.pairs, a.d_model)
    runs = [(m, "glr", *main, 0) for m in members]
    runs += [(m, "reference", *main, 0) for m in members]
    runs += [(m, "glr", *main, 1) for m in members]
    if a.task == "mqar":
        pairs = [int(x) for x in a.sweep_pairs.split(",") if x]
        widths = [int(x) for x in a.sweep_widths.split(",") if x]
        runs += [(m, "glr", p, a.d_model, 0) for p in pairs for m in members if p != a.pairs]
        runs += [(m, "glr", p, w, 0) for w in widths if w != a.d_model for p in pairs for m in members]
    return runs


def folder(member, impl, pairs, width, seed):
    return f"{member}-{impl}-p{pairs}-d{width}-s{seed}"


def mean_abs_gap(a, b):
    la = {r["step"]: r["loss"] for r in a}
    lb = {r["step"]: r["loss"] for r in b}
    common = sorted(set(la) & set(lb))
    return sum(abs(la[s] - lb[s]) for s in common) / len(common) if common else None


def main(argv=None):
    a = parser().parse_args(argv)
    steps = a.steps or (400 if a.task == "mqar" else 600)
    lr = a.lr or (3e-3 if a.task == "mqar" else 1e-3)
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    budget = 60 * a.budget_min
    walls = {}  # impl -> wall times of the runs so far
    done, skipped = [], []
    for member, impl, pairs, width, seed in plan(a):
        name = folder(member, impl, pairs, width, seed)
        out = os.path.join(a.out, name)
        if os.path.exists(os.path.join(out, "summary.json")):
            done.append(name)
            continue
        est = max(walls[impl]) if walls.get(impl) else 0.0
        if time.time() - t0 + est > budget:
            skipped.append(name)
            continue
        cfg = vars(train.parser().parse_args([
            "--member", member, "--task", a.task, "--impl", impl, "--out", out, "--seed", str(seed),
            "--steps", str(steps), "--batch", str(a.batch), "--layers", str(a.layers), "--head-dim",
            str(a.head_dim), "--d-model", str(width), "--pairs", str(pairs), "--lr", str(lr),
            "--eval-every", str(a.eval_every), "--ckpt-every", str(steps)]))
        cfg["seq_len"], cfg["lm_bytes"], cfg["device"] = a.seq_len, a.lm_bytes, a.device
        s = train.run(cfg)
        walls.setdefault(impl, []).append(s["wall_s"])
        done.append(name)
    gaps = {}
    for m in a.members.split(","):
        runs = {k: plot.read_metrics(os.path.join(a.out, folder(m, k[0], a.pairs, a.d_model, k[1])))
                for k in (("glr", 0), ("reference", 0), ("glr", 1))}
        gaps[m] = {"glr_vs_reference": mean_abs_gap(runs[("glr", 0)], runs[("reference", 0)]),
                   "glr_seed0_vs_seed1": mean_abs_gap(runs[("glr", 0)], runs[("glr", 1)])}
    report = {"task": a.task, "wall_s": time.time() - t0, "ran_or_present": done, "skipped_for_budget": skipped,
              "mean_abs_loss_gap": gaps, "args": vars(a)}
    with open(os.path.join(a.out, "sweep.json"), "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    pngs = plot.plot_dir(a.out)
    print(json.dumps({"sweep": os.path.join(a.out, "sweep.json"), "plots": pngs, "skipped": len(skipped)}))


if __name__ == "__main__":
    main()
