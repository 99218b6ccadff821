"""Several corpus files audited over many shard runs, merged into one pooled view, and the tables read from it.

    python -m kgate merge --corpus C1.jsonl C2.jsonl ... --results R1.jsonl R2.jsonl ...
                          [--out results/pooled.kgate.jsonl] [--newest-wins] [--adopt-unsigned]
    python -m kgate pool     [--pooled P] [--out pooled.md] [--html pooled.html]   (outputs beside P by default)
    python -m kgate crossgpu [--pooled P] [--out crossgpu.md] [--permutations 1000]
    python -m kgate headline [--pooled P] [--out headline.md]

Merge. Every results file is read as the audit reads it (results.py): a record counts only when its MAC verifies
under the key beside its file (--adopt-unsigned: a file without its key is vouched for, its records taken as
they stand, and named in the manifest's `vouched`), and within one file the newest record of a row wins (the older ones are
superseded, as the audit itself would move them). Across files, each row of each corpus must then have exactly
one current record: a row with none is *missing*, a row whose record was made for another version of its
corpus line is *stale* (the audit reruns it), a row with different current records in two files is
*duplicated* (the same record copied into two files is one record). Bad input stops the merge with one line
per problem and exit status 2: a file that cannot be read, a results file without its key, a line that is not
a record, a record whose MAC does not verify, a record that is not a row record, a record whose row is in
none of the corpora. Missing, stale or duplicated rows are not bad input: the pooled view is written with
every row that has one current record, the manifest says what is missing, and the exit status is 1.

The pooled view (`pooled.kgate.jsonl`) holds one record per row, corpus by corpus in the order given and row
by row in line order, each the row's current record unchanged plus `corpus` (the corpus file's stem; not
`gpu`, the record's own GPU-memory admission), `merged_from` (the results file's name as its run wrote it,
X.jsonl also when the committed file is packed, X.jsonl.gz) and `code_sha` (a hash
of the candidate source, so identical kernels in two files can be told apart from different ones); it is signed under its own key (`pooled.kgate.key`), so `python -m kgate
report|sweep|agreement|sample` read it like any results file. `pooled.manifest.json` (signed too) names the
inputs with the SHA-256 of their records as written (unpacked: packing a file changes no hash) and says what is
missing. Nothing in either depends on the time or the machine, so
a second merge of the same inputs writes the same bytes; when the manifest shows that inputs and output are
unchanged, the merge recomputes nothing.

The tables count with the definitions in DEFINITIONS (docs/audit.md, "Pooled results" quotes them): one
definition per number, used by every table, the HTML report and the headline.
"""
from __future__ import annotations

import hashlib
import html
import itertools
import json
import os
import random
from collections import Counter, defaultdict

from .classify import CLASSES, FAILING, GATES, REJECTS, classification, counted_failure, gate_family
from .corpus import read_rows, stem_of
from .results import (RecordsError, TrustError, find_records, key_path, load_key, plain_name, records_sha256, sign,
                      verify, _parse_lines)

NOT_AUDITED_BY_DESIGN = ("no_candidate", "bad_row")

# One definition per number. Every table below says "(see DEFINITIONS)" by name and computes it through
# count_row() alone.
DEFINITIONS = {
    "rows": "lines of the corpus file (every row, whatever its content)",
    "with candidate": "rows whose producer kept a solution and whose line is well formed (status neither "
                      "no_candidate nor bad_row)",
    "audited": "rows whose candidate reached the engine and finished every gate (status ok); the denominator of "
               "every percentage",
    "not audited": "rows with a candidate that never reached or never finished the engine (import_error, "
                   "compile_error, oracle_error, row_timeout, driver_crash, ...): a status with its reason, never "
                   "a verdict about the kernel",
    "broken": "audited rows the engine classifies broken beyond tolerance (a tolerance-free gate failed, or "
              "oracle/shapes/accumulation failed with an error at least 100x its bound; kgate::classify)",
    "broken away from the line": "audited rows the engine classifies broken and classifies broken still with every "
                                 "finite error ratio of their gate records divided by 2: not near the 100x line "
                                 "(report.near_line), so another run's random draws would not change their class",
    "violation or broken": "audited rows the engine classifies broken or violation: at least one counted gate "
                           "failure (attributed and out-of-domain findings are not counted)",
    "incomplete": "audited rows the engine classifies incomplete: nothing counted failed, but a counted gate "
                  "could not run (ERROR); neither held against the kernel nor shown clean",
    "clean": "audited rows the engine classifies clean",
    "judge_attacked": "audited rows whose candidate attacked its judge (classification judge_attacked)",
    "baseline accepts, kgate rejects": "audited rows whose baseline (the producer's test, mirrored) passed and "
                                       "whose engine classification is broken, violation or judge_attacked",
    "baseline rejects, kgate accepts": "audited rows whose baseline failed (FAIL, CRASH or TIMEOUT) and whose "
                                       "engine classification is clean",
    "baseline agrees with the producer's acceptance": "audited rows whose baseline passed: the producer "
                                                      "accepted every row that has a candidate",
    "baseline agrees with the producer's own code": "audited rows where baseline and the producer's correctness "
                                                    "code run in one process (public_harness, mode producer) give "
                                                    "the same pass/fail, of audited rows where both ran",
    "per gate": "audited rows with a counted failure of that gate (a kernel failing several gates counts once "
                "under each)",
    "percent": "100 x count / audited of the same file (or of the pooled set), one decimal",
}


ACCEPTANCE = "baseline agrees with the producer's acceptance"
OWN_CODE = "baseline agrees with the producer's own code"


class MergeError(Exception):
    """Bad input to the merge or the tables: one line per problem, exit status 2."""

    def __init__(self, problems):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("; ".join(self.problems))


def _name(path: str) -> str:
    """How the pooled view and its tables name an input: its file name as the run wrote it (X.jsonl, also when
    the committed file is X.jsonl.gz), so packing a file changes no output."""
    return os.path.basename(plain_name(path))


