// The emulated kernel table's contents: every file's share, added explicitly (registration by
// static initializers would be dropped from a static library).
#include "backward_shares.hpp"
#include "emulated_kernel.hpp"

namespace flashjit::detail {

void register_emulated_kernels(EmulatedKernelTable& table) {
  using namespace kernels::emulated;
  add_softmax_kernels(table);
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

}  // namespace flashjit::detail
