#!/usr/bin/env bash
# bench/glr/sm90_bwd_check.sh: build, check and time the tensor-core Gated DeltaNet backward on a Hopper GPU.
# From the repository root:   bench/glr/sm90_bwd_check.sh    (ends within 380 s: every stage has a timeout, cut to
#                                                             what is left of 380 s)
# Stages, logs under $OUT (or build-sm90bwd/):
#   1. nvcc -gencode=arch=compute_90a,code=sm_90a -Xptxas -v (ptxas.txt); registers, stack and spills of the gdn
#      kernels; a stack frame or spill in a backward kernel (gdn_bwd::*, and the forward's kernels it launches:
#      wy_kernel<3>, the split passes' state_t_kernel<.., 64, kStateOnly> and combine_kernel, and with GLR_H_WGMMA=1
#      state_t_wgmma_kernel<.., kStateOnly> and its h mode <.., true, true>) prints FAIL, and so does a ptxas C7519
#      (a warpgroup.arrive injected by ptxas) in any kernel (bench/glr/ptxas_c7519.sh).
#   2. cuobjdump -sass (sass.txt): HMMA / HGMMA / LDSM / LDGSTS per backward kernel; a backward kernel without HMMA
#      (chunk_wgmma_kernel, dh_wgmma_kernel, dh2_kernel, fused_bwd_kernel: without HGMMA): FAIL.
#   3. sm90_bwd_check --check (check.txt): the default kernels (chunk_wgmma_kernel; dh_wgmma_kernel for an unsplit
#      dh pass, dh_kernel for a split one; h_kernel; the switches: glr/cuda/README.md), 9 shapes up to B2 T4096 H4
#      against a float64 recurrence backward on the GPU, six gradients each (normwise and max relative error), bitwise
#      determinism over two runs; then 2 shapes with the split-sequence h and dh passes forced (B1 T2048 H2 in 4
#      segments, B2 T1000 H2 in 3: "split n").
#   4. sm90_bwd_check --timing (timing.txt): fwd (rung 3) and bwd at B8 T4096 H16, B4 T8192 H32, B1 T32768 H16,
#      median of 20, CUDA events, effective TFLOP/s by DESIGN.md's convention; then "split bwd" lines: the backward
#      and its h and dh passes at B1 T32768 H16 and H32 (H16 HV32's state-pass grid) unsplit and in the split rule's
#      segments (and half and twice them). Runs even if stage 3 failed.
#   5. GLR_DH_WGMMA=0 GLR_BWD_WGMMA=0 sm90_bwd_check --check (check_mma.txt): stage 3 on the mma.sync kernels the
#      defaults replaced (dh_kernel for every dh pass, chunk_kernel), the fallbacks the switches select, so they stay
#      checked on a GPU; a failure fails the script.
#   6. GLR_DH_WGMMA=0 sm90_bwd_check --timing (timing_dh_mma.txt): stage 4 with dh_kernel for the unsplit dh pass,
#      side by side with stage 4's "dh" column (the only kernel it replaces).
#  5b. GLR_DH_2GEMM=1 sm90_bwd_check --check (check_dh2.txt): stage 3 with the unsplit dh pass at 64-column slices
#      as dh2_kernel (gdn_bwd_dh2.cuh: the 2-GEMM chain, warp-specialized; opt-in, first run on a GPU here); a
#      failure fails the script.
#  6b. GLR_DH_2GEMM=1 sm90_bwd_check --timing (timing_dh2.txt): stage 4 with it, side by side with stage 4's "dh"
#      column (dh_wgmma_kernel, the only kernel it replaces; at the 16-column slices of B1 T32768 H16 and in the
#      split lines dh2_kernel does not apply: those columns are stage 4's kernels again).
#   7. GLR_H_WGMMA=1 sm90_bwd_check --check (check_h_wgmma.txt): stage 3 with the h pass on wgmma at 64-column
#      slices (state_t_wgmma_kernel's h mode and, split, its pass A: opt-in); a failure
#      fails the script. (Stage 4's first lines, "h pass ...", time the h pass with and without it.)
#   8. GLR_FUSED_BWD=1 sm90_bwd_check --check (check_fused.txt): stage 3 with the dh pass and chunk kernel as one
#      fused reverse sweep (fused_bwd_kernel, gdn_bwd_fused.cuh: opt-in); a failure fails
#      the script.
#   9. GLR_FUSED_BWD=1 sm90_bwd_check --timing (timing_fused.txt): stage 4 with it; its "dh" column is the fused
#      kernel (dh + chunk), "chunk" ~0: compare bwd and dh + chunk with stage 4's.
#  10. GLR_BWD_WGMMA=0 sm90_bwd_check --timing (timing_mma_chunk.txt): stage 4 with chunk_kernel (mma.sync), side
#      by side with stage 4's "chunk" column.
#  11. GLR_BWD_CHUNK_TMA=1 sm90_bwd_check --timing (timing_chunk_tma.txt): stage 4 with chunk_tma_kernel (the
#      persistent TMA-fed chunk kernel, opt-in), side by side with stage 4's "chunk" column (chunk_wgmma_kernel).
# Exit status: 0 when stages 1-3, 5, 7 and 8 pass, 1 when any check failed, 3 when nvcc failed. Timings never fail it.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-build-sm90bwd}"
mkdir -p "$out"
: >"$out/stages.txt"
say() { echo "$*" | tee -a "$out/stages.txt"; }
# Every stage's time limit is its own cap, cut so that the whole script ends within 380 s of starting.
start=$(date +%s)
limit() {  # limit CAP: seconds for the next stage (at least 1)
  local left=$((380 - ($(date +%s) - start)))
  local t=$(($1 < left ? $1 : left))
  echo $((t > 1 ? t : 1))
}
# run_stage MODE LOG LABEL [VAR=VALUE ...]: sm90_bwd_check MODE with the environment VAR=VALUE, its output to
# $out/LOG. --check: capped at 80 s, a failure fails the script; --timing: capped at 50 s, never fails it.
run_stage() {
  local mode=$1 log=$2 label=$3
  shift 3
  local t
  t=$(limit "$([ "$mode" = --check ] && echo 80 || echo 50)")
  env "$@" timeout "$t" "$out/sm90_bwd_check" "$mode" 2>&1 | tee "$out/$log"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 0 ]; then
    return 0
  elif [ "$mode" = --check ]; then
    say "$label: FAIL (exit status $rc; 124 = timed out after $t s)"
    status=1
  else
    say "$label: exit status $rc (124 = timed out after $t s); timings never fail the script"
  fi
}
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
CUOBJDUMP="${CUOBJDUMP:-$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)}"
status=0
echo "== 1. nvcc (sm_90a)"
if ! timeout "$(limit 100)" "$NVCC" -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -o "$out/sm90_bwd_check" \
    bench/glr/sm90_bwd_check.cu 2>"$out/ptxas.txt"; then
  tail -30 "$out/ptxas.txt"
  echo "FAIL: nvcc"
  exit 3
