// Backward kernels for the emulator at head dim 128: the defaults (fp16 and bf16, without and
// with the window mask, both modes) and, in bf16, alternatives the tests sweep: Br = Bc = 64 over
// 8 warps, 4 warps with one Q/dO stage, and the deterministic mode's smaller dQ tile.
#include "attention/emulated/backward_kernels.hpp"

namespace flashjit::kernels::emulated {
namespace {

constexpr std::array<BackwardTiles, 2> kAtomic = {{{{64, 64, 8, 2}}, {{32, 64, 4, 1}}}};
constexpr std::array<BackwardTiles, 1> kDeterministic = {{{{64, 64, 8, 2}, {32, 32, 2}}}};
constexpr auto kConfigs =
    concat(defaults(128, kBothDTypes, kBothMasks), alternatives(128, false, kAtomic),
           alternatives(128, true, kDeterministic));

}  // namespace

void add_backward_kernels_hdim128(detail::EmulatedKernelTable& table) {
  add_backward_configs<kConfigs>(table);
}

}  // namespace flashjit::kernels::emulated
