#pragma once
// Moving registers between warpgroups (setmaxnreg, sm_90a): a warp-specialized kernel's
// producer warpgroup, which only issues TMA, gives registers back to the CTA's pool, and the
// consumer warpgroups, which hold the accumulators, take them (FlashAttention-3's hopper/
// kernels: 24/240 or 40/232 with two consumers). All 128 threads of a warpgroup call the same
// function with the same count: a multiple of 8 in 24..256, no more than held for a decrease
// and no less for an increase. An increase waits until other warpgroups' decreases have freed
// the registers. The emulator's twin checks all of it (emulator/register_budget.cpp).
#include "tile/platform.cuh"

namespace flashjit {

/// Whether `Registers` is a count setmaxnreg accepts.
template <int Registers>
constexpr bool kValidRegisterCount = Registers % 8 == 0 && Registers >= 24 && Registers <= 256;

#if defined(FJ_DEVICE_CODE)

/// setmaxnreg.dec: this warpgroup's threads keep `Registers` registers each; the rest go back
/// to the CTA's pool.
template <int Registers>
FJ_DEVICE void warpgroup_release_registers() {
  static_assert(kValidRegisterCount<Registers>, "setmaxnreg: a multiple of 8 in 24..256");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Registers) : "memory");
}

/// setmaxnreg.inc: this warpgroup's threads grow to `Registers` registers each, waiting until
/// the CTA's pool has them.
template <int Registers>
FJ_DEVICE void warpgroup_claim_registers() {
  static_assert(kValidRegisterCount<Registers>, "setmaxnreg: a multiple of 8 in 24..256");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Registers) : "memory");
}

#else  // host twins: the emulator's model of the same instructions

template <int Registers>
inline void warpgroup_release_registers() {
  static_assert(kValidRegisterCount<Registers>, "setmaxnreg: a multiple of 8 in 24..256");
  emulator::setmaxnreg_dec(Registers);
}

template <int Registers>
inline void warpgroup_claim_registers() {
  static_assert(kValidRegisterCount<Registers>, "setmaxnreg: a multiple of 8 in 24..256");
  emulator::setmaxnreg_inc(Registers);
}

#endif

}  // namespace flashjit
