"""Row jobs forked from one pre-imported parent instead of started from scratch.

A row job spends most of its own time importing: torch, torch._dynamo (the contract probe runs the task on the
meta device, which loads it) and kgate's front-end, 7-15 s per process on a loaded 16-core machine, twice per
row (compile job and verify job). The fork server (`python -m kgate.scheduler forkserver FD`) imports all that
once, never touches the GPU (a CUDA context does not survive fork: the server checks torch never initialised
it), and forks one child per job. Each child is then exactly a row job: its own session and process group,
not dumpable, killed when the server dies, stdin/stdout/stderr the driver's pipes, and it runs the row job
module as `python -m kgate.scheduler rowjob` would. Children are forked from the pristine server, never from
one another, so nothing one row did (a task that patches torch, a seed, a cache) reaches the next.

The driver is not the children's parent, so the server reports what only a parent can see: each child's exit
status, and its being stopped or continued (waitid WSTOPPED/WCONTINUED), over a SOCK_SEQPACKET socket, one JSON
message each. `Forked` gives the driver the part of subprocess.Popen the scheduler uses (pid, stdin, stdout,
stderr, poll, wait, returncode). When the server dies its children die with it (PR_SET_PDEATHSIG) and are
reported killed; the scheduler then starts a new server, or falls back to plain processes.
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1


def _msg(sock, obj, fds=()):
    data = json.dumps(obj).encode()
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.send(data)


class Forked:
    """One row job forked by the server, seen from the driver (the subset of Popen the scheduler uses)."""

    def __init__(self, server: "ForkServer", pid: int, stdin, stdout, stderr):
        self.server, self.pid = server, pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: int | None = None
        self.stops: list[dict] = []   # stopped / continued, as the server saw them, not yet taken

    def poll(self):
        if self.returncode is None:
            self.server.pump(0)
        return self.returncode

    def wait(self, timeout: float | None = None):
        end = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(f"row job {self.pid}", timeout)
            self.server.pump(0.05)
        return self.returncode

    def take_stop(self) -> dict | None:
        self.poll()
        return self.stops.pop(0) if self.stops else None


class ForkServer:
    """The driver's handle on the fork server."""

    def __init__(self, python: str, env: dict, cwd: str, preload: str, log_path: str, ready_timeout: float = 180.0):
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen([python, "-m", "kgate.scheduler", "forkserver", str(child.fileno()), preload],
                                     pass_fds=[child.fileno()], stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=self.log, env=env, cwd=cwd, start_new_session=True)
        child.close()
        self.sock = parent
        self.children: dict[int, Forked] = {}
        self.replies: list[dict] = []
        self.dead = False
        self.ready: dict | None = None
        end = time.monotonic() + ready_timeout
        while self.ready is None and not self.dead and time.monotonic() < end:
            self.pump(0.2)
        if self.ready is None:
            self.close()
            raise RuntimeError("the fork server did not start (its log: " + log_path + ")")
        if not self.ready.get("ok"):
            self.close()
            raise RuntimeError(f"the fork server refused: {self.ready.get('why')}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return not self.dead and self.proc.poll() is None

    def pump(self, timeout: float) -> bool:
        """Reads what the server said (waiting up to `timeout` for the first message). False once it is gone."""
        if self.dead:
            return False
        wait = timeout
        while True:
            r, _, _ = select.select([self.sock], [], [], wait)
            if not r:
                return True
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                self._server_gone()
                return False
            try:
                m = json.loads(data)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            ev = m.get("event")
            if ev == "ready":
                self.ready = m
            elif ev in ("exit", "stopped", "continued"):
                ch = self.children.get(int(m.get("pid", -1)))
                if ch is not None:
                    if ev == "exit":
                        ch.returncode = int(m["status"])
                        self.children.pop(ch.pid, None)
                    else:
                        ch.stops.append(m)
            else:
                self.replies.append(m)
            wait = 0

    def _server_gone(self):
        self.dead = True
        for ch in list(self.children.values()):  # PR_SET_PDEATHSIG killed them with the server
            if ch.returncode is None:
                ch.returncode = -int(signal.SIGKILL)
        self.children.clear()

    def spawn(self, cwd: str) -> Forked:
        r0, w0 = os.pipe()
        r1, w1 = os.pipe()
        r2, w2 = os.pipe()
        try:
            _msg(self.sock, {"op": "fork", "cwd": cwd}, (r0, w1, w2))
        except OSError as e:
            for fd in (r0, w0, r1, w1, r2, w2):
                os.close(fd)
            self._server_gone()
            raise RuntimeError(f"the fork server is gone: {e}") from None
        for fd in (r0, w1, w2):
            os.close(fd)
        end = time.monotonic() + 30
        while not self.replies and self.pump(0.05):
            if time.monotonic() > end:
                break
        if not self.replies:
            for fd in (w0, r1, r2):
                os.close(fd)
            self.close()
            raise RuntimeError("the fork server did not answer a fork")
        m = self.replies.pop(0)
        if "pid" not in m:
            for fd in (w0, r1, r2):
                os.close(fd)
            raise RuntimeError(f"the fork server could not fork: {m.get('why')}")
        ch = Forked(self, int(m["pid"]), os.fdopen(w0, "wb"), os.fdopen(r1, "rb"), os.fdopen(r2, "rb"))
        self.children[ch.pid] = ch
        return ch

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        self.proc.wait()
        self._server_gone()
        self.log.close()


# ---- the server process ------------------------------------------------------------------------------------

def _native_threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


def _preload(fw: str) -> dict:
    """Everything a row job imports, imported once. Never initialises CUDA: torch counts devices through NVML
    (PYTORCH_NVML_BASED_CUDA_CHECK), since asking the CUDA driver, as torch.cuda.is_available() otherwise does,
    marks every later fork child unable to use CUDA ("Cannot re-initialize CUDA in forked subprocess": on the
    H200 every row's oracle failed so)."""
    import importlib
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    from . import _core  # noqa: F401 - the engine
    from .kernelbench import client, context, derive, frontend, gates, rowjob, target, task  # noqa: F401
    importlib.import_module(f"kgate.kernelbench.fw_{fw}")
    note = {}
    if fw == "torch":
        import torch
        try:
            import torch._dynamo  # noqa: F401 - the contract probe on the meta device loads it (torch >= 2)
        except ImportError:
            pass
        note["cuda_initialized"] = bool(torch.cuda.is_initialized())
    return note


def _fork_can_use_cuda() -> str | None:
    """Forks a child that does what a row job will do first on the GPU (a tensor there, read back). None when
    it can, or where there is no GPU; else why not. The proof that nothing in the imports spoiled fork for
    CUDA, whichever import it was."""
    import torch
    if not torch.cuda.is_available():
        return None
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            ok = torch.ones(1, device="cuda").sum().item() == 1.0
            os.write(w, b"ok" if ok else b"wrong value")
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            os.write(w, f"{type(e).__name__}: {e}"[:300].encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        said = f.read().decode(errors="replace")
    os.waitpid(pid, 0)
    return None if said == "ok" else f"a forked child cannot use CUDA: {said or 'it died'}"


def server_main(fd: int, fw: str):
    from .scheduler import DEFAULT_FILE_LIMIT, make_undumpable, _prctl
    make_undumpable()
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    import resource
    limit = int(os.environ.pop("KGATE_FILE_LIMIT", DEFAULT_FILE_LIMIT))
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    except (ValueError, OSError):
        pass
    sock = socket.socket(fileno=fd)
    parent = os.getppid()
    t0 = time.monotonic()
    try:
        note = _preload(fw)
    except BaseException as e:  # noqa: BLE001 - the driver falls back to plain row jobs and says why
        _msg(sock, {"event": "ready", "ok": False, "why": f"preload failed: {type(e).__name__}: {e}"[:500]})
        return
    import threading
    threads = _native_threads()
    why = None
    if note.get("cuda_initialized"):
        why = "a CUDA context exists before any fork"
    elif threading.active_count() != 1:
        # Native pools (OpenBLAS's, started when numpy loads) re-arm themselves across fork (pthread_atfork),
        # as they do under multiprocessing's fork; a Python thread would be lost in the child holding its locks.
        why = f"{threading.active_count()} Python threads after the imports (fork copies only one)"
    elif fw == "torch":
        why = _fork_can_use_cuda()
    _msg(sock, {"event": "ready", "ok": why is None, "why": why, "seconds": round(time.monotonic() - t0, 2),
                "native_threads": threads, **note})
    if why:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    while True:
        r, _, _ = select.select([sock], [], [], 0.05)
        if r:
            try:
                data, fds, _, _ = socket.recv_fds(sock, 65536, 3)
            except OSError:
                return
            if not data:
                return  # the driver closed its end
            try:
                req = json.loads(data)
            except json.JSONDecodeError:
                req = {}
            if req.get("op") != "fork" or len(fds) != 3:
                for f in fds:
                    os.close(f)
                _msg(sock, {"why": "bad request"})
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(sock, fds, req, os.getppid())
            for f in fds:
                os.close(f)
            _msg(sock, {"pid": pid})
        if os.getppid() != parent:
            return
        _reap(sock)


def _reap(sock):
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WSTOPPED | os.WCONTINUED | os.WNOHANG)
        except ChildProcessError:
            return
        if info is None or info.si_pid == 0:
            return
        code = info.si_code
        if code == os.CLD_EXITED:
            _msg(sock, {"event": "exit", "pid": info.si_pid, "status": info.si_status})
        elif code in (os.CLD_KILLED, os.CLD_DUMPED):
            _msg(sock, {"event": "exit", "pid": info.si_pid, "status": -info.si_status})
        elif code == os.CLD_STOPPED:
            try:
                name = signal.Signals(info.si_status).name
            except ValueError:
                name = f"signal {info.si_status}"
            _msg(sock, {"event": "stopped", "pid": info.si_pid, "how": "stopped", "signal": name})
        elif code == os.CLD_CONTINUED:
            _msg(sock, {"event": "continued", "pid": info.si_pid, "how": "stopped and continued",
                        "signal": "SIGCONT"})


def _child(sock, fds, req, server_pid: int):
    """A row job: never returns."""
    rc = 1
    try:
        sock.close()
        os.setsid()
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        from .scheduler import make_undumpable, _prctl
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != server_pid:
            os._exit(1)  # the server died before the death signal was armed
        make_undumpable()
        os.chdir(req["cwd"])
        import runpy
        sys.argv = ["kgate.kernelbench.rowjob"]
        runpy.run_module("kgate.kernelbench.rowjob", run_name="__main__", alter_sys=True)
        rc = 0
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - the row job's own crash, as a plain process would show it
        import traceback
        traceback.print_exc()
        rc = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001
            pass
        os._exit(rc)
