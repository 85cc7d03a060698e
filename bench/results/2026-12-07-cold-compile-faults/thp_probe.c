// First touch of 64 MB of fresh anonymous memory: the page faults and the time it takes, with
// 4 KB pages, or (given any argument) after madvise(MADV_HUGEPAGE) on a 2 MB-aligned range.
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char** argv) {
  (void)argv;
  const size_t bytes = 64u << 20, huge = 2u << 20;
  char* raw = mmap(NULL, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return 1;
  char* memory = (char*)(((unsigned long)raw + huge - 1) & ~(unsigned long)(huge - 1));
  if (argc > 1) printf("madvise(MADV_HUGEPAGE) = %d\n", madvise(memory, bytes, MADV_HUGEPAGE));
  struct rusage before, after;
  getrusage(RUSAGE_SELF, &before);
  const double start = now_ms();
  for (size_t i = 0; i < bytes; i += 4096) memory[i] = 1;
  const double took = now_ms() - start;
  getrusage(RUSAGE_SELF, &after);
  printf("%ld minor faults, %.1f ms\n", after.ru_minflt - before.ru_minflt, took);
  FILE* rollup = fopen("/proc/self/smaps_rollup", "r");
  char line[256];
  while (rollup && fgets(line, sizeof line, rollup)) {
    if (strstr(line, "AnonHugePages")) fputs(line, stdout);
  }
  return 0;
}
