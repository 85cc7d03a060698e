#!/usr/bin/env bash
# The baseline of the emulator's work counters (docs/emulator.md): the default forward and
# backward kernels (the backward in both modes: atomic dQ, and --deterministic) at head dims
# 64, 128 and 256, bf16, seqlen 1024, one head, causal and not, each run with `flashjit run
# --emulate --counters` (which also checks the result against the float64 reference). Later
# speed work without a GPU is measured against this table.
#
# Writes bench/results/<date>-work-counters-emulator<NAME>.md (the table, the commands, the
# commit) and the raw .log beside it; exits 1 when a run fails.
#
# Usage: bench/work_counters.sh [path/to/flashjit]   (default: build/release/tools/flashjit)
# Environment: RESULTS_DIR (default: bench/results beside this script), SEQLEN (default 1024),
# NAME (a suffix for the files, e.g. -after-issue-14; default none), ARCH (the GPU the emulator
# models: sm_80, the default, or sm_90a, whose defaults are the Hopper kernels), OPS (the ops,
# space-separated; default: the forward and the backward in both modes).
set -euo pipefail
flashjit=${1:-build/release/tools/flashjit}
seqlen=${SEQLEN:-1024}
arch=${ARCH:-sm_80}
ops=${OPS:-attention-forward attention-backward attention-backward:--deterministic}
results_dir=${RESULTS_DIR:-$(cd "$(dirname "$0")" && pwd)/results}
if [[ ! -x $flashjit ]]; then
  echo "work_counters.sh: no flashjit at '$flashjit' (build it, or pass its path)" >&2
  exit 2
fi
unset FLASHJIT_TUNING  # the defaults are the baseline, whatever a tuning database says
export FLASHJIT_TUNING=off
stem="$results_dir/$(date -u +%Y-%m-%d)-work-counters-emulator${NAME:-}"
log="$stem.log"
mkdir -p "$results_dir"
: >"$log"
fields=(tensor_flops shared_bytes_read shared_bytes_written global_bytes_read global_bytes_written
        barriers ctas ldmatrix_bytes tensor_flops_ratio global_bytes_ratio
        shared_bytes_per_tensor_flop)
rows=()
for variant in $ops; do
  op=${variant%%:*}
  mode=""
  [[ $variant == *:* ]] && mode=${variant#*:}
  for head_dim in 64 128 256; do
    for causal in "" --causal; do
      command=("$flashjit" run --emulate --counters --arch "$arch" --op "$op" $mode --head-dim "$head_dim"
               --seqlen-q "$seqlen" --heads 1 --dtype bf16 $causal)
      echo "\$ ${command[*]}" >>"$log"
      output=$("${command[@]}" 2>&1) || { echo "$output" >>"$log"; echo "failed: ${command[*]}" >&2; exit 1; }
      echo "$output" >>"$log"
      kernel=$(sed -n 's/^kernel:  \(.*\) (.*/\1/p' <<<"$output")
      is_causal=no
      [[ -n $causal ]] && is_causal=yes
      row="| $op${mode:+ $mode} | $head_dim | $is_causal | \`$kernel\`"
      for field in "${fields[@]}"; do
        row+=" | $(awk -v f="$field" '$1 == f {print $2}' <<<"$output")"
      done
      rows+=("$row |")
      echo "$op${mode:+ $mode} head dim $head_dim ${causal:-not causal}: done" >&2
    done
  done
done
{
  echo "# Work counters of the default kernels on the CPU emulator"
  echo
  echo "Commit $(git -C "$(dirname "$0")" rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC')."
  echo "Counted by the emulator modelling $arch, not timed: a counters claim, not a speed claim. bf16, batch 1,"
  echo "one head, seqlen_q = seqlen_k = $seqlen, the heuristic default config (tuning off). The"
  echo "backward's figures cover its kernels only (D, dK/dV, dQ), not the forward run before it."
  echo "Ratios: tensor_flops / the problem's useful FLOPs (FlashAttention's count, halved for"
  echo "causal; the backward 2.5x the forward); global bytes / every input read once and every"
  echo "output written once; (shared bytes read + written) / tensor FLOPs."
  echo
  echo "Made by \`ARCH=$arch OPS='$ops' bench/work_counters.sh $flashjit\`; every run's output is in"
  echo "$(basename "$log")."
  echo
  printf '| op | head dim | causal | kernel |'
  printf ' %s |' "${fields[@]}"
  echo
  printf '|---|---|---|---|'
  printf -- '---|%.0s' "${fields[@]}"
  echo
  printf '%s\n' "${rows[@]}"
} >"$stem.md"
echo "wrote $stem.md and $log"