def _regular(path: str) -> str | None:
    """The file holding `path`'s lines (X.jsonl or X.jsonl.gz, results.find_records) when it is a regular file."""
    found = find_records(path)
    return found if found is not None and os.path.isfile(found) else None


def _code_sha(row) -> str | None:
    c = row.data.get("custom_code")
    return hashlib.sha256(c.encode()).hexdigest()[:16] if isinstance(c, str) and row.has_candidate() else None


def _read(path: str, what: str):
    try:
        return _parse_lines(path)
    except OSError as e:
        raise MergeError(f"{what} {path}: cannot read it ({e.strerror})") from None
    except RecordsError as e:
        raise MergeError(f"{what} {e}") from None


def _current_records(path: str, corpus_keys: dict, problems: list, adopt_unsigned: bool = False,
                     vouched: list | None = None) -> tuple[dict, int]:
    """{key: record} of one results file (MAC-verified, newest per key) and how many older records it held.
    adopt_unsigned: a file with no key file beside it is vouched for by the user (its key stayed with the run
    that wrote it): its records count as they stand, every other check still applies, and its name goes to
    `vouched`. A file with its key is verified whatever adopt_unsigned says."""
    if not _regular(path):
        problems.append(f"results {path}: {'not a regular file' if find_records(path) else 'no such file'}")
        return {}, 0
    try:
        key = load_key(path, create=False)
    except TrustError as e:
        problems.append(f"results {path}: {e}")
        return {}, 0
    if key is None and not adopt_unsigned:
        problems.append(f"results {path}: no key file {key_path(path)} beside it, so no record can be checked "
                        "(the key travels with its results; --adopt-unsigned vouches for a file whose key stayed "
                        "with the run that wrote it)")
        return {}, 0
    if key is None and vouched is not None:
        vouched.append(_name(path))
    try:
        lines = _read(path, "results")
    except MergeError as e:
        problems.extend(e.problems)
        return {}, 0
    best: dict[str, dict] = {}
    older = 0
    for pos, rec, text in lines:
        where = f"results {path}:{pos + 1}"
        if rec is None:
            problems.append(f"{where}: not a JSON object (a line cut by a kill? `python -m kgate audit` on this "
                            f"file moves it aside)")
            continue
        if key is not None and not verify(rec, key):
            problems.append(f"{where}: record {rec.get('key', '?')} has no valid MAC under {key_path(path)} "
                            "(edited, forged, or signed with another key)")
            continue
        if "superseded_because" in rec:
            problems.append(f"{where}: record {rec.get('key', '?')} is a superseded record (it belongs in the "
                            "superseded file, not among current records)")
            continue
        if "merged_from" in rec:
            problems.append(f"{where}: record {rec.get('key', '?')} comes from a pooled view (merged_from), not "
                            "from an audit's results")
            continue
        if rec.get("type", "row") != "row" or not rec.get("key"):
            problems.append(f"{where}: a {rec.get('type') or 'keyless'} record, not a row record (a compile log "
                            "or a journal given as results?)")
            continue
        k = rec["key"]
        if k not in corpus_keys:
            problems.append(f"{where}: record {k} is not a row of any corpus given "
                            f"({', '.join(sorted({x.split('/')[0] for x in corpus_keys}))})")
            continue
        if k in best:  # newest wins, a later line on a tie (results.py's rule)
            older += 1
            if (rec.get("written_at") or 0) < (best[k].get("written_at") or 0):
                continue
        best[k] = rec
    return best, older


def _atomic_write(path: str, data: bytes) -> bool:
    """Writes data unless the file already holds exactly these bytes. Returns whether it wrote."""
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return False
    except FileNotFoundError:
        pass
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return True


def manifest_path(pooled: str) -> str:
    base = pooled[: -len(".kgate.jsonl")] if pooled.endswith(".kgate.jsonl") else pooled.rsplit(".jsonl", 1)[0]
    return base + ".manifest.json"


def _inputs(corpora, results) -> list[dict]:
    out = []
    for kind, paths in (("corpus", corpora), ("results", results)):
        for p in paths:
            out.append({"kind": kind, "name": _name(p), "sha256": records_sha256(p)})
    return out


# The pooled view's layout: a merge made under another layout (an older kgate) is made again, never reused.
# 2: the corpus stem in `corpus` (was `gpu`, which hid the record's own), `corpora` and `vouched` in the manifest.
POOLED_FORMAT = 2


def _options(newest_wins: bool, adopt_unsigned: bool) -> dict:
    return {"newest_wins": bool(newest_wins), "adopt_unsigned": bool(adopt_unsigned)}


def _up_to_date(out: str, key: bytes | None, inputs: list[dict], options: dict) -> dict | None:
    """The manifest of a previous merge of exactly these inputs whose output is untouched, else None."""
    mp = manifest_path(out)
    if key is None or not (os.path.isfile(out) and os.path.isfile(mp)):
        return None
    try:
        with open(mp) as f:
            man = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(man, dict) or not verify(man, key) or man.get("format") != POOLED_FORMAT or \
            man.get("inputs") != inputs or \
            man.get("options") != options:
        return None
    return man if man.get("output_sha256") == records_sha256(out) else None


