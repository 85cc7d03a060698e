#!/usr/bin/env bash
# The cold compile of four kernels (see the .md beside this file): one process with one and two
# threads, then two processes. Needs a build in build/ci.
set -u
cd "$(dirname "$0")/../.."  # the repository root
export FLASHJIT_TEMPLATE_DIR=$PWD/ops
F=build/ci/tools/flashjit
run() { "$F" autotune --warm --arch sm_90a --head-dim 128 --seqlen 4096 "$@" 2>&1 | grep -v "^=="; }
echo "## one process, -j 1 (each kernel alone)"
export FLASHJIT_CACHE_DIR=$(mktemp -d); run --op attention-forward,attention-backward -j 1
for r in 1 2; do echo "## one process, -j 2 (two threads), run $r"
  export FLASHJIT_CACHE_DIR=$(mktemp -d); run --op attention-forward,attention-backward -j 2; done
for r in 1 2; do echo "## two processes, -j 1 each (forward | backward), run $r"
  export FLASHJIT_CACHE_DIR=$(mktemp -d); s=$(date +%s%N)
  run --op attention-forward -j 1 > /tmp/fwd.out & run --op attention-backward -j 1; wait; cat /tmp/fwd.out
  echo "wall of both processes: $(( ($(date +%s%N) - s) / 1000000 )) ms"; done
