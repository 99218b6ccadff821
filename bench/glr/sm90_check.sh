#!/usr/bin/env bash
# bench/glr/sm90_check.sh: build and run the tensor-core Gated DeltaNet forward check on a Hopper GPU.
# From the repository root:   bench/glr/sm90_check.sh          (about 1-2 minutes: ~30-40 s nvcc, checks of 3 rungs at 10 shapes, timing)
#                             bench/glr/sm90_check.sh --quick  (small shapes only, no timing)
# Rungs 3, 2, 1 (glr/cuda/sm90/gdn_fwd_mma.cuh) each in its own process, at most 200 s each.
# Prints the registers/shared memory/spills of the kernels, the count of HMMA instructions in their SASS,
# one line per checked shape (PASS/FAIL), then timings at B8 T4096 H16, B4 T8192 H32, B1 T32768 H16.
# Exit status: non-zero if any rung's check failed or faulted (timings never fail it); 3 if nvcc failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-build-sm90check}"
mkdir -p "$out"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
CUOBJDUMP="${CUOBJDUMP:-$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)}"
"$NVCC" -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -o "$out/sm90_fwd_check" \
  bench/glr/sm90_fwd_check.cu 2>"$out/ptxas.txt" || { cat "$out/ptxas.txt"; exit 3; }
grep -A3 -E "Compiling entry function '_ZN3glr4cuda4sm903gdn" "$out/ptxas.txt" | grep -E "entry|registers|spill" || true
if [ -x "$CUOBJDUMP" ]; then
  "$CUOBJDUMP" -sass "$out/sm90_fwd_check" >"$out/sass.txt"
  echo "SASS: HMMA $(grep -c HMMA "$out/sass.txt") HGMMA $(grep -c HGMMA "$out/sass.txt") LDSM $(grep -c LDSM "$out/sass.txt") LDGSTS $(grep -c LDGSTS "$out/sass.txt") (whole binary)"
fi
# One process per rung: a fault in one rung (the context is lost) leaves the others' results.
status=0
for rung in 3 2 1; do
  echo "== rung $rung"
  timeout 200 "$out/sm90_fwd_check" --rung "$rung" "$@" 2>&1 | tee "$out/check_rung$rung.txt" || status=1
done
echo "== summary"
grep -h -E "FAIL|PASS$|^timing|resident|error|usage" "$out"/check_rung*.txt | grep -v "^v.*PASS$" || true
for rung in 1 2 3; do echo "rung $rung: $(grep -c 'PASS$' "$out/check_rung$rung.txt" || true) PASS lines (11 when all 10 shapes and ALL PASS)"; done
echo "exit status $status"
exit $status