def merge(corpora: list[str], results: list[str], out: str, newest_wins: bool = False,
          adopt_unsigned: bool = False) -> dict:
    """Checks and pools; returns the manifest (with `wrote`: whether any file changed). Raises MergeError on
    bad input. adopt_unsigned: results files without their key file are vouched for (_current_records); the
    manifest names them under `vouched`."""
    options = _options(newest_wins, adopt_unsigned)
    problems = []
    for p in corpora:
        if not _regular(p):
            problems.append(f"corpus {p}: no such file" if not find_records(p) else f"corpus {p}: not a regular file")
    stems = Counter(stem_of(p) for p in corpora)
    problems += [f"corpus stem {s!r} given {n} times: each corpus file once (rows are keyed by file stem)"
                 for s, n in stems.items() if n > 1]
    if any(os.path.abspath(plain_name(r)) == os.path.abspath(plain_name(out)) for r in results):
        problems.append(f"results {out} is the pooled view this merge writes (a glob such as results/*.kgate.jsonl "
                        "takes it in): leave it out")
    if len(set(map(_name, results))) != len(results):
        problems.append("two results files share a name: the pooled view names each record's file by its name")
    if problems:
        raise MergeError(problems)
    try:
        inputs = _inputs(corpora, [r for r in results if _regular(r)])
    except OSError as e:
        raise MergeError(f"cannot read {e.filename}: {e.strerror}") from None
    try:
        out_key = load_key(out, create=False)
    except TrustError as e:
        raise MergeError(f"pooled view {out}: {e}") from None
    if len(inputs) == len(corpora) + len(results):
        man = _up_to_date(out, out_key, inputs, options)
        if man is not None:
            return dict(man, wrote=False)
    rows_of = {}   # key -> (corpus stem, Row)
    order = []
    for p in corpora:
        try:
            rows = read_rows(p)
        except OSError as e:
            raise MergeError(f"corpus {p}: cannot read it ({e.strerror})") from None
        for r in rows:
            rows_of[r.key] = (stem_of(p), r)
            order.append(r.key)
    per_file: dict[str, dict] = {}
    superseded_in_files = 0
    vouched: list[str] = []
    for p in results:
        recs, older = _current_records(p, rows_of, problems, adopt_unsigned, vouched)
        per_file[p] = recs
        superseded_in_files += older
    if problems:
        raise MergeError(problems)
    candidates: dict[str, list] = defaultdict(list)
    for p, recs in per_file.items():
        for k, rec in recs.items():
            candidates[k].append((p, rec))
    current, missing, stale, duplicated, resolved = {}, [], [], [], []
    stale_superseded = 0
    for k in order:
        stem, row = rows_of[k]
        found = candidates.get(k, [])
        fresh = [(p, r) for p, r in found if r.get("sha") == row.sha]
        old = [(p, r) for p, r in found if r.get("sha") != row.sha]
        # One record copied into two files is one record (compared without its MAC: the keys differ).
        distinct = list({json.dumps({x: v for x, v in r.items() if x != "mac"}, sort_keys=True): (p, r)
                         for p, r in fresh}.values())
        if not distinct:
            if old:  # made for another version of the line, and nothing newer: the audit runs it again
                stale += [{"key": k, "results": _name(p), "record_sha": r.get("sha"),
                           "corpus_sha": row.sha} for p, r in old]
            else:
                missing.append(k)
            continue
        stale_superseded += len(old)  # a fresh record exists: the old line's record is history
        if len(distinct) > 1:
            where = [{"results": _name(p), "status": r.get("status"), "written_at": r.get("written_at")}
                     for p, r in distinct]
            if not newest_wins:
                duplicated.append({"key": k, "records": where})
                continue
            resolved.append({"key": k, "records": where})
            distinct.sort(key=lambda pr: (pr[1].get("written_at") or 0, pr[1]["mac"]))
        p, rec = distinct[-1]
        pooled = {x: v for x, v in rec.items() if x != "mac"}
        pooled.update(corpus=stem, merged_from=_name(p), code_sha=_code_sha(row))
        current[k] = pooled
    key = out_key if out_key is not None else load_key(out, create=True)
    body = "".join(json.dumps(sign(current[k], key), sort_keys=True, allow_nan=True) + "\n"
                   for k in order if k in current).encode()
    per_corpus = {}
    for p in corpora:
        s = stem_of(p)
        keys = [k for k in order if rows_of[k][0] == s]
        per_corpus[s] = {"rows": len(keys), "current": sum(1 for k in keys if k in current),
                         "missing": sum(1 for k in keys if k in missing),
                         # Rows with no current record (missing, stale or duplicated) whose line has a candidate:
                         # what the records cannot say about a file not (fully) audited yet.
                         "no_record_with_candidate": sum(1 for k in keys
                                                         if k not in current and rows_of[k][1].has_candidate()),
                         "stale": len({x["key"] for x in stale if rows_of[x["key"]][0] == s}),
                         "duplicated": sum(1 for x in duplicated if rows_of[x["key"]][0] == s)}
    complete = not (missing or stale or duplicated)
    man = {"kind": "kgate pooled view", "format": POOLED_FORMAT, "inputs": inputs, "output": os.path.basename(out),
           "output_sha256": hashlib.sha256(body).hexdigest(), "complete": complete, "per_corpus": per_corpus,
           "corpora": [stem_of(p) for p in corpora],
           "rows": len(order), "current": len(current), "missing": missing, "stale": stale,
           "duplicated": duplicated, "resolved_newest_wins": resolved,
           "superseded_within_files": superseded_in_files, "stale_with_a_fresh_record": stale_superseded,
           "vouched": vouched, "options": options}
    man = sign(man, key)
    wrote = _atomic_write(out, body)
    wrote = _atomic_write(manifest_path(out), (json.dumps(man, sort_keys=True, indent=1) + "\n").encode()) or wrote
    return dict(man, wrote=wrote)


def corpus_order(man: dict) -> list[str]:
    """The corpus stems in the order the merge was given them (the manifest's JSON sorts per_corpus's keys)."""
    return list(man.get("corpora") or man.get("per_corpus") or [])


