#!/usr/bin/env bash
# glr kernel switches against the default, A/B/A on one warm GPU machine, in one device call:
#
#   bench/glr/ab.sh SHAPES NAME:GLR_VAR=VALUE[,GLR_VAR=VALUE...] [NAME:... ...]
#   e.g. bench/glr/ab.sh B1_T32768_H16_HV32_K128,varlen32k_H16_HV32_K128 group_kernel:GLR_BWD_GROUP_KERNEL=1
#   A configuration may instead (or also) name another build of glr's extension, site=PATH (a --glr-site that
#   side_by_side.py --prepare built from another checkout, e.g. the commit before a change that has no switch):
#   bench/glr/ab.sh B8_T4096_H16_K128 base:site=/tmp/base/build-py/glr-gpu
#
# In order: glr's extension built when build-py/glr-gpu is missing or stale (outside the budget), the default
# (float64 checks at the small check shapes), each switch, the default again (a drift check: the two default runs bracket the switches,
# so a difference between A and B smaller than A against A' is not a result), then switch_diff.py over the same
# shapes (bitwise / normwise differences of o and the five gradients against the default). Every timing is
# side_by_side.py --impls glr --kernels 3 (medians of CUDA events, torch.profiler per kernel), same inputs.
#
# Writes into $OUT (default build-bench/ab): ab.md (one line per shape and configuration: fwd / fwd+bwd ms, and
# fwd+bwd against the mean of the two default runs), each run's side_by_side.md as <name>.md, switch_diff.md, and
# the logs as ab_logs.tgz. Budget: AB_BUDGET seconds in all (default 540); each run gets what is left shared over
# the runs still to come, at least 60 s. Exit status 0 when every run wrote its table, 1 otherwise, 2 bad usage.
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 2 ] || { echo "usage: bench/glr/ab.sh SHAPES NAME:GLR_VAR=VALUE[,...] [...]" >&2; exit 2; }
shapes=$1; shift
names=() envs=()
for c in "$@"; do
  name=${c%%:*} rest=${c#*:}
  [ "$name" != "$c" ] && [ -n "$rest" ] || { echo "ab.sh: '$c' is not NAME:GLR_VAR=VALUE[,...]" >&2; exit 2; }
  case "$name" in default|default2|*[!A-Za-z0-9_-]*) echo "ab.sh: '$name': a name of letters, digits, - and _ (not default)" >&2; exit 2 ;; esac
  for kv in ${rest//,/ }; do
    case "$kv" in GLR_*=*|site=?*) ;; *) echo "ab.sh: '$c': '$kv' is not GLR_VAR=VALUE or site=PATH" >&2; exit 2 ;; esac
  done
  names+=("$name") envs+=("${rest//,/ }")
done
python3 bench/glr/side_by_side.py --dry-run --impls glr --shapes "$shapes" > /dev/null || {
  echo "ab.sh: unknown shape in '$shapes' (python3 bench/glr/side_by_side.py --dry-run lists them)" >&2; exit 2; }
out=${OUT:-build-bench/ab}
mkdir -p "$out" && out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/glr-ab.XXXXXX)
# glr's extension is built (when missing or stale) before the budget's clock starts: a build inside the first run's
# share left the default run no time to measure (2026-12-07, H100: built in 101 s of an 86 s share).
PYTHONUNBUFFERED=1 python3 bench/glr/side_by_side.py --prepare --impls glr --shapes none --checks none \
  --glr-build auto --out "$work/prepare" > "$work/prepare.log" 2>&1 || { echo "ab.sh: glr's build failed:"; tail -5 "$work/prepare.log"; }
t0=$(date +%s)
budget=${AB_BUDGET:-540}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | tee "$work/device.txt"
status=0
left_runs=$(( ${#names[@]} + 3 ))  # default, switches, default again, switch_diff
share() { local left=$(( budget - ($(date +%s) - t0) )); local s=$(( left / left_runs )); [ $s -lt 60 ] && s=60; echo $s; }

run() {  # run NAME BUILD CHECKS [VAR=VALUE | site=PATH ...]
  local name=$1 build=$2 checks=$3; shift 3
  local s; s=$(share)
  local vars=() site=()
  for kv in "$@"; do
    case "$kv" in site=*) site=(--glr-site "${kv#site=}"); build=never ;; *) vars+=("$kv") ;; esac
  done
  mkdir -p "$work/$name"
  env "${vars[@]}" PYTHONUNBUFFERED=1 timeout $(( s + 30 )) python3 bench/glr/side_by_side.py --impls glr \
    --shapes "$shapes" --checks "$checks" --kernels 3 --glr-build "$build" "${site[@]}" --budget-s "$s" \
    --out "$work/$name" > "$work/$name.log" 2>&1
  if [ -f "$work/$name/side_by_side.md" ]; then cp "$work/$name/side_by_side.md" "$out/$name.md"; else
    echo "ab.sh: run $name wrote no table (its log: ab_logs.tgz, $name.log)"; tail -5 "$work/$name.log"; status=1; fi
  left_runs=$(( left_runs - 1 ))
}

run default auto all
for i in "${!names[@]}"; do
  # shellcheck disable=SC2086
  run "${names[$i]}" never none ${envs[$i]}
done
run default2 never none

configs=(default)
for i in "${!names[@]}"; do configs+=("${names[$i]}:${envs[$i]// /,}"); done
PYTHONUNBUFFERED=1 timeout $(( $(share) + 30 )) python3 bench/glr/switch_diff.py --shapes "$shapes" --out "$work/diff" \
  "${configs[@]}" > "$work/switch_diff.log" 2>&1 || status=1
cp "$work/diff/switch_diff.md" "$out/" 2>/dev/null || { echo "ab.sh: switch_diff wrote no table"; tail -5 "$work/switch_diff.log"; }

python3 - "$work" "$out/ab.md" "$shapes" default "${names[@]}" default2 <<'PY'
import json, os, sys
work, dest, shapes, runs = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4:]
def ms(run, shape):
    try:
        rows = json.load(open(os.path.join(work, run, "side_by_side.json")))["rows"]
    except (OSError, ValueError, KeyError):
        return None
    r = next((r for r in rows if r.get("shape") == shape and r.get("impl") == "glr"), None)
    return (r.get("fwd_ms"), r.get("fwdbwd_ms")) if r else None
lines = ["| shape | run | fwd ms | fwd+bwd ms | fwd+bwd / mean of the two default runs |", "|---|---|---|---|---|"]
for s in shapes:
    base = [m[1] for m in (ms("default", s), ms("default2", s)) if m and m[1]]
    mean = sum(base) / len(base) if base else None
    for run in runs:
        m = ms(run, s)
        if not m or m[1] is None:
            lines.append(f"| {s} | {run} | - | - | no timing (its log) |")
            continue
        ratio = f"{m[1] / mean:.3f}" if mean else "-"
        lines.append(f"| {s} | {run} | {m[0]:.3f} | {m[1]:.3f} | {ratio} |")
    if len(base) == 2:
        lines.append(f"| {s} | drift | | | default2 / default = {base[1] / base[0]:.3f} |")
open(dest, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
tar -C "$work" -czf "$out/ab_logs.tgz" --exclude='*.json' --exclude='*.pt' . 2>/dev/null
echo "ab.sh: done in $(( $(date +%s) - t0 )) s; $out"
exit $status
