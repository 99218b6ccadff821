"""The training command on a tiny configuration: it runs, logs, checkpoints, resumes to exactly the
state an uninterrupted run reaches, refuses to resume a different run, and plots."""
import json
import os

import pytest
import torch

from glr import plot, sweep, train

TINY = ["--steps", "3", "--batch", "4", "--seq-len", "32", "--d-model", "16", "--head-dim", "8", "--layers", "1",
        "--pairs", "4", "--vocab", "32", "--eval-every", "2", "--eval-batches", "1", "--ckpt-every", "2",
        "--log-every", "1", "--device", "cpu", "--quiet"]


def cfg(out, *extra, member="gdn", task="mqar", impl="glr"):
    return vars(train.parser().parse_args(["--member", member, "--task", task, "--impl", impl, "--out", str(out),
                                           *TINY, *extra]))


def metrics(d):
    with open(os.path.join(d, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("member", ["gdn", "mamba2"])
def test_resume_reaches_the_uninterrupted_state(tmp_path, member):
    straight = tmp_path / "straight"
    train.run(cfg(straight, member=member))
    broken = tmp_path / "broken"
    train.run(cfg(broken, "--stop-after", "2", member=member))  # interrupted after step 2's checkpoint
    ck = torch.load(broken / "checkpoint.pt")
    assert ck["step"] == 2
    summary = train.run(cfg(broken, member=member))  # resumes: only step 3 runs
    assert summary["resumed_from"] == 2
    a, b = metrics(straight), metrics(broken)
    assert [r["step"] for r in a] == [r["step"] for r in b] == [1, 2, 3]
    for ra, rb in zip(a, b):
        assert ra["loss"] == pytest.approx(rb["loss"], rel=1e-6, abs=0)
        assert ra.get("eval_acc") == rb.get("eval_acc")
    wa = torch.load(straight / "checkpoint.pt")["model"]
    wb = torch.load(broken / "checkpoint.pt")["model"]
    for k in wa:
        assert torch.allclose(wa[k], wb[k], rtol=1e-5, atol=1e-7), k


def test_resume_refuses_a_different_run(tmp_path):
    train.run(cfg(tmp_path))
    with pytest.raises(SystemExit, match="differs in \\['lr'\\]"):
        train.run(cfg(tmp_path, "--lr", "0.5"))


def test_glr_and_reference_train_the_same(tmp_path):
    a = train.run(cfg(tmp_path / "glr", member="deltanet"))
    b = train.run(cfg(tmp_path / "ref", member="deltanet", impl="reference"))
    for ra, rb in zip(metrics(tmp_path / "glr"), metrics(tmp_path / "ref")):
        assert ra["loss"] == pytest.approx(rb["loss"], rel=1e-4)
    assert a["eval_loss"] == pytest.approx(b["eval_loss"], rel=1e-4)


def test_lm_task_on_stdlib_bytes(tmp_path):
    s = train.run(cfg(tmp_path, "--lm-bytes", "200000", member="retnet", task="lm"))
    assert s["task"] == "lm" and "eval_acc" not in s
    assert metrics(tmp_path)[0]["loss"] == pytest.approx(torch.log(torch.tensor(256.0)).item(), rel=0.2)


def test_sweep_runs_every_member_and_plots(tmp_path):
    pytest.importorskip("matplotlib")
    sweep.main(["--task", "mqar", "--out", str(tmp_path), "--steps", "4", "--batch", "2", "--seq-len", "32",
                "--d-model", "16", "--head-dim", "8", "--layers", "1", "--pairs", "4", "--sweep-pairs", "2,4",
                "--sweep-widths", "8,16", "--device", "cpu", "--eval-every", "2", "--budget-min", "5",
                "--jobs", "3", "--reference-steps", "2"])
    report = json.load(open(tmp_path / "sweep.json"))
    assert not report["not_finished"] and not report["failed_this_call"]
    assert len(report["finished"]) == 5 * (3 + 1 + 2)
    for m, gaps in report["mean_abs_loss_gap"].items():
        assert gaps["steps_compared"] == 2, m  # the reference run stopped after its step 2 of 4
        assert gaps["glr_vs_reference"] is not None and gaps["glr_vs_reference"] < 1e-3, m
    ref = metrics(tmp_path / "gdn-reference-p4-d16-s0")
    assert ref[-1]["step"] == 2 and not (tmp_path / "gdn-reference-p4-d16-s0" / "summary.json").exists()
    # a second run of the command finds every run finished and starts none
    sweep.main(["--task", "mqar", "--out", str(tmp_path), "--batch", "2", "--seq-len", "32",
                "--d-model", "16", "--head-dim", "8", "--layers", "1", "--pairs", "4", "--sweep-pairs", "2,4",
                "--sweep-widths", "8,16", "--device", "cpu", "--eval-every", "2", "--budget-min", "5",
                "--steps", "4", "--reference-steps", "2"])
    again = json.load(open(tmp_path / "sweep.json"))
    assert again["finished"] == report["finished"] and again["wall_s"] < 30
    table = (tmp_path / "results.md").read_text()
    for m in ("deltanet", "gdn", "linear", "mamba2", "retnet"):
        row = next(line for line in table.splitlines() if line.startswith(f"| {m} | 2 |"))
        assert row.endswith("| yes |") or row.endswith("| no |") or row.endswith("| - |"), row
        assert f"| {m} | 16 | " in table and f"| {m} | 8 | " in table  # accuracy rows, one per width
    for png in ("loss_curves.png", "mqar_accuracy.png"):
        with open(tmp_path / png, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert plot.plot_dir(str(tmp_path))
