#!/usr/bin/env bash
# tests/glr_sm90/run_emu_bwd.sh: run the sm90 tensor-core backward (glr/cuda/sm90/gdn_bwd_mma.cuh) on the host
# emulator (no GPU) at 7 small shapes against a float64 recurrence; with 6 arguments (B T H h0 dht mu) one case.
# Exit status non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build-emu
g++ -std=c++20 -O2 -DGLR_SM90_HOST_EMU -I/usr/local/cuda/include -o build-emu/glr_sm90_emu_bwd_check \
  tests/glr_sm90/emu_bwd_check.cpp -lpthread
build-emu/glr_sm90_emu_bwd_check "$@"
