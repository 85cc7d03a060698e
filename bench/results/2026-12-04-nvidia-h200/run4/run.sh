#!/bin/bash
# Third call of 2026-12-04: host time per call, eager against the custom operators, the C call
# alone; then layer norm and decoding benches on the eager path.
set -u
repo=$PWD; out=$1; r=$out/r; mkdir -p $r
export PYTHONUNBUFFERED=1 FLASHJIT_CACHE_DIR=/tmp/fjc3
lib=$repo/build/gpu-pack/api/libflashjit.so
cd $repo/bench
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $repo/build/gpu-pack/flashjit-commit.txt; git -C $repo rev-parse --short HEAD 2>/dev/null; } > $r/info.log
timeout 70 python3 call_overhead.py --lib $lib --out $r/overhead.md --runs 20 > $r/overhead.log 2>&1
timeout 30 python3 layernorm.py --lib $lib --out $r/layernorm.md --dtypes bf16 > $r/layernorm.log 2>&1
timeout 30 python3 decode.py --lib $lib --out $r/decode.md --batches 1,8,64 --contexts 4096,32768 --suites grid > $r/decode.log 2>&1
cat $r/overhead.md; grep bf16 $r/layernorm.md; cut -c1-90 $r/decode.md | grep decode
tar czf $out/run3.tgz -C $out r; rm -rf $r
