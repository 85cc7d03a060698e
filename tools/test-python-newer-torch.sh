#!/usr/bin/env bash
# Runs the Python package's tests on the CPU emulator under a newer PyTorch than Debian 12's
# 1.13: Debian 13's (2.6), which has torch.library.custom_op, so that the tests of the custom
# operators (opcheck, torch.compile with fullgraph) run instead of being skipped. Not part of
# CI: the first run downloads a Debian 13 system of about 1.5 GB (debootstrap) into
# CHROOT_DIR, later runs reuse it. Needs root (debootstrap, mount, chroot).
# Usage: tools/test-python-newer-torch.sh [BUILD_DIR] [CHROOT_DIR] [PYTEST_ARGS...]; BUILD_DIR is
# a build folder of this repository with libflashjit.so built (default build/python, built if
# missing), CHROOT_DIR defaults to /var/tmp/flashjit-debian13, PYTEST_ARGS (default
# python/tests) are pytest's: a file, -k EXPRESSION, ...
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
build_dir=$(realpath -m "${1:-build/python}")
root=$(realpath -m "${2:-/var/tmp/flashjit-debian13}")
shift $(($# < 2 ? $# : 2))
pytest_args=("${@:-python/tests}")

if [[ $(id -u) -ne 0 ]]; then
  echo "flashjit: $0 needs root (debootstrap, mount and chroot)" >&2
  exit 1
fi
if [[ ! -f "$build_dir/api/libflashjit.so" ]]; then
  [[ -f "$build_dir/CMakeCache.txt" ]] || cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release
  cmake --build "$build_dir" --target flashjit_shared
fi
if [[ ! -x "$root/usr/bin/python3" ]]; then
  bash tools/apt-install.sh debootstrap
  echo "flashjit: installing Debian 13 with PyTorch into $root (about 1.5 GB, once)"
  debootstrap --variant=minbase --include=python3,python3-torch,python3-numpy,python3-pytest,g++ \
    trixie "$root" http://deb.debian.org/debian >"$root.log" 2>&1 ||
    { tail -20 "$root.log" >&2; exit 1; }
fi

# The repository and the build folder appear at their own paths inside: the tests and the
# library are used where they are.
mounted=()
cleanup() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" || true; done
}
trap cleanup EXIT
bind() {  # bind SOURCE: SOURCE at the same path inside the chroot
  mkdir -p "$root$1"
  mount --bind "$1" "$root$1"
  mounted+=("$root$1")
}
mount -t proc proc "$root/proc" && mounted+=("$root/proc")
mount --rbind /dev "$root/dev" && mounted+=("$root/dev")
bind "$repo"
[[ "$build_dir" == "$repo"/* ]] || bind "$build_dir"
# The CUDA toolkit's NVRTC, which the library links, at the path it was linked from.
nvrtc=$(ldd "$build_dir/api/libflashjit.so" | awk '/libnvrtc/ {print $3}')
[[ -z "$nvrtc" ]] || bind "$(dirname "$(dirname "$nvrtc")")"

cache=$(mktemp -d -p "$root/tmp")  # tests must not touch the user's kernel cache
chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root \
  FLASHJIT_CACHE_DIR="${cache#"$root"}" FLASHJIT_LIBRARY="$build_dir/api/libflashjit.so" \
  PYTHONPATH="$repo/python" bash -c "cd '$repo' && python3 -c 'import torch; \
print(\"flashjit: PyTorch\", torch.__version__)' && python3 -m pytest -q \"\$@\"" bash \
  "${pytest_args[@]}"
