// Forward kernels for the emulator: other tiles at head dim 128 (bf16), so tests can run
// several configs per shape: 8 warps of 16 rows (the default has 4 of 32), Bc 32 (sm_90's
// default) and 128, Br 64 with Q in registers, one stage.
#include "attention/emulated/forward_kernels.hpp"

namespace flashjit::kernels::emulated {
namespace {

constexpr auto kConfigs =
    concat(bf16_both_masks(128, {128, 64, 8, 2}), bf16_both_masks(128, {64, 64, 4, 2}),
           bf16_both_masks(128, {128, 32, 4, 2}), bf16_both_masks(128, {64, 128, 4, 1}),
           bf16_both_masks(128, {64, 64, 4, 2, /*q_in_registers=*/true}));

}  // namespace

void add_forward_kernels_hdim128_alternatives(detail::EmulatedKernelTable& table) {
  add_forward_configs<kConfigs>(table);
}

}  // namespace flashjit::kernels::emulated
