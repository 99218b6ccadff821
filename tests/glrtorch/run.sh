#!/usr/bin/env bash
# glr in PyTorch: builds the glr package (python/glr, its C++ ops against the installed torch) into
# build-py/glrtorch-site and runs pytest on tests/glrtorch. Uses the first of $PYTHON, python3,
# /usr/bin/python3 that imports torch (Debian's python3-torch is /usr/bin/python3's); exits 77 (ctest: skipped)
# when none does. The extension's objects stay in python/glr/build, so a rebuild compiles only what changed.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=""
for cand in ${PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c "import torch, pytest" 2>/dev/null; then py=$cand; break; fi
done
if [ -z "$py" ]; then
  echo "glrtorch: no Python with torch and pytest (scripts/bootstrap installs Debian's python3-torch)"
  exit 77
fi
site=build-py/glrtorch-site
rm -rf "$site"
MAX_JOBS=${MAX_JOBS:-2} $py -m pip install -q --no-build-isolation --no-deps --target "$site" ./python/glr
cd "$site"  # import the built copy
PYTHONPATH="$PWD" exec $py -m pytest -q -p no:cacheprovider ../../tests/glrtorch "$@"
