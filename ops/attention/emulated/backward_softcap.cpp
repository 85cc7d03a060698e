// Backward kernels for the emulator: softcap, the defaults at head dims 64 and 128 (bf16,
// without and with the window mask, both modes).
#include "attention/emulated/backward_kernels.hpp"

namespace flashjit::kernels::emulated {
namespace {

constexpr std::array<DType, 1> kBf16 = {DType::bf16};
constexpr auto kConfigs = concat(defaults(64, kBf16, kBothMasks, /*softcap=*/true),
                                 defaults(128, kBf16, kBothMasks, /*softcap=*/true));

}  // namespace

void add_backward_kernels_softcap(detail::EmulatedKernelTable& table) {
  add_backward_configs<kConfigs>(table);
}

}  // namespace flashjit::kernels::emulated
