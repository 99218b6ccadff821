"""The isolation every candidate worker runs in, for the Python front-end: a command line for kgate-isolate.

kgate-isolate (tools/kgate_isolate.cpp) is the same code the C++ kgate-worker enters
(src/kgate/worker/isolation.hpp), so both front-ends give candidates one guarantee, stated and tested in
docs/security.md: the program and every descendant live in their own PID and mount namespaces with a fresh
/proc (nothing outside their own tree can be signalled, stopped, traced or read), run as an unprivileged uid
when started as root, under a seccomp filter that ends them with SIGSYS for ptrace, process_vm_readv/writev,
pidfd_getfd and any signal aimed at pid 1 (their judge's side); /tmp, /dev/shm and the scratch directory are
private and gone when the program ends; every descendant dies with it or with the launcher; output can be
captured into a capped log. Secrets never go in argv or the environment: send them on a pipe.

Exit status of the launcher: the program's own (or killed by the same signal, so Popen.returncode is -N);
125 when isolation is impossible or an option is wrong (one line on stderr); 126 / 127 when the program
cannot be executed / is not found. A program killed with SIGSYS (returncode -31) attacked its judge.

Started as root, the program runs as uid 65534, never as root: what it must read (`reach`: the interpreter,
its prefix, the kgate package; `interpreter_paths()` lists them for this Python) is made reachable inside
its own mount namespace, where a directory on the way that uid may not search (pyenv's Python under a 0700
/root) is covered by an empty read-only tmpfs holding only the way to those paths. A path the uid still
cannot read is an isolation failure (125, one line), never a reason to keep root. The launcher dies with
the thread that started it (start it from the main thread).

Usage:
    cmd = isolation.command([sys.executable, "-m", "kgate.kernelbench.worker", str(fd)], keep_fds=[fd],
                            log=os.path.join(job_dir, "output.log"), memory=8 << 30,
                            reach=isolation.interpreter_paths())
    proc = subprocess.Popen(cmd, pass_fds=[fd], stdin=subprocess.DEVNULL)
"""
from __future__ import annotations

import os
import shutil
import stat
import sys
from collections.abc import Iterable, Mapping, Sequence

#: Returncode of a program the seccomp filter ended: it tried to reach outside its own process tree.
JUDGE_ATTACK_RETURNCODE = -31  # -SIGSYS
#: Exit status of the launcher when it could not isolate (or was given a wrong option).
ISOLATION_FAILED = 125
DEFAULT_LOG_LIMIT = 64 << 20
#: What a record says when the worker cannot drop to another uid (the driver is not root).
KEEPS_UID_NOTE = ("not root: the worker runs as the driver's uid outside its namespaces (no capabilities, seccomp, "
                  "private /tmp) and can read what the driver can read, the results key included")


def drops_uid() -> bool:
    """Whether kgate-isolate started by this process runs its program as another, unprivileged uid (only root
    can); otherwise the program is root of its own user namespace, the driver's uid outside it."""
    return os.geteuid() == 0

_HERE = os.path.dirname(os.path.abspath(__file__))


def launcher() -> str:
    """The kgate-isolate executable: $KGATE_ISOLATE, else the one installed beside kgate._core, else a build
    tree's (build/tools from the repository root, for PYTHONPATH=python runs), else one on PATH."""
    env = os.environ.get("KGATE_ISOLATE")
    if env:
        if os.access(env, os.X_OK) and os.path.isfile(env):
            return env
        raise FileNotFoundError(f"KGATE_ISOLATE={env} is not an executable file")
    looked = []
    repo = os.path.dirname(os.path.dirname(_HERE))
    for candidate in (os.path.join(_HERE, "kgate-isolate"), os.path.join(repo, "build", "tools", "kgate-isolate")):
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
        looked.append(candidate)
    on_path = shutil.which("kgate-isolate")
    if on_path:
        return on_path
    raise FileNotFoundError(
        f"cannot find kgate-isolate (looked at {', '.join(looked)} and PATH); build it (cmake --build build "
        "--target kgate-isolate) or set KGATE_ISOLATE")


