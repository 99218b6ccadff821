#!/usr/bin/env bash
# glr alone through its torch op: every shape, the checks, each row's kernels (--kernels 3); then the varlen
# shapes with the split state passes forced to 4 segments (the rule gives 1 there), kernels again.
set -uo pipefail
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
PYTHONUNBUFFERED=1 timeout 330 python3 bench/glr/side_by_side.py --impls glr --kernels 3 --budget-s 300 > $OUT/sbs.log 2>&1
tail -5 $OUT/sbs.log
mkdir -p $OUT/split4
GLR_FORWARD_SPLIT=4 GLR_BACKWARD_SPLIT=4 PYTHONUNBUFFERED=1 timeout 150 python3 bench/glr/side_by_side.py --impls glr \
  --checks check_varlen_H16_HV32_K128 --shapes varlen32k_H16_K128,varlen32k_H16_HV32_K128 --kernels 3 --glr-build never \
  --out $OUT/split4 > $OUT/split4.log 2>&1
tail -3 $OUT/split4.log
