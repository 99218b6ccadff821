#!/usr/bin/env bash
# Inputs and references before and after an engine change are the same bits: draws.cpp linked against two
# kgate_core libraries (e.g. a build of the tree before the change and one after), run on 1 thread and on
# the default count. Usage: bench/kgate/host/same_draws.sh OLD/libkgate_core.a NEW/libkgate_core.a
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for k in old new; do
  lib=$([ $k = old ] && echo "$1" || echo "$2")
  g++ -O2 -std=c++20 -DFMT_HEADER_ONLY=1 -I"$here/../../../include" "$here/draws.cpp" "$lib" -lpthread -o "$tmp/$k"
done
"$tmp/old" > "$tmp/old.txt"
"$tmp/new" > "$tmp/new.txt"
KGATE_HOST_THREADS=1 "$tmp/new" > "$tmp/new1.txt"
cmp "$tmp/old.txt" "$tmp/new.txt" && cmp "$tmp/old.txt" "$tmp/new1.txt" && echo "same draws and references ($(wc -l < "$tmp/old.txt") draws)"
