"""kgate's Python front-end: the KernelBench-format adapter, the corpus audit and its report.

The C++ core is the extension kgate._core (built by `pip install ./python`). Everything in the audit also
runs from the source tree without it (PYTHONPATH=python), which is how the GPU machine runs it: there the
extension is optional, and `kgate.core_available()` says whether it was found.
"""
__version__ = "0.1.0"

try:  # the extension is optional for the pure-Python audit path
    from . import _core  # noqa: F401
except ImportError:  # pragma: no cover - depends on the install
    _core = None


def core_available() -> bool:
    return _core is not None
