"""A KernelBench task's source: its module-level constants, and the module re-executed with some of them
rebound (the shapes gate). Rebinding rewrites the constant's assignment in the source before executing it,
so constants derived from it (`out_channels = in_channels`, `bias_shape = (out_channels, 1, 1)`) follow."""
from __future__ import annotations

import ast
import re
import sys
import types

# Constants whose names say they are hyperparameters, not sizes: the shapes gate never rebinds them even
# when they change a shape (a different kernel size is a different operator, not another shape of it).
# `dim`, `input_dim`, `hidden_dim` are left to the rebinding check in derive.py: KernelBench uses them for
# feature sizes far more often than for axes, and an axis rebound breaks the task or moves no extent linearly.
HYPER_NAME = re.compile(
    r"(kernel|stride|pad|dilation|group|head|axis|eps|momentum|slope|scale|factor|prob|p$|^p_|dropout|"
    r"min|max|value|bias|alpha|beta|gamma|margin|temperature|order|reduction|num_layers|layers|"
    r"divisor|constant|shift|power|exponent|threshold|bound|^axis)", re.I)


def int_constants(source: str) -> dict[str, int]:
    """Top-level `NAME = <int literal>` assignments, in source order (bools excluded)."""
    out: dict[str, int] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            v = node.value
            if isinstance(v, ast.Constant) and type(v.value) is int:
                out[node.targets[0].id] = v.value
    return out


def rebind(source: str, overrides: dict[str, int]) -> str:
    """The source with each overridden constant's top-level assignment replaced."""
    if not overrides:
        return source
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in overrides:
                node.value = ast.Constant(value=int(overrides[name]))
    return ast.unparse(tree)


class TaskError(Exception):
    """The task's own code (not the candidate's) failed: reported as ORACLE_ERROR, never against the
    candidate."""


def exec_module(source: str, name: str, filename: str | None = None) -> dict:
    """Runs `source` as the body of a module called `name`, registered in sys.modules as an import would
    register it, and returns its namespace. Tools that look a function's module up by name need it there:
    torch.compile (dynamo imports `fn.__module__`), pickle, inspect. An executed namespace that is not a
    registered module made torch.compile candidates fail under kgate with "No module named ..." (h100 L2/T34)
    where the producer's harness ran them."""
    module = types.ModuleType(name)
    module.__dict__["__builtins__"] = __builtins__
    code = compile(source, filename or f"<{name}>", "exec")
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)  # noqa: S102 - executing the task is the point
    except BaseException:
        sys.modules.pop(name, None)  # as a failed import leaves nothing behind
        raise
    return module.__dict__


class Task:
    """A task module executed at one binding of its size constants."""

    def __init__(self, source: str, overrides: dict[str, int] | None = None):
        self.source = source
        self.overrides = dict(overrides or {})
        try:
            self.ns = exec_module(rebind(source, self.overrides), "kgate_task")
        except Exception as e:  # noqa: BLE001
            raise TaskError(f"the task's source does not run: {type(e).__name__}: {e}") from e
        for required in ("Model", "get_inputs", "get_init_inputs"):
            if required not in self.ns:
                raise TaskError(f"the task defines no {required}")
        self.Model = self.ns["Model"]
        self.get_inputs = self.ns["get_inputs"]
        self.get_init_inputs = self.ns["get_init_inputs"]

    def constants(self) -> dict[str, int]:
        c = int_constants(self.source)
        c.update(self.overrides)
        return c