fi
# one line per gdn kernel: name, registers, stack, spills
awk '/Compiling entry function/ { match($0, /_ZN3glr4cuda4sm90[^'"'"']*/); name = substr($0, RSTART, RLENGTH); keep = (name != "") }
     keep && /stack frame/ { stack = $0 }
     keep && /Used [0-9]+ registers/ { match($0, /Used [0-9]+ registers/); print name ": " substr($0, RSTART, RLENGTH) " |" stack; keep = 0 }' \
  "$out/ptxas.txt" | sed 's/ptxas info    ://; s/  */ /g' | tee "$out/ptxas_gdn.txt"
# the gate covers the backward's kernels and the forward's rung-3 wy kernel it launches; the others are listed only
if grep -E "gdn_bwd|wy_kernelILi3E|state_t_kernelILb[01]ELi(64|128)ELi64ELb1E|state_t_wgmma_kernelILb[01]ELi(64|128)ELb1E|combine_kernel" "$out/ptxas_gdn.txt" |
  grep -E "[1-9][0-9]* bytes (stack frame|spill)" >/dev/null; then
  say "ptxas: FAIL (a backward kernel has a stack frame or spills)"
  status=1
else
  say "ptxas: PASS (no stack frame, no spills in the backward's kernels)"
fi
c7519=$(bench/glr/ptxas_c7519.sh "$out/ptxas.txt") || status=1
say "$c7519"
echo "== 2. SASS"
if [ -x "$CUOBJDUMP" ]; then
  timeout "$(limit 30)" "$CUOBJDUMP" -sass "$out/sm90_bwd_check" >"$out/sass.txt"
  awk '/Function :/ { name = $3 } /HMMA/ { h[name]++ } /LDSM/ { l[name]++ } /LDGSTS/ { c[name]++ } /HGMMA/ { g[name]++ } /HMMA|LDSM|LDGSTS/ { any[name] = 1 }
       END { for (n in any) if (n ~ /gdn/) printf "%s: HMMA %d HGMMA %d LDSM %d LDGSTS %d\n", n, h[n], g[n], l[n], c[n] }' \
    "$out/sass.txt" | sort | tee "$out/sass_counts.txt"
  say "SASS: $(grep -c HMMA "$out/sass.txt") HMMA, $(grep -c HGMMA "$out/sass.txt") HGMMA in the whole binary"
  for k in h_kernel dh_kernel chunk_kernel; do
    if ! grep -E "gdn_bwd[0-9]*${k}.*HMMA [1-9]" "$out/sass_counts.txt" >/dev/null; then
      say "SASS: FAIL (no HMMA in gdn_bwd::$k)"
      status=1
    fi
  done
  if ! grep -E "gdn_bwd[0-9]*chunk_wgmma_kernel.*HGMMA [1-9]" "$out/sass_counts.txt" >/dev/null; then
    say "SASS: FAIL (no HGMMA in gdn_bwd::chunk_wgmma_kernel)"
    status=1
  fi
  # the dh kernel on wgmma: every instantiation (slices of 64, 32, 16 columns; K = 64, 128; delta rule or not)
  if ! grep -E "gdn_bwd[0-9]*dh_wgmma_kernel" "$out/sass_counts.txt" >/dev/null ||
    grep -E "gdn_bwd[0-9]*dh_wgmma_kernel.*HGMMA 0 " "$out/sass_counts.txt" >/dev/null; then
    say "SASS: FAIL (no HGMMA in gdn_bwd::dh_wgmma_kernel)"
    status=1
  fi
  # the dh pass as the 2-GEMM chain (dh2_kernel<K, true>: K = 64, 128)
  if ! grep -E "gdn_bwd[0-9]*dh2_kernel" "$out/sass_counts.txt" >/dev/null ||
    grep -E "gdn_bwd[0-9]*dh2_kernel.*HGMMA 0 " "$out/sass_counts.txt" >/dev/null; then
    say "SASS: FAIL (no HGMMA in gdn_bwd::dh2_kernel)"
    status=1
  fi
  # the fused reverse sweep (fused_bwd_kernel<128, true>)
  if ! grep -E "gdn_bwd[0-9]*fused_bwd_kernel.*HGMMA [1-9]" "$out/sass_counts.txt" >/dev/null; then
    say "SASS: FAIL (no HGMMA in gdn_bwd::fused_bwd_kernel)"
    status=1
  fi
  # the h pass on wgmma (state_t_wgmma_kernel<kDelta, kD, true, true>: K = 64, 128; delta rule or not)
  if ! grep -E "state_t_wgmma_kernelILb[01]ELi(64|128)ELb1ELb1E" "$out/sass_counts.txt" >/dev/null ||
    grep -E "state_t_wgmma_kernelILb[01]ELi(64|128)ELb1ELb1E.*HGMMA 0 " "$out/sass_counts.txt" >/dev/null; then
    say "SASS: FAIL (no HGMMA in the h pass's state_t_wgmma_kernel<.., true, true>)"
    status=1
  fi
