#!/usr/bin/env bash
# On the GPU machine, from the repository root, with build-glrcuda/carry (tests/glrcuda/make_carry.sh)
# and .whl carried:
#
#     bash tests/glrcuda/run_gpu.sh [tests] [kgate] [bench] [sass]   (default: tests kgate bench)
#
# tests: the gpu-labelled tests (error table against the float64 oracle, determinism, device-only
#        offsets, per-stage diffs, the forward's and the backward's dispatch to the sm90 tensor-core kernels,
#        the kgate entry points); kgate: `kgate verify` of every contract in glr/contracts/cuda and
#        glr/contracts/sm90 (the tensor-core forward and backward, every member)
#        against the kernels, with the CPU reference's float64 oracle (KGATE_JOBS at once, default 1); bench: the
#        side-by-side benchmark against flash-linear-attention; sass: cuobjdump of the kernels (local-memory
#        and barrier counts per kernel). Full logs go to $OUT (or /tmp/glrcuda-out);
#        a short summary is printed last; the logs end up in $OUT/logs.tgz beside summary.txt (GLRCUDA_PACK=0: loose).
set -uo pipefail
cd "$(dirname "$0")/../.."
carry=${CARRY:-build-glrcuda/carry}
out=${OUT:-/tmp/glrcuda-out}
mkdir -p "$out"
export GLRCUDA_LIB_DIR=$PWD/$carry/lib
phases=${*:-tests kgate bench}
summary=$out/summary.txt
: > "$summary"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$summary"
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')  $(date -u +%Y-%m-%dT%H:%MZ)" | tee -a "$summary"

if [[ " $phases " == *" tests "* ]]; then
  start=$SECONDS
  "$carry/bin/glrcuda_gpu_tests" --gtest_color=no > "$out/gpu_tests.log" 2>&1
  rc=$?
  {
    echo "== gpu tests: exit $rc ($((SECONDS - start)) s); full log and error table: gpu_tests.log"
    sed -n '/^\[==========\] .* ran/,$p' "$out/gpu_tests.log" | grep -vE "^ *$|YOU HAVE"
    grep -E "^bitwise determinism|^(forward|backward) dispatch:" "$out/gpu_tests.log"
    # the error table: the worst ratio to its bound per output, and every failing row
    grep -E "^\| (o|ht|dq|dk|dv|dg|dbeta|dh0) \|" "$out/gpu_tests.log" |
      awk -F'|' '{r=$6/$7; o=$2; if (r>w[o]) {w[o]=r; at[o]=$3"/"$4"/"$5}} $8 ~ /FAIL/ {print "FAIL:" $0}
                 END {for (o in w) printf "  worst %-6s err/bound %.3f at %s\n", o, w[o], at[o]}'
    grep -E "^  stages of|^    [A-Za-z_+]+ +[0-9.e+-]+$" "$out/gpu_tests.log" | head -40
  } | tee -a "$summary"
fi

