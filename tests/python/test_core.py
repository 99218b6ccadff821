"""The nanobind module: tensors cross by DLPack without copies both ways; the Target trampoline lets C++
drive a Python target; seeds agree with the C++ derivation bit for bit."""
import os

import numpy as np
import pytest

import kgate
from kgate import seeds

core = pytest.importorskip("kgate._core", reason="the extension is not built (pip install ./python)")


def test_host_array_exports_without_copy():
    a = core.HostArray(core.DType.f32, [2, 3])
    v = a.numpy()
    v[:] = 7.0
    assert a.get(5) == 7.0
    assert v.ctypes.data == a.data_address()
    w = np.from_dlpack(a)
    assert w.ctypes.data == a.data_address() and w[1, 2] == 7.0


def test_numpy_arrays_are_read_in_place():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert core.array_address(x) == x.ctypes.data
    y = x.copy()
    assert core.first_bitwise_difference(x, y) == -1
    y[2, 1] = -0.0 if y[2, 1] == 0 else -y[2, 1]
    assert core.first_bitwise_difference(x, y) == 9
    # strided views are read through their strides, not copied
    assert core.first_bitwise_difference(x[:, ::2], y[:, ::2]) == -1
    assert list(core.nonfinite_classes(np.array([1.0, np.nan, np.inf, -np.inf]))) == [0, 1, 2, 3]


def test_seeds_match_the_cpp_core():
    for key in (0, 42, 2**64 - 1, 0x6B67617465):
        for label in (0, 7, "oracle", "inputs"):
            assert seeds.child(key, label) == core.Stream(key).child(label).key
    assert seeds.mix64(123) == core.mix64(123)


def test_round_to_is_exact():
    assert core.round_to(1.0 + 2**-11, core.DType.f16) == 1.0  # tie to even
    assert core.round_to(65520.0, core.DType.f16) == float("inf")


class EchoTarget(core.Target):
    """A minimal Python target: proves the trampoline routes every virtual the gates use."""

    def __init__(self):
        super().__init__()
        self.bufs, self.next = {}, 1

    def describe(self):
        return "echo"

    def device(self):
        return 1

    def alloc(self, n):
        self.bufs[self.next] = bytearray(n)
        self.next += 1
        return self.next - 1

    def release(self, b):
        del self.bufs[b]

    def write(self, b, off, data):
        self.bufs[b][off:off + len(data)] = data

    def read(self, b, off, n):
        return bytes(self.bufs[b][off:off + n])

    def check_guards(self, b):
        return []

    def call(self, req):
        r = core.CallResult()
        inv = req.invocations[0]
        ir = core.InvocationResult()
        src = np.frombuffer(self.bufs[inv.inputs[0].buffer], np.float32)
        h = core.HostArray(core.DType.f32, list(inv.outputs[0].layout.shape))
        h.numpy().reshape(-1)[:] = src + 1
        ir.outputs = [h]
        r.results = [ir]
        return r

    def reset(self):
        pass

    def healthy(self):
        return True


def test_cpp_drives_a_python_target():
    t = EchoTarget()
    a = core.HostArray(core.DType.f32, [4])
    a.numpy()[:] = [1, 2, 3, 4]
    r = core.drive_target(t, [a], [(core.DType.f32, [4])])
    assert r.call.outcome == core.CallOutcome.completed
    assert list(np.from_dlpack(r.call.results[0].outputs[0])) == [2, 3, 4, 5]
    assert t.bufs == {}  # drive_target released every buffer through the trampoline


class KeepingTarget(EchoTarget):
    """Keeps the payload write() was lent: the engine's memory, valid for the call only."""

    def write(self, b, off, data):
        super().write(b, off, data)
        self.kept = data


def test_a_python_target_that_keeps_a_written_payload_is_an_error_not_a_dangling_view():
    t = KeepingTarget()
    a = core.HostArray(core.DType.f32, [4])
    with pytest.raises(Exception, match="kept the payload"):
        core.drive_target(t, [a], [(core.DType.f32, [4])])
    with pytest.raises(ValueError):  # released: it no longer reads the engine's memory
        bytes(t.kept)


