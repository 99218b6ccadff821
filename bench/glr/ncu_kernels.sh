#!/usr/bin/env bash
# bench/glr/ncu_kernels.sh: the bytes and tensor-pipe activity of every kernel of one warm forward+backward, per
# shape and implementation, from Nsight Compute's counters, beside the copy ceiling measured in the same call.
# Answers what CUDA events cannot: is a kernel bound by its DRAM traffic (near the copy ceiling: fewer bytes make
# it faster) or by latency / its serial chain (far below it, tensor pipes idle)? And, for the second, what its warps
# wait on (ncu's stall reasons per issued instruction: loads, barriers, shared memory; ncu_table.py's second table). On the GPU machine, from the
# repository root (glr's extension is built as side_by_side.py builds it if missing; the anchors need
# bench/glr/anchors/install.sh's two calls first, as side_by_side.py does):
#
#   bench/glr/ncu_kernels.sh [SHAPES [IMPLS]]     defaults: B8_T4096_H16_K128,B1_T32768_H16_HV32_K128,varlen32k_H16_K128
#                                                 and glr (comma-separated; names as side_by_side.py --dry-run lists)
# Writes $OUT/ncu/<shape>.<impl>.csv (ncu --csv --page raw --print-units base), $OUT/ncu/<shape>.<impl>.log (the
# profiled process's output), $OUT/ncu/metrics.txt (which counters this ncu has), and $OUT/ncu.md (the tables,
# bench/glr/ncu_table.py). ncu runs with --clock-control none (the device notes: leave the clocks alone) and
# --profile-from-start off: side_by_side.py --profile-pass opens the profiler around one warm call per pair.
# Each pair is capped at 150 s and the whole script at 540 s (PAIR_S, TOTAL_S); a pair that fails says so in
# ncu.md and the others go on. Exit status 0 when every pair gave a table, 1 otherwise, 2 on a usage error.
set -uo pipefail
cd "$(dirname "$0")/../.."
shapes="${1:-B8_T4096_H16_K128,B1_T32768_H16_HV32_K128,varlen32k_H16_K128}"
impls="${2:-glr}"
out="${OUT:-build-bench}"
dir="$out/ncu"
mkdir -p "$dir"
pair_s="${PAIR_S:-150}"
total_s="${TOTAL_S:-540}"
start=$(date +%s)
if ! command -v ncu >/dev/null; then
  echo "ncu_kernels.sh: no ncu on the PATH" >&2
  exit 2
fi
for s in ${shapes//,/ }; do  # refuse unknown names before any GPU work (side_by_side.py's own list)
  python3 bench/glr/side_by_side.py --dry-run --shapes "$s" --checks none >/dev/null 2>"$dir/usage.err" || {
    echo "ncu_kernels.sh: shape $s: $(tail -1 "$dir/usage.err")" >&2
    exit 2
  }
done
for i in ${impls//,/ }; do
  case "$i" in glr | fla | flashqla) ;; *)
    echo "ncu_kernels.sh: implementation $i: use glr, fla or flashqla" >&2
    exit 2
    ;;
  esac
done

# The copy ceiling on this card, read + written bytes counted (as the table's DRAM TB/s): a 2 GiB bf16 copy,
# median of 10 after 3 (bench/glr/timing.py's median_ms, as side_by_side.py's matmul peak).
copy=$(python3 - <<'EOF'
import sys
sys.path.insert(0, "bench/glr")
import torch
from timing import median_ms
a = torch.empty(1 << 30, dtype=torch.bfloat16, device="cuda").normal_()
b = torch.empty_like(a)
ms = median_ms(lambda: b.copy_(a), 3, 10, 1e9)[0]
print(f"{2 * a.numel() * a.element_size() / (ms * 1e-3) / 1e12:.3f}")
EOF
)
echo "copy ceiling: ${copy:-?} TB/s (2 GiB bf16 copy, read + written bytes, median of 10)" | tee "$dir/ceiling.txt"

# The counters ncu_table.py reads, those this ncu knows (a name it does not know would stop the whole run).
ncu --query-metrics --chip gh100 >"$dir/metrics.txt" 2>&1 || true
want=$(python3 -c "import sys; sys.path.insert(0, 'bench/glr'); import ncu_table; print(' '.join(ncu_table.WANTED))")
have=()
for m in $want; do
  base=${m%%.*}
  case "$base" in
    launch__*) have+=("$m") ;;  # launch attributes: always recorded, not always in the counter list
    *) if grep -qE "(^|[[:space:]])${base}([[:space:]]|$)" "$dir/metrics.txt"; then have+=("$m")
       else echo "ncu here has no $base: column left out"; fi ;;
  esac
done
if [ ${#have[@]} -eq 0 ]; then
  echo "ncu_kernels.sh: none of the counters found in 'ncu --query-metrics' (see $dir/metrics.txt)" >&2
  exit 1
fi
metrics=$(IFS=,; echo "${have[*]}")

ok=1
files=()
for s in ${shapes//,/ }; do
  for i in ${impls//,/ }; do
    left=$((total_s - ($(date +%s) - start)))
    if [ "$left" -lt 20 ]; then
      echo "$s $i: not run (time budget of ${total_s} s spent)" | tee -a "$dir/skipped.txt"
      ok=0
      continue
    fi
    t=$((pair_s < left ? pair_s : left))
    csv="$dir/$s.$i.csv"
    rm -f "$csv"
    PYTHONUNBUFFERED=1 timeout "$t" ncu --clock-control none --profile-from-start off --csv --page raw \
      --print-units base --metrics "$metrics" --log-file "$csv" \
      python3 bench/glr/side_by_side.py --profile-pass --impls "$i" --shapes "$s" --checks none \
      --out "$dir/sbs" >"$dir/$s.$i.log" 2>&1
    rc=$?
    echo "$s $i: rc $rc in $(($(date +%s) - start)) s; $(grep -c '' "$csv" 2>/dev/null || echo 0) CSV lines"
    if [ "$rc" -ne 0 ] || ! grep -q "Kernel Name" "$csv" 2>/dev/null; then
      echo "$s $i: no profile (rc $rc; $dir/$s.$i.log: $(tail -1 "$dir/$s.$i.log"))" | tee -a "$dir/skipped.txt"
      ok=0
      continue
    fi
    files+=("$csv")
  done
done
{
  echo "# Kernels of one warm forward+backward under Nsight Compute"
  echo
  echo "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null) | commit $(git rev-parse --short HEAD 2>/dev/null) | $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "Command: bench/glr/ncu_kernels.sh $shapes $impls; $(cat "$dir/ceiling.txt")"
  echo
  [ -f "$dir/skipped.txt" ] && sed 's/^/- /' "$dir/skipped.txt" && echo
  if [ ${#files[@]} -gt 0 ]; then
    python3 bench/glr/ncu_table.py ${copy:+--copy-tbs "$copy"} "${files[@]}" || ok=0
  fi
} >"$out/ncu.md"
cat "$out/ncu.md"
[ "$ok" -eq 1 ]
