#!/usr/bin/env bash
# glr in PyTorch on the GPU machine (no network needed: PyTorch 2.x with CUDA, nvcc, ninja, setuptools).
#
#   python/glr/gpu_check.sh test     build glr._C with the CUDA kernels (sm_90a) into build-py/glr-gpu with the
#                                    installed torch, then run tests/glrtorch: the CPU tests, the CUDA ops
#                                    against the float64 oracle, the stream test and torch.compile(fullgraph)
#   python/glr/gpu_check.sh sweep [TASK [OUT [MINUTES [SWEEP ARGS...]]]]
#                                    every member on TASK (default mqar) through glr and through the
#                                    reference recurrence within MINUTES (default 7), results, results.md and
#                                    PNGs in OUT (default results/train/TASK); further arguments go to
#                                    python -m glr.sweep (results/train/README.md has the ones used there);
#                                    needs `test` (the build) first
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
py=${PYTHON:-python3}
site=build-py/glr-gpu
case "${1:-test}" in
  test)
    shift || true
    GLR_CUDA=1 MAX_JOBS=${MAX_JOBS:-$(nproc)} $py -m pip install -q --no-build-isolation --no-deps --target "$site" \
      ./python/glr
    cd "$site"
    PYTHONPATH="$PWD" exec $py -m pytest -q -p no:cacheprovider "$root/tests/glrtorch" "$@"
    ;;
  sweep)
    task=${2:-mqar}
    out=${3:-results/train/$task}
    minutes=${4:-7}
    shift $(( $# < 4 ? $# : 4 ))
    mkdir -p "$out"
    out=$(cd "$out" && pwd)
    cd "$site"
    PYTHONPATH="$PWD" exec $py -m glr.sweep --task "$task" --out "$out" --budget-min "$minutes" "$@"
    ;;
  *)
    echo "usage: $0 test [pytest args] | sweep [TASK [OUT [MINUTES]]]" >&2
    exit 2
    ;;
esac
