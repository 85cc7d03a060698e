#pragma once
// The softmax's share of the emulated kernel table (softmax_emulated.cpp), for its registry entry.
#include "runtime/emulated_kernel_table.hpp"

namespace flashjit::kernels::emulated {

void add_softmax_kernels(detail::EmulatedKernelTable& table);

}  // namespace flashjit::kernels::emulated
