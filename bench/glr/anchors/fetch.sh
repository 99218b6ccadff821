#!/usr/bin/env bash
# Downloads the wheels bench/glr/side_by_side.py needs on the GPU machine (which has no network) into
# .carry/anchors1 and .carry/anchors2 (.carry is gitignored; the lead carries each part into one device call,
# see bench/glr/README.md). Run HERE, with network, from anywhere in the repository:
#
#     bench/glr/anchors/fetch.sh
#
# wheels.txt beside this script names every wheel, its part and why it is there. After downloading, the script
# prints each wheel's Requires-Dist (extras left out) and fails if a requirement is neither in wheels.txt nor in
# the device image's package list (IMAGE_HAS below, from the device's KINDS.md), or if a part plus the tracked
# working tree (which every device call carries too) exceeds the 64 MiB a call carries, less 1 MiB of margin.
# A wheel in a part's folder that wheels.txt no longer puts there is removed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
py=${PYTHON:-python3}
tree_bytes=$(cd "$root" && git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
limit_bytes=${PART_LIMIT_BYTES:-$(( (63 << 20) - tree_bytes ))}
# Packages the device image already holds (KINDS.md "Python packages already there", read 2026-11-17).
IMAGE_HAS="torch numpy einops cloudpickle ml-dtypes psutil tqdm typing-extensions packaging setuptools triton"

platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
           --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
norm() { echo "$1" | tr 'A-Z_.' 'a-z--'; }

declare -A want=()
while read -r part spec _; do
  [[ -z "$part" || "$part" == \#* ]] && continue
  want[$(norm "${spec%%==*}")]=$part
  dest="$root/.carry/anchors$part"
  mkdir -p "$dest"
  if ls "$dest"/*.whl 2>/dev/null | grep -qi "/$(echo "${spec%%==*}" | tr '-' '_')-${spec##*==}-"; then
    echo "have $spec"
    continue
  fi
  "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
    -d "$dest" "$spec"
  echo "got  $spec"
done < "$here/wheels.txt"

status=0
for part in 1 2; do
  dest="$root/.carry/anchors$part"
  echo "== .carry/anchors$part"
  for w in "$dest"/*.whl; do  # wheels.txt moved this one to the other part (or dropped it)
    name=$(norm "$(basename "$w" | cut -d- -f1)")
    [[ "${want[$name]:-}" == "$part" ]] || { echo "   removed $(basename "$w"): wheels.txt puts it in part ${want[$name]:-none}"; rm -f "$w"; }
  done
  for w in "$dest"/*.whl; do
    printf '%10d  %s\n' "$(stat -c %s "$w")" "$(basename "$w")"
    # Requires-Dist without extras and without markers that exclude Linux / Python 3.12
    while read -r req; do
      [[ -z "$req" ]] && continue
      name=$(norm "$(echo "$req" | sed -E 's/^([A-Za-z0-9_.-]+).*/\1/')")
      marker=$(echo "$req" | sed -n 's/.*;\s*//p')
      if [[ -n "$marker" ]]; then
        case "$marker" in
          *extra*|*Darwin*|*Windows*|*'< "3.9"'*|*"< '3.9'"*) continue ;;
        esac
      fi
      if [[ -n "${want[$name]:-}" ]]; then where="carried, part ${want[$name]}"
      elif [[ " $IMAGE_HAS " == *" $name "* ]]; then where="in the device image"
      else where="MISSING"; status=1; fi
      echo "            requires $req  ->  $where"
    done < <(unzip -p "$w" '*.dist-info/METADATA' | sed -n 's/^Requires-Dist: //p' | tr -d '\r')
  done
  (cd "$dest" && sha256sum ./*.whl > SHA256SUMS)
  total=$(du -cb "$dest"/*.whl | tail -1 | cut -f1)
  echo "   part $part: $total bytes ($((total / 1048576)) MiB; limit $limit_bytes bytes: 63 MiB less the tracked tree's $tree_bytes)"
  if (( total > limit_bytes )); then echo "   part $part is over the limit" >&2; status=1; fi
done
exit $status