def test_inprocess_cpu_backend_poisons_and_guards():
    def fn(ins, outs):
        outs[0][...] = ins[0] * 3
        return 0
    t = core.inprocess_target("triple", fn)
    a = core.HostArray(core.DType.f32, [5])
    a.numpy()[:] = 1
    r = core.drive_target(t, [a], [(core.DType.f32, [5])], poison=b"\xff\xff\xff\xff")
    assert list(np.from_dlpack(r.call.results[0].outputs[0])) == [3] * 5
    assert r.guards_after == [[]]


SRC = """
import os

import numpy as np
def kernel(xs, ys):
    ys[0][...] = xs[0] * 2
    return 0
def crash(xs, ys):
    import os, signal
    os.kill(os.getpid(), signal.SIGSEGV)
def hang(xs, ys):
    import time
    time.sleep(60)
def overrun(xs, ys):
    import ctypes
    ctypes.memset(xs[0].ctypes.data + xs[0].nbytes + 16, 0, 1)
    ys[0][...] = 0
    return 0
"""


def test_worker_target_runs_the_candidate_in_another_process():
    from kgate.target import WorkerTarget
    a = core.HostArray(core.DType.f32, [3, 4])
    a.numpy()[:] = np.arange(12).reshape(3, 4)
    t = WorkerTarget(SRC, "kernel")
    r = core.drive_target(t, [a], [(core.DType.f32, [3, 4])])
    assert r.call.outcome == core.CallOutcome.completed and r.call.results[0].status == 0
    assert np.array_equal(np.from_dlpack(r.call.results[0].outputs[0]), np.arange(12).reshape(3, 4) * 2)
    t = WorkerTarget(SRC, "overrun")
    r = core.drive_target(t, [a], [(core.DType.f32, [3, 4])])
    assert r.guards_after[0] and r.guards_after[0][0].offset == 48 + 16


def test_worker_target_crash_and_hang_cost_one_call():
    from kgate.target import WorkerTarget
    a = core.HostArray(core.DType.f32, [2])
    t = WorkerTarget(SRC, "crash")
    r = core.drive_target(t, [a], [(core.DType.f32, [2])])
    assert r.call.outcome == core.CallOutcome.crashed and not t.healthy()
    t.reset()
    assert t.healthy()
    t = WorkerTarget(SRC, "hang", timeout=1.0)
    r = core.drive_target(t, [a], [(core.DType.f32, [2])])
    assert r.call.outcome == core.CallOutcome.timed_out


def test_take_output_moves_the_bytes():
    h = core.HostArray(core.DType.f32, [3])
    h.numpy()[:] = [1, 2, 3]
    ir = core.InvocationResult()
    ir.take_output(h)
    assert h.nbytes == 0 and list(np.from_dlpack(ir.outputs[0])) == [1, 2, 3]


def test_wire_raw_buffers_cross_uncopied_into_the_sink():
    import socket
    from multiprocessing.connection import Connection
    from kgate.kernelbench import wire
    a, b = socket.socketpair()
    ca, cb = Connection(os.dup(a.fileno())), Connection(os.dup(b.fileno()))
    a.close(), b.close()
    payload = np.arange(1 << 18, dtype=np.float32)
    import threading
    t = threading.Thread(target=wire.send, args=(ca, {"op": "x", wire.RAW: [payload, b"", bytearray(b"ab")]}))
    t.start()
    into = np.zeros(1 << 18, np.float32)
    msg = wire.recv(cb, lambda k, n: into.view(np.uint8) if k == 0 else None)
    t.join()
    assert msg["op"] == "x" and wire.SIZES not in msg
    assert msg[wire.RAW][0] is not None and np.array_equal(into, payload)
    assert bytes(msg[wire.RAW][1]) == b"" and bytes(msg[wire.RAW][2]) == b"ab"
    ca.send({"plain": 1})  # messages without raw buffers are untouched
    assert wire.recv(cb) == {"plain": 1}
