#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build (release: the library and the
# `flashjit` command, target flashjit_cli; not the tests or examples), then show flashjit
# at work: `flashjit info`; `flashjit run`, one attention forward checked against the float64
# reference, on the GPU or, with none, on the CPU emulator (its first line says which); then a
# training job's kernels: one attention shape's forward and backward kernels compiled cold into
# an empty cache, concurrently (`flashjit autotune --warm`), then found in the cache by a second
# process. With no GPU it compiles for sm_90a. Last, the autotuner: that shape tuned on the GPU,
# or with none its plan for sm_90a (candidates and pruning reasons).
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target flashjit_cli
flashjit=build/release/tools/flashjit
export FLASHJIT_CACHE_DIR=${FLASHJIT_CACHE_DIR:-$(mktemp -d)/flashjit-cache}

"$flashjit" info

echo "== flashjit run: attention forward against the float64 reference"
"$flashjit" run

if "$flashjit" info | grep -q '^gpu 0:'; then
  arch_args=()
  echo "== compiling for the local GPU"
else
  arch_args=(--arch sm_90a)
  echo "== no GPU here: compiling for sm_90a (H100) instead"
fi
shape=(--head-dim 128 --seqlen 4096)
for run in "first (cold)" "second (a new process)"; do
  echo "== $run: the forward and backward kernels of head dim 128 (cache: $FLASHJIT_CACHE_DIR)"
  "$flashjit" autotune --warm "${arch_args[@]}" --op attention-forward,attention-backward \
    "${shape[@]}"
done

if [ ${#arch_args[@]} -eq 0 ]; then
  echo "== autotune: one shape timed on the GPU, stored in the tuning database"
  "$flashjit" autotune --op attention-forward "${shape[@]}" --batch-heads 32
else
  echo "== autotune --plan: the candidates for sm_90a after pruning (no GPU: nothing is timed)"
  "$flashjit" autotune --plan --arch sm_90a --op attention-forward "${shape[@]}"
fi
