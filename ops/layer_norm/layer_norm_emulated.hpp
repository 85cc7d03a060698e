#pragma once
// The layer_norm file's share of the emulated kernel table (beside the other ops' in
// emulated_kernel.hpp, backward_shares.hpp and merge_states_share.hpp), for registry.cpp.
#include "runtime/emulated_kernel_table.hpp"

namespace flashjit::kernels::emulated {

void add_layer_norm_kernels(detail::EmulatedKernelTable& table);

}  // namespace flashjit::kernels::emulated