def merge_text(man: dict, out: str) -> str:
    lines = []
    whole = {s for s, c in man["per_corpus"].items() if c["rows"] and c["missing"] == c["rows"]}
    for s in corpus_order(man):
        if s in whole:
            lines.append(f"missing: every row of {s} ({man['per_corpus'][s]['rows']} rows): no results file given "
                         "has a record of it (not audited yet?)")
    for k in man["missing"]:
        if k.split("/")[0] not in whole:
            lines.append(f"missing: {k} has no record in any results file")
    for s in man["stale"]:
        lines.append(f"stale: {s['key']} in {s['results']} was made for another version of its corpus line "
                     f"(record sha {s['record_sha']}, corpus sha {s['corpus_sha']}): the audit runs it again")
    for d in man["duplicated"]:
        lines.append(f"duplicated: {d['key']} has different current records in " +
                     ", ".join(f"{r['results']} ({r['status']}, written_at {r['written_at']})" for r in d["records"]) +
                     " (keep one, or pass --newest-wins)")
    for d in man["resolved_newest_wins"]:
        lines.append(f"newest wins: {d['key']} had records in " + ", ".join(r["results"] for r in d["records"]))
    for name in man.get("vouched", []):
        lines.append(f"vouched for: {name} has no key file beside it, so its records were taken as they stand "
                     "(--adopt-unsigned), not checked against a MAC")
    head = [f"{'wrote' if man.get('wrote') else 'unchanged (nothing recomputed)'}: {out} and {manifest_path(out)}",
            f"{man['current']} of {man['rows']} rows have one current record; missing {len(man['missing'])}, "
            f"stale {len(man['stale'])}, duplicated {len(man['duplicated'])}; older records superseded within "
            f"their own file: {man['superseded_within_files']}",
            _table(["corpus", "rows", "current", "missing", "stale", "duplicated"],
                   [[s, c["rows"], c["current"], c["missing"], c["stale"], c["duplicated"]]
                    for s, c in ((s, man["per_corpus"][s]) for s in corpus_order(man))])]
    tail = ["complete: every row has exactly one current record" if man["complete"] else
            "INCOMPLETE: the pooled view lacks the rows above (exit status 1)"]
    return "\n".join(lines + head + tail)


# ---- reading the pooled view ----------------------------------------------------------------------------

def load_pooled(path: str) -> tuple[list[dict], dict]:
    """The pooled records and the manifest, every one verified under the pooled view's key (MergeError else)."""
    if not _regular(path):
        raise MergeError(f"pooled view {path}: no such file (run `python -m kgate merge` first)")
    try:
        key = load_key(path, create=False)
    except TrustError as e:
        raise MergeError(f"pooled view {path}: {e}") from None
    if key is None:
        raise MergeError(f"pooled view {path}: no key file {key_path(path)} beside it")
    recs, problems = [], []
    for pos, rec, _ in _read(path, "pooled view"):
        if rec is None or not verify(rec, key):
            problems.append(f"pooled view {path}:{pos + 1}: no valid MAC (edited after the merge?)")
        else:
            recs.append(rec)
    mp = manifest_path(path)
    try:
        with open(mp) as f:
            man = json.load(f)
    except (OSError, ValueError) as e:
        raise MergeError(f"manifest {mp}: cannot read it ({e})") from None
    if not isinstance(man, dict) or not verify(man, key):
        problems.append(f"manifest {mp}: no valid MAC")
    elif man.get("output_sha256") != records_sha256(path):
        problems.append(f"pooled view {path}: not the file its manifest describes (merge again)")
    if problems:
        raise MergeError(problems)
    return recs, man


# ---- counting, with the definitions above ---------------------------------------------------------------

def _gate(r, name):
    return next((g for g in r.get("gates", []) if g.get("gate") == name), None)


def audited(recs):
    return [r for r in recs if r.get("status") == "ok"]


def failing_gates(r: dict) -> frozenset:
    """The gates with a counted failure (at x1) in an audited record; a compute-sanitizer pass's failure
    ("bounds/memcheck") is its gate's (bounds)."""
    return frozenset(gate_family(g["gate"]) for g in r.get("gates", []) if counted_failure(g))


def baseline_passed(r):
    return (_gate(r, "baseline") or {}).get("verdict") == "PASS"


def baseline_failed(r):
    return (_gate(r, "baseline") or {}).get("verdict") in FAILING


def producer_code_passed(r):
    """The producer's correctness code run in one process (public_harness, mode producer): True, False, or None
    where it did not run."""
    v = (((_gate(r, "public_harness") or {}).get("harnesses") or {}).get("producer") or {}).get("passed")
    return v if isinstance(v, bool) else None


def count_row(recs: list[dict], rows: int | None = None) -> dict:
    """Every number of DEFINITIONS for one set of records (one file, or the pooled set)."""
    aud = audited(recs)
    cls = Counter(classification(r) for r in aud)
    status = Counter(r.get("status") for r in recs)
    both = [r for r in aud if producer_code_passed(r) is not None]
    return {
        "rows": rows if rows is not None else len(recs),
        "records": len(recs),
        "with candidate": sum(1 for r in recs if r.get("status") not in NOT_AUDITED_BY_DESIGN),
        "audited": len(aud),
        "not audited": {s: n for s, n in status.items() if s not in NOT_AUDITED_BY_DESIGN + ("ok",)},
        "no_candidate": status.get("no_candidate", 0), "bad_row": status.get("bad_row", 0),
        "broken": cls["broken"], "violation or broken": cls["broken"] + cls["violation"], "clean": cls["clean"],
        "incomplete": cls["incomplete"], "judge_attacked": cls["judge_attacked"],
        "baseline accepts, kgate rejects": sum(1 for r in aud if baseline_passed(r) and classification(r) in REJECTS),
        "baseline rejects, kgate accepts": sum(1 for r in aud if baseline_failed(r) and classification(r) == "clean"),
        ACCEPTANCE: sum(1 for r in aud if baseline_passed(r)),
        OWN_CODE: sum(1 for r in both if baseline_passed(r) == producer_code_passed(r)),
        "both ran": len(both),
        "per gate": Counter(g for r in aud for g in failing_gates(r)),
    }


def pct(n, d) -> str:
    return f"{100.0 * n / d:.1f}%" if d else "-"


