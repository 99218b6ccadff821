"""kgate.target.WorkerTarget: a Python function as a kgate::Target, its code in a worker process.

The same worker target as the KernelBench front-end (kernelbench/target.py, kernelbench/worker.py): buffers,
guard zones and calls live in the worker; the driver holds buffer ids only, so the candidate never sees the
driver's memory (oracle outputs, expected values, results). The callee is `fn(inputs, outputs)` with numpy
views (destination-passing, the C ABI's convention) returning a kgate_status, or `fn(*inputs)` returning
arrays (returning convention, copied into the outputs; a wrong count, shape or dtype is KGATE_ERROR). A
crash or hang in the worker ends that call as CallOutcome.crashed / timed_out and leaves the target
unhealthy until reset(), exactly as the engine's own WorkerTarget.
"""
from __future__ import annotations

import shutil
import tempfile

from .kernelbench.client import Candidate
from .kernelbench.target import CandidateTarget, FunctionPlan


class WorkerTarget(CandidateTarget):
    def __init__(self, source: str, entry: str = "kernel", convention: str = "destination",
                 timeout: float = 10.0, guard_seed: int = 0x6B67617465, fw: str = "numpy"):
        self._root = tempfile.mkdtemp(prefix="kgate-worker-")
        cand = Candidate(fw, source, call_timeout=timeout, init_timeout=max(60.0, timeout), entry=entry,
                         guard_seed=guard_seed, work_root=self._root)
        super().__init__(cand, FunctionPlan(entry, convention),
                         describe=f"python:{entry} ({convention}, {'cpu' if fw == 'numpy' else fw}, isolated)")
        reply = cand.start()
        if reply.get("status") != "ok":
            cand.close()
            raise RuntimeError(f"the candidate does not load: {reply.get('message')}")

    def __del__(self):
        try:
            self.cand.close()
            shutil.rmtree(self._root, ignore_errors=True)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
