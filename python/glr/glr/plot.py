"""Tables and PNG plots of the runs under a folder: python -m glr.plot DIR

    results.md         (no matplotlib needed) per member at the main setting: the loss of glr seed 0, glr
                       seed 1 and the reference at the last step the reference ran, and the mean |loss
                       difference| over steps 1..N of glr vs the reference and of glr seed 0 vs seed 1 (the
                       run-to-run noise); then (mqar) the final accuracy of every glr seed-0 run by pairs
                       and width
    loss_curves.png    training loss against step, one panel per member, one line per (impl, seed) at the
                       main setting (the runs whose folders a sweep names -pPAIRS-dWIDTH- alike)
    mqar_accuracy.png  (mqar runs) final eval accuracy against key-value pairs, one line per member and
                       model width, glr runs of seed 0
The plots need matplotlib (Debian's python3-matplotlib 3.6 and PyPI's both work); they use the Agg backend.
"""
import json
import os
import sys


def read_metrics(run_dir):
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def runs_in(root):
    out = []
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        cfg_path = os.path.join(d, "config.json")
        if os.path.isdir(d) and os.path.exists(cfg_path):
            with open(cfg_path) as f:
                cfg = json.load(f)
            summary = None
            if os.path.exists(os.path.join(d, "summary.json")):
                with open(os.path.join(d, "summary.json")) as f:
                    summary = json.load(f)
            out.append((name, cfg, read_metrics(d), summary))
    return out


def mean_abs_gap(a, b, upto=None):
    """Mean |loss difference| of two runs' metrics over the steps both logged (up to `upto`)."""
    la = {r["step"]: r["loss"] for r in a}
    lb = {r["step"]: r["loss"] for r in b}
    common = sorted(s for s in set(la) & set(lb) if upto is None or s <= upto)
    return sum(abs(la[s] - lb[s]) for s in common) / len(common) if common else None


def main_setting(runs):
    """The (pairs, width) most runs share: the sweep's main setting."""
    settings = {}
    for _, cfg, _, _ in runs:
        key = (cfg.get("pairs"), cfg["d_model"])
        settings[key] = settings.get(key, 0) + 1
    return max(settings, key=settings.get)


def gaps(runs, member, main):
    """glr vs reference and glr seed 0 vs seed 1 for one member at the main setting, over the reference's
    steps; None where a run is missing."""
    pick = {}
    for _, cfg, metrics, _ in runs:
        if cfg["member"] == member and (cfg.get("pairs"), cfg["d_model"]) == main:
            pick[(cfg["impl"], cfg["seed"])] = metrics
    g0, g1, ref = pick.get(("glr", 0), []), pick.get(("glr", 1), []), pick.get(("reference", 0), [])
    upto = max((r["step"] for r in ref), default=None)
    at = {k: {r["step"]: r["loss"] for r in v}.get(upto) for k, v in (("glr0", g0), ("glr1", g1), ("ref", ref))}
    return {"steps_compared": upto, "loss_at_last_reference_step": at,
            "glr_vs_reference": mean_abs_gap(g0, ref, upto) if ref else None,
            "glr_seed0_vs_seed1": mean_abs_gap(g0, g1, upto) if g1 else None}


def fmt(x, spec=".4g"):
    return "-" if x is None else format(x, spec)


