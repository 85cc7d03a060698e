#!/usr/bin/env bash
# The whole GPU run in one command (issue 6), on a GPU machine that has the
# CUDA toolkit, Python with PyTorch, compute-sanitizer and no network. It uses a build folder
# made on an everyday machine (x86-64, copied along with the repository; `tools/gpu_pack.sh`
# makes a small one) and compiles nothing but kernels. Steps, in order of importance:
#
#   info          nvidia-smi, `flashjit info`, the build's facts               -> info.log
#   features      `flashjit run` of each kernel form, small shapes checked against the float64
#                 reference, FLASHJIT_GPU_FEATURE_JOBS at a time (default 8)  -> features.log
#   tests         ctest -L gpu --output-on-failure            -> gpu-tests.log, gpu-tests-full.log
#   sanitizer     compute-sanitizer memcheck and racecheck on short runs       -> sanitizer.log
#   bench         bench/attention.py: flashjit against PyTorch's SDPA backends
#                 and FlexAttention                          -> <date>-<device>.md and .log
#   first-result  bench/first_result.sh: time to first result, cold and warm, and one
#                 `flashjit autotune`            -> <date>-first-result-<device>.md and .log
#
# Ten more steps run only when named in FLASHJIT_GPU_STEPS. The first eight stand alone:
#   ncu           Nsight Compute on one launch each of the forward and backward defaults at
#                 head dim 128, seqlen 8k (NCU_OPS and NCU_HEAD_DIMS pick others) -> ncu.log
#   decode        bench/decode.py: decoding on paged KV caches in GB/s against the measured
#                 copy bandwidth, beside SDPA, FlashAttention and FlashInfer where installed
#                 (DECODE_ARGS adds options)            -> <date>-decode-<device>.md and .log
#   python        the Python package's tests (pytest python/tests, the package from python/ on
#                 this build's library): its CUDA tests, and on PyTorch 2.4 or later its
#                 custom operators and torch.compile                         -> python.log
#   ops           bench/multiscale.py and bench/layernorm.py: multi-scale attention against
#                 the retention formula in PyTorch, layer norm against torch's
#                                               -> <date>-ops-<device>-*.md and .log
#   overhead      bench/call_overhead.py: host time per call against GPU time (eager, through
#                 the custom operators, the C call alone) -> <date>-overhead-<device>.md and .log
#   fp8           `flashjit bench` of the fp8 forward (--dtype e4m3) beside its mma.sync form
#                 (--config) and bf16's at head dims 128, 64 and 256, 4k tokens, causal and not
#                 (FP8_HEAD_DIMS, FP8_SEQLENS pick others)                    -> fp8.log
#   persistent    `flashjit bench` of the unmasked forward's defaults at head dims 128 and
#                 256 beside their persistent twins (--config), 1k/4k/16k tokens
#                 (PERSISTENT_SEQLENS picks others)                    -> persistent.log
#   before-after  a kernel change's before and after in one run: `flashjit bench` of AB_SHAPES
#                 (default: the persistent forward defaults, head dims 64 and 128) with the
#                 templates of the commit tools/gpu_pack.sh was given (FLASHJIT_GPU_BEFORE) and
#                 with this build's, alternately, AB_ROUNDS times (default 2)
#                                                                    -> before-after.log
# The other two run together in one call (the tuning database lives in FLASHJIT_CACHE_DIR,
# which a fresh machine does not keep):
#   autotune      `flashjit autotune` over the benchmark's shapes (head dims 64 and 128,
#                 batch x seqlen = 16k, causal and not, forward and backward; the decode
#                 and layer norm benchmarks' shapes; AUTOTUNE_ARGS adds options to the
#                 attention ones, e.g. "--dtype bf16,fp16")                   -> autotune.log
#   bench-tuned   bench/attention.py again, now with the tuned configs
#                                                     -> <date>-<device>-tuned.md and .log
#
# A failing step never stops the others. OUT_DIR stays flat: the logs above and summary.md
# (each step's exit code and time), which is printed last. A device call brings back at most 8
# files, so a run of more steps than that writes into a folder and packs it (tar) at the end.
#
# Time: the whole run keeps within FLASHJIT_GPU_DEADLINE_S seconds (default 570, under a
# 10-minute limit per command); each step gets at most its own limit and what is left, and a
# step with under 20 s left is skipped (summary.md says so). FLASHJIT_GPU_STEPS picks steps
# (default: all, in the order above), so a run that does not fit can be split:
#   FLASHJIT_GPU_STEPS="info tests sanitizer" tools/gpu_run.sh out1
#   FLASHJIT_GPU_STEPS="bench first-result" tools/gpu_run.sh out2
#
# Usage: tools/gpu_run.sh OUT_DIR [BUILD_DIR]   (default BUILD_DIR: build/release)
# Environment: FLASHJIT_GPU_STEPS, FLASHJIT_GPU_DEADLINE_S, FLASHJIT_GPU_TEST_JOBS,
# FLASHJIT_GPU_TEST_TIMEOUT and FLASHJIT_GPU_TEST_REGEX (the tests step's parallel tests,
# per-test limit and selection), FLASHJIT_GPU_SANITIZER_MATCH (an extended regex: only the
# sanitizer runs whose commands match), PYTHON_TESTS (the python step's test files; default
# python/tests), OPS_SCRIPTS (the ops step's benchmarks; default "multiscale layernorm") and
# LAYERNORM_ARGS (bench/layernorm.py's options), FLASHJIT_GPU_FEATURE_JOBS, NCU_OPS and NCU_HEAD_DIMS, AUTOTUNE_* (see run_autotune), FLASHJIT_GPU_LIMIT_<STEP> (a step's
# own limit in seconds, e.g. FLASHJIT_GPU_LIMIT_TESTS=400, FLASHJIT_GPU_LIMIT_FIRST_RESULT=60),
# FLASHJIT_CACHE_DIR (the kernel cache to use, e.g. one warmed on an everyday machine with
# `flashjit compile --arch sm_90a --all`; default: a new empty folder), BENCH_ARGS (more
# bench/attention.py options, e.g. "--head-dims 128 --dtypes bf16").
set -uo pipefail
if (($# < 1 || $# > 2)); then
  echo "usage: tools/gpu_run.sh OUT_DIR [BUILD_DIR]   (BUILD_DIR default: build/release)" >&2
  exit 2
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
build=$(cd "${2:-$repo/build/release}" 2>/dev/null && pwd) || {
  echo "gpu_run.sh: no build folder at '${2:-$repo/build/release}'" >&2
  exit 2
}
flashjit=$build/tools/flashjit
steps=${FLASHJIT_GPU_STEPS:-info features tests sanitizer bench first-result}
deadline=$((SECONDS + ${FLASHJIT_GPU_DEADLINE_S:-570}))
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export FLASHJIT_CACHE_DIR=${FLASHJIT_CACHE_DIR:-$scratch/flashjit-cache}
cd "$repo" || exit 2
# The commit measured: the one tools/gpu_pack.sh recorded with the build, else the repository's.
if [[ -f $build/flashjit-commit.txt ]]; then
  FLASHJIT_COMMIT=$(<"$build/flashjit-commit.txt")
else
  FLASHJIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  git diff --quiet HEAD 2>/dev/null || FLASHJIT_COMMIT="$FLASHJIT_COMMIT plus uncommitted changes"
fi
export FLASHJIT_COMMIT

summary_rows=()
declare -A step_rc=()
note() { echo "== $*"; }

# Seconds the next step may take: its own limit or what is left before the deadline.
allowance() {
  local left=$((deadline - SECONDS - 5))
  ((left < $1)) && echo "$left" || echo "$1"
}

# step NAME LIMIT LOG FUNCTION [OUTPUT]: runs FUNCTION with $limit set (its timeout), output to
# LOG, and records its exit code, time and OUTPUT (what it wrote; default LOG's name); a timeout
# shows as exit 124.
step() {
  local name=$1 wanted=$2 log=$3 fn=$4 shown=${5:-$(basename "$3")}
  if [[ " $steps " != *" $name "* ]]; then
    summary_rows+=("| $name | — | — | not requested (FLASHJIT_GPU_STEPS) |")
    return
  fi
  local override="FLASHJIT_GPU_LIMIT_${name^^}"
  override=${override//-/_}
  wanted=${!override:-$wanted}
  limit=$(allowance "$wanted")
  # Skipped when the deadline leaves it under 20 s; a shorter limit of its own is kept (the
  # 2026-12-04 run skipped `info` at FLASHJIT_GPU_LIMIT_INFO=10).
  if ((limit < 20 && limit < wanted)); then
    note "$name: skipped, ${limit}s left before the deadline"
    summary_rows+=("| $name | — | — | skipped: too little time left before the deadline |")
    return
  fi
  note "$name (at most ${limit}s) -> $(basename "$log")"
  local start=$SECONDS rc=0
  "$fn" >>"$log" 2>&1 || rc=$?
  local took=$((SECONDS - start)) what=$shown
  ((rc == 124)) && what="$what; timed out after ${limit}s"
  summary_rows+=("| $name | $rc | $took | $what |")
  step_rc[$name]=$rc
  note "$name: exit $rc in ${took}s"
}

# ---- info ------------------------------------------------------------------------------------
run_info() {
  echo "\$ nvidia-smi"
  nvidia-smi || echo "(nvidia-smi: exit $?)"
  echo "\$ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
  echo "\$ $flashjit info"
  "$flashjit" info
  local rc=$?
  echo "commit: $FLASHJIT_COMMIT (of the build); repository: $(git rev-parse HEAD 2>/dev/null || echo 'no git')"
  echo "build: $build ($(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt" 2>/dev/null))"
  echo "\$ ldd $flashjit"
  ldd "$flashjit"
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' \
    || echo "(no PyTorch: the bench step will fail)"
  return $rc
}

# ---- features --------------------------------------------------------------------------------
# One `flashjit run` per kernel form, each checked against the float64 reference on shapes small
# enough for the host's reference to take seconds: what landed since the last GPU run first (the
# decode kernel, fp8 caches on the TMA prefill and on decoding, modifiers on the TMA forward and
# backward, MLA's widths, used lengths, appends with rotary on pages of 1 and 16, learnable
# sinks, dropout, the layer-norm bandwidth and cluster kernels, the TMA forward's tile order).
feature_runs=(
  "--dtype e4m3 --batch 2 --heads 8 --heads-kv 2 --seqlen-q 700 --head-dim 128 --causal"
  "--dtype e4m3 --batch 1 --heads 4 --seqlen-q 300 --seqlen-k 1100 --head-dim 256"
  "--dtype e4m3 --batch 2 --heads 4 --seqlen-q 500 --seqlen-k 260 --head-dim 64"
  "--dtype e4m3 --batch 2 --heads 4 --seqlen-q 500 --head-dim 128 --config br128.bc64.w8.s2.fp8"
  "--batch 2 --heads 16 --heads-kv 4 --seqlen-q 1024 --head-dim 128"
  "--batch 2 --heads 8 --seqlen-q 777 --seqlen-k 1030 --head-dim 64 --causal"
  "--batch 1 --heads 4 --heads-kv 2 --seqlen-q 600 --head-dim 256 --causal"
  "--op attention-backward --batch 2 --heads 8 --heads-kv 2 --seqlen-q 600 --head-dim 128 --causal --deterministic"
  "--paged --seqlen-q 1 --seqlen-k 32768 --batch 8 --heads 32 --heads-kv 4 --head-dim 128"
  "--paged --page-size 1 --seqlen-q 4 --seqlen-k 5000 --batch 3 --heads 32 --heads-kv 4 --head-dim 128"
  "--paged --seqlen-q 1 --seqlen-k 9000 --batch 1 --heads 32 --heads-kv 8 --head-dim 64"
  "--paged --kv-dtype e4m3 --seqlen-q 1 --seqlen-k 5000 --batch 4 --heads 32 --heads-kv 4 --head-dim 128"
  "--varlen 6 --kv-dtype e4m3 --seqlen-q 500 --heads 8 --heads-kv 2 --head-dim 128 --causal"
  "--varlen 5 --kv-dtype e4m3 --seqlen-q 400 --heads 4 --head-dim 64"
  "--varlen 4 --kv-dtype e4m3 --seqlen-q 300 --heads 4 --heads-kv 1 --head-dim 256 --causal"
  "--batch 2 --heads 4 --seqlen-q 500 --head-dim 128 --score-mod 'score - 0.01f * float(q_idx > kv_idx ? q_idx - kv_idx : kv_idx - q_idx)' --mask-mod '(q_idx + kv_idx) % 7 != 3'"
  "--op attention-backward --batch 2 --heads 4 --seqlen-q 500 --head-dim 128 --causal --score-mod 'score * 0.5f' --mask-mod 'kv_idx % 5 != 2'"
  "--op attention-backward --batch 1 --heads 4 --seqlen-q 400 --head-dim 192 --head-dim-v 128 --causal"
  "--paged --page-size 64 --values-in-keys --seqlen-q 1 --seqlen-k 3000 --batch 4 --heads 16 --heads-kv 1 --head-dim 576 --head-dim-v 512"
  "--paged --page-size 1 --values-in-keys --seqlen-q 2 --seqlen-k 1500 --batch 2 --heads 16 --heads-kv 1 --head-dim 576 --head-dim-v 512"
  "--varlen 6 --seqused --seqlen-q 300 --heads 4 --heads-kv 2 --head-dim 128 --causal"
  "--op attention-backward --varlen 5 --seqused --seqlen-q 300 --heads 4 --head-dim 128"
  "--paged --page-size 1 --append 3 --rotary --seqlen-q 3 --seqlen-k 700 --batch 3 --heads 8 --heads-kv 2 --head-dim 128"
  "--paged --page-size 16 --append 20 --rotary-interleaved --seqlen-q 20 --seqlen-k 900 --batch 2 --heads 8 --heads-kv 2 --head-dim 64 --causal"
  "--op attention-backward --sinks --batch 2 --heads 4 --seqlen-q 500 --head-dim 128 --causal"
  "--op attention-backward --sinks --batch 2 --heads 4 --heads-kv 2 --seqlen-q 300 --head-dim 64"
  "--op attention-backward --dropout 0.15 --batch 2 --heads 4 --seqlen-q 400 --head-dim 64 --causal"
  "--op attention-backward --dropout 0.1 --batch 2 --heads 4 --heads-kv 2 --seqlen-q 300 --head-dim 256 --deterministic"
  "--op attention-backward --varlen 5 --dropout 0.2 --seqlen-q 300 --heads 4 --head-dim 128"
  "--op layer-norm --rows 512 --cols 16384 --bias --residual"
  "--op layer-norm --rows 2048 --cols 4096 --bias --residual"
  "--op layer-norm --rows 2048 --cols 1536 --bias --residual"
  "--op layer-norm --rows 4096 --cols 384 --rms"
  "--op layer-norm --rows 64 --cols 65536 --rms"
  "--op layer-norm --rows 4096 --cols 768 --dtype fp32"
  "--op layer-norm --rows 1000 --cols 4097"
)

# Runs each of feature_runs (a line of `flashjit run` options) FLASHJIT_GPU_FEATURE_JOBS at a
# time, each with --seed 1, and prints each one's output whole, in order, then a verdict per run.
run_features() {
  local jobs=${FLASHJIT_GPU_FEATURE_JOBS:-8} i failures=0 rc
  local dir=$scratch/features
  mkdir -p "$dir"
  for i in "${!feature_runs[@]}"; do
    while (($(jobs -rp | wc -l) >= jobs)); do wait -n; done
    (
      # shellcheck disable=SC2086  # eval splits the quoted modifier texts as a shell would
      eval "timeout --kill-after=5 $limit \"\$flashjit\" run --seed 1 ${feature_runs[$i]}" \
        >"$dir/$i.log" 2>&1
      echo $? >"$dir/$i.rc"
    ) &
  done
  wait
  for i in "${!feature_runs[@]}"; do
    rc=$(cat "$dir/$i.rc" 2>/dev/null || echo missing)
    echo "== exit $rc: flashjit run --seed 1 ${feature_runs[$i]}"
    cat "$dir/$i.log" 2>/dev/null
    [[ $rc == 0 ]] || failures=$((failures + 1))
  done
  echo "== $failures of ${#feature_runs[@]} feature runs failed"
  ((failures == 0))
}

# ---- tests -----------------------------------------------------------------------------------
# CTest's files name the build folder by its absolute path on the machine that made it; where
# the copy lives elsewhere, those paths are rewritten to this copy's (CTest files only).
relocate_build() {
  local old
  old=$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)
  [[ -z $old || $old == "$build" ]] && return 0
  echo "build folder made at $old, now at $build: rewriting CTest's paths"
  grep -rlF --include='*.cmake' "$old" "$build" | xargs -r sed -i "s|$old|$build|g"
  sed -i "s|^CMAKE_CACHEFILE_DIR:INTERNAL=.*|CMAKE_CACHEFILE_DIR:INTERNAL=$build|" \
    "$build/CMakeCache.txt"
}

