#!/usr/bin/env bash
# What one emulator host kernel costs the host compiler: a TMA backward (bf16, head dim 64) built
# as the runtime builds it (the emulator's headers precompiled, the archive linked in), at -O2
# and -O1, then its link alone with ld.bfd and with gold; the mean of REPEATS runs each. The
# runtime compiles at -O1 and links with gold where ld.gold is on PATH (docs/emulator.md).
#
# Usage: bench/host_compile.sh [BUILD_DIR]   (default build/ci: its libflashjit_emulator.a)
# Environment: REPEATS (default 5), CXX (default g++).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/ci} repeats=${REPEATS:-5} cxx=${CXX:-g++}
archive=$build/emulator/libflashjit_emulator.a
[[ -f $archive ]] || { echo "no $archive: build the project first" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/emulator"
cp emulator/host_prelude.hpp "$work/emulator/"
cat > "$work/kernel.cpp" <<'EOF'
#include "emulator/host_prelude.hpp"
#include "attention/hopper/tma_backward_kernel.cuh"

extern "C" __attribute__((visibility("default")))
flashjit::emulator::HostLaunchFunction flashjit_host_kernel_launcher() {
  return &flashjit::emulator::HostLauncher<&flashjit::attention_backward_tma_kernel<
      flashjit::TmaBackwardTraits<flashjit::bfloat16_t, 64, 128, flashjit::MaskKind::none, false,
                                  2, false, false, false, flashjit::NoModifiers, 128>>>::launch;
}
EOF
link=(-shared -Wl,--exclude-libs,ALL -Wl,-z,defs -Wl,--strip-debug)
mean_seconds() {  # runs "$@" REPEATS times; prints the mean wall time
  local start end
  start=$(date +%s.%N)
  for ((run = 1; run <= repeats; ++run)); do "$@"; done
  end=$(date +%s.%N)
  echo "($end - $start) / $repeats" | bc -l | xargs printf '%.3f'
}
echo "host compile of one TMA backward kernel ($cxx, mean of $repeats; $(nproc) cores)"
for level in -O2 -O1; do
  flags=(-std=c++20 "$level" -fPIC -DFLASHJIT_EMULATOR=1 -Wno-unknown-pragmas
    -fvisibility=hidden "-I$work" -I. -Iinclude -Iops)
  "$cxx" "${flags[@]}" -x c++-header "$work/emulator/host_prelude.hpp" \
    -o "$work/emulator/host_prelude.hpp.gch" 2>/dev/null
  seconds=$(mean_seconds "$cxx" "${flags[@]}" -Winvalid-pch "${link[@]}" "$work/kernel.cpp" \
    "$archive" -o "$work/kernel.so")
  echo "  compile and link at $level: $seconds s"
done
"$cxx" "${flags[@]}" -c "$work/kernel.cpp" -o "$work/kernel.o"
for linker in bfd gold; do
  if [[ $linker == gold ]] && ! command -v ld.gold >/dev/null; then
    echo "  link with gold: no ld.gold on PATH"
    continue
  fi
  seconds=$(mean_seconds "$cxx" -fuse-ld="$linker" "${link[@]}" "$work/kernel.o" "$archive" \
    -o "$work/kernel.so")
  echo "  link alone with ld.$linker: $seconds s"
done
