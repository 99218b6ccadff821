"""Every member on one task in one command, within a wall-clock budget, then the plots:

    python -m glr.sweep --task mqar --out results/train/mqar --budget-min 7.5

Runs in priority order, --jobs at once (each a `python -m glr.train` process), each into its own folder
under --out (named member-impl-pPAIRS-dWIDTH-sSEED):
  1. every member through glr (seed 0, the main setting: --pairs, --d-model)
  2. every member through the pure-PyTorch reference recurrence (same seed, same setting). The token loop is
     about 15x slower than glr, so with --reference-steps N it trains the same run (same --steps, hence the
     same learning-rate schedule) and stops after step N: the comparison covers steps 1..N.
  3. every member through glr with seed 1 (the run-to-run noise the reference gap is judged against)
  4. (mqar) every member through glr at the other --sweep-pairs, then at --sweep-widths
A run is not started when the budget is spent; runs still going at the end of the budget are stopped and
resume from their last checkpoint (every --ckpt-every steps) when the command is run again; a finished
folder is not run again. sweep.json lists what finished, what did not, and per member the mean |loss
difference| glr vs reference and glr seed 0 vs seed 1 over the same steps (1..N of the reference run).
"""
import argparse
import json
import os
import subprocess
import sys
import time

from . import plot, train  # noqa: F401 (train: the TASKS the parser offers)
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
    p.add_argument("--ckpt-every", type=int, default=200)
    p.add_argument("--reference-steps", type=int, default=None,
                   help="stop reference runs after this step (default: train them to --steps)")
    p.add_argument("--jobs", type=int, default=1, help="runs at once (processes sharing the device)")
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


def finished(out, impl, a):
    """A run is finished when it wrote its summary, or (reference runs with --reference-steps) when its
    metrics reach that step."""
    if os.path.exists(os.path.join(out, "summary.json")):
        return True
    if impl == "reference" and a.reference_steps:
        metrics = plot.read_metrics(out)
        return bool(metrics) and metrics[-1]["step"] >= a.reference_steps
    return False


def command(a, member, impl, pairs, width, seed, steps, lr, out):
    cmd = [sys.executable, "-m", "glr.train", "--member", member, "--task", a.task, "--impl", impl, "--out", out,
           "--seed", str(seed), "--steps", str(steps), "--batch", str(a.batch), "--layers", str(a.layers),
           "--head-dim", str(a.head_dim), "--d-model", str(width), "--pairs", str(pairs), "--lr", str(lr),
           "--eval-every", str(a.eval_every), "--ckpt-every", str(a.ckpt_every), "--quiet"]
    if a.seq_len:
        cmd += ["--seq-len", str(a.seq_len)]
    if a.lm_bytes:
        cmd += ["--lm-bytes", str(a.lm_bytes)]
    if a.device:
        cmd += ["--device", a.device]
    if impl == "reference" and a.reference_steps:
        cmd += ["--stop-after", str(a.reference_steps)]
    return cmd


def main(argv=None):
    a = parser().parse_args(argv)
    if a.jobs < 1:
        raise SystemExit("glr.sweep: --jobs must be >= 1")
    steps = a.steps or (400 if a.task == "mqar" else 600)
    lr = a.lr or (3e-3 if a.task == "mqar" else 1e-3)
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    budget = 60 * a.budget_min
    queue = [r for r in plan(a)]
    running, failed, stopped = {}, [], []
    while queue or running:
        for name, (proc, log) in list(running.items()):
            if proc.poll() is not None:
                log.close()
                del running[name]
                if proc.returncode != 0:
                    failed.append(name)
                    print(f"glr.sweep: {name} exited {proc.returncode} (see {name}/train.log)", flush=True)
                else:
                    print(f"glr.sweep: {name} done at {time.time() - t0:.0f}s", flush=True)
        over = time.time() - t0 > budget
        while queue and not over and len(running) < a.jobs:
            member, impl, pairs, width, seed = queue.pop(0)
            name = folder(member, impl, pairs, width, seed)
            out = os.path.join(a.out, name)
            if finished(out, impl, a):
                continue
            os.makedirs(out, exist_ok=True)
            log = open(os.path.join(out, "train.log"), "a")
            running[name] = (subprocess.Popen(command(a, member, impl, pairs, width, seed, steps, lr, out),
                                              stdout=log, stderr=subprocess.STDOUT), log)
        if over:
            queue.clear()
            for name, (proc, log) in running.items():
                proc.terminate()  # resumes from its last checkpoint on the next run of the command
            for name, (proc, log) in running.items():
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                log.close()
                stopped.append(name)
            running.clear()
        time.sleep(0.5)
    done, not_done = [], []
    for member, impl, pairs, width, seed in plan(a):
        name = folder(member, impl, pairs, width, seed)
        (done if finished(os.path.join(a.out, name), impl, a) else not_done).append(name)
    runs = plot.runs_in(a.out)
    main_ = (a.pairs, a.d_model)
    gaps = {m: plot.gaps(runs, m, main_) for m in a.members.split(",") if m}
    report = {"task": a.task, "wall_s": time.time() - t0, "finished": done, "not_finished": not_done,
              "failed_this_call": failed, "stopped_by_budget": stopped, "mean_abs_loss_gap": gaps, "args": vars(a)}
    with open(os.path.join(a.out, "sweep.json"), "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    table = plot.tables(a.out)
    pngs = plot.plot_dir(a.out)
    print(json.dumps({"sweep": os.path.join(a.out, "sweep.json"), "table": table, "plots": pngs, "not_finished": len(not_done),
                      "failed": failed}))


if __name__ == "__main__":
    main()
