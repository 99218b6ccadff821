#!/usr/bin/env bash
# tests/glr_sm90/run_emu.sh: run the sm90 tensor-core kernels (3 rungs, 7 shapes) on the host emulator (no GPU),
# about 2 minutes on 2 cores. Exit status non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build-emu
g++ -std=c++20 -O2 -DGLR_SM90_HOST_EMU -I/usr/local/cuda/include -o build-emu/glr_sm90_emu_check \
  tests/glr_sm90/emu_check.cpp -lpthread
build-emu/glr_sm90_emu_check
