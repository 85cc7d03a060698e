#pragma once
// Programmatic dependent launch (sm_90 and later): a kernel the host launches to overlap the
// one before it in its stream (LaunchShape::overlap_previous) may start while that kernel still
// runs, so its launch and set-up hide behind that kernel's tail. Each of its threads then waits
// for the earlier kernel (griddepcontrol.wait) before touching any global memory: that kernel
// may still be writing what this one reads, or reading what this one writes. A kernel lets the
// next one start early with allow_next_grid(); until then the next one starts when this one's
// blocks exit. On earlier GPUs, and on launches that overlap nothing, both are no-ops; the
// emulator reports a global access before the wait in an overlapping launch.
#include "tile/platform.cuh"

namespace flashjit {

/// griddepcontrol.wait: returns once the grids this launch depends on have completed and their
/// writes are visible. Call it in every thread before its first global access.
FJ_DEVICE void wait_for_previous_grid() {
#if defined(FJ_DEVICE_CODE)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
#elif defined(FLASHJIT_EMULATOR)
  emulator::grid_dependency_wait();
#endif
}

/// griddepcontrol.launch_dependents: the next grid in the stream, if it was launched to overlap
/// this one, may start its blocks now (they still wait for this grid's completion before they
/// touch memory). Call it once the rest of this kernel no longer needs the whole GPU.
FJ_DEVICE void allow_next_grid() {
#if defined(FJ_DEVICE_CODE)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
#elif defined(FLASHJIT_EMULATOR)
  emulator::launch_dependent_grids();
#endif
}

}  // namespace flashjit
