#pragma once
// The merge_states file's share of the emulated kernel table, for its registry entry.
#include "runtime/emulated_kernel_table.hpp"

namespace flashjit::kernels::emulated {

void add_merge_states_kernels(detail::EmulatedKernelTable& table);

}  // namespace flashjit::kernels::emulated