if [[ " $phases " == *" kgate "* ]]; then
  # KGATE_JOBS contracts at once (default 1): each verify is one small process on the one GPU, so a few at once
  # share it well; the summary lines come in the contracts' order either way.
  njobs=${KGATE_JOBS:-1}
  echo "== kgate verify (seed ${KGATE_SEED:-1}, $njobs at once); logs: kgate_*.log" | tee -a "$summary"
  contract_name() {  # contract_name CONTRACT: the name its log, JSON and summary line go under
    if [[ $1 == */sm90/* ]]; then echo "sm90_$(basename "$1" .toml)"; else basename "$1" .toml; fi
  }
  verify_one() {  # verify_one CONTRACT: one contract's verify; its summary line into $out/kgate_NAME.line
    local c=$1 name pass sym rc bad
    name=$(contract_name "$c")
    pass=fwd
    [[ $name == *_bwd ]] && pass=bwd
    # glr/contracts/cuda judge the block programs (kgate_run_blocks, both passes); glr/contracts/sm90 what the
    # API dispatches to (kgate_run: on sm_90 the tensor-core forward for these bf16 calls, and the tensor-core
    # backward for the *_bwd contracts' calls: every member, K = V = 64 or 128, GVA, packed sequences, bf16 or
    # fp32 g and beta).
    sym=kgate_run_blocks
    [[ $c == */sm90/* ]] && sym=kgate_run
    "$carry/bin/kgate" verify --contract "$c" --kernel "$carry/lib/glr_cuda_kgate_$pass.so:$sym" \
      --oracle "$carry/lib/libglr_kgate_$pass.so" --seed "${KGATE_SEED:-1}" --json "$out/kgate_$name.json" \
      > "$out/kgate_$name.log" 2>&1
    rc=$?
    bad=$(sed -n '/^gate/,/^result/p' "$out/kgate_$name.log" | awk 'NR>1 && $2!="PASS" && $1!="result:" && NF>1 {printf "%s=%s ", $1, $2}')
    if ! grep -q "^gate " "$out/kgate_$name.log"; then bad=$(grep -m1 -iE "error" "$out/kgate_$name.log" | cut -c1-150); fi
    printf "  %-38s exit %d  %s\n" "$name" "$rc" "${bad:-all PASS}" > "$out/kgate_$name.line"
  }
  contracts=(glr/contracts/cuda/*.toml glr/contracts/sm90/*.toml)
  start=$SECONDS
  for c in "${contracts[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$njobs" ]; do wait -n; done
    verify_one "$c" &
  done
  wait
  for c in "${contracts[@]}"; do
    name=$(contract_name "$c")
    cat "$out/kgate_$name.line" 2>/dev/null || printf "  %-38s no result\n" "$name"
    rm -f "$out/kgate_$name.line"
  done | tee -a "$summary"
  echo "== kgate verify: ${#contracts[@]} contracts in $((SECONDS - start)) s" | tee -a "$summary"
fi

if [[ " $phases " == *" bench "* ]]; then
  start=$SECONDS
  python3 bench/glr/bench_glr.py --lib "$carry/lib/libglr_cuda_capi.so" --wheels .whl > "$out/bench.log" 2>&1
  rc=$?
  { echo "== bench: exit $rc ($((SECONDS - start)) s); log: bench.log"; grep -E "^#|^\|" "$out/bench.log"; tail -3 "$out/bench.log" | grep -iE "error|Traceback" ; } | tee -a "$summary"
fi
if [[ " $phases " == *" sass "* ]]; then
  # The disassembly (cuobjdump is on the GPU image, not on the build machine): per kernel, local-memory
  # instructions (LDL/STL: spills or stack arrays), barriers and any matrix instruction.
  cuobjdump -sass "$carry/lib/libglr_cuda_capi.so" > "$out/sass.txt" 2>&1
  echo "== sass (sass.txt): kernel, LDL+STL, BAR, HMMA/HGMMA" | tee -a "$summary"
  awk '/Function :/ {f=$3; n[f]=0} /LDL|STL/ {l[f]++} /BAR/ {b[f]++} /HMMA|HGMMA/ {m[f]++}
       END {for (k in n) printf "  %-70s %4d %4d %4d\n", substr(k, 1, 70), l[k], b[k], m[k]}' "$out/sass.txt" |
    sort | tee -a "$summary"
fi
# A device call returns at most 8 files of $OUT: every log goes into one logs.tgz beside summary.txt (set
# GLRCUDA_PACK=0 to keep them loose).
if [ "${GLRCUDA_PACK:-1}" != 0 ]; then
  (cd "$out" && find . -maxdepth 1 -type f ! -name summary.txt ! -name logs.tgz ! -name .packed -printf '%f\n' | sort > .packed &&
    tar -czf logs.tgz -T .packed && xargs -a .packed rm -f && rm -f .packed)
  echo "== logs packed into $out/logs.tgz" | tee -a "$summary"
fi
echo "== summary in $summary"
