#!/usr/bin/env bash
# The audit's host overhead on a machine without a GPU: audits a fixed small corpus through the whole row-job
# path (worker, engine, gates) at a fixed seed, one job, no fork server, and prints the per-gate cost table of
# `python -m kgate report` (cases, candidate calls, seconds, in candidate, in oracle, drawing, kgate host) and
# the CPU seconds of every process of the run (perf stat's task-clock; /usr/bin/time where perf cannot run).
# A benchmark: it measures, it never fails on a timing.
#
#   bench/kgate/host_overhead.sh OUT_DIR            (PY: a python3 with torch, default /usr/bin/python3;
#                                                     SITE: the built package, default build-py/site;
#                                                     PROFILE=1: the driver under cProfile, OUT_DIR/driver.prof)
#
# The corpus (written to OUT_DIR/corpus.jsonl): bench/kgate/rows' RMSNorm row at half its size there
# (16 x 64 x 64 x 256 f32, 64 MiB a tensor: a large row's host work at a size this machine runs in about a
# minute) and seven torch positive controls (two correct; one defect each for bounds, immutability, layout,
# shapes, nan). Compare two builds' records with bench/kgate/same_records.py.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:?OUT_DIR}
py=${PY:-/usr/bin/python3}
site=$(cd "${SITE:-$repo/build-py/site}" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/results.jsonl* "$out"/corpus.jsonl
PYTHONPATH="$site" "$py" - "$repo/bench/kgate/rows/h100-L1-T36-half-cpu.jsonl" "$out/corpus.jsonl" <<'PY'
import json, sys
from kgate.controls import load, corpus_lines
row = json.loads(open(sys.argv[1]).readline())
row = {"level_id": 1, "task_id": "36h", "ref_code": row["ref_code"].replace("dim1 = 128", "dim1 = 64"),
       "custom_code": row["custom_code"].replace("dim1 = 128", "dim1 = 64")}
# controls whose records are a function of the seed alone (not caches_result, keyed by input address, nor
# nondeterministic, seeded by the OS): two runs of one build write the same records but for timings
keep = ("correct_softmax", "correct_linear", "writes_past_input", "modifies_input", "assumes_contiguous",
        "hardcoded_batch", "nan_masked")
controls = [c for c in load("torch") if c["name"] in keep]
with open(sys.argv[2], "w") as f:
    f.write("\n".join([json.dumps(row)] + corpus_lines(controls)) + "\n")
PY
prof=()
[ "${PROFILE:-0}" = 1 ] && prof=(-m cProfile -o "$out/driver.prof")
cd "$site"
# CPU time of every process of the run (driver, row jobs, workers, wherever they were reparented): perf stat
# counts each task it follows from fork to exit; /usr/bin/time only the children each parent waited for.
meter=(/usr/bin/time -f "cpu: %e s wall, %U s user, %S s system, max RSS %M KB" -o "$out/time.txt")
if command -v perf > /dev/null && perf stat -e task-clock -x, -o /dev/null true 2> /dev/null; then
  meter=(perf stat -e task-clock,page-faults,context-switches -o "$out/time.txt")
fi
KGATE_FORKSERVER=0 PYTHONPATH="$site" "${meter[@]}" "$py" "${prof[@]}" -m kgate audit "$out/corpus.jsonl" \
  --fw torch --seed 1234abcd --jobs 1 --row-timeout 1100 --results "$out/results.jsonl" \
  --ext-cache "$out/ext-cache" --quiet > "$out/audit.log" 2>&1 \
  || { echo "the audit failed (exit $?); its log:"; tail -n 30 "$out/audit.log"; }
PYTHONPATH="$site" "$py" - "$out/results.jsonl" <<'PY'
import sys
from kgate.report import cost_text
from kgate.results import read_results
recs = read_results(sys.argv[1])
print(f"{len(recs)} records: " + ", ".join(f"{r.get('key')} {r.get('classification') or r.get('status')}" for r in recs))
print(cost_text(recs))
PY
grep -E "cpu:|task-clock|page-faults|context-switches|elapsed|user|sys" "$out/time.txt"
