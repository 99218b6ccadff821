#!/usr/bin/env bash
# The session's kernels on the GPU: (1) every shape with the new defaults (chunk_tma_kernel, length-aware split),
# kernels per row, float64 checks; (2) each change against the old path (A/B timing, same machine);
# (3) outputs and gradients compared across the switches at production shapes (switch_diff).
set -uo pipefail
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $OUT/new /tmp/ab
PYTHONUNBUFFERED=1 timeout 200 python3 bench/glr/side_by_side.py --impls glr --kernels 3 --budget-s 180 --out $OUT/new > $OUT/new.log 2>&1
tail -3 $OUT/new.log
S=B8_T4096_H16_K128,B4_T8192_H32_K128,B1_T32768_H16_HV32_K128,varlen32k_H16_K128,varlen32k_H16_HV32_K128
run() { name=$1; shift; mkdir -p /tmp/ab/$name; env "$@" PYTHONUNBUFFERED=1 timeout 50 python3 bench/glr/side_by_side.py \
  --impls glr --checks none --shapes $S --kernels 3 --glr-build never --out /tmp/ab/$name > /tmp/ab/$name.log 2>&1;
  cp /tmp/ab/$name/side_by_side.md $OUT/ab_$name.md 2>/dev/null
  echo "== $name $*"; grep -E "^\| (B|v)[^|]*\| glr" /tmp/ab/$name/side_by_side.md | head -5 | cut -d'|' -f2,4,5; }
run tma_off GLR_BWD_CHUNK_TMA=0
run nosplit GLR_FORWARD_SPLIT=1 GLR_BACKWARD_SPLIT=1
PYTHONUNBUFFERED=1 timeout 110 python3 bench/glr/switch_diff.py --out $OUT default tma_off:GLR_BWD_CHUNK_TMA=0 \
  nosplit:GLR_FORWARD_SPLIT=1,GLR_BACKWARD_SPLIT=1 dh2:GLR_DH_2GEMM=1 --shapes B8_T4096_H16_K128,B1_T32768_H16_HV32_K128,varlen32k_H16_K128 > /tmp/ab/switch_diff.log 2>&1
grep -E "failed|ran in" /tmp/ab/switch_diff.log | head -20
run dh2 GLR_DH_2GEMM=1
tar -C /tmp -czf $OUT/ab_logs.tgz ab --exclude='*.json' 2>/dev/null
