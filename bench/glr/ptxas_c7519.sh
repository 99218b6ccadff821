#!/usr/bin/env bash
# bench/glr/ptxas_c7519.sh PTXAS_LOG: the C7519 gate of the sm90 check scripts (sm90_check.sh, sm90_bwd_check.sh,
# sm90_wgmma_check.sh), on the stderr of nvcc -Xptxas -v. Property: no kernel got a warpgroup.arrive that ptxas
# injected itself ("(C7519) warpgroup.arrive is injected ... to allow use of registers in GMMA"); tolerance-free.
# Such an arrive waits for every wgmma in flight. ptxas injects one where an accumulator or register-A fragment is
# written, or a run-time branch taken, between wgmma.fence and the wgmmas of a group: glr/cuda/sm90/wgmma.cuh,
# wgmma_fence_operand, says how the kernels keep them out.
# Prints one line (PASS, or FAIL and the count of kernels), then each offending kernel with its count of C7519s.
# Exit status: 0 none, 1 some, 2 no readable log.
set -uo pipefail
log=${1:?usage: ptxas_c7519.sh PTXAS_LOG}
[ -r "$log" ] || { echo "ptxas C7519: no log at $log"; exit 2; }
hits=$(grep "(C7519)" "$log" | sed -E "s/.*function '([^']*)'.*/\1/" | sort | uniq -c)
if [ -z "$hits" ]; then
  echo "ptxas: PASS (no C7519: no warpgroup.arrive injected by ptxas)"
  exit 0
fi
demangle() { if command -v c++filt >/dev/null; then c++filt; else cat; fi; }
echo "ptxas: FAIL (C7519 in $(echo "$hits" | wc -l) kernel(s): ptxas injected warpgroup.arrive; see wgmma_fence_operand in glr/cuda/sm90/wgmma.cuh)"
echo "$hits" | while read -r n name; do echo "  $n x $(echo "$name" | demangle)"; done
exit 1
