#pragma once
// The layer_norm file's share of the emulated kernel table, for its registry entry.
#include "runtime/emulated_kernel_table.hpp"

namespace flashjit::kernels::emulated {

void add_layer_norm_kernels(detail::EmulatedKernelTable& table);

}  // namespace flashjit::kernels::emulated
