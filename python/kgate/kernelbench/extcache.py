"""A content-addressed cache for torch.utils.cpp_extension.load_inline, installed in the candidate's worker
before its source runs.

torch's own JIT cache keys on a per-process version counter and ninja's timestamps, so it neither survives
a move to a fresh machine nor tolerates many builds at once. Here the key is a hash of everything that
determines the binary (sources, flags, torch version); a hit imports the stored .so directly, a miss builds in
a private directory and stores the .so. The compile phase fills the cache in parallel; verification then only
imports. The cache is a folder of small .so files that can be carried to the next machine.

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

stats = {"builds": 0, "hits": 0, "compile_seconds": 0.0}


def _import_so(name: str, path: str):
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


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
        build = os.path.join(slot, f"build-{os.getpid()}")
        os.makedirs(build, exist_ok=True)
        a["build_directory"] = build
        t0 = time.monotonic()
        try:
            mod = real(**a)
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
