#!/usr/bin/env bash
# The Python front-end's tests (no torch, no GPU): builds the kgate package with its nanobind module into
# build-py/site (never touching the system site-packages) and runs pytest on tests/python against it.
# Needs from PyPI: nanobind, scikit-build-core (build), numpy, pytest (run); installs the first two if missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-python3}
need=()
$py -c "import nanobind" 2>/dev/null || need+=(nanobind)
$py -c "import scikit_build_core" 2>/dev/null || need+=(scikit-build-core)
if [ ${#need[@]} -gt 0 ]; then
  $py -m pip install -q "${need[@]}" 2>/dev/null || $py -m pip install -q --break-system-packages "${need[@]}"
fi
site=build-py/site
rm -rf "$site"
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
  $py -m pip install -q --no-build-isolation --no-deps --target "$site" ./python
cd "$site"  # import the built copy, not python/ (which has no extension)
PYTHONPATH="$PWD" exec $py -m pytest -q -p no:cacheprovider ../../tests/python "$@"
