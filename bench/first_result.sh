#!/usr/bin/env bash
# Measures the time to the first result of one attention forward in a fresh process
# (`flashjit bench --first-result`) three ways: cold (an empty FLASHJIT_CACHE_DIR: NVRTC
# compiles the kernel), warm disk (the same folder, a new process: the kernel is read from
# disk) and warm memory (the second call in that process). Each way is measured REPEATS times
# (the cold one with a new empty folder each time). On a GPU the first call is timed end to end
# (kernel obtained, loaded, launched, finished); with none, only obtaining the kernel for ARCH
# is timed, and the report says that no launch was. On a GPU it also times `flashjit autotune`
# on one shape, from an empty cache.
#
# Writes bench/results/<date>-first-result-<device>.md (the table, the exact commands, the
# commit) and the raw .log beside it; exits 1 when a run fails or a kernel came from an
# unexpected place (cold not compiled, warm not from disk or memory).
#
# Usage: bench/first_result.sh [path/to/flashjit]   (default: build/release/tools/flashjit)
# Environment: ARCH (target without a GPU, default sm_90a), REPEATS (default 3),
#              RESULTS_DIR (default: bench/results beside this script).
set -euo pipefail
flashjit=${1:-build/release/tools/flashjit}
arch=${ARCH:-sm_90a}
repeats=${REPEATS:-3}
results_dir=${RESULTS_DIR:-$(cd "$(dirname "$0")" && pwd)/results}
shape=(--head-dim 128 --seqlen 4096 --batch 4 --heads 16 --dtype bf16)
shape_text="attention forward, batch 4, 16 heads, seqlen 4096, head dim 128, bf16, not causal"
autotune_args=(autotune --op attention-forward --head-dim 128 --seqlen 4096 --batch-heads 32
               --dtype bf16 --causal false)

if [[ ! -x $flashjit ]]; then
  echo "first_result.sh: no flashjit at '$flashjit' (build it, or pass its path)" >&2
  exit 2
fi
if ! [[ $repeats =~ ^[1-9][0-9]*$ ]]; then
  echo "first_result.sh: REPEATS must be a whole number of at least 1, not '$repeats'" >&2
  exit 2
fi
# Only FLASHJIT_CACHE_DIR may steer the runs: a bypassed disk or a forced policy would change
# what is measured.
unset FLASHJIT_ALWAYS_COMPILE FLASHJIT_NO_JIT FLASHJIT_TUNING FLASHJIT_TEMPLATE_DIR
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

now_ms() { date +%s%3N; }
# The number after KEY on the line that starts with KEY, and its source=.
value_of() { awk -v key="$1" '$1 == key { print $2; exit }'; }
source_of() { awk -v key="$1" '$1 == key { sub(/^source=/, "", $3); print $3; exit }'; }
# The middle value of the arguments (the lower middle for an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
span() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo "–" hi }'; }

mkdir -p "$results_dir"
info=$("$flashjit" info 2>&1) || true
gpu_line=$(grep -m1 '^gpu 0:' <<<"$info" || true)
if [[ -n $gpu_line ]]; then
  gpu_name=$(sed -E 's/^gpu 0: +([^,]+),.*/\1/' <<<"$gpu_line")
  device=$(tr '[:upper:]' '[:lower:]' <<<"$gpu_name" | sed -E 's/[^a-z0-9]+/-/g; s/^-|-$//g')
  device_text="$gpu_name (GPU 0)"
  arch_args=()
  first_key=first_result_ms second_key=second_result_ms
  what="the wall time of the first \`Runtime::forward\` + \`synchronize\` in a new process (the kernel obtained, loaded, launched and finished; opening the runtime and preparing inputs are not included), and of an identical second call"
else
  device=cpu
  device_text="the machine's CPU, no GPU ($(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
  arch_args=(--arch "$arch")
  first_key=kernel_ready_ms second_key=kernel_ready_again_ms
  what="**no launch was timed** (there is no GPU): only obtaining the forward kernel for $arch (\`KernelCache::get\`: memory, else disk, else NVRTC), the part of the first call that needs no GPU, first and second time in the same process"
fi
stem="$results_dir/$(date +%F)-first-result-$device"
log="$stem.log"
# FLASHJIT_COMMIT (set by tools/gpu_run.sh: the commit the build folder was made from), else
# the repository's HEAD, marked when the working tree differs from it.
commit=${FLASHJIT_COMMIT:-}
if [[ -z $commit ]]; then
  commit=$(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown)
  if ! git -C "$(dirname "$0")" diff --quiet HEAD 2>/dev/null; then
    commit="$commit plus uncommitted changes"
  fi
fi
cache_file="$(dirname "$(dirname "$flashjit")")/CMakeCache.txt"
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$cache_file" 2>/dev/null || true)
: >"$log"
commands=()
# Other work on the machine slows the compiles: the report gives the load it ran under.
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# Runs a command with the given cache folder, logs "$ command" and its output, and leaves its
# output in $out, its exit code in $rc and its wall time (process start included) in $wall.
run_logged() {
  local cache=$1
  shift
  local line="FLASHJIT_CACHE_DIR=$cache $*"
  commands+=("$line")
  echo "\$ $line" >>"$log"
  local start
  start=$(now_ms)
  rc=0
  out=$(FLASHJIT_CACHE_DIR=$cache "$@" 2>&1) || rc=$?
  wall=$(($(now_ms) - start))
  printf '%s\n' "$out" >>"$log"
  echo "(exit $rc, ${wall} ms wall)" >>"$log"
}