def tables(root):
    runs = runs_in(root)
    if not runs:
        raise SystemExit(f"glr.plot: no runs under {root}")
    task = runs[0][1]["task"]
    main = main_setting(runs)
    members = sorted({cfg["member"] for _, cfg, _, _ in runs})
    lines = [f"# {task}: runs under this folder", "",
             f"Written by `python -m glr.plot {os.path.basename(os.path.abspath(root))}` (from the metrics.jsonl"
             " and summary.json files here).", "",
             f"Main setting: d_model {main[1]}" + (f", {main[0]} key-value pairs" if task == "mqar" else "") +
             ". Loss at step N, the last step the reference run trained; gaps are mean |loss difference| over "
             "the logged steps 1..N. glr matches the reference within run-to-run noise when the first gap is "
             "below the second.", "",
             "| member | N | loss glr s0 | loss glr s1 | loss reference | glr vs reference | glr s0 vs s1 | within noise |",
             "|---|---|---|---|---|---|---|---|"]
    for m in members:
        g = gaps(runs, m, main)
        at = g["loss_at_last_reference_step"]
        ok = None if g["glr_vs_reference"] is None or g["glr_seed0_vs_seed1"] is None else \
            g["glr_vs_reference"] < g["glr_seed0_vs_seed1"]
        lines.append(f"| {m} | {fmt(g['steps_compared'], 'd')} | {fmt(at['glr0'])} | {fmt(at['glr1'])} | "
                     f"{fmt(at['ref'])} | {fmt(g['glr_vs_reference'], '.2e')} | {fmt(g['glr_seed0_vs_seed1'], '.2e')} | "
                     f"{'-' if ok is None else ('yes' if ok else 'no')} |")
    lines.append("")
    final = [(cfg, summary) for _, cfg, _, summary in runs if cfg["impl"] == "glr" and cfg["seed"] == 0 and summary]
    if task == "mqar":
        pairs = sorted({c["pairs"] for c, _ in final})
        widths = sorted({c["d_model"] for c, _ in final})
        lines += ["Final MQAR accuracy (fraction of queries answered right, glr runs of seed 0; '-' not run):", "",
                  "| member | d_model | " + " | ".join(f"{p} pairs" for p in pairs) + " |",
                  "|---|---|" + "---|" * len(pairs)]
        acc = {(c["member"], c["d_model"], c["pairs"]): s["eval_acc"] for c, s in final}
        for m in members:
            for w in widths:
                lines.append(f"| {m} | {w} | " + " | ".join(fmt(acc.get((m, w, p)), ".3f") for p in pairs) + " |")
    else:
        lines += ["Final held-out loss (nats per byte, glr runs of seed 0):", "", "| member | eval loss | steps |",
                  "|---|---|---|"]
        for c, s in sorted(final, key=lambda cs: cs[0]["member"]):
            if (c.get("pairs"), c["d_model"]) == main:
                lines.append(f"| {c['member']} | {s['eval_loss']:.4f} | {s['steps']} |")
    path = os.path.join(root, "results.md")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def plot_dir(root):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = runs_in(root)
    if not runs:
        raise SystemExit(f"glr.plot: no runs under {root}")
    written = []
    # Loss curves at the most common (pairs, width) setting: the sweep's main one.
    main = main_setting(runs)
    members = sorted({cfg["member"] for _, cfg, _, _ in runs})
    fig, axes = plt.subplots(1, len(members), figsize=(4 * len(members), 3.2), squeeze=False)
    for ax, m in zip(axes[0], members):
        for name, cfg, metrics, _ in runs:
            if cfg["member"] != m or (cfg.get("pairs"), cfg["d_model"]) != main or not metrics:
                continue
            ax.plot([r["step"] for r in metrics], [r["loss"] for r in metrics],
                    label=f"{cfg['impl']} seed {cfg['seed']}", linewidth=1)
        ax.set_title(m)
        ax.set_xlabel("step")
        ax.set_yscale("log")
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("training loss")
    task = runs[0][1]["task"]
    fig.suptitle(f"{task}: pairs {main[0]}, d_model {main[1]}" if task == "mqar" else f"{task}: d_model {main[1]}")
    fig.tight_layout()
    path = os.path.join(root, "loss_curves.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    written.append(path)

    acc = {}
    for _, cfg, _, summary in runs:
        if cfg["task"] == "mqar" and cfg["impl"] == "glr" and cfg["seed"] == 0 and summary:
            acc.setdefault((cfg["member"], cfg["d_model"]), []).append((cfg["pairs"], summary["eval_acc"]))
    if acc:
        fig, ax = plt.subplots(figsize=(6, 4))
        for (m, w), pts in sorted(acc.items()):
            pts.sort()
            ax.plot([p for p, _ in pts], [a for _, a in pts], marker="o", label=f"{m} d{w}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("key-value pairs")
        ax.set_ylabel("MQAR accuracy")
        ax.set_ylim(0, 1.02)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = os.path.join(root, "mqar_accuracy.png")
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        raise SystemExit("usage: python -m glr.plot DIR")
    print(tables(argv[0]))
    print("\n".join(plot_dir(argv[0])))


if __name__ == "__main__":
    main()
