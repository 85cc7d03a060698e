// Forward kernels for the emulator: other tiles at head dim 64 (bf16), so tests can run several
// configs per shape: Q read from shared memory (the default keeps it in registers), Br 64, Bc
// 32 and 128, one stage, and 8 warps.
#include "attention/emulated/forward_kernels.hpp"

namespace flashjit::kernels::emulated {
namespace {

constexpr auto kConfigs =
    concat(bf16_both_masks(64, {64, 64, 4, 1}), bf16_both_masks(64, {128, 128, 4, 2}),
           bf16_both_masks(64, {128, 32, 8, 1}), bf16_both_masks(64, {64, 128, 4, 2}),
           bf16_both_masks(64, {128, 64, 4, 2}));

}  // namespace

void add_forward_kernels_hdim64_alternatives(detail::EmulatedKernelTable& table) {
  add_forward_configs<kConfigs>(table);
}

}  // namespace flashjit::kernels::emulated
