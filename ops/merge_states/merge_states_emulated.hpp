#pragma once
// The merge_states file's share of the emulated kernel table (beside the other ops' in
// emulated_kernel.hpp and backward_shares.hpp), for registry.cpp.
#include "runtime/emulated_kernel_table.hpp"

namespace flashjit::kernels::emulated {

void add_merge_states_kernels(detail::EmulatedKernelTable& table);

}  // namespace flashjit::kernels::emulated
