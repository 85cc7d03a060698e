// The emulated kernel table's contents: every file's share, added explicitly (registration by
// static initializers would be dropped from a static library).
#include "common/builtin_kernels.hpp"

#include "attention/emulated/backward_shares.hpp"
#include "common/emulated_kernel.hpp"
#include "layer_norm/layer_norm_emulated.hpp"
#include "merge_states/merge_states_emulated.hpp"

namespace flashjit::kernels::emulated {
namespace {

void add_every_kernel(detail::EmulatedKernelTable& table) {
  add_softmax_kernels(table);
  add_merge_states_kernels(table);
  add_layer_norm_kernels(table);
  add_forward_kernels_hdim8_to_40(table);
  add_forward_kernels_hdim64(table);
  add_forward_kernels_hdim64_alternatives(table);
  add_forward_kernels_hdim80_96(table);
  add_forward_kernels_hdim128(table);
  add_forward_kernels_hdim128_alternatives(table);
  add_forward_kernels_hdim256(table);
  add_backward_kernels_hdim8_40(table);
  add_backward_kernels_hdim64(table);
  add_backward_kernels_hdim128(table);
  add_backward_kernels_hdim256(table);
  add_backward_kernels_softcap(table);
}

}  // namespace

const detail::EmulatedKernelTable& builtin_kernels() {
  static const detail::EmulatedKernelTable table = [] {
    detail::EmulatedKernelTable filled;
    add_every_kernel(filled);
    return filled;
  }();
  return table;
}

}  // namespace flashjit::kernels::emulated
