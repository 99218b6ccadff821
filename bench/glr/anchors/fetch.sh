#!/usr/bin/env bash
# Downloads the wheels bench/glr/side_by_side.py needs on the GPU machine (which has no network) into
# .carry/anchors1, .carry/anchors2, ... (.carry is gitignored; the lead carries each part into one device call,
# see bench/glr/README.md). Run HERE, with network, from anywhere in the repository:
#
#     bench/glr/anchors/fetch.sh
#
# wheels.txt beside this script names every wheel, its part (a number, or split:A,B) and why it is there. A
# split wheel is downloaded into .carry/anchors-whole and cut in two pieces (<wheel>.piece1 in part A, .piece2
# in part B) sized so that parts A and B are about equal; both parts' SPLIT files name the whole wheel, its
# SHA-256 and size, which install.sh checks after joining the pieces. After downloading, the script prints
# each wheel's Requires-Dist (extras left out) and fails if a requirement is neither in wheels.txt nor in the
# device image's package list (IMAGE_HAS below, from the device's KINDS.md), or if a part plus the tracked
# working tree (which every device call carries too) exceeds the 64 MiB a call carries, less 1 MiB of margin.
# Whatever a part's folder holds that wheels.txt no longer puts there is removed, and so are the folders of
# parts wheels.txt no longer has.
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
whole="$root/.carry/anchors-whole"
mkdir -p "$whole"
parts=()   # every part number wheels.txt names, in order
add_part() { [[ " ${parts[*]} " == *" $1 "* ]] || parts+=("$1"); mkdir -p "$root/.carry/anchors$1"; }
while read -r part spec _; do
  [[ -z "$part" || "$part" == \#* ]] && continue
  case "$part" in
    split:[0-9]*,[0-9]*) a=${part#split:}; add_part "${a%,*}"; add_part "${a#*,}"; dest=$whole ;;
    [0-9]*) add_part "$part"; dest="$root/.carry/anchors$part" ;;
    *) echo "fetch.sh: wheels.txt: part '$part' of $spec is neither a number nor split:A,B" >&2; exit 2 ;;
  esac
  want[$(norm "${spec%%==*}")]=$part
  if ls "$dest"/*.whl 2>/dev/null | grep -qi "/$(echo "${spec%%==*}" | tr '-' '_')-${spec##*==}-"; then
    echo "have $spec"
    continue
  fi
  "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
    -d "$dest" "$spec"
  echo "got  $spec"
done < "$here/wheels.txt"
mapfile -t parts < <(printf '%s\n' "${parts[@]}" | sort -n)

wheel_name() { norm "$(basename "$1" | cut -d- -f1)"; }
status=0
# Drop the folders of parts that are gone, what wheels.txt no longer puts where it is, and the old pieces (cut
# again below).
for d in "$root"/.carry/anchors[0-9]*; do
  [[ -d "$d" && " ${parts[*]} " != *" ${d##*/anchors} "* ]] && { echo "   removed ${d#$root/}: wheels.txt has no part ${d##*/anchors}"; rm -rf "$d"; }
done
for part in "${parts[@]}"; do
  dest="$root/.carry/anchors$part"
  rm -f "$dest"/*.piece[12] "$dest/SPLIT"
  for w in "$dest"/*.whl; do
    [[ -e "$w" ]] || continue
    [[ "${want[$(wheel_name "$w")]:-}" == "$part" ]] ||
      { echo "   removed $(basename "$w"): wheels.txt puts it in part ${want[$(wheel_name "$w")]:-none}"; rm -f "$w"; }
  done
done
part_bytes() { find "$root/.carry/anchors$1" -maxdepth 1 \( -name '*.whl' -o -name '*.piece[12]' \) -printf '%s\n' | awk '{s += $1} END {print s + 0}'; }
for w in "$whole"/*.whl; do
  [[ -e "$w" ]] || continue
  where=${want[$(wheel_name "$w")]:-}
  [[ "$where" == split:* ]] || { rm -f "$w"; continue; }
  a=${where#split:}; pa=${a%,*}; pb=${a#*,}
  sa=$(part_bytes "$pa"); sb=$(part_bytes "$pb")
  size=$(stat -c %s "$w")
  first=$(( (sa + sb + size) / 2 - sa ))
  (( first < 0 )) && first=0
  (( first > size )) && first=$size
  b=$(basename "$w")
  head -c "$first" "$w" > "$root/.carry/anchors$pa/$b.piece1"
  tail -c +"$((first + 1))" "$w" > "$root/.carry/anchors$pb/$b.piece2"
  for part in "$pa" "$pb"; do echo "$b $(sha256sum "$w" | cut -d' ' -f1) $size" >> "$root/.carry/anchors$part/SPLIT"; done
  echo "split $b ($size bytes): $first bytes into part $pa, $((size - first)) into part $pb"
done

for part in "${parts[@]}"; do
  dest="$root/.carry/anchors$part"
  echo "== .carry/anchors$part"
  for w in "$dest"/*.whl "$whole"/*.whl; do
    [[ -e "$w" ]] || continue
    if [[ "$w" == "$whole"/* ]]; then  # a split wheel: listed, with its requirements, under its first part
      where=${want[$(wheel_name "$w")]}; a=${where#split:}
      [[ "${a%,*}" == "$part" ]] || continue
    fi
    printf '%10d  %s\n' "$(stat -c %s "$w")" "$(basename "$w")$([[ "$w" == "$whole"/* ]] && echo " ($where)")"
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
      if [[ -n "${want[$name]:-}" ]]; then where_req="carried, part ${want[$name]}"
      elif [[ " $IMAGE_HAS " == *" $name "* ]]; then where_req="in the device image"
      else where_req="MISSING"; status=1; fi
      echo "            requires $req  ->  $where_req"
    done < <(unzip -p "$w" '*.dist-info/METADATA' | sed -n 's/^Requires-Dist: //p' | tr -d '\r')
  done
  (cd "$dest" && find . -maxdepth 1 \( -name '*.whl' -o -name '*.piece[12]' \) | LC_ALL=C sort | xargs -r sha256sum > SHA256SUMS)
  total=$(part_bytes "$part")
  echo "   part $part: $total bytes ($((total / 1048576)) MiB; limit $limit_bytes bytes: 63 MiB less the tracked tree's $tree_bytes)"
  if (( total > limit_bytes )); then echo "   part $part is over the limit" >&2; status=1; fi
done
exit $status
