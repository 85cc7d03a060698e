// Backward kernels for the emulator at head dim 64: the defaults (fp16 and bf16, without and
// with the window mask, both modes) and, in bf16, alternatives the tests sweep: a 4-warp grid
// split in both dimensions with one Q/dO stage, 2 warps, and the deterministic mode's smaller dQ
// tile.
#include "attention/emulated/backward_kernels.hpp"

namespace flashjit::kernels::emulated {
namespace {

constexpr std::array<BackwardTiles, 2> kAtomic = {{{{32, 32, 4, 1}}, {{32, 32, 2, 2}}}};
constexpr std::array<BackwardTiles, 1> kDeterministic = {{{{32, 32, 4, 1}, {32, 32, 2}}}};
constexpr auto kConfigs =
    concat(defaults(64, kBothDTypes, kBothMasks), alternatives(64, false, kAtomic),
           alternatives(64, true, kDeterministic));

}  // namespace

void add_backward_kernels_hdim64(detail::EmulatedKernelTable& table) {
  add_backward_configs<kConfigs>(table);
}

}  // namespace flashjit::kernels::emulated
