"""The worker protocol of a placed call (kernelbench/target.py, kernelbench/worker.py): the driver names its
buffers and allocs and releases ride ahead of the next message, so a placed call is a round trip per tensor
and one for the call; a failure of an op that rode ahead surfaces, naming that op, and the message's own op
does not run; a malformed or wrong-sized ecall reply is an error, never a result."""
import numpy as np
import pytest

from kgate import _core as core
from kgate.kernelbench import fw_numpy, wire

SRC = """
def kernel(xs, ys):
    ys[0][...] = xs[0] * 2
    return 0
"""


def _target():
    from kgate.target import WorkerTarget
    return WorkerTarget(SRC, "kernel")


def _arg(bid, shape):
    a = core.TensorArg()
    a.buffer, a.layout = bid, core.Layout.dense(core.DType.f32, list(shape))
    return a


def _request(ids, shape=(3, 4)):
    inv = core.Invocation()
    inv.inputs = [_arg(ids[0], shape)]
    inv.outputs = [_arg(ids[1], shape)]
    req = core.CallRequest()
    req.invocations = [inv]
    return req


def _place(t, x):
    a = t.alloc(x.nbytes)
    t.write(a, 0, x.tobytes())
    b = t.alloc(x.nbytes)
    t.fill(b, 0, x.nbytes, 0xFF)
    return a, b


def test_a_placed_call_is_three_messages_and_ids_start_at_one_per_worker():
    t = _target()
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    ids = _place(t, x)
    assert ids == (1, 2) and t.messages == 2  # the write and the fill, each with its alloc riding ahead
    r = t.call(_request(ids))
    assert r.outcome == core.CallOutcome.completed and r.results[0].status == 0
    assert np.array_equal(np.from_dlpack(r.results[0].outputs[0]), x * 2)
    assert t.messages == 3
    for i in ids:
        t.release(i)
    with pytest.raises(RuntimeError, match=r"worker guards: KeyError"):  # the releases rode ahead of it
        t.check_guards(1)
    t.reset()
    assert _place(t, x) == (1, 2)  # a fresh worker numbers from 1 again: the same guard patterns as before


def test_a_failed_op_that_rode_ahead_names_itself_and_stops_the_message():
    t = _target()
    a = t.alloc(8)
    t.write(a, 0, b"\0" * 8)
    b = t.alloc(1 << 62)  # the worker cannot: reported by the next message, as the alloc's failure
    with pytest.raises(RuntimeError, match=r"^worker alloc: "):
        t.write(a, 0, b"\1" * 8)
    assert bytes(t.read(a, 0, 8)) == b"\0" * 8  # the write it rode ahead of did not run
    with pytest.raises(RuntimeError, match=r"^worker write: IndexError: write of 8 bytes at 4 past the end"):
        t.write(a, 4, b"\0" * 8)
    assert b == 2


def test_a_failed_alloc_riding_on_a_call_is_an_error_not_a_crash():
    t = _target()
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a, _ = _place(t, x)
    bad = t.alloc(1 << 62)
    with pytest.raises(RuntimeError, match=r"^worker alloc: "):
        t.call(_request((a, bad)))
    assert t.healthy()


def test_an_alloc_of_an_id_in_use_is_refused():
    b = fw_numpy.Buffers(guard_seed=1)
    assert b.alloc(8, 3) == 3 and b.alloc(8) == 4
    for bad in (3, 0, -1):
        with pytest.raises(ValueError, match="in use or not a positive integer"):
            b.alloc(8, bad)


def test_only_buffer_ops_ride_ahead():
    from kgate.kernelbench.worker import Worker
    w = Worker(fw_numpy)
    w.buffers = fw_numpy.Buffers(0)
    reply = w.handle({"op": "read", "id": 1, "offset": 0, "bytes": 4, "before": [{"op": "harness"}]})
    assert reply["status"] == "error" and reply["op"] == "harness" and "cannot ride" in reply["message"]
    reply = w.handle({"op": "read", "id": 1, "offset": 0, "bytes": 4,
                      "before": [{"op": "alloc", "id": 1, "bytes": 4}, {"op": "fill", "id": 1, "offset": 0,
                                                                       "bytes": 4, "value": 7}]})
    assert reply["status"] == "ok" and bytes(reply[wire.RAW][0]) == b"\7" * 4