# FLASHJIT_GPU_TEST_JOBS tests at a time (default 1; several share the GPU, which is fine for
# correctness and lets NVRTC use the machine's cores) and FLASHJIT_GPU_TEST_TIMEOUT seconds at
# most per test (default: the step's limit), so that one hung kernel does not take the step;
# FLASHJIT_GPU_TEST_REGEX runs only the tests whose names match (ctest -R).
run_tests() {
  relocate_build
  local jobs=${FLASHJIT_GPU_TEST_JOBS:-1} per_test=${FLASHJIT_GPU_TEST_TIMEOUT:-$limit}
  local -a only=()
  [[ -n ${FLASHJIT_GPU_TEST_REGEX:-} ]] && only=(-R "$FLASHJIT_GPU_TEST_REGEX")
  echo "\$ ctest --test-dir $build -L gpu --output-on-failure -j $jobs --timeout $per_test" \
    "${only[*]}"
  timeout --kill-after=10 "$limit" ctest --test-dir "$build" -L gpu --output-on-failure \
    -j "$jobs" --timeout "$per_test" "${only[@]}"
  local status=$?
  # Every test's whole output, passing ones too (their MESSAGE lines: the driver's resident
  # clusters, for one), which --output-on-failure leaves out.
  cp "$build/Testing/Temporary/LastTest.log" "$out/gpu-tests-full.log" 2>/dev/null
  return $status
}

