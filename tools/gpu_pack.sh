#!/usr/bin/env bash
# Makes a small copy of a build folder with only what tools/gpu_run.sh uses on the GPU machine,
# so that it fits what a GPU session can carry across (64 MiB of ignored paths): the flashjit
# command, libflashjit.so (for bench/ and the Python package) and the emulator's archive, the
# training-step example, the executables of the GPU tests (CTest label `gpu`) and CTest's
# files, at the same relative paths, the binaries stripped of debug symbols. CTest's absolute paths are rewritten to the copy's; gpu_run.sh rewrites them
# again if the copy lands elsewhere on the GPU machine.
#
# With FLASHJIT_GPU_BEFORE=<commit> it also packs that commit's kernel templates (ops/) as
# templates-before/, for gpu_run.sh's before-after step.
#
# Usage: tools/gpu_pack.sh [BUILD_DIR] [PACK_DIR]   (default: build/release, build/gpu-pack)
# Build first: cmake --preset release && cmake --build --preset release
# Then, on the GPU machine: tools/gpu_run.sh OUT_DIR build/gpu-pack
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build/release}" && pwd)
pack=${2:-build/gpu-pack}
rm -rf "$pack"
mkdir -p "$pack"
pack=$(cd "$pack" && pwd)

# The GPU tests' executables, as CTest lists them.
mapfile -t gpu_tests < <(ctest --test-dir "$build" -N -L gpu --show-only=json-v1 |
  python3 -c 'import json, sys
for p in sorted({t["command"][0] for t in json.load(sys.stdin)["tests"] if t.get("command")}):
    print(p)')
if ((${#gpu_tests[@]} == 0)); then
  echo "gpu_pack.sh: CTest lists no GPU test in $build (build every target first)" >&2
  exit 1
fi

missing=0
copy() {  # path relative to the build folder
  if [[ -f $build/$1 ]]; then
    (cd "$build" && cp --parents "$1" "$pack/")
  else
    echo "gpu_pack.sh: warning: $build/$1 is missing (not built?)" >&2
    missing=$((missing + 1))
  fi
}

binaries=(tools/flashjit api/libflashjit.so examples/training_step)
for test in "${gpu_tests[@]}"; do
  binaries+=("${test#"$build"/}")
  # doctest's discovered test list for this executable.
  for list in "$test"_tests-*.cmake; do
    [[ -f $list ]] && copy "${list#"$build"/}"
  done
done
for file in "${binaries[@]}"; do copy "$file"; done
# The emulator's archive, where libflashjit.so looks for it: the Python package's tests (the
# python step) compile a kernel for the emulator when they need one the library lacks.
copy emulator/libflashjit_emulator.a
copy CMakeCache.txt
while IFS= read -r file; do copy "${file#./}"; done < <(
  cd "$build" && find . -name CTestTestfile.cmake -o -name '*_include-*.cmake')

# Release builds carry no debug info, but strip anyway (a RelWithDebInfo folder halves).
for file in "${binaries[@]}"; do
  [[ -f $pack/$file ]] && strip --strip-unneeded "$pack/$file"
done
grep -rlF --include='*.cmake' "$build" "$pack" | xargs -r sed -i "s|$build|$pack|g"
sed -i "s|^CMAKE_CACHEFILE_DIR:INTERNAL=.*|CMAKE_CACHEFILE_DIR:INTERNAL=$pack|" \
  "$pack/CMakeCache.txt"

# The commit the binaries were built from, for the reports (the GPU machine may have no .git).
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit plus uncommitted changes"
echo "$commit" >"$pack/flashjit-commit.txt"
if [[ -n ${FLASHJIT_GPU_BEFORE:-} ]]; then
  mkdir -p "$pack/templates-before"
  git archive "$FLASHJIT_GPU_BEFORE" ops | tar -x -C "$pack/templates-before"
  git rev-parse --short "$FLASHJIT_GPU_BEFORE" >"$pack/templates-before/commit.txt"
fi

size=$(du -sm "$pack" | cut -f1)
echo "packed ${#binaries[@]} binaries and CTest's files into $pack: ${size} MiB"
du -sh "${binaries[@]/#/$pack/}" 2>/dev/null | sed 's/^/  /'
if ((size > 60)); then
  echo "gpu_pack.sh: warning: over 60 MiB; a GPU session carries at most 64 MiB" >&2
fi
((missing == 0)) || exit 1
