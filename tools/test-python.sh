#!/usr/bin/env bash
# Installs the Python package (python/) into a fresh virtual environment of Debian's python3
# (with its system packages: numpy, torch, pytest) and runs its tests on the CPU emulator.
# Usage: tools/test-python.sh [BUILD_DIR]; BUILD_DIR, a configured build folder of this
# repository (default build/python, configured on first use), is where libflashjit.so is built.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-python-deps.sh
# Tests must not touch the user's kernel cache.
export FLASHJIT_CACHE_DIR=${FLASHJIT_CACHE_DIR:-$(mktemp -d)/flashjit-test-cache}
build_dir=${1:-build/python}
venv="$build_dir/python-venv"
rm -rf "$venv"
/usr/bin/python3 -m venv --system-site-packages "$venv"
FLASHJIT_CMAKE_BUILD_DIR="$build_dir" "$venv/bin/python" -m pip install --quiet \
  --no-build-isolation --no-index ./python
# From the repository's root, so that the tests import the installed package, not python/.
"$venv/bin/python" -m pytest -q python/tests