# ---- sanitizer -------------------------------------------------------------------------------
sanitizer_path() {
  if [[ -x /usr/local/cuda/bin/compute-sanitizer ]]; then
    echo /usr/local/cuda/bin/compute-sanitizer
  else
    command -v compute-sanitizer
  fi
}

# Short runs that reach every kernel family: a ragged causal GQA forward through the command
# (persistent, its tiles taken from a counter), an unmasked one (2-CTA clusters, one release a
# warpgroup and CTA), two with more tiles than SMs, so that persistent CTAs walk several tiles
# through both Q slots (head dim 64 unmasked, 128 causal),
# the training-step example (forward and backward, GQA, causal), the GPU forward test's
# ragged-lengths case, and multi-scale attention and layer norm, forward and backward, a
# backward with dropout, a packed one at head dim 64 (the row statistics by TMA, dQ before dK),
# the decode kernel, the fp8 TMA prefill, an append with rotary on pages
# of one key, a backward with sinks, one with a mask modifier, and the layer-norm cluster kernel. Each under memcheck, then racecheck; any finding fails the step.
run_sanitizer() {
  local sanitizer
  sanitizer=$(sanitizer_path) || {
    echo "compute-sanitizer: not in /usr/local/cuda/bin or PATH"
    return 127
  }
  local -a runs=(
    "$flashjit run --batch 2 --heads 4 --heads-kv 2 --seqlen-q 200 --seqlen-k 333 --head-dim 128 --causal"
    "$flashjit run --batch 2 --heads 4 --heads-kv 2 --seqlen-q 256 --seqlen-k 300 --head-dim 128"
    "$flashjit run --batch 2 --heads 40 --heads-kv 8 --seqlen-q 384 --seqlen-k 384 --head-dim 64"
    "$flashjit run --batch 2 --heads 40 --heads-kv 8 --seqlen-q 384 --seqlen-k 500 --head-dim 128 --causal"
    "$build/examples/training_step"
    "$build/tests/test_gpu_attention_forward --test-case=forward?on?the?GPU:?ragged?lengths"
    "$flashjit run --op multiscale --mask tensor --batch 2 --heads 4 --heads-kv 2 --seqlen-q 130 --seqlen-k 150"
    "$flashjit run --op layer-norm --rows 33 --cols 4097 --bias --residual"
    "$flashjit run --op attention-backward --batch 2 --heads 4 --heads-kv 2 --seqlen-q 200 --seqlen-k 333 --head-dim 256 --causal"
    "$flashjit run --op attention-backward --batch 2 --heads 4 --seqlen-q 150 --seqlen-k 150 --head-dim 192 --deterministic"
    "$flashjit run --op attention-backward --varlen 3 --seqlen-q 200 --heads 4 --heads-kv 2 --head-dim 64 --causal"
    "$flashjit run --op attention-backward --batch 2 --heads 4 --heads-kv 2 --seqlen-q 300 --head-dim 64 --causal --deterministic"
    "$flashjit run --op attention-backward --batch 2 --heads 4 --heads-kv 2 --seqlen-q 200 --seqlen-k 333 --head-dim 128 --causal --dropout 0.2"
    "$flashjit run --paged --seqlen-q 1 --seqlen-k 2000 --batch 2 --heads 32 --heads-kv 4 --head-dim 128"
    "$flashjit run --varlen 3 --kv-dtype e4m3 --seqlen-q 200 --heads 4 --heads-kv 2 --head-dim 128 --causal"
    "$flashjit run --dtype e4m3 --batch 1 --heads 4 --heads-kv 2 --seqlen-q 300 --head-dim 128 --causal"
    "$flashjit run --paged --page-size 1 --append 3 --rotary --seqlen-q 3 --seqlen-k 300 --batch 2 --heads 8 --heads-kv 2 --head-dim 128"
    "$flashjit run --op attention-backward --sinks --batch 1 --heads 2 --seqlen-q 200 --head-dim 128 --causal"
    "$flashjit run --op attention-backward --batch 1 --heads 2 --seqlen-q 200 --head-dim 128 --mask-mod kv_idx%5!=2"
    "$flashjit run --op layer-norm --rows 64 --cols 65536 --rms"
  )
  if [[ -n ${FLASHJIT_GPU_SANITIZER_MATCH:-} ]]; then
    mapfile -t runs < <(printf '%s\n' "${runs[@]}" | grep -E -- "$FLASHJIT_GPU_SANITIZER_MATCH")
  fi
  local failures=0 each=$((limit / (2 * ${#runs[@]} + 1))) tool cmd rc
  # Kernels with line info, so that findings name template lines (a key field: own entries).
  export FLASHJIT_LINEINFO=1
  for tool in memcheck racecheck; do
    for cmd in "${runs[@]}"; do
      local program=${cmd%% *}
      if [[ ! -x $program ]]; then
        echo "== $tool: $program is not in this build; skipped"
        continue
      fi
      echo "== $tool, at most ${each}s: $cmd"
      rc=0
      # shellcheck disable=SC2086  # the command line is split into words on purpose
      timeout --kill-after=10 "$each" "$sanitizer" --tool "$tool" --error-exitcode 86 \
        --print-limit 20 $cmd || rc=$?
      echo "== $tool exit $rc: $cmd"
      ((rc != 0)) && failures=$((failures + 1))
    done
  done
  echo "== $failures of the sanitizer runs failed (exit 86: the sanitizer found errors)"
  ((failures == 0))
}

# ---- ncu -------------------------------------------------------------------------------------
# One launch each of the sm_90a forward and backward (dK/dV, or the TMA kernel) defaults at head dim 128, seqlen 8k,
# batch 2, 16 heads, bf16: the sections that name a bottleneck (speed of light, compute and
# memory workload with shared bank conflicts, occupancy, warp stall reasons, and the source
# counters: the lines whose shared accesses conflict and whose global loads waste sectors, which
# the emulator's memory model reports per instruction site; kernels compiled with line info for
# it). Clocks are left as they are (--clock-control none).
run_ncu() {
  local ncu rc=0 op kernel head_dim
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null) || {
    echo "ncu: not on PATH or in /usr/local/cuda/bin"
    return 127
  }
  local -a runs=() run
  for op in ${NCU_OPS:-attention-forward attention-backward}; do
    for head_dim in ${NCU_HEAD_DIMS:-128}; do runs+=("$op $head_dim"); done
  done
  for run in "${runs[@]}"; do
    op=${run% *} head_dim=${run#* }
    kernel=$([[ $op == attention-forward ]] && echo 'regex:attention_forward' ||
      echo 'regex:attention_backward_(dkdv|tma)')
    echo "\$ ncu --clock-control none -k $kernel --launch-count 1 ... $flashjit bench --op $op" \
      "--head-dim $head_dim --seqlen 8192 --batch 2 --heads $((2048 / head_dim)) --budget-ms 1"
    FLASHJIT_LINEINFO=1 timeout --kill-after=10 $((limit / ${#runs[@]})) "$ncu" \
      --clock-control none -k "$kernel" \
      --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
      --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
      --section Occupancy --section LaunchStats --section WarpStateStats --section SourceCounters \
      --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct \
      "$flashjit" bench --op "$op" --head-dim "$head_dim" --seqlen 8192 --batch 2 \
      --heads $((2048 / head_dim)) --budget-ms 1 || rc=$?
  done
  return $rc
}

# ---- bench -----------------------------------------------------------------------------------
device_slug() {
  local name
  name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  [[ -z $name ]] && name=unknown-gpu
  tr '[:upper:]' '[:lower:]' <<<"$name" | sed -E 's/[^a-z0-9]+/-/g; s/^-|-$//g'
}

bench_stem="$out/$(date +%F)-$(device_slug)"
run_bench() {
  local stem=$bench_stem
  echo "\$ python3 bench/attention.py --lib $build/api/libflashjit.so --out $stem.md" \
    "--time-limit-s $((limit - 30)) ${BENCH_ARGS:-}"
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of options
  timeout --kill-after=10 "$limit" python3 bench/attention.py \
    --lib "$build/api/libflashjit.so" --out "$stem.md" \
    --time-limit-s $((limit - 30)) ${BENCH_ARGS:-}
}

decode_stem="$out/$(date +%F)-decode-$(device_slug)"
run_decode() {
  local stem=$decode_stem
  echo "\$ python3 bench/decode.py --lib $build/api/libflashjit.so --out $stem.md ${DECODE_ARGS:-}"
  # shellcheck disable=SC2086  # DECODE_ARGS is a list of options
  timeout --kill-after=10 "$limit" python3 bench/decode.py \
    --lib "$build/api/libflashjit.so" --out "$stem.md" ${DECODE_ARGS:-}
}

run_python() {
  python3 -c 'import pytest' 2>/dev/null || {
    echo "python: no pytest in this machine's Python; the package's tests cannot run"
    return 127
  }
  local -a tests=(${PYTHON_TESTS:-python/tests})
  echo "\$ FLASHJIT_LIBRARY=$build/api/libflashjit.so PYTHONPATH=python python3 -m pytest -q" \
    "${tests[*]}"
  FLASHJIT_LIBRARY=$build/api/libflashjit.so PYTHONPATH=$repo/python \
    timeout --kill-after=10 "$limit" python3 -m pytest -q -p no:cacheprovider "${tests[@]}"
}

overhead_stem="$out/$(date +%F)-overhead-$(device_slug)"
run_overhead() {
  echo "\$ python3 bench/call_overhead.py --lib $build/api/libflashjit.so --out $overhead_stem.md"
  timeout --kill-after=10 "$limit" python3 bench/call_overhead.py \
    --lib "$build/api/libflashjit.so" --out "$overhead_stem.md"
}

# The fp8 forward against bf16 on the same shapes (a model width of 2048: 32 heads of 64, 16
# of 128, 8 of 256; batch x seqlen = 16k tokens), each `flashjit bench` as the runtime runs it:
# e4m3 (the TMA and wgmma kernel on sm_90a), its mma.sync form and bf16's default.
run_fp8() {
  local head_dim seqlen causal dtype rc=0
  for head_dim in ${FP8_HEAD_DIMS:-128 64 256}; do
    for seqlen in ${FP8_SEQLENS:-4096}; do
      for causal in "" "--causal"; do
        local -a shape=(--op attention-forward --head-dim "$head_dim" --seqlen "$seqlen"
          --batch $((16384 / seqlen)) --heads $((2048 / head_dim)) $causal)
        for dtype in "e4m3" "e4m3 --config br128.bc64.w8.s2.fp8" "bf16"; do
          echo "\$ flashjit bench ${shape[*]} --dtype $dtype"
          # shellcheck disable=SC2086  # $dtype is the dtype and, for one, a --config
          timeout --kill-after=5 60 "$flashjit" bench "${shape[@]}" --dtype $dtype || rc=$?
        done
      done
    done
  done
  return $rc
}

# The same host code runs the kernel templates of two commits (FLASHJIT_TEMPLATE_DIR), so only a
# change confined to ops/ (kernels whose parameters and launch the host sets up alike) compares
# this way: the kernel cache keys them apart by their templates' digest. Before, after, before,
# after, so that a drift of the GPU's clocks shows as a difference between rounds.
run_before_after() {
  local before=$build/templates-before/ops round variant rc=0
  if [[ ! -d $before ]]; then
    echo "no $before: pack with FLASHJIT_GPU_BEFORE=<commit> tools/gpu_pack.sh"
    return 2
  fi
  echo "before: the templates of $(cat "$build/templates-before/commit.txt"); after: this build's"
  local -a shapes
  IFS=';' read -r -a shapes <<<"${AB_SHAPES:-$(
    printf '%s;' "--head-dim 64 --seqlen 1024 --batch 16 --heads 32" \
      "--head-dim 64 --seqlen 4096 --batch 4 --heads 32 --causal" \
      "--head-dim 128 --seqlen 1024 --batch 16 --heads 16 --causal" \
      "--head-dim 128 --seqlen 4096 --batch 4 --heads 16 --causal" \
      "--head-dim 128 --seqlen 16384 --batch 1 --heads 16 --causal"
  )}"
  for round in $(seq "${AB_ROUNDS:-2}"); do
    for shape in "${shapes[@]}"; do
      [[ -n ${shape// /} ]] || continue
      for variant in before after; do
        echo "\$ [$variant, round $round] flashjit bench --op attention-forward $shape"
        # shellcheck disable=SC2086  # $shape is a list of options
        if [[ $variant == before ]]; then
          FLASHJIT_TEMPLATE_DIR=$before timeout --kill-after=5 60 "$flashjit" bench \
            --op attention-forward $shape || rc=$?
        else
          timeout --kill-after=5 60 "$flashjit" bench --op attention-forward $shape || rc=$?
        fi
      done
    done
  done
  return $rc
}

# Issue 65's open question, persistent at every shape: the unmasked forward's defaults at head
# dims 128 and 256 launch a CTA (pair) per query tile; their persistent twins (hd 128: the same
# tile; hd 256: the spill-free Br 64 ones) beside them, 16k tokens, 1k/4k/16k each.
run_persistent() {
  local head_dim seqlen config rc=0
  local -A twins=([128]="br128.bc176.w12.s2.tma.overlap.pingpong.persistent"
    [256]="br64.bc80.w8.s2.tma.overlap.persistent br64.bc64.w8.s3.tma.overlap.persistent")
  for head_dim in 128 256; do
    for seqlen in ${PERSISTENT_SEQLENS:-1024 4096 16384}; do
      local -a shape=(--op attention-forward --head-dim "$head_dim" --seqlen "$seqlen"
        --batch $((16384 / seqlen)) --heads $((2048 / head_dim)))
      for config in default ${twins[$head_dim]}; do
        local -a chosen=()
        [[ $config == default ]] || chosen=(--config "$config")
        echo "\$ flashjit bench ${shape[*]} ${chosen[*]}"
        timeout --kill-after=5 60 "$flashjit" bench "${shape[@]}" "${chosen[@]}" || rc=$?
      done
    done
  done
  return $rc
}

ops_stem="$out/$(date +%F)-ops-$(device_slug)"
run_ops() {
  local script rc=0 extra
  local -a scripts=(${OPS_SCRIPTS:-multiscale layernorm})
  for script in "${scripts[@]}"; do
    extra=$([[ $script == layernorm ]] && echo "${LAYERNORM_ARGS:-}")
    echo "\$ python3 bench/$script.py --lib $build/api/libflashjit.so --out $ops_stem-$script.md" \
      "$extra"
    # shellcheck disable=SC2086  # LAYERNORM_ARGS is a list of options
    timeout --kill-after=10 $((limit / ${#scripts[@]})) python3 "bench/$script.py" \
      --lib "$build/api/libflashjit.so" --out "$ops_stem-$script.md" $extra || rc=$?
  done
  return $rc
}

# ---- autotune and the benchmark with tuned configs -------------------------------------------
# The benchmark's shapes: batch x seqlen = 16k tokens, 16 heads at head dim 128, 32 at 64 (8 at
# 256). AUTOTUNE_OPS, AUTOTUNE_HEAD_DIMS and AUTOTUNE_SEQLENS narrow them (defaults: forward and
# backward, "64 128", "512 1024 2048 4096 8192 16384"); AUTOTUNE_OTHERS=0 leaves out the decode
# and layer norm shapes.
run_autotune() {
  local seqlen head_dim heads batch_heads rc=0 end=$((SECONDS + limit))
  local ops=${AUTOTUNE_OPS:-attention-forward,attention-backward}
  for head_dim in ${AUTOTUNE_HEAD_DIMS:-64 128}; do
    heads=$((head_dim == 64 ? 32 : head_dim == 256 ? 8 : 16))
    for seqlen in ${AUTOTUNE_SEQLENS:-512 1024 2048 4096 8192 16384}; do
      if ((end - SECONDS < 15)); then
        echo "== out of time: head dim $head_dim from seqlen $seqlen on was not tuned"
        return 124
      fi
      batch_heads=$((16384 * heads / seqlen))
      echo "\$ $flashjit autotune --op $ops --head-dim $head_dim" \
        "--seqlen $seqlen --batch-heads $batch_heads --heads $heads --causal both" \
        "${AUTOTUNE_ARGS:-}"
      # shellcheck disable=SC2086  # AUTOTUNE_ARGS is a list of options
      timeout --kill-after=10 $((end - SECONDS)) "$flashjit" autotune \
        --op "$ops" --head-dim "$head_dim" --seqlen "$seqlen" \
        --batch-heads "$batch_heads" --heads "$heads" --causal both ${AUTOTUNE_ARGS:-} || rc=$?
    done
  done
  if [[ ${AUTOTUNE_OTHERS:-1} == 0 ]]; then
    echo "== AUTOTUNE_OTHERS=0: the decode and layer norm shapes are left out"
  else
    # The decode benchmark's shapes: head dim 128, GQA 8:1 (32:4), pages of 16.
    if ((end - SECONDS >= 15)); then
      echo "\$ $flashjit autotune --op attention-decode --head-dim 128 --heads 32 --heads-kv 4" \
        "--batch 1,8,64 --seqlen 1024,4096,32768 --queries 1,4 --page-size 16"
      timeout --kill-after=10 $((end - SECONDS)) "$flashjit" autotune --op attention-decode \
        --head-dim 128 --heads 32 --heads-kv 4 --batch 1,8,64 --seqlen 1024,4096,32768 \
        --queries 1,4 --page-size 16 || rc=$?
    else
      echo "== out of time: the decode shapes were not tuned"
    fi
    # The layer norm benchmark's shapes (bench/layernorm.py), forward and backward, bf16.
    if ((end - SECONDS >= 15)); then
      echo "\$ $flashjit autotune --op layer-norm,layer-norm-backward --rows 4096,32768" \
        "--cols 768,1024,1536,2048,4096,8192,16384; then --rows 1024 --cols 65536"
      timeout --kill-after=10 $((end - SECONDS)) "$flashjit" autotune \
        --op layer-norm,layer-norm-backward --rows 4096,32768 \
        --cols 768,1024,1536,2048,4096,8192,16384 || rc=$?
      timeout --kill-after=10 $((end - SECONDS)) "$flashjit" autotune \
        --op layer-norm,layer-norm-backward --rows 1024 --cols 65536 || rc=$?
    else
      echo "== out of time: the layer norm shapes were not tuned"
    fi
  fi
  echo "\$ $flashjit autotune show"
  "$flashjit" autotune show
  return $rc
}

run_bench_tuned() {
  echo "\$ python3 bench/attention.py --lib $build/api/libflashjit.so --out $bench_stem-tuned.md" \
    "--time-limit-s $((limit - 30)) ${BENCH_ARGS:-}   (tuning database: $FLASHJIT_CACHE_DIR)"
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of options
  timeout --kill-after=10 "$limit" python3 bench/attention.py \
    --lib "$build/api/libflashjit.so" --out "$bench_stem-tuned.md" \
    --time-limit-s $((limit - 30)) ${BENCH_ARGS:-}
}

# ---- first result ----------------------------------------------------------------------------
run_first_result() {
  echo "\$ RESULTS_DIR=$out bash bench/first_result.sh $flashjit"
  RESULTS_DIR=$out timeout --kill-after=10 "$limit" bash bench/first_result.sh "$flashjit"
}

note "flashjit GPU run: build $build, output $out, steps: $steps"
[[ -x $flashjit ]] || note "warning: no flashjit at $flashjit; the steps that use it will fail"
step info 30 "$out/info.log" run_info
step features 120 "$out/features.log" run_features
step tests 240 "$out/gpu-tests.log" run_tests
step sanitizer 150 "$out/sanitizer.log" run_sanitizer
step bench 300 "$bench_stem.log" run_bench "$(basename "$bench_stem").md and .log"
# first_result.sh writes its own table and raw log into OUT_DIR; its console output stays out
# of OUT_DIR (8 files at most) and summary.md quotes its end when the step fails.
step first-result 90 "$scratch/first-result-console.log" run_first_result \
  "$(date +%F)-first-result-*.md and .log"
if [[ " $steps " == *" ncu "* ]]; then
  step ncu 120 "$out/ncu.log" run_ncu
fi
if [[ " $steps " == *" decode "* ]]; then
  step decode 300 "$decode_stem.log" run_decode "$(basename "$decode_stem").md and .log"
fi
if [[ " $steps " == *" python "* ]]; then
  step python 240 "$out/python.log" run_python
fi
if [[ " $steps " == *" ops "* ]]; then
  step ops 300 "$ops_stem.log" run_ops "$(basename "$ops_stem")-*.md and .log"
fi
if [[ " $steps " == *" overhead "* ]]; then
  step overhead 120 "$overhead_stem.log" run_overhead "$(basename "$overhead_stem").md and .log"
fi
if [[ " $steps " == *" fp8 "* ]]; then
  step fp8 150 "$out/fp8.log" run_fp8
fi
if [[ " $steps " == *" persistent "* ]]; then
  step persistent 150 "$out/persistent.log" run_persistent
fi
if [[ " $steps " == *" before-after "* ]]; then
  step before-after 150 "$out/before-after.log" run_before_after
fi
if [[ " $steps " == *" autotune "* ]]; then
  step autotune 400 "$out/autotune.log" run_autotune
fi
if [[ " $steps " == *" bench-tuned "* ]]; then
  step bench-tuned 300 "$bench_stem-tuned.log" run_bench_tuned \
    "$(basename "$bench_stem")-tuned.md and .log"
fi

{
  echo "# flashjit GPU run"
  echo
  echo "$(date -u '+%F %T UTC'), commit $FLASHJIT_COMMIT," \
    "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo none)," \
    "build: $build"
  echo
  echo "| step | exit | seconds | output |"
  echo "| --- | --- | --- | --- |"
  printf '%s\n' "${summary_rows[@]}"
  echo
  echo "Feature runs (failures and the count):"
  echo
  grep -hE '^== (exit [^0]|[0-9]+ of)' "$out/features.log" 2>/dev/null | sed 's/^/    /' ||
    echo "    (no verdict lines: see the log)"
  echo
  echo "Sanitizer verdicts:"
  echo
  grep -hE '^== (memcheck|racecheck) exit|ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer.log" \
    2>/dev/null | sed 's/^/    /' || echo "    (no verdict lines: see the log)"
  echo
  echo "GPU tests:"
  echo
  grep -hE 'tests passed|tests failed|\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception' \
    "$out/gpu-tests.log" 2>/dev/null | sed 's/^/    /' || echo "    (no verdict lines: see the log)"
  if [[ ${step_rc[first-result]:-0} != 0 ]]; then
    echo
    echo "first-result failed; the end of its output:"
    echo
    tail -n 15 "$scratch/first-result-console.log" | sed 's/^/    /'
  fi
} >"$out/summary.md"
cat "$out/summary.md"
