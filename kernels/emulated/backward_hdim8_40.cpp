// Backward kernels for the emulator: the defaults at head dims 8 and 40 (fp16 and bf16, without
// and with the window mask).
#include "backward_kernels.hpp"

namespace flashjit::kernels::emulated {
namespace {

constexpr std::array<BackwardTile, 1> kDefault = {kBackwardDefaultUpTo64};
constexpr auto kConfigs = concat(combine(8, kDefault, kBothDTypes, kBothMasks),
                                 combine(40, kDefault, kBothDTypes, kBothMasks));

}  // namespace

void add_backward_kernels_hdim8_40(detail::EmulatedKernelTable& table) {
  add_backward_configs<kConfigs>(table);
}

}  // namespace flashjit::kernels::emulated