@pytest.mark.parametrize("spoil", ["few_results", "no_results", "few_outputs", "short_output"])
def test_a_malformed_or_wrong_sized_ecall_reply_is_an_error(spoil):
    t = _target()
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    ids = _place(t, x)
    real = t.cand.request

    def spoiled(msg, timeout=None, sink=None):
        if msg["op"] != "ecall":
            return real(msg, timeout, sink=sink)
        reply = real(msg, timeout, sink=None)  # raw buffers as fresh bytearrays, then spoiled
        if spoil == "few_results":
            reply["results"] = []
        elif spoil == "no_results":
            del reply["results"]
        elif spoil == "few_outputs":
            reply[wire.RAW] = []
        else:
            reply[wire.RAW] = [reply[wire.RAW][0][:-4]]
        return reply

    t.cand.request = spoiled
    with pytest.raises((RuntimeError, ValueError), match=r"malformed reply|bytes for"):
        t.call(_request(ids))


def test_a_failed_call_with_nothing_riding_ahead_is_a_crash_whatever_op_its_reply_names():
    # a reply naming a folded op is believed only when the message carried some: a worker cannot turn its
    # own failed call into kgate's error by naming one
    t = _target()
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    ids = _place(t, x)
    real = t.cand.request
    t.cand.request = lambda msg, timeout=None, sink=None: (
        {"status": "error", "op": "alloc", "message": "forged"} if msg["op"] == "ecall" else real(msg, timeout, sink=sink))
    r = t.call(_request(ids))
    assert r.outcome == core.CallOutcome.crashed and r.detail == "forged"


KNOB_SRC = """
import numpy as np
import kgate_test_cudnn as cudnn
cudnn.benchmark = True  # as a candidate's `torch.backends.cudnn.benchmark = True` at import
seen = []


class ModelNew:
    def __init__(self):
        cudnn.benchmark = True

    def __call__(self, x):
        seen.append(cudnn.benchmark)
        cudnn.benchmark = True  # turned on again inside its forward
        return x * 2
"""


@pytest.mark.parametrize("hold", [False, True])
def test_the_guarded_pass_holds_cudnn_benchmark_off_after_import_and_before_every_build_and_call(hold, monkeypatch):
    """The guard allocator's second pass (rowjob._guarded_pass) asks the worker to hold cuDNN's benchmark mode
    off (fw.hold_cudnn_benchmark: torch.backends.cudnn.benchmark = False in fw_torch): after the candidate's
    import and before every build and call, whatever the candidate set since. Here a fake framework's knob
    stands for torch's; without the request nothing is touched."""
    import sys
    import types
    from kgate.kernelbench.worker import Worker
    knob = types.ModuleType("kgate_test_cudnn")
    knob.benchmark = False
    monkeypatch.setitem(sys.modules, "kgate_test_cudnn", knob)

    def hold_cudnn_benchmark():
        was, knob.benchmark = knob.benchmark, False
        return was
    fw = types.SimpleNamespace(**{k: getattr(fw_numpy, k) for k in dir(fw_numpy) if not k.startswith("__")},
                               hold_cudnn_benchmark=hold_cudnn_benchmark)
    w = Worker(fw)
    assert w.handle({"op": "init", "custom_code": KNOB_SRC, "hold_cudnn_benchmark": hold})["status"] == "ok"
    assert knob.benchmark is not hold  # held off right after the import
    assert w.handle({"op": "build", "slot": "s", "init_inputs": [], "seed": 0})["status"] == "ok"
    x = np.arange(6, dtype=np.float32)
    for _ in range(2):
        r = w.handle({"op": "call", "slot": "s", "inputs": [x]})
        assert r["status"] == "ok", r
        assert np.array_equal(r["outputs"][0]["array"], x * 2)
    assert w.ns["seen"] == [not hold] * 2  # every call began with it off under the hold
    # the import, ModelNew.__init__ and the first call turned it on; each time the hold found it on
    assert w.cudnn_turned_on == (3 if hold else 0)


def test_fw_torch_holds_cudnn_benchmark_off():
    torch = pytest.importorskip("torch")
    from kgate.kernelbench import fw_torch
    old = torch.backends.cudnn.benchmark
    try:
        torch.backends.cudnn.benchmark = True
        assert fw_torch.hold_cudnn_benchmark() is True and torch.backends.cudnn.benchmark is False
        assert fw_torch.hold_cudnn_benchmark() is False and torch.backends.cudnn.benchmark is False
    finally:
        torch.backends.cudnn.benchmark = old
