#!/usr/bin/env bash
# tests/glr_sm90/run_emu_bwd.sh: run the sm90 tensor-core backward (glr/cuda/sm90/gdn_bwd_mma.cuh) on the host
# emulator (no GPU) at 8 small shapes (state slices of 64, 32 and 16 columns) against a float64 recurrence, then
# planted NaN/Inf in v, kgate's contract sweep and bf16 g / beta cases; with arguments B T H h0 dht mu [vt] one case,
# with "planted" (v and kgate's nan/inf rule: NaN, +Inf, -Inf in every input, g at a sequence's first token among
# them), "rule" (the rule cases alone), "sweep", "bf16", "gva" or "shapes" that subset; "varlen": packed sequences
# (emu_bwd_varlen.inc, not in the default run); "k64": every family's K = V = 64 cases alone (GLR_EMU_K64=1 does
# that for any subset); "members": Mamba2, RetNet and linear attention (the kernels' kDelta = false instantiation:
# dense, GVA, K 64 and 128, planted, rule, packed), "members-quick" a subset (ctest glr_sm90_emu_bwd_members);
# GLR_EMU_MEMBER=1|2|3 makes the single case one of them. The kernels as the launcher picks them (glr/cuda/README.md):
# the chunk kernel on wgmma (gdn_bwd_wgmma.cuh; GLR_BWD_CHUNK_TMA=1: gdn_bwd_chunk_tma.cuh; GLR_BWD_WGMMA=0: chunk_kernel),
# the unsplit dh pass on wgmma (gdn_bwd_dh_wgmma.cuh; GLR_DH_WGMMA=0: dh_kernel, which split dh passes take either way);
# "wgmma" (5 cases) and "wgmma-all" (8) run both wgmma kernels and compare
# each case with chunk_kernel and dh_kernel word for word. "split" (6 cases) and "split-all" (10): the
# split-sequence h and dh passes in forced segments, against float64 and the unsplit run; GLR_EMU_SEGS=n splits the
# single case. "dh2": the dh pass as dh2_kernel (GLR_DH_2GEMM=1, gdn_bwd_dh2.cuh), each case against float64 and
# today's dh pass.
# Exit status non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build-emu
g++ -std=c++20 -O2 -DGLR_SM90_HOST_EMU -I/usr/local/cuda/include -o build-emu/glr_sm90_emu_bwd_check \
  tests/glr_sm90/emu_bwd_check.cpp glr/cuda/sm90/emu/emu_launch.cpp -lpthread
build-emu/glr_sm90_emu_bwd_check "$@"
