#pragma once
// The kernels the emulator backend can run without a GPU: every template instance compiled
// into flashjit by the host compiler (the files of this folder).
#include "runtime/emulated_kernel_table.hpp"

namespace flashjit::kernels::emulated {

/// The table of build-time specializations, filled on first use; it lives for the process.
const detail::EmulatedKernelTable& builtin_kernels();

}  // namespace flashjit::kernels::emulated
