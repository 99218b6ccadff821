#!/usr/bin/env bash
# Installs one carried part of the anchors' wheels (.carry/anchors1 or .carry/anchors2, made by fetch.sh) on the
# GPU machine, offline, into a folder outside the working tree that lives as long as the machine stays warm:
#
#     bench/glr/anchors/install.sh PART          (from the repository root; PART is 1 or 2)
#
# Target: ${GLR_ANCHORS:-/tmp/glr-anchors}/site (side_by_side.py puts that folder on sys.path). A fresh machine
# starts bare, so part 1 and part 2 must go in on the same machine: issue the second call within the 30 s the
# machine stays warm after the first. Re-running a part already installed (same SHA256SUMS) does nothing.
# A wheel split across the parts (wheels.txt "split"; the part's SPLIT file names it, its SHA-256 and size):
# each part's piece is kept under ${GLR_ANCHORS}/pieces; once both are there they are joined, the whole
# wheel's SHA-256 checked, and it is installed (with part 2, in the order the calls come).
set -euo pipefail
part=${1:?usage: install.sh PART (1 or 2)}
root=$(cd "$(dirname "$0")/../../.." && pwd)
src="$root/.carry/anchors$part"
base=${GLR_ANCHORS:-/tmp/glr-anchors}
site="$base/site"
py=${PYTHON:-python3}
t0=$(date +%s)
if ! ls "$src"/*.whl "$src"/*.piece[12] > /dev/null 2>&1; then
  echo "install.sh: $src holds no wheels: run bench/glr/anchors/fetch.sh where there is network, and carry" \
       ".carry/anchors$part into this call (carry: [\".carry/anchors$part\"])" >&2
  exit 2
fi
(cd "$src" && sha256sum --quiet -c SHA256SUMS) || { echo "install.sh: $src: checksums differ from SHA256SUMS" >&2; exit 2; }
mkdir -p "$site"
if [[ "$part" == 2 && ! -f "$base/part1.sha256" ]]; then
  echo "install.sh: WARNING: part 1 (fla-core, z3-solver, tilelang's first piece) is not installed on this machine:" \
       "a fresh machine since call 1? Without it fla and FlashQLA will not load (their rows will say so); run" \
       "call 1 again first." >&2
fi
if [[ -f "$base/part$part.sha256" ]] && cmp -s "$base/part$part.sha256" "$src/SHA256SUMS"; then
  echo "install.sh: part $part already installed in $site"
  exit 0
fi
# --upgrade: replaces this part's packages if an older copy is there; the parts hold disjoint packages.
wheels=()
for w in "$src"/*.whl; do [[ -e "$w" ]] && wheels+=("$w"); done
mkdir -p "$base/pieces"
if [[ -f "$src/SPLIT" ]]; then
  cp "$src"/*.piece"$part" "$base/pieces/"
  while read -r name sum size; do
    [[ -z "$name" ]] && continue
    if [[ -f "$base/pieces/$name.piece1" && -f "$base/pieces/$name.piece2" ]]; then
      cat "$base/pieces/$name.piece1" "$base/pieces/$name.piece2" > "$base/pieces/$name"
      got=$(sha256sum "$base/pieces/$name" | cut -d' ' -f1)
      [[ "$got" == "$sum" && "$(stat -c %s "$base/pieces/$name")" == "$size" ]] ||
        { echo "install.sh: $name joined from its pieces does not match SPLIT (sha256 $got)" >&2; exit 2; }
      wheels+=("$base/pieces/$name")
      echo "install.sh: $name joined from its two pieces ($size bytes, sha256 as fetched)"
    else
      echo "install.sh: $name: piece $part kept in $base/pieces; it is installed when the other part arrives"
    fi
  done < "$src/SPLIT"
fi
if [[ ${#wheels[@]} -gt 0 ]]; then
  "$py" -m pip install -q --root-user-action=ignore --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "${wheels[@]}"
fi
cp "$src/SHA256SUMS" "$base/part$part.sha256"
echo "install.sh: part $part ($(for w in "${wheels[@]}"; do basename "$w"; done | tr '\n' ' ')) into $site in $(( $(date +%s) - t0 )) s"