def interpreter_paths(extra: Iterable[str] = ()) -> list[str]:
    """What this Python needs to run as the program's unprivileged uid: its executable (as named and as
    resolved), its prefixes (stdlib, lib-dynload, site-packages, libpython), the kgate package's root, and
    the PYTHONPATH directories that others may read and search (one they may not would fail the isolation
    check; Python skips it anyway). Not sys.path: `python -m` puts the caller's working directory there,
    which may be the results folder. Pass it as `reach`."""
    pkg_root = os.path.dirname(_HERE)
    want = [sys.executable, os.path.realpath(sys.executable), sys.prefix, sys.base_prefix, sys.exec_prefix,
            sys.base_exec_prefix, pkg_root, *extra]
    for p in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        try:
            if p and os.path.isabs(p) and stat.S_IMODE(os.stat(p).st_mode) & 0o005 == 0o005:
                want.append(p)
        except OSError:
            pass
    out: list[str] = []
    for p in want:
        if p and p not in out and os.path.exists(p):
            out.append(p)
    return out


def command(argv: Sequence[str], *, keep_fds: Iterable[int] = (), scratch: str | None = None,
            keep_in_scratch: str | None = None, log: str | None = None, log_limit: int = DEFAULT_LOG_LIMIT, memory: int | None = None,
            log_stdout: bool = True, private_tmp: bool = True, visible: Iterable[str] = (),
            reach: Iterable[str] = (),
            clear_env: bool = False, setenv: Mapping[str, str] | None = None,
            unsafe_no_isolation: bool = False) -> list[str]:
    """The command line that runs `argv` isolated. Pass the same `keep_fds` to Popen's pass_fds.

    scratch: a host directory to use as working directory and TMPDIR, emptied when the program ends (not if
        the launcher itself is SIGKILLed); None: a private tmpfs that cannot outlive the program.
    keep_in_scratch: entries of `scratch` whose names start with this are left there when it is emptied (a
        wrapper tool's log, kernelbench/sanitizer.py).
    log: the file the program's stdout and stderr go to (only stderr with log_stdout=False, leaving stdout
        to the caller's pipe), at most log_limit bytes, then one line saying how much was not kept.
    memory: bytes of RLIMIT_DATA, and the size of each private tmpfs.
    visible: host paths under /tmp the program must still read (the private /tmp hides the host's).
    reach: host paths the program's unprivileged uid must read (see the module's docstring); the program
        itself, argv[0] when it names a path, always is.
    """
    if not argv:
        raise ValueError("isolation.command: an empty argv")
    cmd = [launcher()]
    for fd in keep_fds:
        if int(fd) < 0:
            raise ValueError(f"isolation.command: keep_fds holds {fd}")
        cmd += ["--keep-fd", str(int(fd))]
    if scratch is not None:
        cmd += ["--scratch", os.fspath(scratch)]
    if keep_in_scratch:
        if scratch is None or "/" in keep_in_scratch:
            raise ValueError(f"isolation.command: keep_in_scratch {keep_in_scratch!r} wants a scratch and a plain name")
        cmd += ["--keep-in-scratch", keep_in_scratch]
    if log is not None:
        if log_limit < 0:
            raise ValueError(f"isolation.command: log_limit must be >= 0, got {log_limit}")
        cmd += ["--log", os.fspath(log), "--log-limit", str(int(log_limit))]
        if not log_stdout:
            cmd.append("--log-stderr-only")
    if memory is not None:
        if memory <= 0:
            raise ValueError(f"isolation.command: memory must be > 0 bytes, got {memory}")
        cmd += ["--memory", str(int(memory))]
    if not private_tmp:
        cmd.append("--host-tmp")
    for path in visible:
        cmd += ["--visible", os.fspath(path)]
    for path in reach:
        cmd += ["--reach", os.fspath(path)]
    if clear_env:
        cmd.append("--clear-env")
    for name, value in (setenv or {}).items():
        if not name or "=" in name:
            raise ValueError(f"isolation.command: bad environment name {name!r}")
        cmd += ["--setenv", f"{name}={value}"]
    if unsafe_no_isolation:
        cmd.append("--unsafe-no-isolation")
    return cmd + ["--", *map(os.fspath, argv)]
