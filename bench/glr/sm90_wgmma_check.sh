#!/usr/bin/env bash
# bench/glr/sm90_wgmma_check.sh: build and run the wgmma wrapper check (bench/glr/sm90_wgmma_check.cu) on a
# Hopper GPU, well under a minute. From the repository root: bench/glr/sm90_wgmma_check.sh
# NOT YET RUN ON A GPU (written 2026-12-04 with no GPU lent): it is meant for the next GPU session. What it
# settles: whether the descriptor encoding, the canonical layouts (every swizzle, K- and MN-major), the
# register-A and accumulator layouts, the mbarrier / named-barrier / bulk-copy wrappers of
# glr/cuda/sm90/wgmma.cuh, the 2-D TMA boxes' placement and the pipelined producer/consumer GEMM (TMA producer
# warpgroup, full/empty mbarrier ring, wgmma consumer warpgroups, setmaxnreg; also never run on a GPU) match the
# hardware, i.e. whether the host emulator
# (tests/glr_sm90/emu_wgmma.hpp, same kernels and cases, all passing there) models them as an H200 executes
# them. Each case prints one line ending in PASS or FAIL; the faults (wrong SBO, swizzle mode, transpose bit)
# must come out wrong ("PASS (wrong, as it must be)"). On a FAIL the emulator is wrong too: fix both together.
# Also: ptxas report and SASS instruction counts (HGMMA must be there: exit 4 otherwise; cuobjdump needs
# nvdisasm on PATH). Files under $OUT (or build-wgmmacheck/): ptxas.txt, sass.txt, check.txt, the binary.
# ptxas gate: no C7519 (a warpgroup.arrive injected by ptxas) in any kernel (bench/glr/ptxas_c7519.sh).
# Exit status: 0 all pass; 1 a case failed or the run faulted; 3 nvcc failed; 4 no HGMMA in the SASS; 5 all cases
# passed but ptxas reported C7519.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-build-wgmmacheck}"
mkdir -p "$out"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
CUOBJDUMP="${CUOBJDUMP:-$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)}"
start=$SECONDS
"$NVCC" -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -o "$out/sm90_wgmma_check" \
  bench/glr/sm90_wgmma_check.cu 2>"$out/ptxas.txt" || { cat "$out/ptxas.txt"; exit 3; }
echo "nvcc: $((SECONDS - start)) s"
grep -E "registers|spill" "$out/ptxas.txt" | sort | uniq -c | head -20 || true
c7519=0
bench/glr/ptxas_c7519.sh "$out/ptxas.txt" || c7519=1
if [ -x "$CUOBJDUMP" ] || command -v "$CUOBJDUMP" >/dev/null 2>&1; then
  "$CUOBJDUMP" -sass "$out/sm90_wgmma_check" >"$out/sass.txt"
  hgmma=$(grep -c 'HGMMA\.' "$out/sass.txt" || true)
  echo "SASS: HGMMA $hgmma (64x64x16 $(grep -c 'HGMMA\.64x64x16' "$out/sass.txt" || true)," \
    "64x128x16 $(grep -c 'HGMMA\.64x128x16' "$out/sass.txt" || true)," \
    "A from registers $(grep -cE 'HGMMA\.[^ ]+ R[0-9]+, R[0-9]+, gdesc' "$out/sass.txt" || true))" \
    "WARPGROUP.ARRIVE $(grep -c 'WARPGROUP\.ARRIVE' "$out/sass.txt" || true)" \
    "SYNCS $(grep -c 'SYNCS\.' "$out/sass.txt" || true) UBLKCP $(grep -c 'UBLKCP' "$out/sass.txt" || true)" \
    "UTMALDG $(grep -c 'UTMALDG' "$out/sass.txt" || true) UTMASTG $(grep -c 'UTMASTG' "$out/sass.txt" || true)" \
    "USETMAXREG $(grep -c 'USETMAXREG' "$out/sass.txt" || true)"
  [ "$hgmma" -gt 0 ] || { echo "no HGMMA in the SASS"; exit 4; }
else
  echo "SASS: not checked (no cuobjdump at $CUOBJDUMP; pip's nvidia-cuda-cuobjdump + nvidia-cuda-nvdisasm have it)"
fi
rc=0
timeout 120 "$out/sm90_wgmma_check" >"$out/check.txt" 2>&1 || rc=$?
cat "$out/check.txt"
[ "$rc" -eq 0 ] || { echo "sm90_wgmma_check: exit $rc"; exit 1; }
[ "$c7519" -eq 0 ] || { echo "sm90_wgmma_check: FAIL (ptxas C7519, above)"; exit 5; }
