#!/bin/bash
# Second call of 2026-12-04: before (fac9787's library) and after (6b7494f) in one run.
set -u
repo=$PWD; out=$1; mkdir -p $out/r; r=$out/r
export PYTHONUNBUFFERED=1 FLASHJIT_CACHE_DIR=/tmp/fjc2
new=$repo/build/gpu-pack/api/libflashjit.so; old=$repo/build/gpu-pack-old/libflashjit.so
fj=$repo/build/gpu-pack/tools/flashjit
cd $repo/bench
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "old: $(cat $repo/build/gpu-pack-old/commit.txt) new: $(cat $repo/build/gpu-pack/flashjit-commit.txt)"; } > $r/info.log
for v in old new; do lib=${!v}
  echo "== $v call_overhead"; timeout 60 python3 call_overhead.py --lib $lib --out $r/overhead-$v.md --runs 20
  echo "== $v layernorm"; timeout 45 python3 layernorm.py --lib $lib --out $r/layernorm-$v.md --dtypes bf16
  echo "== $v decode"; timeout 40 python3 decode.py --lib $lib --out $r/decode-$v.md --batches 1,8,64 --contexts 4096,32768 --suites grid
  echo "== $v attention backward"; timeout 50 python3 attention.py --lib $lib --out $r/attention-$v.md --head-dims 128,64 --seqlens 1024,4096 --dtypes bf16 --ops backward --causal false --impls flashjit,sdpa-cudnn --time-limit-s 40
done > $r/bench.log 2>&1
cd $repo
for a in "--op layer-norm --rows 512 --cols 16384 --bias --residual" "--op layer-norm --rows 64 --cols 65536 --rms" "--op layer-norm --rows 4096 --cols 768 --dtype fp32" "--op layer-norm --rows 1000 --cols 4097" "--op attention-backward --varlen 5 --dropout 0.2 --seqlen-q 300 --heads 4 --head-dim 128" "--op attention-backward --batch 2 --heads 8 --heads-kv 2 --seqlen-q 600 --head-dim 128 --causal" "--op attention-backward --batch 2 --heads 8 --seqlen-q 500 --head-dim 256 --deterministic"; do
  echo "== flashjit run --seed 1 $a"; timeout 60 $fj run --seed 1 $a 2>&1 | tail -4; echo "== exit ${PIPESTATUS[0]}"
done > $r/features.log 2>&1
FLASHJIT_LINEINFO=1 timeout 60 ncu --clock-control none -k regex:layer_norm --launch-count 6 --section SpeedOfLight --section LaunchStats $fj run --op layer-norm --rows 4096 --cols 768 > $r/ncu-layernorm.log 2>&1
grep -E "== |PASS|FAIL" $r/features.log; cat $r/overhead-*.md; grep -E "layer_norm|Duration" $r/ncu-layernorm.log | head -20
tar czf $out/run2.tgz -C $out r; rm -rf $r
