// Backward kernels for the emulator: every tile of the space at head dim 128 (fp16 and bf16,
// without and with the window mask), the default among them.
#include "backward_kernels.hpp"

namespace flashjit::kernels::emulated {
namespace {

constexpr auto kConfigs = combine(128, every_tile<128>(), kBothDTypes, kBothMasks);

}  // namespace

void add_backward_kernels_hdim128(detail::EmulatedKernelTable& table) {
  add_backward_configs<kConfigs>(table);
}

}  // namespace flashjit::kernels::emulated
