#!/usr/bin/env bash
# Builds flashjit with the `ci` preset (warnings are errors) and runs the whole test suite.
# GPU tests (label `gpu`) run too when a GPU is present; without one they are excluded and
# this script says so.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
# The Python packages (PyTorch's among them) install while flashjit builds; apt works alone.
python_deps_log=$(mktemp)
bash tools/install-python-deps.sh >"$python_deps_log" 2>&1 &
python_deps=$!
cmake --preset ci >/dev/null
cmake --build --preset ci

# Tests must not touch the user's kernel cache.
export FLASHJIT_CACHE_DIR=${FLASHJIT_CACHE_DIR:-$(mktemp -d)/flashjit-test-cache}
ctest --preset ci
if build/ci/tools/flashjit info | grep -q '^gpu 0:'; then
  ctest --test-dir build/ci -L gpu --output-on-failure
else
  echo "flashjit: no GPU on this machine: the GPU tests (ctest -L gpu) were not run"
fi

# The Python package, built from build/ci's objects, and its tests on the emulator.
if ! wait "$python_deps"; then
  cat "$python_deps_log" >&2
  echo "flashjit: installing the Python packages failed" >&2
  exit 1
fi
bash tools/test-python.sh build/ci
