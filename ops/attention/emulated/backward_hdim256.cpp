// Backward kernels for the emulator: the defaults at head dim 256 (fp16 and bf16, without and
// with the window mask, both modes).
#include "attention/emulated/backward_kernels.hpp"

namespace flashjit::kernels::emulated {
namespace {

constexpr auto kConfigs = defaults(256, kBothDTypes, kBothMasks);

}  // namespace

void add_backward_kernels_hdim256(detail::EmulatedKernelTable& table) {
  add_backward_configs<kConfigs>(table);
}

}  // namespace flashjit::kernels::emulated
