#!/usr/bin/env bash
# Reproduces bench/results/2026-12-07-cold-compile-faults.md's numbers: run from the repository
# root with the ci build in build/ci, on an otherwise idle machine.
set -u
FJ=build/ci/tools/flashjit
DIR=bench/results/2026-12-07-cold-compile-faults
SET=(autotune --warm --arch sm_90a --op attention-forward,attention-backward --head-dim 128 --seqlen 4096)
echo "## the set cold, -j 2 then -j 1 (each kernel's compile time in the order finished, the"
echo "## count line; /usr/bin/time: wall user sys minflt)"
for j in 2 2 2 2 2 1 1; do
  export FLASHJIT_CACHE_DIR=$(mktemp -d)
  /usr/bin/time -f "-j $j: %e wall %U user %S sys %R minflt" "$FJ" "${SET[@]}" -j $j 2>&1 |
    grep -v "^== " | awk '/sm90a +sm_90a/ {print $1, $(NF-1), $NF; next} {print}'
done
echo "## glibc malloc tunables, -j 2"
for t in "" glibc.malloc.hugetlb=1 "glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=33554432"; do
  export FLASHJIT_CACHE_DIR=$(mktemp -d)
  GLIBC_TUNABLES=$t /usr/bin/time -f "[$t] %e wall %U user %S sys %R minflt" "$FJ" "${SET[@]}" -j 2 2>&1 | tail -1
done
echo "## where the page faults are (perf record -e page-faults -d, -j 2)"
export FLASHJIT_CACHE_DIR=$(mktemp -d)
perf record -q -e page-faults -d -o /tmp/pf.data "$FJ" "${SET[@]}" -j 2 > /dev/null 2>&1
echo "# by the code that faulted"
perf report -i /tmp/pf.data --sort dso --stdio 2>/dev/null | grep -E "^ +[0-9]"
echo "# by the memory faulted on"
perf report -i /tmp/pf.data --mem-mode --sort dso_daddr --stdio 2>/dev/null | grep -E "^ +[0-9]"
echo "## first touch of 64 MB of fresh anonymous memory, 4 KB pages then MADV_HUGEPAGE"
echo "# THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
gcc -O2 "$DIR/thp_probe.c" -o /tmp/thp_probe && /tmp/thp_probe && /tmp/thp_probe huge
echo "## process start to the compile workers (strace -f -tt, -j 2)"
export FLASHJIT_CACHE_DIR=$(mktemp -d)
strace -f -tt -e trace=execve,clone3,openat -o /tmp/st.txt "$FJ" "${SET[@]}" -j 2 > /dev/null 2>&1
grep -E "execve|clone3|libnvrtc.so" /tmp/st.txt | grep -v ENOENT | cut -c1-120
echo "## loading libnvrtc alone (three fresh processes)"
gcc -O2 "$DIR/dlopen_probe.c" -o /tmp/dlopen_probe -ldl
for i in 1 2 3; do /tmp/dlopen_probe; done
readelf -d /usr/local/cuda/lib/libnvrtc.so.13 | grep RELACOUNT
