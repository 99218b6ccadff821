"""The gates of DESIGN.md section 3 for KernelBench-format candidates, one file each, plus `baseline` (the
producer's own test, mirrored) and `public_harness` (the public harness logic run in one process, for the
agreement defence). Every gate returns one record: gate, verdict (PASS FAIL REFUSED SKIP CRASH TIMEOUT
ERROR), summary, and where measured error_ratio and evidence."""
from importlib import import_module

ORDER = ["baseline", "oracle", "nan", "inf", "determinism", "immutability", "coverage", "freshness", "stream",
         "accumulation", "shapes", "layout", "bounds", "public_harness"]
KGATE_GATES = ["oracle", "nan", "inf", "determinism", "shapes", "accumulation", "immutability", "coverage",
               "bounds", "freshness", "stream", "layout"]
TOLERANCE_FREE = {"nan", "inf", "determinism", "immutability", "coverage", "bounds", "freshness"}
# Gates whose failures count as broken beyond tolerance when their error is >= 100x the bound.
RATIO_GATES = {"oracle", "shapes", "accumulation"}
BROKEN_RATIO = 100.0


def get(name: str):
    return import_module(f"{__name__}.{name}").run
