// How long loading libnvrtc takes in a fresh process: dlopen (RTLD_NOW) alone, then one call.
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>
static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
int main(void) {
  double t0 = now_ms();
  void* handle = dlopen("libnvrtc.so.13", RTLD_NOW);
  double t1 = now_ms();
  if (!handle) return 1;
  int (*version)(int*, int*) = (int (*)(int*, int*))dlsym(handle, "nvrtcVersion");
  int major = 0, minor = 0;
  version(&major, &minor);
  printf("dlopen %.1f ms, nvrtcVersion %.1f ms (%d.%d)\n", t1 - t0, now_ms() - t1, major, minor);
  return 0;
}
