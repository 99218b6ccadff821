#!/usr/bin/env bash
# tests/glr_sm90/run_emu.sh [--widths 32,16] [rungs | features [I ...] | inf | accumulation | split [I ...]]: run the sm90
# tensor-core kernels on the host emulator (no GPU): 3 rungs x 7 Gated DeltaNet shapes, then rung 3's 24 feature
# cases (GVA, packed sequences, bf16 g/beta, the other members, K = V = 64), then the split-sequence state pass
# forced (`split`: every member, GVA, h0/ht, packed, K = V = 64; each also against the unsplit pass); about
# 2 + 3 + 5 minutes on 2 idle cores.
# --widths: rung 3's state kernel also at those slice widths, each compared bit for bit with 64 (ctest
# glr_sm90_emu_slices). Exit status non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build-emu
g++ -std=c++20 -O2 -DGLR_SM90_HOST_EMU -I/usr/local/cuda/include -o build-emu/glr_sm90_emu_check \
  tests/glr_sm90/emu_check.cpp -lpthread
build-emu/glr_sm90_emu_check "$@"
