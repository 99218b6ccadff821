#!/usr/bin/env bash
# Device call (carry .carry/calls, .carry/base.tar, .carry/bwdcheck): the merged tree (helpers hBT: V_new formed in
# the chunk kernels; hBU: saved block T and G only) built beside the tree before them (.carry/base.tar = git archive
# e53af59), the float64 tests, B8 timings of both builds and dh_kernel, words against the base, memcheck last.
cd "$(dirname "$0")/../.."
export OUT=${OUT:-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
t0=$(date +%s); end=$(( t0 + ${CALL_S:-320} ))
left() { echo $(( end - $(date +%s) )); }
mkdir -p /tmp/base && tar -xf .carry/base.tar -C /tmp/base
( cd /tmp/base && MAX_JOBS=8 PYTHONUNBUFFERED=1 python3 bench/glr/side_by_side.py --prepare --impls glr --shapes none \
    --checks none --glr-build auto --out /tmp/prep-base > "$OUT/build-base.log" 2>&1 ) &
MAX_JOBS=8 PYTHONUNBUFFERED=1 python3 bench/glr/side_by_side.py --prepare --impls glr --shapes none --checks none \
  --glr-build auto --out /tmp/prep > "$OUT/build.log" 2>&1
wait
echo "builds done in $(( $(date +%s) - t0 )) s"; tail -1 "$OUT/build.log"; tail -1 "$OUT/build-base.log"
( cd build-py/glr-gpu && PYTHONPATH=$PWD timeout 60 python3 -m pytest -q -p no:cacheprovider -rfE \
    ../../tests/glrtorch/test_cuda.py ../../tests/glrtorch/test_dispatch.py -k "oracle or sm90 or saved" > "$OUT/glrtorch.log" 2>&1
  echo "pytest rc=$?" >> "$OUT/glrtorch.log" )
tail -3 "$OUT/glrtorch.log"
sbs() {  # NAME SITE [VAR=VALUE]: one side_by_side run at B8 (kernel table)
  local name=$1 site=${2:-build-py/glr-gpu}; shift 2
  env "$@" PYTHONUNBUFFERED=1 timeout 60 python3 bench/glr/side_by_side.py --impls glr --shapes B8_T4096_H16_K128 \
    --checks none --kernels 3 --glr-build never --glr-site "$site" --budget-s 40 --out "$OUT/$name" > "$OUT/$name.log" 2>&1
  echo "$name: $(grep -E '^\| B8_T4096_H16_K128 \| glr' "$OUT/$name/side_by_side.md" 2>/dev/null | cut -d'|' -f3-6)"
}
sbs default ""; sbs base /tmp/base/build-py/glr-gpu
[ $(left) -gt 60 ] && sbs dhmma "" GLR_DH_WGMMA=0
[ $(left) -gt 60 ] && sbs default2 ""
[ $(left) -gt 50 ] && { PYTHONUNBUFFERED=1 timeout $(( $(left) - 10 )) python3 bench/glr/switch_diff.py --shapes B8_T4096_H16_K128 \
    --out "$OUT/diff" default base:site=/tmp/base/build-py/glr-gpu 2>&1 | tail -2; grep -E "\| (base|dhmma) \|" "$OUT/diff/switch_diff.md" | head -8; }
[ $(left) -gt 40 ] && [ -x .carry/bwdcheck/sm90_bwd_check ] && { timeout $(( $(left) - 5 )) compute-sanitizer --tool memcheck \
    --print-limit 20 .carry/bwdcheck/sm90_bwd_check --check --quick > "$OUT/memcheck.log" 2>&1; echo "memcheck rc=$?" >> "$OUT/memcheck.log"; tail -3 "$OUT/memcheck.log"; }
echo "done at $(( $(date +%s) - t0 )) s"
