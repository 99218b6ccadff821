"""The driver's handle on the candidate's worker: start it, send requests, survive its death.

A request that outlives its time limit kills the worker (TIMEOUT); a worker that dies (a signal, os._exit
after a lost CUDA context) ends the request as CRASH. Either way the next request starts a fresh worker, which
re-runs the candidate's source (its compiled extensions come from the cache) and rebuilds its models.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
from multiprocessing.connection import Connection

from . import extstage, wire


# The name (a prefix) of a wrapper tool's log in the worker's scratch (Candidate's launch_prefix), what is
# read of each, and how long a worker under the tool may take to end by itself so the tool finishes its log.
TOOL_LOG = "kgate-tool-log"
TOOL_LOG_LIMIT = 4 << 20
TOOL_GRACE_SECONDS = 30.0


class WorkerDied(Exception):
    def __init__(self, kind: str, detail: str, output: str = "", *, request: str | None = None,
                 limit: float | None = None, how: str | None = None):
        super().__init__(f"{kind}: {detail}")
        self.kind = kind          # "crash" or "timeout"
        self.detail = detail
        self.output = output
        self.request = request    # the request it died in or did not answer ("init", "build", ...), where known
        self.limit = limit        # a timeout's seconds
        self.how = how            # a crash's signal or exit status, where known


def _signal_name(rc: int) -> str:
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


class Candidate:
    def __init__(self, fw_name: str, custom_code: str, *, call_timeout: float = 60.0,
                 init_timeout: float = 300.0, ext_cache: str | None = None, env: dict | None = None,
                 output_limit: int = 64 * 1024, work_root: str | None = None, entry: str = "ModelNew",
                 guard_seed: int = 0, guard_library: str | None = None, hold_cudnn_benchmark: bool = False,
                 launch_prefix: list[str] | None = None, guard_bytes: int | None = None):
        self.fw_name, self.custom_code = fw_name, custom_code
        # Words the worker starts under, inside its isolation (the bounds gate's compute-sanitizer pass,
        # kernelbench/sanitizer.py); "{log}" in one becomes this start's log file, in the worker's scratch and
        # kept there when the worker ends, then read into tool_logs: [(name, text)], one per worker started,
        # so a worker replaced after a crash never overwrites the log that holds the crash's record.
        self.launch_prefix = list(launch_prefix or [])
        self.tool_logs: list[tuple[str, str]] = []
        self.starts = 0
        # Bytes of each guard zone of the engine's buffers in the worker (None: layout.GUARD_BYTES); 0 under
        # memcheck, so that a write just past a buffer leaves its allocation (sanitizer.py).
        self.guard_bytes = guard_bytes
        self.entry, self.guard_seed, self.guard_library = entry, guard_seed, guard_library
        # torch.backends.cudnn.benchmark held off in the worker (the guard allocator's second pass, rowjob.verify)
        self.hold_cudnn_benchmark = hold_cudnn_benchmark
        self.call_timeout, self.init_timeout = call_timeout, init_timeout
        self.ext_cache = ext_cache
        # The cache is the audit user's alone (0700); this candidate's part of it is staged into its worker's
        # scratch at every start and what it compiles is harvested back (extstage.py).
        self.ext_part = extstage.part_of(ext_cache, custom_code) if ext_cache else None
        self.ext_stage: str | None = None
        self.output_limit = output_limit
        self.builds: dict[str, dict] = {}   # slot -> build request, replayed after a restart
        self.proc: subprocess.Popen | None = None
        self.conn: Connection | None = None
        # Under the row job's own folder (its cwd), never a shared /tmp name another tool might clean up.
        self.dir = tempfile.mkdtemp(prefix="worker-", dir=work_root or os.getcwd())
        self.log_path = os.path.join(self.dir, "output.log")
        self.restarts = 0
        self.init_reply: dict | None = None
        # Seconds this candidate's workers spent compiling extensions (extcache.py), as their init and build
        # replies say: at import, and in ModelNew.__init__ (where many candidates call load_inline).
        self.compile_seconds = 0.0
        # Extensions whose build failed in any of this candidate's workers (their replies' ext_failed): the
        # candidate ran whatever it falls back to, not the kernel it meant to build.
        self.ext_failed: list[str] = []
        base = dict(os.environ if env is None else env)
        # The worker gets no kgate secrets and no results path: only what running the candidate needs.
        self.env = {k: v for k, v in base.items() if not k.startswith("KGATE_")}
        self.env["KGATE_FW"] = fw_name
        self.env["PYTHONUNBUFFERED"] = "1"
        self.env.setdefault("MAX_JOBS", "2")
        self.env["TORCH_EXTENSIONS_DIR"] = "torch_extensions"  # inside the worker's private scratch (its cwd)
        self.log_limit = 16 << 20
        pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.pkg_root = pkg_root
        from .. import isolation
        # Root drops to uid 65534 (kgate-isolate refuses otherwise); without root the worker keeps the driver's
        # uid outside its namespaces, and can read what the driver can: the row record says so.
        self.isolation_note = ("isolated (kgate-isolate: namespaces, unprivileged uid, seccomp)"
                               if isolation.drops_uid() else isolation.KEEPS_UID_NOTE)
        self.env["PYTHONPATH"] = pkg_root + (os.pathsep + base["PYTHONPATH"] if base.get("PYTHONPATH") else "")
        self._prespawned = False  # the worker process was started ahead (prespawn) and start() uses it
        # The inputs' staging area shared with the current worker (wire.SharedStaging), made at its first
        # large write; one per connection, so a fresh worker gets a fresh area. None where memfd is unavailable.
        self.shared_ok = wire.shared_staging_enabled(fw_name)
        self._shared: wire.SharedStaging | None = None
        self._out: wire.SharedStaging | None = None  # the outputs' area, likewise (the worker writes it)

    def prespawn(self):
        """Starts the worker process ahead of start(): its launcher, interpreter and framework imports (seconds,
        no CUDA context and nothing of the candidate: its source comes with start()'s init request). A row job
        waiting for the driver's go does this meanwhile (rowjob.main)."""
        self._spawn()
        self._prespawned = True

    def adopt(self, other: "Candidate"):
        """Takes over the worker `other` prespawned (the same candidate source, cache and environment)."""
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir, self.log_path = other.dir, other.log_path
        self.proc, self.conn, self.ext_stage, self.env = other.proc, other.conn, other.ext_stage, other.env
        self._prespawned = other._prespawned and self.alive()
        other.proc, other.conn, other._prespawned = None, None, False

    # -- process ------------------------------------------------------------------------------------------
    def _spawn(self):
        """The worker under kgate-isolate (kgate/isolation.py, docs/security.md): its own PID and mount
        namespaces, an unprivileged uid, seccomp against its judge, a private scratch directory as its cwd
        (torch builds extensions there), its output captured into a capped log this process reads."""
        from .. import isolation
        parent, child = socket.socketpair()
        scratch = os.path.join(self.dir, "scratch")
        os.makedirs(scratch, exist_ok=True)
        # caches the candidate's tools keep under $HOME (triton, torch hub) go to its private scratch
        self.env["HOME"] = scratch
        self.env["XDG_CACHE_HOME"] = os.path.join(scratch, ".cache")
        if self.ext_part:
            self.ext_stage = extstage.stage_in(self.ext_part, scratch)
        argv = [sys.executable, "-m", "kgate.kernelbench.worker", str(child.fileno())]
        if self.launch_prefix:  # the tool is the program kgate-isolate starts (and always reaches)
            log = os.path.join(scratch, f"{TOOL_LOG}.{self.starts}.log")
            argv = [w.replace("{log}", log) for w in self.launch_prefix] + argv
        self.starts += 1
        # The interpreter and the package are reached by the unprivileged uid even under a 0700 /root (pyenv):
        # kgate-isolate opens the way inside the worker's own mount namespace, or refuses (never keeps root).
        cmd = isolation.command(argv, keep_fds=[child.fileno()], scratch=scratch, log=self.log_path,
                                log_limit=self.log_limit, keep_in_scratch=TOOL_LOG if self.launch_prefix else None,
                                reach=isolation.interpreter_paths([self.pkg_root]))
        self.proc = subprocess.Popen(cmd, pass_fds=[child.fileno()], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env)
        child.close()
        self.conn = Connection(os.dup(parent.fileno()))
        parent.close()

    def output_size(self) -> int:
        try:
            return os.path.getsize(self.log_path)
        except OSError:
            return 0

    def output_since(self, start: int, limit: int = 16384) -> tuple[str, int]:
        """What the worker printed since byte `start` of its log (the last `limit` bytes), and how much."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                n = f.tell() - start
                f.seek(max(start, start + n - limit))
                return f.read().decode("utf-8", errors="replace"), max(0, n)
        except OSError:
            return "", 0

    def output_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                n = f.tell()
                f.seek(max(0, n - self.output_limit))
                return f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def harvest(self):
        """What the worker compiled into its staged cache, kept in this candidate's part of the cache."""
        if self.ext_stage and self.ext_part:
            extstage.harvest(self.ext_stage, self.ext_part)

    def kill(self):
        self.harvest()
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
        if self.proc:
            self.proc.wait()
        if self.conn:
            self.conn.close()
        self.proc, self.conn = None, None
        self._drop_shared()
        self._take_tool_logs()

    def _drop_shared(self):
        for area in (self._shared, self._out):
            if area is not None:
                area.close()
        self._shared = self._out = None

    def shared(self) -> wire.SharedStaging | None:
        """The inputs' staging area of the current connection (wire.py), None where there is none to be had."""
        if not self.shared_ok or self.conn is None:
            return None
        if self._shared is None or self._shared.conn is not self.conn:
            self._drop_shared()
            self._shared = wire.SharedStaging(self.conn)
        return self._shared

    def out_area(self) -> wire.SharedStaging | None:
        """The outputs' area of the current connection (wire.py), None where there is none to be had."""
        if self.shared() is None:
            return None
        if self._out is None:
            self._out = wire.SharedStaging(self.conn, peer_writes=True)
        return self._out

    def _take_tool_logs(self):
        """The tool's logs the ended worker left in its scratch, into tool_logs (at most TOOL_LOG_LIMIT bytes
        each; opened without following a link, regular files only: the candidate shares the scratch)."""
        scratch = os.path.join(self.dir, "scratch")
        if not self.launch_prefix or not os.path.isdir(scratch):
            return
        for name in sorted(n for n in os.listdir(scratch) if n.startswith(TOOL_LOG)):
            path = os.path.join(scratch, name)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                try:
                    text = os.read(fd, TOOL_LOG_LIMIT) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
                finally:
                    os.close(fd)
                self.tool_logs.append((name, text.decode("utf-8", errors="replace")))
            except OSError as e:
                self.tool_logs.append((name, f"(unreadable: {e})"))
            try:
                os.unlink(path)
            except OSError:
                shutil.rmtree(path, ignore_errors=True)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _request(self, msg: dict, timeout: float, *, step_timeout: float | None = None, steps: int = 0,
                 meanwhile=None, sink=None, out_bytes: int = 0) -> dict:
        """Sends one request and waits `timeout` for its reply. With `steps`, the worker may answer with up to
        that many progress messages first ({"progress": what}); after each, the next message is awaited
        `step_timeout`, so a long request made of bounded steps (the public harness: build, then one forward
        per trial) ends within one step's limit of a hang, not within the whole request's. `meanwhile` runs in
        this process between sending and waiting (the time limit counts from its end). Buffers under "_raw"
        travel raw both ways (wire.py); `sink` places the reply's; `out_bytes` (wire.spans_of's end of the
        reply's outputs) offers the outputs' area for them."""
        assert self.conn and self.proc
        what = msg["op"]
        try:
            wire.send(self.conn, msg, self.shared(), self.out_area() if out_bytes else None, out_bytes)
            if meanwhile is not None:
                meanwhile()
            limit = timeout
            while True:
                if not self.conn.poll(limit):
                    self.kill()
                    raise WorkerDied("timeout", f"no answer to {what} within {limit:.0f} s", self.output_tail(),
                                     request=what, limit=limit)
                reply = wire.recv(self.conn, sink, self._out)
                if steps > 0 and isinstance(reply, dict) and set(reply) == {"progress"}:
                    steps -= 1
                    what = f"{msg['op']} after {str(reply['progress'])[:80]}"
                    limit = step_timeout or timeout
                    continue
                break
        except (EOFError, OSError, BrokenPipeError):
            rc = self.proc.wait() if self.proc else -1
            self.kill()
            raise WorkerDied("crash", f"the worker died during {msg['op']} ({_signal_name(rc)})",
                             self.output_tail(), request=msg["op"], how=_signal_name(rc)) from None
        if reply.get("fatal"):
            self.kill()
        return reply

    # -- protocol ----------------------------------------------------------------------------------------
    def start(self, meanwhile=None) -> dict:
        """Starts the worker and runs the candidate's source; the reply says ok, import_error or
        compile_error. Raises WorkerDied if that itself crashes or hangs. `meanwhile` (no arguments, must not
        raise) runs here while the worker starts: its imports take seconds the driver can use."""
        if not (self._prespawned and self.alive()):
            if self.proc is not None:
                self.kill()
            self._spawn()
        self._prespawned = False  # a restart spawns afresh
        self.init_reply = self._request({"op": "init", "custom_code": self.custom_code, "entry": self.entry,
                                         "ext_cache": extstage.STAGE if self.ext_part else None,
                                         "guard_seed": self.guard_seed,
                                         "guard_library": self.guard_library,
                                         "hold_cudnn_benchmark": self.hold_cudnn_benchmark,
                                         "guard_bytes": self.guard_bytes}, self.init_timeout,
                                        meanwhile=meanwhile)
        self.harvest()
        self.compile_seconds += self.init_reply.get("compile_seconds", 0.0)
        self._note_failed(self.init_reply)
        return self.init_reply

    def _note_failed(self, reply: dict):
        for name in reply.get("ext_failed") or []:
            if isinstance(name, str) and name not in self.ext_failed and len(self.ext_failed) < 20:
                self.ext_failed.append(name[:200])

    def ensure(self):
        if self.alive():
            return
        self.restarts += 1
        reply = self.start()
        if reply.get("status") != "ok":
            raise WorkerDied("crash", f"restart failed: {reply.get('message')}", self.output_tail())
        for b in self.builds.values():
            reply = self._request(b, max(self.call_timeout, self.init_timeout))
            self.compile_seconds += reply.get("compile_seconds", 0.0)
            self._note_failed(reply)

    def build(self, slot: str, init_inputs: list, seed: int, eval_mode: bool = True) -> dict:
        return self.build_with(slot, {"init_inputs": init_inputs, "seed": seed, "eval": eval_mode})

    def build_with(self, slot: str, fields: dict) -> dict:
        """Builds ModelNew (or binds a plain function) in `slot`; a successful build is replayed after
        every restart of the worker."""
        req = {"op": "build", "slot": slot, **fields}
        self.ensure()
        # The init timeout, not the call timeout: many candidates compile their extension in ModelNew's
        # __init__ (load_inline there); the compile job builds ModelNew once to fill the cache, but a build
        # at another binding, or after that one failed, may still compile here.
        reply = self._request(req, max(self.call_timeout, self.init_timeout))
        self.harvest()
        self.compile_seconds += reply.get("compile_seconds", 0.0)
        self._note_failed(reply)
        if reply.get("status") == "ok":
            self.builds[slot] = req
        return reply

    def request(self, msg: dict, timeout: float | None = None, sink=None, out_bytes: int = 0) -> dict:
        """One request of the engine's protocol (alloc, write, read, guards, release, ecall); the worker
        must be alive (a dead one is restarted by ensure(), which the target calls in reset())."""
        if not self.alive():
            raise WorkerDied("crash", "the worker is not running", self.output_tail())
        return self._request(msg, timeout or self.call_timeout, sink=sink, out_bytes=out_bytes)

    def call(self, slot: str, inputs: list, **opts) -> dict:
        self.ensure()
        return self._request({"op": "call", "slot": slot, "inputs": inputs, **opts}, self.call_timeout)

    def harness(self, ref_code: str, mode: str, trials: int = 5) -> dict:
        """The public harness logic in the worker (kernelbench/harness.py). Loading and building the two
        models may compile (the init timeout); after that each step (the lazy check, each trial: a reference
        and a candidate forward) must end within two call timeouts, so a hanging candidate costs that, not
        the init timeout."""
        self.ensure()
        return self._request({"op": "harness", "ref_code": ref_code, "custom_code": self.custom_code,
                              "mode": mode, "trials": trials, "progress": True},
                             max(self.call_timeout, self.init_timeout), step_timeout=2 * self.call_timeout,
                             steps=trials + 1)

    def close(self):
        self.harvest()  # before the worker ends: its scratch goes with it
        if self.alive():
            try:
                self.conn.send({"op": "exit"})
                if self.conn.poll(5):
                    self.conn.recv()
                if self.launch_prefix:  # the tool writes the rest of its log as the worker ends: let it
                    self.proc.wait(TOOL_GRACE_SECONDS)
            except (OSError, EOFError, subprocess.TimeoutExpired):
                pass
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
