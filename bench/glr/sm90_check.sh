#!/usr/bin/env bash
# bench/glr/sm90_check.sh: build and run the tensor-core forward check on a Hopper GPU, in under 4 minutes.
# From the repository root:   bench/glr/sm90_check.sh          (~40-50 s nvcc, then the checks and timings)
#                             bench/glr/sm90_check.sh --quick  (small shapes only, no timing)
# Rung 3 (what glr dispatches to) first: 10 Gated DeltaNet shapes, then its features (grouped value heads, packed
# sequences with int64/int32/invalid offsets, bf16 g and beta, DeltaNet, Mamba2, RetNet, linear attention), each
# also run with the split-sequence state pass forced to 4 segments (same bounds, bitwise run to run: the
# "  split 4:" lines), then timings (B1 T32768 H16 and HV32 also split in 4, 8 and 16 segments: "split N" in
# the timing line). Its state kernel runs on wgmma at 64 columns (gdn_state_wgmma.cuh) and on mma.sync at 32 and 16,
# so the width comparison counts 64 run to run and prints 16 / 32 against it as "wgmma vs mma.sync" (not failed).
# Then "rung 3m": rung 3 again with the mma.sync state kernel at every width (GLR_FWD_WGMMA=0, state_t_kernel, the
# fallback the switch selects): the same checks and timings, and the outputs bitwise equal across 16 / 32 / 64
# columns. Then rungs 2 and 1 (10 shapes each, timings). Each rung in its own process with its own time limit (a
# fault in one loses only its results): 100 s, 60 s, 45 s, 45 s, cut so that the whole script ends within 235 s of
# its start. ptxas gate: no C7519 (a warpgroup.arrive injected by ptxas) in any kernel (bench/glr/ptxas_c7519.sh).
# SASS gate: every gdn::state_t_wgmma_kernel instantiation holds HGMMA (sass_wgmma.txt).
# Every checked case prints one line ending in PASS or FAIL (float64 reference: normwise and max error;
# bitwise equality of two runs; NaN-poisoned outputs all written). Logs under $OUT (or build-sm90check/):
# ptxas.txt, ptxas_c7519.txt, sass.txt, sass_wgmma.txt, check_rung{1,2,3,3m}.txt, summary.txt.
# Exit status: non-zero if any check or gate failed, a rung faulted or ran out of time (timings never fail it);
# 3 if nvcc failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-build-sm90check}"
mkdir -p "$out"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
CUOBJDUMP="${CUOBJDUMP:-$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)}"
start=$SECONDS
"$NVCC" -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -o "$out/sm90_fwd_check" \
  bench/glr/sm90_fwd_check.cu 2>"$out/ptxas.txt" || { cat "$out/ptxas.txt"; exit 3; }
echo "nvcc: $((SECONDS - start)) s"
grep -A3 -E "Compiling entry function '_ZN3glr4cuda4sm903gdn" "$out/ptxas.txt" | grep -E "entry|registers|spill" || true
status=0
bench/glr/ptxas_c7519.sh "$out/ptxas.txt" | tee "$out/ptxas_c7519.txt" || status=1
if [ -x "$CUOBJDUMP" ]; then
  "$CUOBJDUMP" -sass "$out/sm90_fwd_check" >"$out/sass.txt"
  echo "SASS: HMMA $(grep -c HMMA "$out/sass.txt") HGMMA $(grep -c HGMMA "$out/sass.txt") LDSM $(grep -c LDSM "$out/sass.txt") LDGSTS $(grep -c LDGSTS "$out/sass.txt") (whole binary)"
fi
# SASS gate: rung 3's state kernel on wgmma (gdn_state_wgmma.cuh, the default) must hold HGMMA in every instantiation.
if [ -s "$out/sass.txt" ]; then
  awk '/Function :/ { name = $3; if (name ~ /state_t_wgmma_kernel/) n[name] = 0 } /HGMMA/ && name ~ /state_t_wgmma_kernel/ { n[name]++ }
       END { for (k in n) printf "%s: HGMMA %d\n", k, n[k] }' "$out/sass.txt" >"$out/sass_wgmma.txt"
  cat "$out/sass_wgmma.txt"
  if [ ! -s "$out/sass_wgmma.txt" ] || grep -q "HGMMA 0$" "$out/sass_wgmma.txt"; then
    echo "SASS: FAIL (gdn::state_t_wgmma_kernel missing or without HGMMA)"
    status=1
  fi
fi
deadline=$((start + 235))  # the whole script, nvcc included, within 4 minutes
for rung in 3 3m 2 1; do  # 3m: rung 3 with its state kernel on mma.sync at every width (GLR_FWD_WGMMA=0)
  limit=45
  reserve=${rung%m}; reserve=$((reserve - 1))  # rungs still to run after this one, 20 s kept for each
  [ "$rung" = 3 ] && limit=100 && reserve=3
  [ "$rung" = 3m ] && limit=60
  left=$((deadline - SECONDS - 20 * reserve))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 10 ]; then
    echo "rung $rung: TIMEOUT (not run: the 4-minute budget is spent)" | tee "$out/check_rung$rung.txt"
    status=1
    continue
  fi
  echo "== rung $rung (limit $limit s)"
  rc=0
  if [ "$rung" = 3m ]; then
    GLR_FWD_WGMMA=0 timeout "$limit" "$out/sm90_fwd_check" --rung 3 "$@" >"$out/check_rung$rung.txt" 2>&1 || rc=$?
  else
    timeout "$limit" "$out/sm90_fwd_check" --rung "$rung" "$@" >"$out/check_rung$rung.txt" 2>&1 || rc=$?
  fi
  cat "$out/check_rung$rung.txt"
  if [ "$rc" -ne 0 ]; then
    status=1
    [ "$rc" -eq 124 ] && echo "rung $rung: TIMEOUT after $limit s"
  fi
done
{
  echo "== summary ($((SECONDS - start)) s)"
  head -1 "$out/ptxas_c7519.txt"
  grep -h -E "FAIL|^timing|resident|error|usage|TIMEOUT|\.cu:[0-9]+:" "$out"/check_rung*.txt || true
  for rung in 3 3m 2 1; do
    f="$out/check_rung$rung.txt"
    echo "rung $rung: $(grep -c '| PASS$' "$f" || true) PASS, $(grep -c '| FAIL$' "$f" || true) FAIL case lines; $(grep -q '^ALL PASS$' "$f" && echo 'ALL PASS' || echo 'NOT ALL PASS')"
  done
  [ "$status" -eq 0 ] && echo "sm90 forward check: PASS" || echo "sm90 forward check: FAIL"
  echo "exit status $status"
} | tee "$out/summary.txt"
exit $status
