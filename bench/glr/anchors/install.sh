#!/usr/bin/env bash
# Installs one carried part of the anchors' wheels (.carry/anchors1, .carry/anchors2, ..., made by fetch.sh) on
# the GPU machine, offline, into a folder outside the working tree that lives as long as the machine stays warm:
#
#     bench/glr/anchors/install.sh PART          (from the repository root; PART is 1, 2, ...)
#
# Target: ${GLR_ANCHORS:-/tmp/glr-anchors}/site (side_by_side.py puts that folder on sys.path). A fresh machine
# starts bare, so all parts must go in on the same machine: issue each call within the 30 s the machine stays
# warm after the one before. A part whose lower-numbered parts are not installed here is still installed, with
# a warning naming them. Re-running a part already installed (same SHA256SUMS) does nothing.
# A wheel split across two parts (wheels.txt "split:A,B"; both parts' SPLIT files name it, its SHA-256 and
# size): each part's piece is kept under ${GLR_ANCHORS}/pieces; once both are there they are joined, the whole
# wheel's SHA-256 checked, and it is installed (with the part that brings the second piece to arrive).
set -euo pipefail
part=${1:?usage: install.sh PART (1, 2, ...)}
[[ "$part" =~ ^[1-9][0-9]*$ ]] || { echo "install.sh: PART '$part' is not a part number (1, 2, ...)" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../../.." && pwd)
src="$root/.carry/anchors$part"
base=${GLR_ANCHORS:-/tmp/glr-anchors}
site="$base/site"
py=${PYTHON:-python3}
t0=$(date +%s)
if ! compgen -G "$src/*.whl" > /dev/null && ! compgen -G "$src/*.piece[12]" > /dev/null; then
  echo "install.sh: $src holds no wheels: run bench/glr/anchors/fetch.sh where there is network, and carry" \
       ".carry/anchors$part into this call (carry: [\".carry/anchors$part\"])" >&2
  exit 2
fi
(cd "$src" && sha256sum --quiet -c SHA256SUMS) || { echo "install.sh: $src: checksums differ from SHA256SUMS" >&2; exit 2; }
mkdir -p "$site"
missing_parts=""
for ((p = 1; p < part; p++)); do [[ -f "$base/part$p.sha256" ]] || missing_parts+=" $p"; done
if [[ -n "$missing_parts" ]]; then
  echo "install.sh: WARNING: part(s)$missing_parts not installed on this machine: a fresh machine since an earlier" \
       "call? Without them fla and FlashQLA will not load (their rows will say so); start again at call 1." >&2
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
  cp "$src"/*.piece[12] "$base/pieces/"
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
      echo "install.sh: $name: its piece in part $part kept in $base/pieces; it is installed when the other piece arrives"
    fi
  done < "$src/SPLIT"
fi
if [[ ${#wheels[@]} -gt 0 ]]; then
  "$py" -m pip install -q --root-user-action=ignore --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "${wheels[@]}"
fi
cp "$src/SHA256SUMS" "$base/part$part.sha256"
echo "install.sh: part $part ($(for w in "${wheels[@]}"; do basename "$w"; done | tr '\n' ' ')) into $site in $(( $(date +%s) - t0 )) s"