def _table(headers, rows) -> str:
    """A Markdown table (readable as text too)."""
    out = ["| " + " | ".join(map(str, headers)) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _groups(recs, man):
    by = defaultdict(list)
    for r in recs:
        by[r.get("corpus")].append(r)
    stems = corpus_order(man) or list(by)
    return [(s, by.get(s, []), (man.get("per_corpus") or {}).get(s, {}).get("rows")) for s in stems]


def _state(man: dict) -> str:
    vouched = man.get("vouched") or []
    trust = (f"; the records of {', '.join(vouched)} vouched for, not MAC-checked (their key stayed with the run "
             "that wrote them)") if vouched else ""
    if man.get("complete"):
        return "complete" + trust
    return (f"INCOMPLETE: {len(man.get('missing', []))} missing, {len(man.get('stale', []))} stale, "
            f"{len(man.get('duplicated', []))} duplicated rows" + trust)


def pool_text(recs: list[dict], man: dict, pooled_path: str) -> str:
    groups = _groups(recs, man)
    counted = [(s, count_row(rs, n)) for s, rs, n in groups]
    counted.append(("pooled", count_row(recs, man.get("rows"))))
    per = man.get("per_corpus") or {}
    lacking = {s: per.get(s, {}).get("no_record_with_candidate") for s, _, _ in groups}
    known = [v for v in lacking.values() if v is not None]
    lacking["pooled"] = sum(known) if len(known) == len(groups) else None

    def no_record(s, c):
        n, w = c["rows"] - c["records"], lacking.get(s)
        return f"{n} ({w} with a candidate)" if n and w is not None else n
    share = lambda c, k, d="audited": f"{c[k]} ({pct(c[k], c[d])})"  # noqa: E731
    out = ["# kgate audit: per file and pooled", "",
           f"From `{pooled_path}` ({_state(man)}); remade by `{merge_command(man, pooled_path)}` then "
           f"`python -m kgate pool --pooled {pooled_path}`. Classes are the engine's; every number is defined once "
           "in docs/audit.md (\"Pooled results\") and in kgate/pooled.py's DEFINITIONS.", "",
           "## Rows", "",
           _table(["file", "rows", "no candidate", "bad row", "with candidate", "audited", "not audited (status: rows)",
                   "no current record (of them with a candidate in the corpus)"],
                  [[s, c["rows"], c["no_candidate"], c["bad_row"], c["with candidate"], c["audited"],
                    ", ".join(f"{k} {v}" for k, v in sorted(c["not audited"].items())) or "-",
                    no_record(s, c)] for s, c in counted]),
           "", "## Classification (percent of audited rows)", "",
           _table(["file", "audited", "broken", "violation or broken", "clean", "judge_attacked"],
                  [[s, c["audited"]] + [share(c, k) for k in ("broken", "violation or broken", "clean", "judge_attacked")]
                   for s, c in counted]),
           "", "## Baseline (the producer's test, mirrored) against kgate", "",
           _table(["file", "baseline accepts, kgate rejects", "baseline rejects, kgate accepts", ACCEPTANCE, OWN_CODE],
                  [[s, c["baseline accepts, kgate rejects"], c["baseline rejects, kgate accepts"], share(c, ACCEPTANCE),
                    f"{c[OWN_CODE]} of {c['both ran']} ({pct(c[OWN_CODE], c['both ran'])})"] for s, c in counted]),
           "", "## Audited kernels with a counted failure, per gate", "",
           _table(["file"] + GATES, [[s] + [c["per gate"][g] for g in GATES] for s, c in counted])]
    return "\n".join(out) + "\n"


# ---- cross-GPU ------------------------------------------------------------------------------------------

def jaccard(a: frozenset, b: frozenset) -> float:
    """Agreement of two failing-gate sets: |a & b| / |a | b|, and 1 when both are empty (both pass every gate)."""
    return 1.0 if not (a or b) else len(a & b) / len(a | b)


def _by_task(recs):
    tasks = defaultdict(dict)  # (level, task) -> {gpu: record}
    for r in recs:
        if r.get("level") is not None and r.get("task") is not None:
            tasks[(r["level"], r["task"])][r.get("corpus")] = r
    return tasks


def crossgpu(recs: list[dict], permutations: int = 1000, seed: int = 0) -> dict:
    """Same-task pairs against random pairs. A pair is two audited kernels from two different files. Same-task
    pairs: the kernels of one task accepted on two GPUs. Random pairs: every pair of kernels of the same two
    files whose tasks differ (the baseline: what agreement two kernels have when nothing but the generator
    and the pair of files ties them). Agreement of a pair: the Jaccard index of their failing-gate sets, and
    whether their classes match. The permutation test shuffles task labels within each file (`permutations`
    times, random.Random(seed)) and counts how often the same-task mean Jaccard reaches the observed one; it
    keeps the observed pair structure (the (task, file, file) slots the observed mean averages over, so a
    shuffled mean averages as many pairs, as dependent on each other), and leaves out a shuffled pair whose two
    sources are identical. Pairs
    whose two candidates are byte-identical are reported apart and left out of both means (they agree by
    construction, and say nothing about task against generator).

    Random pairs are counted through the distinct (gate set, class) values of each file rather than pair by
    pair (five files of 250 rows make 600,000 pairs), then the same-task and identical pairs are taken out."""
    import numpy as np
    aud = [r for r in audited(recs) if r.get("level") is not None]
    files = sorted({r.get("corpus") for r in aud})
    per_file = {f: [r for r in aud if r.get("corpus") == f] for f in files}
    info = {id(r): (failing_gates(r), classification(r), (r["level"], r["task"]), r.get("code_sha")) for r in aud}
    sets = sorted({v[0] for v in info.values()}, key=lambda x: sorted(x))
    sid = {x: i for i, x in enumerate(sets)}
    jac = np.array([[jaccard(a, b) for b in sets] for a in sets]) if sets else np.zeros((0, 0))

    def stats(pairs_weighted):
        """[(set a, set b, class a == class b, weight)] -> sums of Jaccard, same set, same class, per gate."""
        out = {"n": 0, "jac": 0.0, "exact": 0, "cls": 0, "both": Counter(), "either": Counter()}
        for a, b, same_cls, w in pairs_weighted:
            out["n"] += w
            out["jac"] += w * float(jac[sid[a], sid[b]])
            out["exact"] += w * (a == b)
            out["cls"] += w * same_cls
            for g in a | b:
                out["either"][g] += w
                if g in a and g in b:
                    out["both"][g] += w
        return out

    def minus(x, y):
        return {"n": x["n"] - y["n"], "jac": x["jac"] - y["jac"], "exact": x["exact"] - y["exact"],
                "cls": x["cls"] - y["cls"], "both": x["both"] - y["both"], "either": x["either"] - y["either"]}

    same_list, ident_list, all_list = [], [], []
    identical = 0
    for fa, fb in itertools.combinations(files, 2):
        ca = Counter((info[id(r)][0], info[id(r)][1]) for r in per_file[fa])
        cb = Counter((info[id(r)][0], info[id(r)][1]) for r in per_file[fb])
        all_list += [(a, b, c == d, na * nb) for (a, c), na in ca.items() for (b, d), nb in cb.items()]
        by_task_b = defaultdict(list)
        by_code_b = defaultdict(list)
        for r in per_file[fb]:
            by_task_b[info[id(r)][2]].append(r)
            if info[id(r)][3]:
                by_code_b[info[id(r)][3]].append(r)
        for ra in per_file[fa]:
            ga, ca_, ta, sa = info[id(ra)]
            twins = {id(x) for x in by_code_b.get(sa, [])} if sa else set()
            for rb in by_task_b.get(ta, []):
                gb, cb_, _, _ = info[id(rb)]
                if id(rb) in twins:
                    identical += 1
                else:
                    same_list.append((ga, gb, ca_ == cb_, 1))
            for rb in by_code_b.get(sa, []) if sa else []:  # identical sources: out of both groups
                gb, cb_, tb, _ = info[id(rb)]
                ident_list.append((ga, gb, ca_ == cb_, 1))
    same = stats(same_list)
    twins = stats(ident_list)
    rand = minus(minus(stats(all_list), same), twins)
    mean = lambda total, n: total / n if n else float("nan")  # noqa: E731
    obs = mean(same["jac"], same["n"])
    # Permutation test over the same pair structure: task labels shuffled within each file.
    rng = random.Random(seed)
    reach = done = 0
    if same["n"]:
        ids = {f: np.array([sid[info[id(r)][0]] for r in per_file[f]]) for f in files}
        codes = {f: [info[id(r)][3] for r in per_file[f]] for f in files}
        code_id = {c: i for i, c in enumerate(sorted({c for f in files for c in codes[f] if c}))}
        cid = {f: np.array([code_id[c] if c else -1 - i for i, c in enumerate(codes[f])]) for f in files}
        slots = []  # (fa, fb, positions in fa, positions in fb) of the tasks both files hold
        for fa, fb in itertools.combinations(files, 2):
            pos_b = defaultdict(list)
            for j, r in enumerate(per_file[fb]):
                pos_b[info[id(r)][2]].append(j)
            pa, pb = [], []
            for i, r in enumerate(per_file[fa]):
                for j in pos_b.get(info[id(r)][2], []):
                    if cid[fa][i] == cid[fb][j]:
                        continue  # a slot the observed statistic leaves out stays out: the same pair structure
                    pa.append(i)
                    pb.append(j)
            slots.append((fa, fb, np.array(pa, dtype=int), np.array(pb, dtype=int)))
        for _ in range(permutations):
            perm = {f: np.array(rng.sample(range(len(ids[f])), len(ids[f])), dtype=int) for f in files}
            total = n = 0.0
            for fa, fb, pa, pb in slots:
                ra, rb = perm[fa][pa], perm[fb][pb]
                keep = cid[fa][ra] != cid[fb][rb]
                total += float(jac[ids[fa][ra], ids[fb][rb]][keep].sum())
                n += int(keep.sum())
            done += 1
            reach += int(bool(mean(total, n) >= obs - 1e-12))
    per_gate = {g: {"same": (same["both"][g], same["either"][g]), "random": (rand["both"][g], rand["either"][g])}
                for g in GATES}
    return {"files": files, "same_pairs": same["n"], "random_pairs": rand["n"], "identical_pairs": identical,
            "same_jaccard": obs, "random_jaccard": mean(rand["jac"], rand["n"]),
            "same_class": mean(same["cls"], same["n"]), "random_class": mean(rand["cls"], rand["n"]),
            "same_exact": mean(same["exact"], same["n"]), "random_exact": mean(rand["exact"], rand["n"]),
            "twin_pairs": twins["n"], "twin_jaccard": mean(twins["jac"], twins["n"]),
            "twin_exact": mean(twins["exact"], twins["n"]), "twin_class": mean(twins["cls"], twins["n"]),
            "p_value": (reach + 1) / (done + 1) if done else float("nan"), "permutations": done, "seed": seed,
            "per_gate": per_gate}


def _cell(r) -> str:
    if r is None:
        return ""
    if r.get("status") != "ok":
        return f"({r.get('status')})"
    fg = failing_gates(r)
    return (",".join(g for g in GATES if g in fg) or "none") + (" *" if classification(r) == "broken" else "")


def crossgpu_text(recs: list[dict], man: dict, permutations: int = 1000, seed: int = 0) -> str:
    tasks = _by_task(recs)
    files = corpus_order(man) or sorted({r.get("corpus") for r in recs})
    shared = sorted(t for t, by in tasks.items() if sum(1 for r in by.values() if r.get("status") == "ok") >= 2)
    s = crossgpu(recs, permutations, seed)
    multi = [len({r["code_sha"] for r in by.values() if r.get("code_sha")}) for by in tasks.values()
             if sum(1 for r in by.values() if r.get("code_sha")) >= 2]
    f3 = lambda x: "-" if x != x else f"{x:.3f}"  # noqa: E731
    out = ["# Cross-GPU: the kernels of one task accepted on several GPUs", "",
           f"Remade by `python -m kgate crossgpu` (permutations {s['permutations']}, seed {seed}). "
           f"{len(shared)} tasks have an audited kernel in at least two files.", "",
           "## Does the failure class follow the task or the generator?", "",
           "A pair is two audited kernels from two different files. Same-task pairs are the kernels of one task "
           "accepted on two GPUs; random pairs are every pair from the same two files whose tasks differ. If "
           "failures were a property of the task, same-task pairs would agree far more than random pairs; if "
           "they are a property of each generated kernel, no more than random pairs. Agreement: the Jaccard "
           "index of the failing-gate sets (1 when both are empty), exact equality of the sets, and equality of "
           "the class. p: share of permutations (task labels shuffled within each file) whose same-task mean "
           "Jaccard reaches the observed one. Pairs of byte-identical candidates are left out "
           f"({s['identical_pairs']} same-task pairs).", "",
           _table(["pairs", "count", "mean Jaccard", "same gate set", "same class"],
                  [["same task", s["same_pairs"], f3(s["same_jaccard"]), f3(s["same_exact"]), f3(s["same_class"])],
                   ["random (different tasks)", s["random_pairs"], f3(s["random_jaccard"]), f3(s["random_exact"]),
                    f3(s["random_class"])],
                   ["identical sources (one kernel audited twice, other seeds)", s["twin_pairs"],
                    f3(s["twin_jaccard"]), f3(s["twin_exact"]), f3(s["twin_class"])]]),
           "", "The last row is not part of the comparison: it measures how far the audit itself repeats on one "
           f"kernel. Of the {len(multi)} tasks with a candidate in several files, {sum(1 for n in multi if n == 1)} "
           f"keep one source on every GPU; the most distinct sources one task has is {max(multi, default=0)}.",
           "", f"permutation p-value (same-task mean Jaccard >= observed): {f3(s['p_value'])}", "",
           "Per gate, among pairs where at least one kernel fails the gate: the share where both do "
           "(same task against random pairs). A gate whose same-task share is far above its random share "
           "fails for reasons of the task (its inputs, its structure, or the gate's reading of it).", "",
           _table(["gate", "same task: both / either", "share", "random: both / either", "share"],
                  [[g, f"{v['same'][0]} / {v['same'][1]}", pct(*v["same"]), f"{v['random'][0]} / {v['random'][1]}",
                    pct(*v["random"])] for g, v in s["per_gate"].items() if v["same"][1] or v["random"][1]]),
           "", "## Per task", "",
           "Each cell: the gates with a counted failure for the kernel accepted on that GPU (`none`: it passed "
           "every gate; `*`: broken beyond tolerance; a status in parentheses: not audited; empty: no row). "
           "Distinct sources: how many different candidate sources the task's rows hold, of its rows with one "
           "(the producer often kept one kernel for several GPUs).", "",
           _table(["level", "task"] + files + ["distinct sources"],
                  [[lv, t] + [_cell(tasks[(lv, t)].get(f)) for f in files] +
                   [f"{len({r.get('code_sha') for r in tasks[(lv, t)].values() if r.get('code_sha')})} of "
                    f"{sum(1 for r in tasks[(lv, t)].values() if r.get('code_sha'))}"]
                   for lv, t in shared])]
    return "\n".join(out) + "\n"


# ---- headline -------------------------------------------------------------------------------------------

# The published figures for the same kind of audit, as issue 18 quotes them (another corpus: compare shares,
# not counts).
PUBLISHED = {
    "broken": "39.5%",
    "violation or broken": "62.1%",
    "baseline accepts, kgate rejects": "1,487",
    "baseline rejects, kgate accepts": "14",
    "baseline agrees with the producer's own code": "98.5%",
}


def merge_command(man: dict, pooled_path: str) -> str:
    """The merge that made this pooled view, from its manifest (file names; run it where they lie)."""
    names = lambda kind: " ".join(i["name"] for i in man.get("inputs", []) if i["kind"] == kind)  # noqa: E731
    return (f"python -m kgate merge --corpus {names('corpus')} --results {names('results')} --out {pooled_path}"
            + (" --newest-wins" if (man.get("options") or {}).get("newest_wins") else "")
            + (" --adopt-unsigned" if (man.get("options") or {}).get("adopt_unsigned") else ""))


def broken_away_from_line(recs: list[dict]) -> tuple[int, int]:
    """(audited rows broken and not near the 100x line, broken rows left out because today's engine classifies
    their gate records otherwise than their record says). Needs the engine (kgate._core): report.near_line asks it
    for both classes."""
    from . import report
    margins = [report.margin_of(r) for r in audited(recs) if classification(r) == "broken"]
    return sum(1 for m in margins if m is None), sum(1 for m in margins if m == "stale")


def headline_text(recs: list[dict], man: dict, pooled_path: str) -> str:
    c = count_row(recs, man.get("rows"))
    n = c["audited"]
    away, stale = broken_away_from_line(recs)
    recompute = f"python -m kgate headline --pooled {pooled_path}"
    acc = "baseline agrees with the producer's acceptance"
    own = "baseline agrees with the producer's own code"
    rows = [
        ["broken beyond any tolerance argument", PUBLISHED["broken"], f"{pct(c['broken'], n)} ({c['broken']} of {n})",
         "broken"],
        ["broken beyond any tolerance argument, not within 2x of the 100x line", "-",
         f"{pct(away, n)} ({away} of {n})" + (f"; {stale} broken rows with older records left out" if stale else ""),
         "broken away from the line"],
        ["at least one violation", PUBLISHED["violation or broken"],
         f"{pct(c['violation or broken'], n)} ({c['violation or broken']} of {n})", "violation or broken"],
        ["accepted by the standard test, rejected by the verifier", PUBLISHED["baseline accepts, kgate rejects"],
         str(c["baseline accepts, kgate rejects"]), "baseline accepts, kgate rejects"],
        ["rejected by the standard test, accepted by the verifier", PUBLISHED["baseline rejects, kgate accepts"],
         str(c["baseline rejects, kgate accepts"]), "baseline rejects, kgate accepts"],
        ["agreement with the benchmark's own correctness code", PUBLISHED[own],
         f"{pct(c[own], c['both ran'])} ({c[own]} of {c['both ran']})", own],
        ["agreement with the producer's recorded acceptance", "-", f"{pct(c[acc], n)} ({c[acc]} of {n})", acc],
    ]
    out = ["# Headline: kgate's pooled audit beside the published figures", "",
           f"Ours: the pooled view `{pooled_path}` ({man.get('rows')} rows, {n} audited; {_state(man)}). "
           "Recompute every number below: "
           f"`{merge_command(man, pooled_path)}` (the corpus and results files by name"
           f"{'' if man.get('vouched') else ', with the results keys beside them'}), then `{recompute}`. The published figures are those issue 18 quotes for the same kind "
           "of audit on another corpus: compare shares, not counts.", "",
           _table(["figure", "published", "kgate (pooled)", "definition"],
                  [[a, b, x, DEFINITIONS[d]] for a, b, x, d in rows])]
    return "\n".join(out) + "\n"


# ---- HTML -----------------------------------------------------------------------------------------------

def _md_table_html(md: str) -> str:
    """The Markdown of pool_text/crossgpu_text/headline_text as HTML (tables, headings, paragraphs)."""
    out, in_table = [], False
    for line in md.splitlines():
        if line.startswith("|"):
            cells = [html.escape(c.strip()) for c in line.strip("|").split("|")]
            if all(set(c) <= {"-"} for c in cells):
                continue
            if not in_table:
                out.append('<table class="t">')
                in_table, tag = True, "th"
            else:
                tag = "td"
            out.append("<tr>" + "".join(f"<{tag}>{c}</{tag}>" for c in cells) + "</tr>")
            continue
        if in_table:
            out.append("</table>")
            in_table = False
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level + 1}>{html.escape(line.lstrip('#').strip())}</h{level + 1}>")
        elif line.strip():
            out.append(f"<p>{html.escape(line)}</p>")
    if in_table:
        out.append("</table>")
    return "\n".join(out)


