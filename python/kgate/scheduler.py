"""Runs jobs, each in its own process (group), a few at a time, with a time limit each and a budget overall.

A job is the row job (`python -m kgate.kernelbench.rowjob`, started through `python -m kgate.scheduler rowjob`,
which hardens the process first) fed a JSON spec on stdin; it answers with JSON lines on stdout ("gate",
"gate_start", and one final "row" or "compile" record). A job that crashes or outlives its limit is killed with
its whole process group (the candidate's worker included) and costs that one row; what it reported before is
kept. When the overall budget runs out, running jobs are killed and *not* recorded, so a rerun redoes them.

With a GPU memory probe (torch audits: NVML, see `NvmlProbe`), a verify job starts beside others only when the
running jobs' expected peaks (Job.gpu_estimate, or what their processes hold when that is more), its own and a
margin fit the card (`gpu_fits`; without estimates that is the free-memory rule `gpu_admits`); with no probe, or
one that cannot read, jobs start as they always did.

Against a candidate that attacks its judge (docs/security.md):
- every row job makes itself non-dumpable (prctl PR_SET_DUMPABLE 0: its /proc/PID/mem, environ and fds are
  closed to processes of the same uid without CAP_SYS_PTRACE), writes no core file, and may write no file
  larger than `file_limit` (RLIMIT_FSIZE, inherited by the worker: a log flood ends the writer with SIGXFSZ);
- its stderr goes through the driver, which keeps at most `log_limit` bytes of it (head, a note, and tail);
- a row job found stopped (SIGSTOP, seen with waitid WSTOPPED/WCONTINUED, even when continued since) is
  killed at once and reported with status "stopped";
- the OOM killer's counter of the driver's memory cgroup is read before and after each job, so a row job
  killed by SIGKILL says whether the kernel's OOM killer acted;
- with `harden`, the driver is a child subreaper: a candidate's process that escapes its worker (setsid,
  double fork) is re-parented to the driver when its parents die, and the driver kills every child that is
  not a job of its own; and a watchdog process continues the driver when something stops it and says so
  (the jobs then running are returned as suspects, see audit.py).
"""
from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from .forkserver import Forked, ForkServer

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
DEFAULT_LOG_LIMIT = 4 << 20        # bytes of a row job's stderr kept (head + tail)
DEFAULT_FILE_LIMIT = 1 << 30       # largest file a row job or its worker may write (RLIMIT_FSIZE)


def _prctl(option: int, arg: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0),
                          ctypes.c_ulong(0)) == 0
    except (OSError, AttributeError):
        return False


def make_undumpable() -> bool:
    """This process's memory, environment and descriptors closed to other processes of its uid (without
    CAP_SYS_PTRACE), and no core file. Reset by execve, so every Python process of ours calls it itself."""
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):
        pass
    return _prctl(PR_SET_DUMPABLE, 0)


def become_subreaper() -> bool:
    """Orphaned descendants are re-parented to this process instead of init (PR_SET_CHILD_SUBREAPER)."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def scrub_argv(keep: int) -> bool:
    """Overwrites this process's command line after its first `keep` words with NULs, so /proc/PID/cmdline
    (readable by every process that sees the PID) shows no path or seed given on it. sys.argv is a copy and
    stays. Writes the process's own memory through /proc/self/mem (always allowed for oneself)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        # fields[0] is field 3 (state); arg_start and arg_end are fields 48 and 49.
        start, end = int(fields[45]), int(fields[46])
        with open("/proc/self/cmdline", "rb") as f:
            words = f.read().split(b"\0")
        head = len(b"\0".join(words[:keep])) + 1
        if start + head >= end:
            return True
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start + head)
            mem.write(b"\0" * (end - start - head))
        return True
    except (OSError, ValueError, IndexError):
        return False


def oom_kills() -> int | None:
    """The kernel's count of OOM kills in this process's memory cgroup (v2 memory.events, v1
    memory.oom_control), or None where it cannot be read. KGATE_OOM_COUNTER names another file to read
    (a line "oom_kill N"): the tests use it to stand for the kernel's counter."""
    paths = []
    if os.environ.get("KGATE_OOM_COUNTER"):
        paths.append(os.environ["KGATE_OOM_COUNTER"])
    else:
        try:
            for line in open("/proc/self/cgroup"):
                _, ctrls, path = line.rstrip("\n").split(":", 2)
                if ctrls == "":
                    paths.append(f"/sys/fs/cgroup{path}/memory.events")
                elif "memory" in ctrls.split(","):
                    paths.append(f"/sys/fs/cgroup/memory{path}/memory.oom_control")
                    paths.append("/sys/fs/cgroup/memory/memory.oom_control")
        except OSError:
            pass
    for p in paths:
        try:
            for line in open(p):
                name, _, value = line.partition(" ")
                if name == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            continue
    return None


