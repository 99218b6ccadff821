#!/usr/bin/env bash
# Times the engine's host side on one huge case: relu f32 at 64M elements through `kgate verify` (CPU backend,
# the relu control and its oracle), per gate from the JSON report. Usage: bench/kgate/host/run.sh BUILD [GATES]
# (BUILD: a build tree with tools/kgate and the controls' libraries; GATES default "oracle"; KGATE_BIN: another
# kgate binary to time with BUILD's libraries, e.g. the tree before a change). The row job of an audit keeps
# freed heap memory (kernelbench/frontend.py keep_freed_host_memory); MALLOC_MMAP_MAX_=0
# MALLOC_TRIM_THRESHOLD_=2147483647 in the environment does the same for this driver.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?build directory}
gates=${2:-oracle}
out=${OUT_JSON:-/tmp/kgate-host-$$.json}
lib=$(dirname "$(find "$build" -name 'libctl_relu_f32.so' -o -name 'ctl_relu_f32.so' | head -1)")
/usr/bin/time -v "${KGATE_BIN:-$build/tools/kgate}" verify --contract "$here/relu_64m.toml" --kernel "$lib/$(ls "$lib" | grep -m1 'ctl_relu_f32')" \
  --oracle "$lib/$(ls "$lib" | grep -m1 'oracle_relu')" --gates "$gates" --seed 7 --json "$out" ${KGATE_EXTRA:-} \
  2> >(grep -E "Elapsed|Maximum resident|User time|System time|Percent of CPU" >&2) | tail -n 20
python3 - "$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
gates = r.get("gates") or r.get("results") or []
for g in gates:
    print(f"{g.get('gate', g.get('name'))}: {g.get('verdict')} {g.get('seconds', 0):.2f} s")
PY
