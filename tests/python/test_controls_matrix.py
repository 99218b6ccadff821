"""The detection matrix (defence 1) holds a control to all issue 14 asks of it, not only to its gate: a broken
control must pass the producer's own test (its `baseline` record) in every run, or it is no defect the field's
test misses; a precision-downgrade control must carry its precision label. Pure Python: the matrix reads
records, so these run without the extension, and the torch matrix a GPU run prints checks the same."""
from kgate.controls import load, matrix

CONTROL = {"name": "drops_precision", "expect": {"oracle"}, "precision": "tf32", "producer_passes": True}
STATUS = {"name": "crashes", "expect": {"oracle"}, "precision": None, "producer_passes": False}
CORRECT = {"name": "correct", "expect": set(), "precision": None, "producer_passes": True}


def record(name, baseline="PASS", oracle="FAIL", label="tf32"):
    return {"task": name, "status": "ok",
            "gates": [{"gate": "baseline", "verdict": baseline},
                      {"gate": "oracle", "verdict": oracle, "counted": True, "precision_label": label}]}


def test_a_control_the_producer_accepts_caught_and_labelled_is_as_intended():
    ok, text = matrix([CONTROL, STATUS, CORRECT],
                      [record("drops_precision"), record("drops_precision"),
                       record("crashes", baseline="CRASH", oracle="CRASH", label=None),
                       record("correct", oracle="PASS", label=None)], seeds_n=None)
    assert ok, text
    rows = {line.split()[0]: line for line in text.splitlines()[2:] if line.strip()}
    assert rows["drops_precision"].rstrip().endswith("2/2  ok"), rows["drops_precision"]
    assert rows["crashes"].rstrip().endswith("-  ok"), rows["crashes"]  # a status: the field rejects it too


def test_a_broken_control_the_producer_rejects_is_not_as_intended():
    # caught by its gate in both runs, but the producer's allclose rejects it in one: the field would not
    # accept this kernel, so it says nothing about what the field's test misses
    ok, text = matrix([CONTROL], [record("drops_precision"), record("drops_precision", baseline="FAIL")],
                      seeds_n=None)
    assert not ok
    assert "MISSED (the producer's test rejects it)" in text and " 1/2 " in text, text


def test_a_downgrade_labelled_with_another_precision_is_not_as_intended():
    ok, text = matrix([CONTROL], [record("drops_precision", label="fp16")], seeds_n=None)
    assert not ok and "labelled tf32 in 0 of 1 runs" in text, text


def test_every_torch_control_says_whether_the_producer_accepts_it():
    # the status controls (a crash), a defect the field's allclose sees anyway (an unwritten column) and one it
    # sees or not by allocator luck (a cache keyed on the address alone) say so; every other broken torch control
    # must pass the producer's test on the GPU
    cs = {c["name"]: c for c in load("torch")}
    assert {n for n, c in cs.items() if not c["producer_passes"]} == {"crashes", "unwritten_output", "caches_result"}
    assert cs["tf32_linear"]["precision"] == "tf32" and cs["tf32_linear"]["expect"] == {"oracle"}
    numpy = {c["name"]: c for c in load("numpy")}
    assert {n for n, c in numpy.items() if not c["producer_passes"]} == {"crashes", "hangs", "caches_result"}
