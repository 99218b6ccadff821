"""The two checks that stay in Python because they copy other harnesses' Python on purpose: `baseline`
(the producer's own test, mirrored) and `public_harness` (the public harness logic run in one process, for
the agreement defence). Neither is a gate: the twelve gates and the classification are the C++ engine's
(src/kgate/gates, reached through kgate._core.verify). Each returns one record: gate, verdict, summary."""
from importlib import import_module

PYTHON_CHECKS = ["baseline", "public_harness"]


def get(name: str):
    if name not in PYTHON_CHECKS:
        raise KeyError(f"{name} is an engine gate, not a Python check")
    return import_module(f"{__name__}.{name}").run
