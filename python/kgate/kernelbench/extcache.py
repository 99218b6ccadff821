"""A content-addressed cache for torch.utils.cpp_extension.load_inline, installed in the candidate's worker
before its source runs.

torch's own JIT cache keys on a per-process version counter and ninja's timestamps, so it neither survives
a move to a fresh machine nor tolerates many builds at once. Here the key is a hash of everything that
determines the binary (sources, flags, torch version); a hit imports the stored .so directly, a miss builds in
a private directory and stores the .so. The compile phase fills the cache in parallel; verification then only
imports. The cache is a folder of small .so files that can be carried to the next machine.

A build that fails with the compiler's own error (torch's "Error building extension", no sign of a build that
was killed or ran out of a resource) is remembered too, as `<name>.failed` beside where the .so would be: the
same inputs fail the same way, and many candidates catch the failure and fall back to torch, so without this
every worker of the row (compile job, verification, each restart) spent its 30-100 s of nvcc again to arrive
at the same exception. A remembered failure raises RuntimeError with the recorded message at once.

The worker never sees the cache itself: `cache_dir` is a copy, in the worker's private scratch, of the part
of the cache that belongs to this candidate's source (extstage.py); the driver keeps what is added here.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import inspect
import json
import os
import shutil
import time

# failed: names of the extensions whose build failed in this worker (built or remembered), in order; the
# worker's replies carry them so a record can say its candidate ran without the extension it meant to build.
stats = {"builds": 0, "hits": 0, "failed_hits": 0, "compile_seconds": 0.0, "failed": []}

FAILED = ".failed"           # suffix of a remembered failure (extstage.py harvests it like a .so)
FAILED_MAX = 64 * 1024       # characters of the message kept
# A failure with one of these in its message may not happen again (the build was killed, or a resource ran
# out): never remembered.
TRANSIENT = ("Killed", "killed", "Terminated", "terminated", "out of memory", "No space left", "Cannot allocate",
             "Resource temporarily unavailable", "Too many open files", "timed out", "Interrupted", "signal")


def deterministic_failure(e: BaseException) -> str | None:
    """The message to remember for a build that raised `e`, or None when it must not be remembered: only
    torch's own report of a failed build ("Error building extension ..."), and none that looks transient."""
    if type(e) is not RuntimeError:
        return None
    msg = str(e)
    if not msg.startswith("Error building extension") or any(t in msg for t in TRANSIENT):
        return None
    return msg[:FAILED_MAX]


def _import_so(name: str, path: str):
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def _failed(name: str):
    if name not in stats["failed"]:
        stats["failed"].append(name)


def install(cache_dir: str):
    import torch
    import torch.utils.cpp_extension as ce

    real = ce.load_inline
    sig = inspect.signature(real)
    os.makedirs(cache_dir, exist_ok=True)
    # Absolute where the worker's cwd has a name it can resolve (torch makes the sources' paths absolute
    # anyway); a scratch under the host's /tmp does not (the worker's /tmp is private), then it stays relative.
    if os.path.isdir(os.path.abspath(cache_dir)):
        cache_dir = os.path.abspath(cache_dir)

    def load_inline(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        a = dict(bound.arguments)
        if not a.get("is_python_module", True):
            return real(*args, **kwargs)
        ident = {k: v for k, v in a.items() if k not in ("build_directory", "verbose", "keep_intermediates")}
        ident["torch"] = torch.__version__
        key = hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:24]
        name = a["name"]
        slot = os.path.join(cache_dir, key)
        so = os.path.join(slot, f"{name}.so")
        if os.path.exists(so):
            stats["hits"] += 1
            return _import_so(name, so)
        failed = os.path.join(slot, f"{name}{FAILED}")
        if os.path.exists(failed):
            stats["failed_hits"] += 1
            _failed(name)
            with open(failed, encoding="utf-8", errors="replace") as f:
                raise RuntimeError(f.read(FAILED_MAX))
        build = os.path.join(slot, f"build-{os.getpid()}")
        os.makedirs(build, exist_ok=True)
        a["build_directory"] = build
        t0 = time.monotonic()
        try:
            mod = real(**a)
        except BaseException as e:
            _failed(name)
            remembered = deterministic_failure(e)
            if remembered is not None:
                tmp = failed + f".tmp{os.getpid()}"
                with open(tmp, "w", encoding="utf-8") as f:
                    f.write(remembered)
                os.replace(tmp, failed)
                shutil.rmtree(build, ignore_errors=True)
            raise
        finally:  # a build that fails (a compile error) spent its seconds compiling too
            stats["compile_seconds"] += time.monotonic() - t0
        stats["builds"] += 1
        built = os.path.join(build, f"{name}.so")
        if os.path.exists(built):
            tmp = so + f".tmp{os.getpid()}"
            shutil.copyfile(built, tmp)
            os.replace(tmp, so)  # atomic: a parallel reader sees the whole file or none
            shutil.rmtree(build, ignore_errors=True)
        return mod

    load_inline.__wrapped__ = real
    ce.load_inline = load_inline