def _single_report_body(pooled_path: str) -> str:
    """report.write_html's page for the pooled view (it reads any signed results file): its plots, the four
    defences' tables and the failures with evidence, without its own head and title."""
    import tempfile
    from . import report
    with tempfile.TemporaryDirectory(prefix="kgate-pooled-") as d:
        page = os.path.join(d, "report.html")
        report.write_html([pooled_path], page)
        text = open(page, encoding="utf-8").read()
    body = text.split("<body>", 1)[-1].rsplit("</body>", 1)[0]
    body = body.replace("<h1>kgate audit report</h1>", "", 1)
    style = text.split("<style>", 1)[-1].split("</style>", 1)[0] if "<style>" in text else ""
    return (f"<style>{style}</style>" if style else "") + body


def write_html(recs: list[dict], man: dict, pooled_path: str, out_path: str, permutations: int = 1000) -> bool:
    """One self-contained page over every file and the pooled set: per-file and pooled tables, a
    classification plot per file, the threshold sweep per file, the headline and the cross-GPU table.
    Deterministic (no time, no paths but the ones given), so it is rewritten only when the results change."""
    from . import report
    groups = _groups(recs, man)
    labels = [s for s, _, _ in groups] + ["pooled"]
    sets = [rs for _, rs, _ in groups] + [recs]
    counts = [count_row(rs) for rs in sets]
    cls = [("broken", [c["broken"] for c in counts]),
           ("violation (not broken)", [c["violation or broken"] - c["broken"] for c in counts]),
           ("clean", [c["clean"] for c in counts])]
    svg = report._svg_bars("classification of audited kernels, per file and pooled", labels, cls,
                           ["#e15759", "#f28e2b", "#59a14f"])
    palette = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7"]
    svg_gates = report._svg_bars("audited kernels with a counted failure, per gate, stacked by file", GATES,
                                 [(lab, [c["per gate"][g] for g in GATES]) for lab, c in zip(labels[:-1], counts[:-1])],
                                 palette * 4)
    sweep = ["## Threshold sweep (every tolerance multiplied by m; classes are the engine's at x1)", "",
             _table(["file", "tolerance", "kernels failing", "of them broken", "tolerance-gate failures"],
                    [[lab] + row for lab, rs in zip(labels, sets) for row in report.sweep_rows(rs)])]
    doc = ("<!doctype html><html><head><meta charset=\"utf-8\"><title>kgate audit: every file and the pooled set"
           "</title><style>body{font-family:sans-serif;max-width:1200px;margin:2em auto} table.t{border-collapse:"
           "collapse;font-size:12px;margin:.5em 0} table.t td,table.t th{border:1px solid #ccc;padding:2px 5px}"
           "</style></head><body>\n<h1>kgate audit: every file and the pooled set</h1>\n"
           + _md_table_html(headline_text(recs, man, pooled_path)) + "\n"
           + _md_table_html(pool_text(recs, man, pooled_path)) + "\n" + svg + "<br>" + svg_gates + "\n"
           + _md_table_html("\n".join(sweep)) + "\n"
           + _md_table_html(crossgpu_text(recs, man, permutations)) + "\n"
           + "<h1>The pooled set in detail</h1>\n" + _single_report_body(pooled_path) + "\n</body></html>\n")
    return _atomic_write(out_path, doc.encode())
