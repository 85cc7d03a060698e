#pragma once
// Kernels that instantiate the tile library's Hopper device PTX, for the NVRTC compile test
// (tests/templates/test_tile_device_compile.cpp): they are built for sm_90a and never run, so
// each only has to use every instruction variant it is about.
#include "tile/memory.cuh"
#include "tile/register_budget.cuh"

namespace flashjit::testing {

/// setmaxnreg as FlashAttention-3 uses it: warpgroup 0 (the producer) releases registers, the
/// other two (the consumers) claim them. setmaxnreg needs a register count known at launch,
/// which __launch_bounds__ gives ptxas.
template <int Producer, int Consumer>
FJ_GLOBAL void __launch_bounds__(384, 1) register_budget_probe(const float* in, float* out) {
  const int t = static_cast<int>(threadIdx.x);
  if (t / 128 == 0) {
    warpgroup_release_registers<Producer>();
  } else {
    warpgroup_claim_registers<Consumer>();
  }
  store_global(out, t, load_global(in, t));
}

}  // namespace flashjit::testing
