#!/usr/bin/env bash
# Installs one carried part of the anchors' wheels (.carry/anchors1 or .carry/anchors2, made by fetch.sh) on the
# GPU machine, offline, into a folder outside the working tree that lives as long as the machine stays warm:
#
#     bench/glr/anchors/install.sh PART          (from the repository root; PART is 1 or 2)
#
# Target: ${GLR_ANCHORS:-/tmp/glr-anchors}/site (side_by_side.py puts that folder on sys.path). A fresh machine
# starts bare, so part 1 and part 2 must go in on the same machine: issue the second call within the 30 s the
# machine stays warm after the first. Re-running a part already installed (same SHA256SUMS) does nothing.
set -euo pipefail
part=${1:?usage: install.sh PART (1 or 2)}
root=$(cd "$(dirname "$0")/../../.." && pwd)
src="$root/.carry/anchors$part"
base=${GLR_ANCHORS:-/tmp/glr-anchors}
site="$base/site"
py=${PYTHON:-python3}
t0=$(date +%s)
if ! ls "$src"/*.whl > /dev/null 2>&1; then
  echo "install.sh: $src holds no wheels: run bench/glr/anchors/fetch.sh where there is network, and carry" \
       ".carry/anchors$part into this call (carry: [\".carry/anchors$part\"])" >&2
  exit 2
fi
(cd "$src" && sha256sum --quiet -c SHA256SUMS) || { echo "install.sh: $src: checksums differ from SHA256SUMS" >&2; exit 2; }
mkdir -p "$site"
if [[ "$part" == 2 && ! -f "$base/part1.sha256" ]]; then
  echo "install.sh: WARNING: part 1 (tilelang, fla-core) is not installed on this machine: a fresh machine since" \
       "call 1? Without it fla and FlashQLA will not load (their rows will say so); run call 1 again first." >&2
fi
if [[ -f "$base/part$part.sha256" ]] && cmp -s "$base/part$part.sha256" "$src/SHA256SUMS"; then
  echo "install.sh: part $part already installed in $site"
  exit 0
fi
# --upgrade: replaces this part's packages if an older copy is there; the parts hold disjoint packages.
"$py" -m pip install -q --root-user-action=ignore --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$src"/*.whl
cp "$src/SHA256SUMS" "$base/part$part.sha256"
echo "install.sh: part $part ($(ls "$src"/*.whl | xargs -n1 basename | tr '\n' ' ')) into $site in $(( $(date +%s) - t0 )) s"
