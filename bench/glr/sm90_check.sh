#!/usr/bin/env bash
# bench/glr/sm90_check.sh: build and run the tensor-core Gated DeltaNet forward check on a Hopper GPU.
# From the repository root:   bench/glr/sm90_check.sh          (about 1-2 minutes: ~30-40 s nvcc, checks of 3 rungs at 10 shapes, timing)
#                             bench/glr/sm90_check.sh --quick  (small shapes only, no timing)
# Prints the registers/shared memory/spills of the kernels, the count of HMMA instructions in their SASS,
# one line per checked shape (PASS/FAIL), then timings at B8 T4096 H16, B4 T8192 H32, B1 T32768 H16.
# Exit status: the program's (non-zero on any failed check; timings never fail it).
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
"$out/sm90_fwd_check" "$@" 2>&1 | tee "$out/check.txt"