failures=0
expect_source() {  # what, got, wanted...
  local what=$1 got=$2
  shift 2
  for wanted in "$@"; do [[ $got == "$wanted" ]] && return 0; done
  echo "unexpected: $what came from '$got' (expected $*)" | tee -a "$log" >&2
  failures=$((failures + 1))
}

{
  echo "# first_result.sh, $(date -u '+%F %T UTC'), commit $commit"
  echo "# flashjit: $flashjit (build type: ${build_type:-unknown}); device: $device_text"
  echo "# load average at the start (1, 5, 15 min): $load_start"
  echo "\$ $flashjit info"
  echo "$info"
} >>"$log"

cold=() cold_wall=() disk=() disk_wall=() memory=()
cold_src=() disk_src=() memory_src=()
for ((i = 1; i <= repeats; i++)); do
  echo "run $i of $repeats: cold, then warm disk..."
  cache="$work/cache-$i"
  for way in cold disk; do
    run_logged "$cache" "$flashjit" bench --first-result "${shape[@]}" "${arch_args[@]}"
    first=$(value_of "$first_key" <<<"$out")
    second=$(value_of "$second_key" <<<"$out")
    if ((rc != 0)) || [[ -z $first || -z $second ]]; then
      echo "FAIL: flashjit bench --first-result (exit $rc):" >&2
      printf '%s\n' "$out" >&2
      exit 1
    fi
    if [[ $way == cold ]]; then
      cold+=("$first") cold_wall+=("$wall") cold_src+=("$(source_of "$first_key" <<<"$out")")
      expect_source "cold run $i" "${cold_src[-1]}" compiled
    else
      disk+=("$first") disk_wall+=("$wall") disk_src+=("$(source_of "$first_key" <<<"$out")")
      memory+=("$second") memory_src+=("$(source_of "$second_key" <<<"$out")")
      expect_source "warm disk run $i" "${disk_src[-1]}" disk
      expect_source "warm memory run $i" "${memory_src[-1]}" memory
    fi
  done
done

autotune_row=""
if [[ -n $gpu_line ]]; then
  if "$flashjit" autotune --help >/dev/null 2>&1; then
    echo "timing flashjit autotune on one shape (empty cache)..."
    run_logged "$work/autotune-cache" "$flashjit" "${autotune_args[@]}"
    if ((rc == 0)); then
      autotune_row="| \`flashjit ${autotune_args[*]}\` | empty | compiled and timed | — | $wall |"
    else
      autotune_row="| \`flashjit ${autotune_args[*]}\` | empty | failed (exit $rc, see the log) | — | — |"
      failures=$((failures + 1))
    fi
  else
    echo "flashjit autotune: not in this build; not timed" | tee -a "$log"
    autotune_row="| \`flashjit autotune\` | — | not timed: this build has no autotune command | — | — |"
  fi
fi

uniq_sources() { printf '%s\n' "$@" | sort -u | paste -sd/ -; }
cell() { echo "$(median "$@") ($(span "$@"))"; }
{
  echo "# Time to first result: \`flashjit bench --first-result\`"
  echo
  echo "Measured on $(date +%F) on $device_text, commit $commit, with"
  echo "\`REPEATS=$repeats${arch_args:+ ARCH=$arch} bash bench/first_result.sh $flashjit\` (build type" \
    "${build_type:-unknown}). Raw log:"
  echo "\`$(basename "$log")\` beside this file."
  echo
  echo "Shape: $shape_text. What was timed: $what."
  echo "Each way was run $repeats times; the cells give the median and (min–max). Load average"
  echo "(1, 5, 15 min) at the start: $load_start; at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "| run | cache | kernel from | in-process ms | process wall ms |"
  echo "| --- | --- | --- | --- | --- |"
  echo "| cold | empty \`FLASHJIT_CACHE_DIR\` | $(uniq_sources "${cold_src[@]}") | $(cell "${cold[@]}") | $(cell "${cold_wall[@]}") |"
  echo "| warm disk | same folder, new process | $(uniq_sources "${disk_src[@]}") | $(cell "${disk[@]}") | $(cell "${disk_wall[@]}") |"
  echo "| warm memory | second call in that process | $(uniq_sources "${memory_src[@]}") | $(cell "${memory[@]}") | — |"
  [[ -n $autotune_row ]] && echo "$autotune_row"
  echo
  echo "The process wall time adds process start and exit, the runtime's setup and (on a GPU)"
  echo "preparing the inputs to the in-process time."
  echo
  echo "Commands, in the order run:"
  echo
  echo '```sh'
  printf '%s\n' "${commands[@]}"
  echo '```'
} >"$stem.md"

cat "$stem.md"
echo
echo "wrote $stem.md and $log"
if ((failures > 0)); then
  echo "FAIL: $failures unexpected result(s); see $log" >&2
  exit 1
fi