@dataclass
class Job:
    key: str
    kind: str                      # "compile" or "verify"
    spec: dict
    timeout_s: float
    after: str | None = None       # key of the compile job (same row) that must finish first
    # filled while running
    proc: subprocess.Popen | None = None
    started: float = 0.0
    lines: list = field(default_factory=list)
    log_path: str = ""
    cancelled: bool = False        # set by on_finish of its compile job when that failed
    solo: bool = False             # ran with no other job beside it
    attempt: str = ""              # the attempt id in the driver's journal (audit.py)
    stopped: dict | None = None    # how the row job was found stopped, when it was
    oom_before: int | None = None
    oom_after: int | None = None
    log_dropped: int = 0           # bytes of its stderr past the log limit
    # GPU memory (run_jobs' admission): what the job is expected to hold at its peak, and where that figure
    # came from (gpumem.estimate; None: nothing known, the job is admitted on free memory alone as before);
    # gpu_used/gpu_peak: what its processes hold now / held at most, measured by the driver (NVML per process);
    # gpu: how it was admitted (the audit writes it into the job's record).
    gpu_estimate: int | None = None
    gpu_estimate_from: str = ""
    gpu_used: int = 0
    gpu_peak: int | None = None
    gpu: dict = field(default_factory=dict)
    _threads: list = field(default_factory=list)


class Progress:
    """A one-line progress report per finished job, plus a bar when stderr is a terminal."""

    def __init__(self, total: int, label: str, stream=None):
        self.total, self.label, self.done = total, label, 0
        self.t0 = time.monotonic()
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def step(self, note: str, running: int):
        self.done += 1
        el = time.monotonic() - self.t0
        rate = self.done / el * 60 if el > 0 else 0.0
        left = (self.total - self.done) / (self.done / el) if self.done and el > 0 else float("nan")
        width = 24
        filled = int(width * self.done / max(1, self.total))
        bar = "#" * filled + "." * (width - filled)
        msg = (f"[{self.label} {bar}] {self.done}/{self.total} {rate:5.1f}/min eta {left:5.0f}s "
               f"running {running}: {note}")
        print(msg, file=self.stream, flush=True)


def _reader(job: Job, limit: int = 64 << 20):
    """The job's stdout: JSON lines only; at most `limit` bytes are parsed (the rest is drained)."""
    assert job.proc and job.proc.stdout
    seen = 0
    for raw in job.proc.stdout:
        seen += len(raw)
        if seen > limit:
            continue
        try:
            rec = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            continue  # the rowjob writes only JSON here; anything else is noise
        if isinstance(rec, dict):
            job.lines.append(rec)


