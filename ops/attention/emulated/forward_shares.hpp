#pragma once
// The forward files' shares of the emulated kernel table, for the forward's registry entry; each
// file defines one (so they compile in parallel).
#include "runtime/emulated_kernel_table.hpp"

namespace flashjit::kernels::emulated {

void add_forward_kernels_hdim8_to_40(detail::EmulatedKernelTable& table);
void add_forward_kernels_hdim64(detail::EmulatedKernelTable& table);
void add_forward_kernels_hdim64_alternatives(detail::EmulatedKernelTable& table);
void add_forward_kernels_hdim80_96(detail::EmulatedKernelTable& table);
void add_forward_kernels_hdim128(detail::EmulatedKernelTable& table);
void add_forward_kernels_hdim128_alternatives(detail::EmulatedKernelTable& table);
void add_forward_kernels_hdim256(detail::EmulatedKernelTable& table);
void add_kvcache_append_kernels(detail::EmulatedKernelTable& table);
void add_unused_rows_kernels(detail::EmulatedKernelTable& table);
void add_sinks_kernels(detail::EmulatedKernelTable& table);

}  // namespace flashjit::kernels::emulated
