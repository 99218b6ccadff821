#!/bin/sh
# check_sass.sh LIBRARY PATTERN: the library's SASS must contain an instruction matching PATTERN (an
# extended regex). Exit 77 (ctest SKIP) when no cuobjdump can be found.
lib=$1 pattern=$2
tool=$(command -v cuobjdump || true)
for d in "${CUDA_HOME:-}" /usr/local/cuda "$(dirname "$(command -v nvcc 2>/dev/null || echo /none/x)")/.."; do
  [ -z "$tool" ] && [ -n "$d" ] && [ -x "$d/bin/cuobjdump" ] && tool=$d/bin/cuobjdump
done
if [ -z "$tool" ]; then echo "SKIP: no cuobjdump on this machine"; exit 77; fi
count=$("$tool" --dump-sass "$lib" | grep -Ec "$pattern")
echo "$lib: $count SASS instructions match $pattern"
[ "$count" -gt 0 ]
