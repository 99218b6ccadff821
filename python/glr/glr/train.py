"""Train one family member on one task: python -m glr.train --member gdn --task mqar [options].

The same model with the same seed trains through glr's operator (--impl glr) or through the pure-PyTorch
token loop (--impl reference): initial weights and every batch depend only on --seed (batches on
(seed, step)), never on the implementation. A run writes into --out:

    config.json      the arguments (a resumed run must be given the same ones)
    metrics.jsonl    one JSON object per logged step: step, loss, lr, tokens_per_s, and at eval steps
                     eval_loss (and eval_acc for MQAR: the fraction of queries answered right)
    checkpoint.pt    model, optimizer and step, written every --ckpt-every steps and at the end; a run
                     started on a folder with a checkpoint resumes from it (metrics after it are dropped)
    summary.json     the final evaluation and the wall time

--compile wraps the model in torch.compile(fullgraph=True), which fails on any graph break.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

from . import data
from .layers import LanguageModel
from .ops import MEMBERS

TASKS = ("mqar", "lm")


def parser():
    p = argparse.ArgumentParser(prog="python -m glr.train", description=__doc__.split("\n\n")[0])
    p.add_argument("--member", required=True, choices=sorted(MEMBERS))
    p.add_argument("--task", required=True, choices=TASKS)
    p.add_argument("--impl", default="glr", choices=("glr", "reference"))
    p.add_argument("--out", required=True, help="run folder (created; resumed when it holds a checkpoint)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seq-len", type=int, default=None, help="default: 128 for mqar, 256 for lm")
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--head-dim", type=int, default=64, help="K = V per head (the CUDA kernels take 64 or 128)")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--warmup", type=float, default=0.1, help="fraction of steps of linear warmup (then cosine)")
    p.add_argument("--pairs", type=int, default=16, help="mqar: key-value pairs per sequence")
    p.add_argument("--vocab", type=int, default=512, help="mqar: vocabulary size (lm: 256 bytes)")
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--eval-batches", type=int, default=4)
    p.add_argument("--ckpt-every", type=int, default=200)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--lm-bytes", type=int, default=None, help="lm: cap on corpus bytes per split (quick runs)")
    p.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    p.add_argument("--compile", action="store_true", help="torch.compile(fullgraph=True) the model")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--stop-after", type=int, default=None,
                   help="end the process after this step, as an interruption would (resume by rerunning)")
    return p


class Progress:
    """A one-line progress bar on stderr (a line every 10% when stderr is not a terminal)."""

    def __init__(self, total, start, label, quiet=False):
        self.total, self.start, self.label, self.quiet = total, start, label, quiet
        self.t0 = time.time()
        self.tty = sys.stderr.isatty()
        self.last_decile = -1

    def update(self, step, text):
        if self.quiet:
            return
        done = step - self.start
        rate = done / max(time.time() - self.t0, 1e-9)
        eta = (self.total - step) / rate if rate > 0 else float("inf")
        frac = step / max(self.total, 1)
        bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
        line = f"{self.label} [{bar}] {step}/{self.total} {text} {rate:.1f} it/s eta {eta:.0f}s"
        if self.tty:
            sys.stderr.write("\r" + line)
            if step >= self.total:
                sys.stderr.write("\n")
        elif int(10 * frac) > self.last_decile or step >= self.total:
            self.last_decile = int(10 * frac)
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def lr_at(step, cfg):
    warm = max(1, int(cfg["warmup"] * cfg["steps"]))
    if step < warm:
        return cfg["lr"] * (step + 1) / warm
    t = (step - warm) / max(1, cfg["steps"] - warm)
    return cfg["lr"] * 0.5 * (1 + math.cos(math.pi * min(t, 1.0)))


class Task:
    def __init__(self, cfg):
        self.cfg = cfg
        if cfg["task"] == "mqar":
            self.vocab = cfg["vocab"]
        else:
            self.vocab = 256
            self.train, self.held = data.byte_corpus(cfg["lm_bytes"])

    def batch(self, step, split="train"):
        # every batch is a function of (seed, split, step): resuming replays exactly the same data
        base = 1_000_003 * self.cfg["seed"] + (0 if split == "train" else 500_000_000)
        gen = torch.Generator().manual_seed(base + step)
        c = self.cfg
        if c["task"] == "mqar":
            return data.mqar_batch(c["batch"], c["seq_len"], c["pairs"], c["vocab"], gen)
        return data.lm_batch(self.train if split == "train" else self.held, c["batch"], c["seq_len"], gen)


def loss_of(model, x, y):
    logits = model(x)
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=data.IGNORE), logits


@torch.no_grad()
def evaluate(model, task, device):
    model.eval()
    losses, right, count = [], 0, 0
    for i in range(task.cfg["eval_batches"]):
        x, y = task.batch(i, "eval")
        x, y = x.to(device), y.to(device)
        loss, logits = loss_of(model, x, y)
        losses.append(loss.item())
        mask = y != data.IGNORE
        right += (logits.argmax(-1)[mask] == y[mask]).sum().item()
        count += mask.sum().item()
    model.train()
    out = {"eval_loss": sum(losses) / len(losses)}
    if task.cfg["task"] == "mqar":
        out["eval_acc"] = right / max(count, 1)
    return out


def build(cfg, device):
    torch.manual_seed(cfg["seed"])
    task = Task(cfg)
    model = LanguageModel(cfg["member"], task.vocab, cfg["d_model"], cfg["layers"], cfg["head_dim"], cfg["impl"])
    model.to(device)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg["weight_decay"]},
                             {"params": other, "weight_decay": 0.0}], lr=cfg["lr"], betas=(0.9, 0.95))
    return task, model, opt


RESUME_KEYS_IGNORED = ("out", "quiet", "log_every", "device", "compile", "stop_after")


def run(cfg):
    """Trains per cfg (the parser's arguments as a dict); returns the summary dict."""
    cfg = dict(cfg)
    if cfg.get("seq_len") is None:
        cfg["seq_len"] = 128 if cfg["task"] == "mqar" else 256
    device = torch.device(cfg.get("device") or ("cuda" if torch.cuda.is_available() else "cpu"))
    out = cfg["out"]
    os.makedirs(out, exist_ok=True)
    ckpt_path, metrics_path = os.path.join(out, "checkpoint.pt"), os.path.join(out, "metrics.jsonl")
    task, model, opt = build(cfg, device)
    start = 0
    if os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path, map_location=device)
        saved = {k: v for k, v in ck["config"].items() if k not in RESUME_KEYS_IGNORED}
        now = {k: v for k, v in cfg.items() if k not in RESUME_KEYS_IGNORED}
        if saved != now:
            diff = sorted(k for k in set(saved) | set(now) if saved.get(k) != now.get(k))
            raise SystemExit(f"glr.train: {out} holds a checkpoint of a different run (differs in {diff})")
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        start = ck["step"]
        kept = []
        if os.path.exists(metrics_path):
            with open(metrics_path) as f:
                kept = [line for line in f if json.loads(line)["step"] <= start]
        with open(metrics_path, "w") as f:
            f.writelines(kept)
    else:
        open(metrics_path, "w").close()
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1, sort_keys=True)

    step_model = torch.compile(model, fullgraph=True) if cfg.get("compile") else model
    label = f"{cfg['member']}/{cfg['task']}/{cfg['impl']}"
    bar = Progress(cfg["steps"], start, label, cfg.get("quiet", False))
    t0, tokens = time.time(), 0

    def save(step):
        tmp = ckpt_path + ".tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "config": cfg}, tmp)
        os.replace(tmp, ckpt_path)

    metrics = open(metrics_path, "a")
    done = start
    for step in range(start, cfg["steps"]):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        x, y = task.batch(step)
        x, y = x.to(device), y.to(device)
        loss, _ = loss_of(step_model, x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += x.numel()
        done = step + 1
        record = None
        if done % cfg["log_every"] == 0 or done == cfg["steps"] or done == 1:
            record = {"step": done, "loss": loss.item(), "lr": lr_at(step, cfg),
                      "tokens_per_s": tokens / max(time.time() - t0, 1e-9)}
        if done % cfg["eval_every"] == 0 or done == cfg["steps"]:
            record = record or {"step": done, "loss": loss.item(), "lr": lr_at(step, cfg)}
            record.update(evaluate(model, task, device))
        if record is not None:
            if not math.isfinite(record["loss"]):
                metrics.write(json.dumps(record) + "\n")
                metrics.close()
                raise SystemExit(f"glr.train: loss is {record['loss']} at step {done}")
            metrics.write(json.dumps(record) + "\n")
            metrics.flush()
            bar.update(done, f"loss {record['loss']:.4f}" +
                       (f" acc {record['eval_acc']:.3f}" if "eval_acc" in record else ""))
        if done % cfg["ckpt_every"] == 0 or done == cfg["steps"]:
            save(done)
        if cfg.get("stop_after") is not None and done >= cfg["stop_after"]:
            break
    metrics.close()
    if done < cfg["steps"]:  # interrupted on purpose (--stop-after): no summary, the checkpoint resumes it
        return {"stopped_at": done, "resumed_from": start}
    summary = {"member": cfg["member"], "task": cfg["task"], "impl": cfg["impl"], "seed": cfg["seed"],
               "steps": cfg["steps"], "resumed_from": start, "wall_s": time.time() - t0,
               "device": str(device), "torch": torch.__version__}
    summary.update(evaluate(model, task, device))
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    return summary


def main(argv=None):
    args = parser().parse_args(argv)
    summary = run(vars(args))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
