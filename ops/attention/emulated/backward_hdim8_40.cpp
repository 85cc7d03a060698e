// Backward kernels for the emulator: the defaults at head dims 8 and 40 (fp16 and bf16, without
// and with the window mask, both modes).
#include "attention/emulated/backward_kernels.hpp"

namespace flashjit::kernels::emulated {
namespace {

constexpr auto kConfigs =
    concat(defaults(8, kBothDTypes, kBothMasks), defaults(40, kBothDTypes, kBothMasks));

}  // namespace

void add_backward_kernels_hdim8_40(detail::EmulatedKernelTable& table) {
  add_backward_configs<kConfigs>(table);
}

}  // namespace flashjit::kernels::emulated
