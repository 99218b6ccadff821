#!/usr/bin/env bash
# Builds glr's CUDA pieces here (no GPU needed) and packs, stripped, what the GPU machine runs into
# build-glrcuda/carry/{bin,lib}: the GPU tests, the kgate entry libraries of the kernels, the CPU
# reference's kgate library (the float64 oracle), the benchmark's C library, and kgate itself.
# Carry build-glrcuda/carry and .whl; then run tests/glrcuda/run_gpu.sh there.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build-glrcuda}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "${JOBS:-2}" --target glrcuda_gpu_tests glr_cuda_kgate_fwd glr_cuda_kgate_bwd \
  glr_cuda_capi glr_kgate_fwd glr_kgate_bwd kgate kgate-worker
out=$build/carry
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
strip -o "$out/bin/glrcuda_gpu_tests" "$build/tests/glrcuda/glrcuda_gpu_tests"
strip -o "$out/bin/kgate" "$build/tools/kgate"
strip -o "$out/bin/kgate-worker" "$build/tools/kgate-worker"
for l in glr_cuda_kgate_fwd.so glr_cuda_kgate_bwd.so libglr_cuda_capi.so; do
  strip -o "$out/lib/$l" "$build/glr/cuda/$l"
done
for l in libglr_kgate_fwd.so libglr_kgate_bwd.so; do strip -o "$out/lib/$l" "$build/glr/$l"; done
# .whl (the benchmark's wheels) is the GPU session's to bring; without it the carry is still complete for tests/kgate.
if [ -d .whl ]; then du -sh "$out" .whl; else du -sh "$out"; fi
