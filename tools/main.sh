#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build (release), then show flashjit
# at work: `flashjit info`, and `flashjit compile` run twice into an empty cache, once
# compiling and once finding every kernel cached. With no GPU it compiles for sm_90a.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release
flashjit=build/release/tools/flashjit

"$flashjit" info
if nvidia-smi >/dev/null 2>&1 && "$flashjit" info | grep -q '^gpu 0:'; then
  arch_args=()
  echo "== compiling for the local GPU"
else
  arch_args=(--arch sm_90a)
  echo "== no GPU here: compiling for sm_90a (H100) instead"
fi

export FLASHJIT_CACHE_DIR=${FLASHJIT_CACHE_DIR:-$(mktemp -d)/flashjit-cache}
for run in first second; do
  echo "== $run run (cache: $FLASHJIT_CACHE_DIR)"
  "$flashjit" compile "${arch_args[@]}" --all
done
