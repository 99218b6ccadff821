"""The worker protocol of a placed call (kernelbench/target.py, kernelbench/worker.py): the driver names its
buffers and allocs and releases ride ahead of the next message, so a placed call is a round trip per tensor
and one for the call; a failure of an op that rode ahead surfaces, naming that op, and the message's own op
does not run; a malformed or wrong-sized ecall reply is an error, never a result."""
import os

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

    def spoiled(msg, timeout=None, sink=None, **kw):
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
    t.cand.request = lambda msg, timeout=None, sink=None, **kw: (
        {"status": "error", "op": "alloc", "message": "forged"} if msg["op"] == "ecall" else real(msg, timeout, sink=sink))
    r = t.call(_request(ids))
    assert r.outcome == core.CallOutcome.crashed and r.detail == "forged"


KNOB_SRC = """
import os

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


# -- the shared staging area (wire.SharedStaging): the inputs' bytes without the socket ----------------------
# (the torch worker's by default; these tests ask for it for the numpy worker: KGATE_SHARED_STAGING=1)


@pytest.fixture
def shared_on(monkeypatch):
    monkeypatch.setenv("KGATE_SHARED_STAGING", "1")


def test_the_areas_are_the_torch_workers_unless_asked(monkeypatch):
    monkeypatch.delenv("KGATE_SHARED_STAGING", raising=False)
    memfd = wire.shared_staging_enabled("torch")
    assert not wire.shared_staging_enabled("numpy")
    monkeypatch.setenv("KGATE_SHARED_STAGING", "1")
    assert wire.shared_staging_enabled("numpy") == memfd
    monkeypatch.setenv("KGATE_SHARED_STAGING", "0")
    assert not wire.shared_staging_enabled("torch")

COPY_SRC = """
def kernel(xs, ys):
    ys[0][...] = xs[0][::-1]
    return 0
"""


def _u8_request(ids, n):
    def arg(bid):
        a = core.TensorArg()
        a.buffer, a.layout = bid, core.Layout.dense(core.DType.f32, [n])
        return a
    inv = core.Invocation()
    inv.inputs, inv.outputs = [arg(ids[0])], [arg(ids[1])]
    req = core.CallRequest()
    req.invocations = [inv]
    return req


def _round_trips(t, sizes, seed):
    """For each size (f32 elements): write fresh random bytes, read them back, call the candidate (it
    reverses its input); what came back each time."""
    rng = np.random.default_rng(seed)
    out = []
    for n in sizes:
        x = rng.integers(0, 256, size=4 * n, dtype=np.uint8)
        a, b = t.alloc(x.nbytes), t.alloc(x.nbytes)
        t.write(a, 0, memoryview(x))  # the engine lends a memoryview of its array
        t.fill(b, 0, x.nbytes, 0xFF)
        back = bytes(t.read(a, 0, x.nbytes))
        r = t.call(_u8_request((a, b), n))
        assert r.outcome == core.CallOutcome.completed and r.results[0].status == 0
        y = np.from_dlpack(r.results[0].outputs[0]).tobytes()
        assert back == x.tobytes() and y == x.view(np.float32)[::-1].tobytes()
        guards = t.check_guards(a) + t.check_guards(b)
        out.append((back, y, [(g.offset, g.expected, g.found) for g in guards]))
        t.release(a)
        t.release(b)
    return out


# edge sizes around the threshold, a growth of the area (1 MiB, then 2^22 + 1 elements), and smaller again
_SIZES = [0, 1, wire.SHARED_MIN // 4 - 1, wire.SHARED_MIN // 4, wire.SHARED_MIN // 4 + 1, 1 << 18,
          (1 << 18) + 1, (1 << 22) + 1, 3, 1 << 20]


def test_the_shared_area_gives_what_the_socket_gives(monkeypatch):
    from kgate.target import WorkerTarget
    plain = WorkerTarget(COPY_SRC, "kernel")  # the numpy worker: the socket unless asked
    monkeypatch.setenv("KGATE_SHARED_STAGING", "1")
    fast = WorkerTarget(COPY_SRC, "kernel")
    if not wire.shared_staging_enabled("numpy"):
        pytest.skip("no memfd here: the socket path only (test_without_memfd_every_payload_crosses_the_socket)")
    assert plain.cand.shared() is None
    assert _round_trips(fast, _SIZES, 7) == _round_trips(plain, _SIZES, 7)
    area = fast.cand._shared
    assert area is not None and not area.broken and area.size >= 4 * ((1 << 22) + 1)
    out = fast.cand._out  # the outputs came back through the outputs' area
    assert out is not None and not out.broken and out.size >= 4 * ((1 << 22) + 1)
    assert plain.cand._out is None
    fast.reset()  # a fresh worker gets a fresh area
    assert _round_trips(fast, _SIZES[-3:], 8) == _round_trips(plain, _SIZES[-3:], 8)
    assert fast.cand._shared is not area and area.mm is None


def test_without_memfd_every_payload_crosses_the_socket(monkeypatch, shared_on):
    from kgate.target import WorkerTarget

    def no_memfd(*a, **k):
        raise OSError(38, "Function not implemented")
    monkeypatch.setattr(wire.os, "memfd_create", no_memfd, raising=False)
    t = WorkerTarget(COPY_SRC, "kernel")
    _round_trips(t, _SIZES[:6], 9)
    assert t.cand._shared is None or t.cand._shared.broken


def test_an_area_that_cannot_be_sealed_is_never_used(monkeypatch, shared_on):
    # unsealed, a worker could shrink the file under the driver's mapping: the driver's next copy into it
    # would end the driver by SIGBUS. No seals, no area: the socket.
    from kgate.target import WorkerTarget
    real = wire.fcntl.fcntl

    def no_seals(fd, cmd, *a):
        if cmd == wire.fcntl.F_ADD_SEALS:
            raise OSError(22, "Invalid argument")
        return real(fd, cmd, *a)
    monkeypatch.setattr(wire.fcntl, "fcntl", no_seals)
    t = WorkerTarget(COPY_SRC, "kernel")
    _round_trips(t, _SIZES[3:6], 10)
    if wire.shared_staging_enabled("numpy"):
        assert t.cand._shared.broken and t.cand._shared.mm is None


def test_the_area_refuses_what_a_worker_would_do_to_it(shared_on):
    """The receiving side, as a hostile worker holds it: the descriptor cannot shrink or grow the file, and
    (Linux 5.1+, F_SEAL_FUTURE_WRITE) cannot write it nor map it writable; the driver goes on writing."""
    import mmap
    import socket
    if not wire.shared_staging_enabled("numpy"):
        pytest.skip("no memfd here")
    from multiprocessing.connection import Connection
    a, b = socket.socketpair()
    driver = wire.SharedStaging(Connection(os.dup(a.fileno())))
    x = np.arange(1 << 18, dtype=np.uint8)
    spans, fd = driver.place([memoryview(x)])
    driver.pass_fd(fd)
    _, fds, _, _ = socket.recv_fds(b, 1, 1)
    fd = fds[0]
    for attempt in (lambda: os.ftruncate(fd, 0), lambda: os.ftruncate(fd, driver.size + 4096)):
        with pytest.raises(PermissionError):
            attempt()
    if driver.seals & wire.F_SEAL_FUTURE_WRITE:
        with pytest.raises(PermissionError):
            os.pwrite(fd, b"\0" * 8, 0)
        with pytest.raises(PermissionError):
            mmap.mmap(fd, driver.size)  # shared and writable
    view = mmap.mmap(fd, driver.size, access=mmap.ACCESS_READ)
    os.close(fd)
    assert view[:x.nbytes] == x.tobytes()
    y = x[::-1].copy()
    assert driver.place([memoryview(y)]) == ([(0, y.nbytes)], None)  # the same area, no SIGBUS
    assert view[:y.nbytes] == y.tobytes()
    driver.close()
    for s in (a, b):
        s.close()


HOSTILE_SRC = """
import mmap, os, socket
from kgate.kernelbench import wire
tried = []


