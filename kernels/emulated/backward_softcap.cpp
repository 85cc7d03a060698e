// Backward kernels for the emulator: softcap, every tile of the space at head dims 64 and 128
// (bf16, without and with the window mask).
#include "backward_kernels.hpp"

namespace flashjit::kernels::emulated {
namespace {

constexpr std::array<DType, 1> kBf16 = {DType::bf16};
constexpr auto kConfigs =
    concat(combine(64, every_tile<64>(), kBf16, kBothMasks, /*softcap=*/true),
           combine(128, every_tile<128>(), kBf16, kBothMasks, /*softcap=*/true));

}  // namespace

void add_backward_kernels_softcap(detail::EmulatedKernelTable& table) {
  add_backward_configs<kConfigs>(table);
}

}  // namespace flashjit::kernels::emulated
