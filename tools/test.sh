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

if ! wait "$python_deps"; then
  cat "$python_deps_log" >&2
  echo "flashjit: installing the Python packages failed" >&2
  exit 1
fi

# Tests must not touch the user's kernel cache. Both suites share one: the disk cache is safe
# for concurrent processes, and a kernel one suite compiles the other finds.
export FLASHJIT_CACHE_DIR=${FLASHJIT_CACHE_DIR:-$(mktemp -d)/flashjit-test-cache}

# The Python package, built from build/ci's objects, and its tests on the emulator, beside
# CTest: pytest runs one test at a time, so alone it would leave a core of two idle for minutes.
python_log=$(mktemp)
bash tools/test-python.sh build/ci >"$python_log" 2>&1 &
python_tests=$!

ctest_status=0
ctest --preset ci || ctest_status=$?
python_status=0
wait "$python_tests" || python_status=$?
echo "flashjit: the Python package's tests (tools/test-python.sh build/ci):"
cat "$python_log"

# The GPU's suites alone on it, after the Python tests (which use it too where there is one).
if ((ctest_status == 0)); then
  if build/ci/tools/flashjit info | grep -q '^gpu 0:'; then
    ctest --test-dir build/ci -L gpu --output-on-failure || ctest_status=$?
  else
    echo "flashjit: no GPU on this machine: the GPU tests (ctest -L gpu) were not run"
  fi
fi
if ((python_status != 0)); then
  echo "flashjit: the Python package's tests failed (exit status $python_status)" >&2
fi
if ((ctest_status != 0)); then
  echo "flashjit: CTest failed (exit status $ctest_status)" >&2
  exit "$ctest_status"
fi
exit "$python_status"
