#!/usr/bin/env bash
# bench/glr/ncu_source.sh: on which SASS instructions (and source lines) one glr kernel's warps stall, and on what
# reason, from Nsight Compute's warp-state sampling (the SourceCounters section) of one launch in one warm
# forward+backward. ncu_kernels.sh gives each kernel's stall reasons summed over the kernel; this gives them per
# instruction (bench/glr/ncu_source_table.py's tables). On the GPU machine, from the repository root:
#
#   bench/glr/ncu_source.sh KERNEL_REGEX [SHAPE]     SHAPE default B8_T4096_H16_K128 (side_by_side.py --dry-run lists
#                                                    them); KERNEL_REGEX a regex searched in the name as ncu demangles
#                                                    it, bools as 1 / 0 (ncu.md's kernel column): 'dh_wgmma_kernel<64,
#                                                    128, 1, 0, 0>' for dh_wgmma_kernel<64, 128, true, false, false>
# Builds glr's extension with nvcc -lineinfo into build-py/glr-gpu-lineinfo (GLR_NVCC_FLAGS, python/glr/setup.py; its
# objects in python/glr/build-nvcc-flags, so the plain build-py/glr-gpu and its objects are left alone; ~1.5 min,
# reused while the sources are the same), then profiles the first launch matching KERNEL_REGEX inside
# side_by_side.py --profile-pass's warm call (--profile-from-start off, as ncu_kernels.sh). Writes under
# $OUT/ncu-source/ (NAME: KERNEL_REGEX with each run of characters other than [A-Za-z0-9_] made one '_'):
#   NAME.ncu-rep          the report (open it in ncu-ui: Source page, SASS beside the imported .cu/.cuh)
#   NAME.csv              ncu -i REPORT --page source --csv --print-source sass: one row per SASS instruction
#   NAME.sass             the profiled kernel's nvdisasm -g -c text (its source lines), when cuobjdump and nvdisasm
#                         are found
#   NAME.cuda_sass.csv    the same page with --print-source cuda,sass (not read here: to see that view's layout)
#   NAME.details.csv      ncu -i REPORT --page details --csv (WarpStateStats' stalls an issue, SourceCounters)
#   NAME.md               the tables: python3 bench/glr/ncu_source_table.py --sass NAME.sass NAME.csv
#   NAME.log, build.log   the profiled process's output, the extension build's
# The ncu options relied on, as NVIDIA's Nsight Compute CLI manual names them (from memory: the stored copy of the
# manual could not be searched on 2026-12-07; other projects' scripts for ncu 2025 / CUDA 13.1 use the same export
# line; not yet checked against this ncu's --help): -k regex: with --kernel-name-base demangled (so template
# arguments can be named) and --launch-count 1 (one launch); --section SourceCounters (the warp-state sampling: the
# source page's per-instruction stall_* columns) and WarpStateStats (the kernel's stalls an issue, to set beside
# ncu_table.py's); --import-source yes (the .cu/.cuh text into the report, for ncu-ui; needs -lineinfo);
# --clock-control none (the device notes: leave the clocks alone); -i REPORT --page source --csv --print-source sass
# to export (the manual does not give that page's CSV layout: ncu_source_table.py reads it by column names, and its
# test says which layout it assumes). The sass view has no source lines, so they come from nvdisasm -g of the same
# build (ncu_source_table.py --sass finds the kernel there by its code).
# Capped at 540 s in all (TOTAL_S) and 300 s for the profiled run (PROFILE_S). Exit status 0 when the table was
# written, 1 when the build, the profile or the export failed (NAME.log / build.log say why), 2 on a usage error.
set -uo pipefail
cd "$(dirname "$0")/../.."
regex="${1:-}"
shape="${2:-B8_T4096_H16_K128}"
out="${OUT:-build-bench}"
dir="$out/ncu-source"
site="build-py/glr-gpu-lineinfo"
total_s="${TOTAL_S:-540}"
profile_s="${PROFILE_S:-300}"
start=$(date +%s)
if [ -z "$regex" ] || [ $# -gt 2 ]; then
  echo "usage: bench/glr/ncu_source.sh KERNEL_REGEX [SHAPE]   (e.g. 'dh_wgmma_kernel<64, 128, 1, 0, 0>')" >&2
  exit 2
fi
if ! command -v ncu >/dev/null; then
  echo "ncu_source.sh: no ncu on the PATH" >&2
  exit 2
fi
mkdir -p "$dir"
python3 bench/glr/side_by_side.py --dry-run --shapes "$shape" --checks none >/dev/null 2>"$dir/usage.err" || {
  echo "ncu_source.sh: shape $shape: $(tail -1 "$dir/usage.err")" >&2
  exit 2
}
name=$(printf '%s' "$regex" | tr -c 'A-Za-z0-9_' '_' | tr -s '_')
export GLR_NVCC_FLAGS="-lineinfo"  # also in the build's source stamp: this site is never taken for the plain build

# The -lineinfo extension, outside ncu (a build under ncu would inject it into every nvcc process).
python3 - "$site" "$dir" >"$dir/build.log" 2>&1 <<'EOF'
import sys
sys.path.insert(0, "bench/glr")
from side_by_side_impls import finish_glr_build, glr_build_plan, start_glr_build
site, out = sys.argv[1:3]
needed, why, stamp = glr_build_plan(site, "auto")
ok, note = finish_glr_build(site, start_glr_build(site, why, out), stamp) if needed else (True, why)
print(note)
sys.exit(0 if ok else 1)
EOF
rc=$?
echo "build: $(tail -1 "$dir/build.log") (rc $rc, $(($(date +%s) - start)) s)"
if [ "$rc" -ne 0 ]; then
  [ -f "$dir/glr_build.log" ] && tail -20 "$dir/glr_build.log"
  exit 1
fi

left=$((total_s - ($(date +%s) - start) - 60))  # 60 s kept for the exports and the table
t=$((profile_s < left ? profile_s : left))
if [ "$t" -lt 30 ]; then
  echo "ncu_source.sh: no time left to profile (budget of ${total_s} s)" >&2
  exit 1
fi
rm -f "$dir/$name.ncu-rep" "$dir/$name.csv" "$dir/$name.md"
PYTHONUNBUFFERED=1 timeout "$t" ncu --clock-control none --profile-from-start off \
  --kernel-name-base demangled -k "regex:$regex" --launch-count 1 \
  --section SourceCounters --section WarpStateStats --import-source yes -f -o "$dir/$name" \
  python3 bench/glr/side_by_side.py --profile-pass --impls glr --shapes "$shape" --checks none \
  --glr-site "$site" --glr-build never --out "$dir/sbs" >"$dir/$name.log" 2>&1
rc=$?
echo "profile: rc $rc in $(($(date +%s) - start)) s"
if [ "$rc" -ne 0 ] || [ ! -s "$dir/$name.ncu-rep" ]; then
  echo "ncu_source.sh: no report for '$regex' (rc $rc; $dir/$name.log: $(tail -1 "$dir/$name.log"))" >&2
  grep -E "==(PROF|WARNING|ERROR)==" "$dir/$name.log" | tail -5 >&2
  exit 1
fi
rep="$dir/$name.ncu-rep"
ncu -i "$rep" --page source --csv --print-source sass >"$dir/$name.csv" 2>"$dir/$name.export.err"
rc=$?
ncu -i "$rep" --page source --csv --print-source cuda,sass >"$dir/$name.cuda_sass.csv" 2>/dev/null ||
  echo "cuda,sass view: not exported by this ncu (rc $?)"
ncu -i "$rep" --page details --csv >"$dir/$name.details.csv" 2>/dev/null || echo "details page: not exported"
echo "export: rc $rc, $(grep -c '' "$dir/$name.csv") CSV lines"
if [ "$rc" -ne 0 ]; then
  echo "ncu_source.sh: export failed: $(tail -1 "$dir/$name.export.err")" >&2
  exit 1
fi

# The build's SASS with its source lines: every cubin of the extension (the table keeps the profiled kernel's part).
sass_args=()
CUOBJDUMP="${CUOBJDUMP:-$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)}"
NVDISASM="${NVDISASM:-$(command -v nvdisasm || echo /usr/local/cuda/bin/nvdisasm)}"
so=$(ls "$site"/glr/_C*.so 2>/dev/null | head -1)
if [ -x "$CUOBJDUMP" ] && [ -x "$NVDISASM" ] && [ -n "$so" ]; then
  tmp=$(mktemp -d)
  (cd "$tmp" && timeout 60 "$CUOBJDUMP" -xelf all "$OLDPWD/$so" >/dev/null 2>&1)
  for c in "$tmp"/*.cubin; do  # one per .cu of the extension (~1 min in all for the 126 backward kernels' cubin)
    [ -f "$c" ] && timeout 90 "$NVDISASM" -g -c "$c" >>"$tmp/all.sass" 2>/dev/null
  done
  if [ -s "$tmp/all.sass" ]; then
    sass_args=(--sass "$tmp/all.sass" --sass-out "$dir/$name.sass")
  else
    echo "source lines: no SASS from $CUOBJDUMP -xelf / $NVDISASM -g on $so"
  fi
else
  echo "source lines: left out (cuobjdump at $CUOBJDUMP, nvdisasm at $NVDISASM, extension '${so:-none}')"
fi
python3 bench/glr/ncu_source_table.py "${sass_args[@]}" "$dir/$name.csv" >"$dir/$name.md"
rc=$?
[ -n "${tmp:-}" ] && rm -rf "$tmp"
{
  echo
  echo "Build: $(tail -1 "$dir/build.log") (the source stamp names the tree; git HEAD of a device copy can be stale)"
  gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)
  echo "Command: bench/glr/ncu_source.sh '$regex' $shape | $gpu | ncu $(ncu --version 2>/dev/null | tail -1) |" \
    "commit $(git rev-parse --short HEAD 2>/dev/null) | $(date -u '+%Y-%m-%d %H:%M UTC')"
} >>"$dir/$name.md"
cat "$dir/$name.md"
echo "done in $(($(date +%s) - start)) s"
[ "$rc" -eq 0 ] || exit 1