def take(self, size):
    # the worker's receiving side, replaced by the candidate (it owns the process): the area's descriptor
    # in hand, it tries to shrink, grow, write and map it writable, then scribbles where it can
    if self.sock is None:
        self.sock = socket.socket(fileno=os.dup(self.conn.fileno()))
    _, fds, _, _ = socket.recv_fds(self.sock, 1, 1)
    fd = fds[0]
    for what, f in (("shrink", lambda: os.ftruncate(fd, 0)), ("grow", lambda: os.ftruncate(fd, 2 * size)),
                    ("write", lambda: os.pwrite(fd, b"\\x55" * 4096, 0)), ("map", lambda: mmap.mmap(fd, size))):
        try:
            f()
            tried.append(what + " done")
        except OSError:
            tried.append(what + " refused")
    try:  # a private writable mapping (refused with the seal before Linux 6.1)
        self.mm = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        self.mm[:4096] = b"\\x55" * 4096  # scribbles on its own copy of the page: its own inputs
        tried.append("scribble done")
    except OSError:
        self.mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    os.close(fd)


wire.SharedReader.take = take


def kernel(xs, ys):
    ys[0][...] = xs[0][::-1]
    print(" ".join(tried))
    return 0
"""


def _printed(t, *words, wait: float = 20.0) -> str:
    """What the worker printed so far, once every one of `words` is in it (or `wait` seconds passed): its output
    reaches the log through kgate-isolate's relay, after the call's reply, so CallResult.output may not hold it yet."""
    import time
    until = time.monotonic() + wait
    while True:
        text = t.cand.output_tail()
        if all(w in text for w in words) or time.monotonic() > until:
            return text
        time.sleep(0.02)


def _first_call(src):
    """A numpy worker running `src` (the areas on), 2^16 f32 written to its input and its first call: the target,
    the input, the two buffer ids and the call's result."""
    from kgate.target import WorkerTarget
    if not wire.shared_staging_enabled("numpy"):
        pytest.skip("no memfd here")
    t = WorkerTarget(src, "kernel")
    x = np.arange(1 << 16, dtype=np.float32)
    a, b = t.alloc(x.nbytes), t.alloc(x.nbytes)
    t.write(a, 0, x.tobytes())
    t.fill(b, 0, x.nbytes, 0xFF)
    return t, x, a, b, t.call(_u8_request((a, b), x.size))