else
  say "SASS: cuobjdump not found, skipped"
fi
echo "== 3. check"
run_stage --check check.txt "check"
echo "== 4. timing"
run_stage --timing timing.txt "timing"
echo "== 5. check, dh and chunk kernels on mma.sync (GLR_DH_WGMMA=0 GLR_BWD_WGMMA=0)"
run_stage --check check_mma.txt "check (mma.sync dh and chunk kernels)" GLR_DH_WGMMA=0 GLR_BWD_WGMMA=0
echo "== 6. timing, dh kernel on mma.sync (GLR_DH_WGMMA=0)"
run_stage --timing timing_dh_mma.txt "timing (dh_kernel)" GLR_DH_WGMMA=0
echo "== 5b. check, dh pass as the 2-GEMM chain (GLR_DH_2GEMM=1)"
run_stage --check check_dh2.txt "check (dh2_kernel)" GLR_DH_2GEMM=1
echo "== 6b. timing, dh pass as the 2-GEMM chain (GLR_DH_2GEMM=1)"
run_stage --timing timing_dh2.txt "timing (dh2_kernel)" GLR_DH_2GEMM=1
echo "== 7. check, h pass on wgmma (GLR_H_WGMMA=1)"
run_stage --check check_h_wgmma.txt "check (wgmma h pass)" GLR_H_WGMMA=1
echo "== 8. check, fused reverse sweep (GLR_FUSED_BWD=1)"
run_stage --check check_fused.txt "check (fused sweep)" GLR_FUSED_BWD=1
echo "== 9. timing, fused reverse sweep (GLR_FUSED_BWD=1)"
run_stage --timing timing_fused.txt "timing (fused sweep)" GLR_FUSED_BWD=1
echo "== 10. timing, chunk kernel on mma.sync (GLR_BWD_WGMMA=0)"
run_stage --timing timing_mma_chunk.txt "timing (chunk_kernel)" GLR_BWD_WGMMA=0
echo "== 11. timing, chunk kernel on TMA (GLR_BWD_CHUNK_TMA=1: chunk_tma_kernel)"
run_stage --timing timing_chunk_tma.txt "timing (chunk_tma_kernel)" GLR_BWD_CHUNK_TMA=1
echo "== summary"
cat "$out/stages.txt"
grep -h -E "PASS$|FAIL|CHECK" "$out/check.txt" || true
grep -h -E "^h pass|^timing|resident|^  \(bwd|^split bwd" "$out/timing.txt" || true
echo "-- dh and chunk kernels on mma.sync (GLR_DH_WGMMA=0 GLR_BWD_WGMMA=0):"
grep -h -E "FAIL|CHECK" "$out/check_mma.txt" || true
echo "-- dh kernel on mma.sync (GLR_DH_WGMMA=0):"
grep -h -E "^timing|resident" "$out/timing_dh_mma.txt" || true
echo "-- dh pass as the 2-GEMM chain (GLR_DH_2GEMM=1; dh column = dh2_kernel at 64-column slices):"
grep -h -E "FAIL|CHECK" "$out/check_dh2.txt" || true
grep -h -E "^timing|resident" "$out/timing_dh2.txt" || true
echo "-- h pass on wgmma (GLR_H_WGMMA=1):"
grep -h -E "FAIL|CHECK" "$out/check_h_wgmma.txt" || true
echo "-- fused reverse sweep (GLR_FUSED_BWD=1; dh column = fused_bwd_kernel):"
grep -h -E "FAIL|CHECK" "$out/check_fused.txt" || true
grep -h -E "^timing|^  \(bwd|^split bwd" "$out/timing_fused.txt" || true
echo "-- chunk kernel on mma.sync (GLR_BWD_WGMMA=0):"
grep -h -E "^timing|resident" "$out/timing_mma_chunk.txt" || true
echo "-- chunk kernel on TMA (GLR_BWD_CHUNK_TMA=1, chunk_tma_kernel; stage 4 ran chunk_wgmma_kernel):"
grep -h -E "^timing|resident" "$out/timing_chunk_tma.txt" || true
echo "exit status $status ($(($(date +%s) - start)) s)"
exit $status
