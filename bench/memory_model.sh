#!/usr/bin/env bash
# The emulator's memory model (docs/emulator.md, "Memory model") over every op's default
# kernels on sm_90a: per kernel, the worst shared site's wavefronts per request and the
# average, global sector use, bytes in flight per SM, and the op's modelled DRAM bytes against
# its minimum. Each run is `flashjit run --emulate --arch sm_90a --counters-json`, which also
# checks the result against the float64 reference. The performance issues read it as their
# no-GPU evidence: a counters claim, not a speed claim.
#
# Writes bench/results/<date>-memory-model-sm90a<NAME>.md (the table, the commands, the commit)
# and the raw .log beside it, with each run's JSON in a folder of that name; exits 1 when a run
# fails.
#
# Usage: bench/memory_model.sh [path/to/flashjit]   (default: build/release/tools/flashjit)
# Environment: RESULTS_DIR (default: bench/results beside this script), NAME (a suffix for the
# files, e.g. -after-issue-65; default none).
set -euo pipefail
flashjit=${1:-build/release/tools/flashjit}
results_dir=${RESULTS_DIR:-$(cd "$(dirname "$0")" && pwd)/results}
if [[ ! -x $flashjit ]]; then
  echo "memory_model.sh: no flashjit at '$flashjit' (build it, or pass its path)" >&2
  exit 2
fi
export FLASHJIT_TUNING=off  # the defaults, whatever a tuning database says
stem="$results_dir/$(date -u +%Y-%m-%d)-memory-model-sm90a${NAME:-}"
log="$stem.log"
json_dir="$stem"
mkdir -p "$results_dir" "$json_dir"
: >"$log"
# One run a line: a label, then the options after `flashjit run --emulate --arch sm_90a`.
runs=(
  "forward-d64|--op attention-forward --head-dim 64 --seqlen-q 1024 --heads 2"
  "forward-d128|--op attention-forward --head-dim 128 --seqlen-q 1024 --heads 2"
  "forward-d256|--op attention-forward --head-dim 256 --seqlen-q 1024 --heads 2"
  "forward-d128-causal|--op attention-forward --head-dim 128 --seqlen-q 1024 --heads 2 --causal"
  "backward-d64|--op attention-backward --head-dim 64 --seqlen-q 1024 --heads 2"
  "backward-d128|--op attention-backward --head-dim 128 --seqlen-q 1024 --heads 2"
  "backward-d256|--op attention-backward --head-dim 256 --seqlen-q 1024 --heads 2"
  "backward-d128-deterministic|--op attention-backward --head-dim 128 --seqlen-q 1024 --heads 2 --deterministic"
  "decode-paged-d128|--op attention-forward --paged --head-dim 128 --seqlen-q 1 --seqlen-k 4096 --batch 2 --heads 32 --heads-kv 4"
  "prefill-varlen-d128|--op attention-forward --varlen 3 --head-dim 128 --seqlen-q 512 --heads 2"
  "softmax|--op softmax --rows 256 --cols 4096"
  "layer-norm|--op layer-norm --rows 256 --cols 4096"
  "rms-norm|--op layer-norm --rows 256 --cols 4096 --rms"
  "merge-states|--op merge-states --seqlen-q 256 --heads 8 --head-dim 128"
  "multiscale|--op multiscale --seqlen-q 256 --heads 2"
)
rows=()
for entry in "${runs[@]}"; do
  label=${entry%%|*}
  read -r -a options <<<"${entry#*|}"
  json="$json_dir/$label.json"
  command=("$flashjit" run --emulate --arch sm_90a "${options[@]}" --counters --counters-json "$json")
  echo "\$ ${command[*]}" >>"$log"
  output=$("${command[@]}" 2>&1) || { echo "$output" >>"$log"; echo "failed: ${command[*]}" >&2; exit 1; }
  echo "$output" >>"$log"
  rows+=("$(python3 - "$label" "$json" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
report = json.load(open(path))
ratios = report["ratios"]
lines = []
for kernel in report["kernels"]:
    m = kernel["counters"].get("memory", {})
    sites = m.get("sites", [])
    shared = [s for s in sites if s["kind"] not in ("global_load", "global_store")]
    worst = max(shared, key=lambda s: (s["conflict_degree"], s["wavefronts_per_request"]),
                default=None)
    lsu = [s for s in shared if s["kind"] != "wgmma_operand"]
    requests = sum(s["requests"] for s in lsu)
    average = sum(s["wavefronts"] for s in lsu) / requests if requests else None
    glob = [s for s in sites if s["kind"] in ("global_load", "global_store")]
    sector = sum(s["sector_bytes"] for s in glob)
    use = sum(s["bytes"] for s in glob) / sector if sector else None
    worst_text = ("%.2f, %.2fx the fewest (`%s` %s)" % (
        worst["wavefronts_per_request"], worst["conflict_degree"], worst["site"],
        worst["instruction"])) if worst else "-"
    lines.append("| %s | `%s` | %s | %s | %s | %d (%d x %d) | %d |" % (
        label, kernel["kernel"], worst_text,
        "%.2f" % average if average is not None else "-",
        "%.3f" % use if use is not None else "-",
        m.get("bytes_in_flight_per_sm", 0), m.get("ctas_per_sm", 0),
        m.get("bytes_in_flight_per_cta", 0),
        m.get("dram_bytes_read", 0) + m.get("dram_bytes_written", 0)))
lines[-1] += " %.3f |" % ratios.get("dram_bytes_ratio", 0)
for i in range(len(lines) - 1):
    lines[i] += " |"
print("\n".join(lines))
PY
)")
  echo "$label: done" >&2
done
{
  echo "# The emulator's memory model over the sm_90a defaults"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown), \`bench/memory_model.sh $flashjit\`."
  echo "Each run: \`flashjit run --emulate --arch sm_90a <options> --counters --counters-json <file>\`"
  echo "(options and output in the .log, each run's JSON in the folder of the same name). Counters"
  echo "and a model, not a GPU: what ncu's memory tables would show (docs/emulator.md)."
  echo
  echo "Columns: the worst shared site (the highest conflict degree: wavefronts over the fewest its"
  echo "bytes could take; wgmma operands included, a core matrix a request), its wavefronts per"
  echo "request, the average over LSU shared requests (ncu's N-way), global sector use"
  echo "(bytes used of the 32-byte sectors the LSU requests touch; TMA excluded), bytes in flight"
  echo "per SM (CTAs per SM x the most one CTA had outstanding), the kernel's modelled DRAM bytes,"
  echo "and, on the op's last kernel, the op's modelled DRAM bytes over its minimum."
  echo
  echo "| run | kernel | worst shared site | average | sector use | bytes in flight / SM | DRAM bytes | DRAM ratio |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
  printf '%s\n' "${rows[@]}"
} >"$stem.md"
echo "wrote $stem.md"
