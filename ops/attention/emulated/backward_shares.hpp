#pragma once
// The backward files' shares of the emulated kernel table, for the backward's registry entry;
// each file defines one (so they compile in parallel).
#include "runtime/emulated_kernel_table.hpp"

namespace flashjit::kernels::emulated {

void add_backward_kernels_hdim8_40(detail::EmulatedKernelTable& table);
void add_backward_kernels_hdim64(detail::EmulatedKernelTable& table);
void add_backward_kernels_hdim128(detail::EmulatedKernelTable& table);
void add_backward_kernels_hdim256(detail::EmulatedKernelTable& table);
void add_backward_kernels_softcap(detail::EmulatedKernelTable& table);

}  // namespace flashjit::kernels::emulated
