"""How much memory one case of a row may take, and which rows must run alone for it.

The engine refuses a contract whose largest case passes the limit it is given, before anything is allocated
(src/kgate/frontend/contract_check.cpp; the estimate is `case_bytes`: every input and output, each capped at
max_case_elements, at 2 x (dtype bytes + 8) an element). That limit is the machine's, not a constant:
`_core.case_memory_limit()` is KGATE_CASE_MEMORY where set, else 3/4 of the machine's memory (MemTotal, or the
memory cgroup's limit where lower). A task the producer ran at its nominal shape on an 80 GB A100 must be
auditable on a larger machine: a100 L2/T34's nominal case (a conv-transpose output of 2^30 f32 elements, about
27 GB by the estimate) was refused by the old constant 8 GiB.

Rows share the machine: `--jobs` verify jobs at once each get 1/jobs of the machine's limit. A row whose
nominal case passes that share is not refused: it stops before its oracle runs with the status
CASE_MEMORY_STATUS (never a verdict, like gpu_out_of_memory), and the audit runs it again alone, where it gets
the machine's whole limit (its GPU memory is the scheduler's business: alone, it has the card to itself).
Only a nominal case larger than the machine's whole limit is a contract_error, with the engine's message
saying that this machine cannot judge it.

The derived contract never asks more than that of its own larger cases: derive.py lowers the dims' max
(towards, never below, the nominal) until the largest case fits max(the share, the nominal case), and says so
in a note. The share is the one cap used whether the row runs beside others or alone, so a row's contract
does not depend on how it was scheduled.
"""
from __future__ import annotations

CASE_MEMORY_STATUS = "case_memory_shared"  # the audit's name for it too (audit.CASE_MEMORY_STATUS)


def machine_limit() -> tuple[int, str]:
    """(bytes, why): what one case may take on this machine (the engine's own default)."""
    from .. import _core
    return _core.case_memory_limit()


def shared_limit(spec: dict, machine: tuple[int, str] | None = None) -> tuple[int, str]:
    """(bytes, why): a row's share of the machine's limit when `rows_at_once` verify jobs run together."""
    total, why = machine or machine_limit()
    n = max(1, int(spec.get("rows_at_once") or 1))
    if n == 1:
        return total, why
    return total // n, f"1/{n} of {total} bytes, {n} rows at once ({why})"


def row_limit(spec: dict, machine: tuple[int, str] | None = None) -> tuple[int, str]:
    """(bytes, why): what this row's cases may take: the machine's whole limit when it runs alone, else its share."""
    total, why = machine or machine_limit()
    if spec.get("alone"):
        return total, f"the machine's whole limit, the row running alone ({why})"
    return shared_limit(spec, (total, why))


def needs_alone(nominal_bytes: int, spec: dict, machine: tuple[int, str] | None = None) -> str | None:
    """Why the row must run alone for its nominal case (the record's message), or None: its nominal case passes
    its share beside others but fits the machine's whole limit. A nominal case past the whole limit is left to
    the engine, which refuses it with its own message (contract_error)."""
    total, why = machine or machine_limit()
    share, share_why = row_limit(spec, (total, why))
    if spec.get("alone") or nominal_bytes <= share or nominal_bytes > total:
        return None
    return (f"the nominal case needs about {nominal_bytes} bytes ({nominal_bytes / 2**30:.1f} GiB, the engine's "
            f"estimate), more than a row's share beside others ({share} bytes: {share_why}) and within the "
            f"machine's {total} bytes; not a verdict: the row runs again alone")