def test_a_worker_that_attacks_the_area_costs_its_own_verdict_only(shared_on):
    t, x, a, b, r = _first_call(HOSTILE_SRC)
    n = x.size
    printed = _printed(t, "shrink", "grow", "write", "map", "\n")  # one line, written at once
    assert "shrink refused" in printed and "grow refused" in printed
    if t.cand._shared.seals & wire.F_SEAL_FUTURE_WRITE:
        assert "write refused" in printed and "map refused" in printed
    # it computed from what it scribbled (its own inputs, as a candidate that modifies them), and the buffer
    # it holds says so: the immutability gate's read-back against the driver's own copy is its verdict
    seen = x.copy()
    if "scribble done" in printed:
        seen[:1024] = np.frombuffer(b"\x55" * 4096, np.float32)
    assert np.array_equal(np.from_dlpack(r.results[0].outputs[0]), seen[::-1])
    assert np.frombuffer(bytes(t.read(a, 0, x.nbytes)), np.float32).tobytes() == seen.tobytes()
    assert np.array_equal(x, np.arange(n, dtype=np.float32))  # the driver's own copy
    y = x + 1
    t.write(a, 0, y.tobytes())  # the driver writes the area again: no SIGBUS, no harm
    back = np.frombuffer(bytes(t.read(a, 0, y.nbytes)), np.float32)
    assert np.array_equal(back[1024:], y[1024:])  # its private page keeps its scribble, the rest is the driver's
    assert t.healthy()


def test_a_payload_too_large_for_an_area_crosses_the_socket_and_the_area_stays(shared_on):
    # RLIMIT_FSIZE (the row job's --file-limit) bounds a memfd's size too: a case larger than it may be crosses
    # the socket alone, and the next smaller one uses the area again
    import resource
    from kgate.target import WorkerTarget
    if not wire.shared_staging_enabled("numpy"):
        pytest.skip("no memfd here")
    t = WorkerTarget(COPY_SRC, "kernel")
    _round_trips(t, [1 << 17], 11)  # an area of 1 MiB
    area = t.cand._shared
    old = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (3 << 20, old[1]))
    try:
        _round_trips(t, [(3 << 18) + 5, 1 << 17], 12)  # 3 MiB + 20 bytes: no area of 4 MiB, nor of exactly that
        assert t.cand._shared is area and not area.broken and area.size == 1 << 20
        _round_trips(t, [1 << 19], 13)  # 2 MiB: a new area within the limit
        assert not area.broken and area.size == 2 << 20
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old)


SCRIBBLER_SRC = """
import mmap, os, threading
from kgate.kernelbench import wire
tried = []


def take_out(self, size):
    # the worker's outputs' area, as the candidate (it owns the process) gets it: it tries to shrink and
    # grow it, then keeps the writable mapping and scribbles on it from a thread, forever
    fd = self._fd()
    for what, f in (("shrink", lambda: os.ftruncate(fd, 0)), ("grow", lambda: os.ftruncate(fd, 2 * size))):
        try:
            f()
            tried.append(what + " done")
        except OSError:
            tried.append(what + " refused")
    self.out = mmap.mmap(fd, size, access=mmap.ACCESS_WRITE)
    os.close(fd)
    area = self.out

    def scribble():
        while True:
            area[:4096] = b"\\x55" * 4096
    threading.Thread(target=scribble, daemon=True).start()


wire.SharedReader.take_out = take_out


def kernel(xs, ys):
    ys[0][...] = xs[0][::-1]
    print(" ".join(tried))
    return 0
"""


def test_a_worker_that_scribbles_on_the_outputs_area_changes_only_what_it_returned(shared_on):
    """The outputs' area is the worker's to write, at any time: the driver copies each output out of it once
    into the engine's array and never reads it again, so a scribble lands in that copy or not at all; the
    seals keep the area's size, so the driver's copy cannot fault."""
    import time
    t, x, a, b, r = _first_call(SCRIBBLER_SRC)
    n = x.size
    printed = _printed(t, "shrink", "grow", "\n")
    assert "shrink refused" in printed and "grow refused" in printed
    got = np.from_dlpack(r.results[0].outputs[0]).copy()
    assert np.array_equal(got[1024:], x[::-1][1024:])  # past the scribbled page: what it computed
    time.sleep(0.2)
    assert np.array_equal(np.from_dlpack(r.results[0].outputs[0]), got)  # the driver's copy stays its own
    r = t.call(_u8_request((a, b), n))  # and the driver goes on
    assert np.array_equal(np.from_dlpack(r.results[0].outputs[0])[1024:], x[::-1][1024:])
    assert t.healthy()
