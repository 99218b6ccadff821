"""PNG plots of the runs under a folder: python -m glr.plot DIR

    loss_curves.png    training loss against step, one panel per member, one line per (impl, seed) at the
                       main setting (the runs whose folders a sweep names -pPAIRS-dWIDTH- alike)
    mqar_accuracy.png  (mqar runs) final eval accuracy against key-value pairs, one line per member and
                       model width, glr runs of seed 0
Needs matplotlib (Debian's python3-matplotlib 3.6 and PyPI's both work); uses the Agg backend.
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


def plot_dir(root):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = runs_in(root)
    if not runs:
        raise SystemExit(f"glr.plot: no runs under {root}")
    written = []
    # Loss curves at the most common (pairs, width) setting: the sweep's main one.
    settings = {}
    for _, cfg, _, _ in runs:
        key = (cfg.get("pairs"), cfg["d_model"])
        settings[key] = settings.get(key, 0) + 1
    main = max(settings, key=settings.get)
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
    print("\n".join(plot_dir(argv[0])))


if __name__ == "__main__":
    main()