def _log_pump(job: Job, pipe, path: str, limit: int):
    """Copies the job's stderr to its log, keeping the first limit/2 bytes and the last limit/2; what lies
    between is dropped and counted, and a note says so."""
    head_left = limit // 2
    tail = bytearray()
    tail_cap = limit - limit // 2
    with open(path, "wb") as log:
        while True:
            try:
                chunk = os.read(pipe.fileno(), 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            if head_left > 0:
                part = chunk[:head_left]
                log.write(part)
                log.flush()
                head_left -= len(part)
                chunk = chunk[len(part):]
            if chunk:
                tail += chunk
                if len(tail) > tail_cap:
                    job.log_dropped += len(tail) - tail_cap
                    del tail[: len(tail) - tail_cap]
        if job.log_dropped:
            log.write(f"\n[kgate: {job.log_dropped} bytes of output dropped here: the log keeps "
                      f"{limit} bytes, its head and its tail]\n".encode())
        log.write(bytes(tail))
    pipe.close()


def _kill(job: Job):
    if job.proc and job.proc.poll() is None:
        try:
            os.killpg(job.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.kill(job.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if job.proc:
        job.proc.wait()


def _was_stopped(job: Job) -> dict | None:
    """A stop or a continue of the row job since the last look (WSTOPPED|WCONTINUED, without reaping; for a
    forked row job, as its parent, the fork server, saw it)."""
    if isinstance(job.proc, Forked):
        m = job.proc.take_stop()
        return None if m is None else {"how": m["how"], "signal": m["signal"]}
    try:
        r = os.waitid(os.P_PID, job.proc.pid, os.WSTOPPED | os.WCONTINUED | os.WNOHANG)
    except (ChildProcessError, OSError):
        return None
    if r is None or r.si_pid == 0:
        return None
    if r.si_code == os.CLD_STOPPED:
        try:
            name = signal.Signals(r.si_status).name
        except ValueError:
            name = f"signal {r.si_status}"
        return {"how": "stopped", "signal": name}
    if r.si_code == os.CLD_CONTINUED:
        return {"how": "stopped and continued", "signal": "SIGCONT"}
    return None


def _tail(path: str, limit: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            n = f.tell()
            f.seek(max(0, n - limit))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _children(pid: int) -> list[int]:
    """Processes whose parent is pid (through /proc/PID/task/*/children when present, else a scan)."""
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                out += [int(x) for x in open(f"/proc/{pid}/task/{tid}/children").read().split()]
            except OSError:
                pass
        return out
    except OSError:
        pass
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = open(f"/proc/{name}/stat", "rb").read()
                if int(stat.rsplit(b")", 1)[1].split()[1]) == pid:
                    out.append(int(name))
            except (OSError, ValueError, IndexError):
                pass
    return out


class Watchdog:
    """A process beside the driver that continues it when something stops it (SIGSTOP) and says so on a
    pipe; the driver in turn continues the watchdog when that is stopped. Started only with harden."""

    def __init__(self, python: str, env: dict):
        self.proc = subprocess.Popen([python, "-m", "kgate.scheduler", "watchdog"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env, start_new_session=True)
        self.events: list[dict] = []
        self._seen = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.proc.stdout:
            try:
                self.events.append(json.loads(raw))
            except (json.JSONDecodeError, UnicodeDecodeError):
                pass

    def new_events(self) -> list[dict]:
        ev = self.events[self._seen:]
        self._seen += len(ev)
        if self.proc.poll() is None:
            try:
                state = open(f"/proc/{self.proc.pid}/stat", "rb").read().rsplit(b")", 1)[1].split()[0]
            except OSError:
                state = b"?"
            if state == b"T":
                os.kill(self.proc.pid, signal.SIGCONT)
                ev.append({"event": "watchdog_stopped", "t": time.time()})
        return ev

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _watchdog_main():
    make_undumpable()
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    parent = os.getppid()
    while True:
        r, _, _ = select.select([sys.stdin], [], [], 0.05)
        if r and not sys.stdin.buffer.read1(1):
            return  # the driver closed its end or died
        if os.getppid() != parent:
            return
        try:
            state = open(f"/proc/{parent}/stat", "rb").read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            return
        if state == b"T":
            os.kill(parent, signal.SIGCONT)
            print(json.dumps({"event": "driver_stopped", "t": time.time()}), flush=True)


def _rowjob_main():
    """The row job, hardened: not dumpable, no core, no file past the limit (inherited by its worker)."""
    make_undumpable()
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # a row job never outlives the driver that judges with it
    import resource
    limit = int(os.environ.pop("KGATE_FILE_LIMIT", DEFAULT_FILE_LIMIT))
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    except (ValueError, OSError):
        pass
    import runpy
    sys.argv = ["kgate.kernelbench.rowjob"]
    runpy.run_module("kgate.kernelbench.rowjob", run_name="__main__", alter_sys=True)


def _pid_owner(pid: int, roots: dict, limit: int = 64):
    """The value of `roots` (keyed by a running job's row-job pid) whose process `pid` is or descends from, by
    its parents in /proc, or failing that by its session (a row job leads its own session); None when neither
    leads to one (a process of another user of the GPU, or one that escaped its row job: charged as memory no
    job of ours holds)."""
    p, session = pid, None
    for _ in range(limit):
        if p in roots:
            return roots[p]
        try:
            fields = open(f"/proc/{p}/stat", "rb").read().rsplit(b")", 1)[1].split()
            ppid = int(fields[1])
            if session is None:
                session = int(fields[3])
        except (OSError, ValueError, IndexError):
            break
        if ppid <= 1:
            break
        p = ppid
    return roots.get(session) if session is not None else None


def sweep_strays(known: set[int]) -> list[int]:
    """Kills every child of this process (a subreaper: orphans of its jobs' descendants land here) that is
    not one of `known`. Returns the pids killed."""
    killed = []
    for pid in _children(os.getpid()):
        if pid in known:
            continue
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in killed:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    return killed


DEFAULT_GPU_HEADROOM = 0.15       # fraction of the GPU's memory that must be free to start a verify job
DEFAULT_GPU_SETTLE_S = 10.0        # seconds a just-started verify job may take to allocate what it will
DEFAULT_GPU_SAMPLE_S = 0.5         # how often the driver reads what each job's processes hold (NVML)
DEFAULT_GPU_BACKFILL_S = 60.0      # how long smaller rows may start past a row held for memory (then none)


class _NvmlProcess(ctypes.Structure):
    """NVML's nvmlProcessInfo_t as nvmlDeviceGetComputeRunningProcesses_v2/_v3 fill it."""
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong), ("gpuInstanceId", ctypes.c_uint),
                ("computeInstanceId", ctypes.c_uint)]


class _NvmlProcessV1(ctypes.Structure):
    """nvmlProcessInfo_v1_t, what the unversioned nvmlDeviceGetComputeRunningProcesses fills."""
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_VALUE_NOT_AVAILABLE = (1 << 64) - 1


class _NvmlMemory(ctypes.Structure):
    """NVML's nvmlMemory_t (v1, what nvmlDeviceGetMemoryInfo fills): bytes, total = free + used."""
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


def _visible_gpu() -> int | str | None:
    """The GPU the row jobs' `cuda:0` is, as NVML names it: an index (NVML counts in PCI bus order, as CUDA does
    with CUDA_DEVICE_ORDER=PCI_BUS_ID or on a host of one kind of GPU), a UUID, or None where no GPU is visible."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
    if first.isdigit():
        return int(first)
    if first.startswith(("GPU-", "MIG-")):
        return first
    return None


class NvmlProbe:
    """The free and total memory of the row jobs' GPU, read through NVML (libnvidia-ml.so.1, loaded with ctypes):
    NVML creates no CUDA context, so the driver stays free of CUDA. Calling it gives (total, free) in bytes, or
    None where NVML cannot load or answer (`why` says why); the scheduler then admits jobs as it always did."""

    def __init__(self, lib: str = "libnvidia-ml.so.1"):
        self.why: str | None = None
        self._lib = None
        self._handle = ctypes.c_void_p()
        try:
            nvml = ctypes.CDLL(lib)
            nvml.nvmlErrorString.restype = ctypes.c_char_p
            err = lambda rc: nvml.nvmlErrorString(rc).decode(errors="replace")  # noqa: E731
            rc = nvml.nvmlInit_v2()
            if rc != 0:
                raise OSError(f"nvmlInit_v2: {err(rc)}")
            dev = _visible_gpu()
            if dev is None:
                raise OSError(f"no GPU named in CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}")
            if isinstance(dev, int):
                rc = nvml.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(dev), ctypes.byref(self._handle))
            else:
                rc = nvml.nvmlDeviceGetHandleByUUID(dev.encode(), ctypes.byref(self._handle))
            if rc != 0:
                raise OSError(f"no NVML handle for GPU {dev}: {err(rc)}")
            self._lib = nvml
            if self() is None:
                raise OSError(f"nvmlDeviceGetMemoryInfo: {self.why}")
        except (OSError, AttributeError) as e:
            self._lib, self.why = None, str(e)

    def __call__(self) -> tuple[int, int] | None:
        if self._lib is None:
            return None
        mem = _NvmlMemory()
        rc = self._lib.nvmlDeviceGetMemoryInfo(self._handle, ctypes.byref(mem))
        if rc != 0:
            self.why = self._lib.nvmlErrorString(rc).decode(errors="replace")
            return None
        return int(mem.total), int(mem.free)

    def processes(self) -> dict[int, int] | None:
        """{pid: bytes} of every compute process on the GPU, as NVML sees them (the pids of this PID namespace
        where the driver runs in the container's, as torch's out-of-memory message shows them), or None where
        NVML cannot tell (no such call in this driver, or the memory of processes is not available)."""
        if self._lib is None:
            return None
        for name, struct in (("nvmlDeviceGetComputeRunningProcesses_v3", _NvmlProcess),
                             ("nvmlDeviceGetComputeRunningProcesses_v2", _NvmlProcess),
                             ("nvmlDeviceGetComputeRunningProcesses", _NvmlProcessV1)):
            fn = getattr(self._lib, name, None)
            if fn is None:
                continue
            cap = 64
            for _ in range(4):
                count = ctypes.c_uint(cap)
                infos = (struct * cap)()
                rc = fn(self._handle, ctypes.byref(count), infos)
                if rc == NVML_ERROR_INSUFFICIENT_SIZE:
                    cap = max(cap * 2, count.value + 16)
                    continue
                if rc != 0:
                    return None
                out: dict[int, int] = {}
                for i in range(min(count.value, cap)):
                    used = int(infos[i].usedGpuMemory)
                    if used == NVML_VALUE_NOT_AVAILABLE:
                        return None
                    out[int(infos[i].pid)] = out.get(int(infos[i].pid), 0) + used
                return out
            return None
        return None


def gpu_probe_for(fw: str):
    """The memory probe an audit of framework `fw` admits its verify jobs with: NVML for torch (rows on the
    GPU), None for numpy (never probed). Tests replace this function."""
    return NvmlProbe() if fw == "torch" else None


def gpu_fits(total: int, free: int, headroom: float, *, charged: int, attributed: int, estimate: int,
             unknown_unsettled: int) -> bool:
    """Whether a verify job expected to hold `estimate` bytes may start beside running jobs. Every running job
    is charged the larger of its estimate and what its processes hold now (`charged`, summed); memory in use
    that no job of ours holds (`total - free - attributed`: other processes, or ours where NVML cannot say per
    process) is charged as it stands; a running job with no estimate that started in the last settle seconds
    (`unknown_unsettled`) one headroom. The job fits when all that, its own estimate and a margin of `headroom`
    x total stay within the card:
        max(0, total - free - attributed) + charged + estimate + unknown_unsettled x m <= total - m,
    m = headroom x total. With no estimates and no per-process reading (charged = attributed = estimate = 0)
    this is gpu_admits: free >= (unsettled + 1) x m. The caller lets a job start alone whatever it needs."""
    margin = headroom * total
    others = max(0, total - free - attributed)
    return others + charged + estimate + unknown_unsettled * margin <= total - margin


def gpu_admits(total: int, free: int, headroom: float, unsettled: int) -> bool:
    """Whether a verify job may start beside running ones. The rule: free memory must stay at least
    `headroom` x total after each verify job started in the last settle seconds (`unsettled`: its context,
    model and oracle are not yet allocated, so the probe does not show them) is charged one headroom more:
    free >= (unsettled + 1) x headroom x total. So with memory plentiful many start at once; near the floor
    one starts and the next waits until it settled; below it none (the caller always lets one run)."""
    return free >= (unsettled + 1) * headroom * total


THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def host_threads(at_once: int) -> int:
    """The host threads one job's libraries may use when `at_once` jobs share this machine's CPUs (the ones
    this process may run on): at least one."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, cpus // max(1, at_once))


def run_jobs(jobs: list[Job], limits: dict[str, int], on_finish, *, budget_s: float | None = None,
             work_dir: str, env: dict | None = None, progress: Progress | None = None,
             python: str = sys.executable, start_margin_s: float = 20.0, on_start=None, harden: bool = False,
             log_limit: int = DEFAULT_LOG_LIMIT, file_limit: int = DEFAULT_FILE_LIMIT, solo: bool = False,
             watchdog: Watchdog | None = None, notes: list | None = None, preload: str | None = None,
             gpu_probe=None, gpu_headroom: float = DEFAULT_GPU_HEADROOM,
             gpu_settle_s: float = DEFAULT_GPU_SETTLE_S, gpu_sample_s: float = DEFAULT_GPU_SAMPLE_S,
             gpu_backfill_s: float = DEFAULT_GPU_BACKFILL_S, prestart: int = 0) -> dict:
    """Runs jobs; calls on_start(job) just before one starts and on_finish(job, final_record_or_None, status,
    lines, log_tail) for each one that ends (status "ok", "crash", "timeout", "stopped"). Jobs cut by the
    budget are not reported. When the watchdog says the driver was stopped, the jobs then running are killed
    and returned in counts["suspects"] (not reported). With `preload` (a framework name), row jobs are forked
    from a fork server that imported it once (forkserver.py); without, or where the server cannot run, each
    is a fresh process. With `gpu_probe` (a callable giving (total, free) bytes, or None when it cannot tell) and
    `gpu_headroom` > 0, a verify job starts beside other verify jobs only when `gpu_admits`; when none runs, it
    starts regardless, so a row larger than the headroom never blocks the queue. counts then say how many verify
    jobs were held back for memory (`gpu_held`) and the least free memory seen (`gpu_free_min`, bytes). Returns
    counts.

    GPU memory by estimates: a job's `gpu_estimate` (bytes it is expected to hold at its peak) is charged from
    its start, so rows admitted while memory is free are counted at what they will grow to, not at what they
    hold yet (gpu_fits: the running jobs' estimates, or what they hold when that is more, plus the new job's,
    within the card less a margin of `gpu_headroom`). Where the probe also has `processes()` ({pid: bytes},
    NvmlProbe.processes), the driver reads every `gpu_sample_s` what each running job's processes hold (the
    row job and its descendants: the worker, the baseline's), and keeps each job's peak in job.gpu_peak; each
    job's admission (estimate, what was charged beside it, how long it waited) is in job.gpu when on_finish
    sees it. counts then say how many were admitted beside others (`gpu_admitted_beside`), how many started
    alone after waiting (`gpu_started_alone`), whether per-process readings worked (`gpu_per_process`).
    A verify job held for memory holds the queue behind it, except that for its first `gpu_backfill_s` jobs
    with smaller estimates may start past it where they fit (`gpu_backfilled`); jobs without an estimate never
    pass one. So a large row waits at most that long before the card drains for it.

    prestart: up to that many verify jobs next in the queue (their compile step done) are started ahead, before
    a slot or memory is theirs: the row job gets its spec with `await_go` and starts its candidate's worker
    process (interpreter, imports; no CUDA context, no candidate code), then waits for a "go" line, which the
    driver sends when the job is admitted. Seconds of every row's start thus pass while it waits. A job started
    ahead counts for nothing until its go: not in the limits, not charged memory, not journaled (on_start runs
    at the go), its time limit and row seconds count from the go; one never given its go is killed unrecorded
    (left in `not_started`)."""
    os.makedirs(work_dir, exist_ok=True)
    t0 = time.monotonic()
    deadline = t0 + budget_s if budget_s else None
    pending = deque(jobs)
    finished_keys: set[str] = set()
    running: list[Job] = []
    counts = {"ok": 0, "crash": 0, "timeout": 0, "stopped": 0, "cut_by_budget": 0, "not_started": 0,
              "strays_killed": 0, "suspects": [], "cut": []}
    job_env = dict(os.environ if env is None else env)
    job_env.pop("KGATE_OOM_COUNTER", None)  # the driver's own (tests), not the row job's
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    job_env["PYTHONPATH"] = pkg_root + (os.pathsep + job_env["PYTHONPATH"] if job_env.get("PYTHONPATH") else "")
    job_env["PYTHONUNBUFFERED"] = "1"
    job_env["KGATE_FILE_LIMIT"] = str(file_limit)
    # Host threads per job: the CPUs shared out among the jobs that run at once. Left to themselves, torch's
    # OpenMP pool, MKL and OpenBLAS each take every CPU in every row job and in every worker, and a dozen jobs
    # then spin on hundreds of threads over a few cores (a row whose gates took 3 s took 116 s so on the H200).
    # A value the caller set is kept.
    at_once = max(1, min(limits.get("total", 10**6), max(limits.get("verify", 1), limits.get("compile", 1))))
    threads = str(host_threads(at_once))
    for var in THREAD_VARS:
        job_env.setdefault(var, threads)
    last_sweep = 0.0
    server: ForkServer | None = None
    server_failures = 0

    def start_process(job: Job):
        nonlocal server, server_failures
        if preload and os.environ.get("KGATE_FORKSERVER", "1") != "0" and server_failures < 2:
            try:
                if server is None or not server.alive():
                    if server is not None:
                        server.close()
                    server = ForkServer(python, job_env, work_dir, preload, os.path.join(work_dir, "forkserver.log"))
                    if notes is not None:
                        notes.append({"event": "forkserver", "pid": server.pid, "ready": server.ready})
                return server.spawn(work_dir)
            except RuntimeError as e:
                server_failures += 1
                server = None
                if notes is not None:
                    notes.append({"event": "forkserver_failed", "why": str(e)})
                print(f"kgate: row jobs start as plain processes: {e}", file=sys.stderr)
        return subprocess.Popen(
            [python, "-m", "kgate.scheduler", "rowjob"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=job_env, start_new_session=True, cwd=work_dir)

    def can_start(job: Job) -> bool:
        if job.after and ("compile", job.after) not in finished_keys:
            return False
        return sum(1 for r in running if r.kind == job.kind) < limits.get(job.kind, 1) and \
            len(running) < limits.get("total", 10**6)

    gpu = {"held": set(), "free_min": None, "noted": False, "procs_ok": None, "last_sample": None,
           "held_since": {}, "beside": 0, "alone": 0, "backfilled": 0}
    processes = getattr(gpu_probe, "processes", None) if gpu_probe is not None else None

    def gpu_sample(now: float, force: bool = False):
        """What each running job's processes hold now (job.gpu_used) and at most so far (job.gpu_peak)."""
        if processes is None or not running:
            return
        if not force and gpu["last_sample"] is not None and now - gpu["last_sample"] < gpu_sample_s:
            return
        gpu["last_sample"] = now
        m = processes()
        gpu["procs_ok"] = m is not None
        if m is None:
            return
        roots = {j.proc.pid: j for j in running if j.proc is not None}
        used: dict[int, int] = {}
        for pid, b in m.items():
            j = _pid_owner(pid, roots)
            if j is not None:
                used[id(j)] = used.get(id(j), 0) + b
        for j in running:
            j.gpu_used = used.get(id(j), 0)
            j.gpu_peak = max(j.gpu_peak or 0, j.gpu_used)

    def gpu_note(job: Job):
        """The job's GPU entry as on_finish sees it: its admission and the peak its processes held."""
        if job.gpu_estimate is not None:
            job.gpu.setdefault("estimate_bytes", job.gpu_estimate)
            job.gpu.setdefault("estimate_from", job.gpu_estimate_from)
        if job.gpu_peak is not None:
            job.gpu["peak_bytes"] = job.gpu_peak

    def may_backfill(job: Job, held: Job, now: float) -> bool:
        """Whether `job` may start past `held` (a verify job held for memory): both have estimates, job's is
        the smaller, and held has waited less than gpu_backfill_s."""
        return (job.gpu_estimate is not None and held.gpu_estimate is not None
                and job.gpu_estimate < held.gpu_estimate
                and now - gpu["held_since"].get(held.key, now) < gpu_backfill_s)

    def gpu_allows(job: Job, now: float, probed: dict) -> bool:
        """Memory admission of one verify job (probed: this pass's reading, taken at most once a pass)."""
        verifying = [r for r in running if r.kind == "verify"]
        if gpu_probe is None or gpu_headroom <= 0 or job.kind != "verify":
            return True
        if not verifying:
            if (job.kind, job.key) in gpu["held"]:
                gpu["alone"] += 1
                job.gpu.update(alone=True, waited_s=round(now - gpu["held_since"][job.key], 2))
            return True
        if "m" not in probed:
            probed["m"] = gpu_probe()
            gpu_sample(now, force=True)
        if probed["m"] is None:
            return True
        total, free = probed["m"]
        gpu["free_min"] = free if gpu["free_min"] is None else min(gpu["free_min"], free)
        if not gpu["noted"] and notes is not None:
            notes.append({"event": "gpu_admission", "total": total, "headroom": gpu_headroom,
                          "settle_s": gpu_settle_s, "per_process": gpu["procs_ok"]})
        gpu["noted"] = True
        known = gpu["procs_ok"] is True
        attributed = sum(r.gpu_used for r in running) if known else 0
        charged = sum(max(r.gpu_estimate or 0, r.gpu_used if known else 0) for r in running)
        unknown_unsettled = sum(1 for r in verifying if r.gpu_estimate is None and now - r.started < gpu_settle_s)
        estimate = job.gpu_estimate or 0
        if gpu_fits(total, free, gpu_headroom, charged=charged, attributed=attributed, estimate=estimate,
                    unknown_unsettled=unknown_unsettled):
            gpu["beside"] += 1
            job.gpu.update(beside=len(verifying), charged_beside_bytes=charged,
                           others_bytes=max(0, total - free - attributed), free_bytes=free)
            if job.key in gpu["held_since"]:
                job.gpu["waited_s"] = round(now - gpu["held_since"][job.key], 2)
            return True
        gpu["held"].add((job.kind, job.key))
        gpu["held_since"].setdefault(job.key, now)
        return False

    ahead: list[Job] = []  # started ahead (prestart), waiting for their go; still in pending

    def launch(job: Job, wait_for_go: bool):
        """The job's process, its readers, its spec on stdin: closed at once, or (wait_for_go) kept open for
        the go line."""
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in job.key)
        job.log_path = os.path.join(work_dir, f"{safe}.{job.kind}.log")
        job.proc = start_process(job)
        job._threads = [threading.Thread(target=_reader, args=(job,), daemon=True),
                        threading.Thread(target=_log_pump, args=(job, job.proc.stderr, job.log_path, log_limit),
                                         daemon=True)]
        for t in job._threads:
            t.start()
        assert job.proc.stdin
        try:
            if wait_for_go:
                job.proc.stdin.write(json.dumps(dict(job.spec, await_go=True)).encode() + b"\n")
                job.proc.stdin.flush()
            else:
                job.proc.stdin.write(json.dumps(job.spec).encode())
                job.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    def go(job: Job):
        try:
            job.proc.stdin.write(b"go\n")
            job.proc.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass  # it died waiting: reaped below as a crash, with its stderr

    def drop_ahead():
        """Ends every job started ahead that never got its go (not recorded: it stays in pending)."""
        for job in ahead:
            _kill(job)
            for t in job._threads:
                t.join(timeout=5)
            job.proc, job.lines, job._threads, job.log_dropped = None, [], [], 0
        ahead.clear()

    while pending or running:
        now = time.monotonic()
        # Start what fits, in order, skipping jobs still waiting on their compile step.
        # No new job in the last `start_margin_s` of the budget: it would only be cut.
        if deadline is None or now < deadline - start_margin_s:
            probed: dict = {}
            gpu_wait = None  # the first verify job held for memory: the ones behind it wait too (queue order)
            for job in list(pending):
                if job.cancelled:
                    pending.remove(job)
                    if job in ahead:
                        ahead.remove(job)
                        _kill(job)
                    continue
                if can_start(job) and not (job.kind == "verify" and gpu_wait is not None
                                           and not may_backfill(job, gpu_wait, now)):
                    if not gpu_allows(job, now, probed):
                        if gpu_wait is None:
                            gpu_wait = job
                        continue
                    if job.kind == "verify" and gpu_wait is not None:
                        gpu["backfilled"] += 1
                        job.gpu["passed"] = gpu_wait.key
                    pending.remove(job)
                    job.solo = solo
                    if on_start:
                        on_start(job)
                    job.oom_before = oom_kills()
                    if job in ahead:
                        ahead.remove(job)
                        go(job)
                    else:
                        launch(job, False)
                    job.started = time.monotonic()
                    running.append(job)
            # Start the next verify jobs ahead (prestart), in queue order, each to wait for its go.
            if prestart > 0:
                for job in pending:
                    if len(ahead) >= prestart:
                        break
                    if job.kind != "verify" or job in ahead or job.cancelled or \
                            (job.after and ("compile", job.after) not in finished_keys):
                        continue
                    launch(job, True)
                    ahead.append(job)
        # The driver stopped by someone (the watchdog continued it): every running row is a suspect.
        if watchdog is not None:
            events = watchdog.new_events()
            if events and notes is not None:
                notes.extend(events)
            if events and running:
                for job in list(running):
                    _kill(job)
                    running.remove(job)
                    job.stopped = {"how": "driver stopped", "events": events}
                    counts["suspects"].append(job)
                continue
        gpu_sample(time.monotonic())
        # Reap.
        for job in list(running):
            assert job.proc
            rc = job.proc.poll()
            elapsed = time.monotonic() - job.started
            stop = _was_stopped(job) if rc is None else None
            if stop is not None:
                job.stopped = dict(stop, after_s=round(elapsed, 2))
                _kill(job)
                status = "stopped"
            elif rc is None and elapsed > job.timeout_s:
                _kill(job)
                status = "timeout"
            elif rc is None:
                if deadline is not None and time.monotonic() > deadline:
                    gpu_note(job)
                    _kill(job)
                    for t in job._threads:
                        t.join(timeout=5)
                    running.remove(job)
                    counts["cut_by_budget"] += 1
                    counts["cut"].append(job)
                continue
            else:
                status = "ok" if rc == 0 else "crash"
            job.proc.wait()
            job.oom_after = oom_kills()
            # The reader threads end when every holder of the pipes' write ends is gone; a descendant that
            # escaped the process group may hold them, so the wait is bounded.
            for t in job._threads:
                t.join(timeout=5)
            running.remove(job)
            finished_keys.add((job.kind, job.key))
            final = next((l for l in reversed(job.lines) if l.get("type") in ("row", "compile")), None)
            if final is not None and status == "crash":
                status = "ok"  # it reported before dying in teardown: the record is complete
            counts[status] += 1
            gpu_note(job)
            on_finish(job, final, status, job.lines, _tail(job.log_path))
            if progress:
                note = f"{job.key} {job.kind} {status}"
                if final and final.get("type") == "row":
                    note += f" -> {final.get('classification')}"
                progress.step(note, len(running))
        if harden and time.monotonic() - last_sweep > 0.25:
            last_sweep = time.monotonic()
            known = {j.proc.pid for j in running + ahead if j.proc}
            if watchdog is not None:
                known.add(watchdog.proc.pid)
            if server is not None:
                known.add(server.pid)
            counts["strays_killed"] += len(sweep_strays(known))
        if deadline is not None and time.monotonic() > deadline - start_margin_s and ahead:
            drop_ahead()  # no go can come now
        if deadline is not None and time.monotonic() > deadline - start_margin_s and not running:
            counts["not_started"] = len(pending)
            break
        time.sleep(0.05)
    drop_ahead()
    if server is not None:
        server.close()
    if harden:
        known = {watchdog.proc.pid} if watchdog is not None else set()
        counts["strays_killed"] += len(sweep_strays(known))
    if gpu["free_min"] is not None:
        counts["gpu_held"] = len(gpu["held"])
        counts["gpu_free_min"] = gpu["free_min"]
        counts["gpu_admitted_beside"] = gpu["beside"]
        counts["gpu_started_alone"] = gpu["alone"]
        counts["gpu_backfilled"] = gpu["backfilled"]
        counts["gpu_per_process"] = gpu["procs_ok"] is True
    return counts


if __name__ == "__main__":
    if sys.argv[1:] == ["rowjob"]:
        _rowjob_main()
    elif sys.argv[1:2] == ["forkserver"] and len(sys.argv) == 4:
        from .forkserver import server_main
        server_main(int(sys.argv[2]), sys.argv[3])
    elif sys.argv[1:] == ["watchdog"]:
        _watchdog_main()
    else:
        print("usage: python -m kgate.scheduler rowjob|watchdog (started by the audit driver)", file=sys.stderr)
        sys.exit(2)
