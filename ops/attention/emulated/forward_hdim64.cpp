// Forward kernels for the emulator: the defaults at head dim 64, with softcap for bf16.
#include "attention/emulated/forward_kernels.hpp"

namespace flashjit::kernels::emulated {
namespace {

constexpr auto kConfigs = concat(every_dtype_and_mask(64, kDefaultUpTo64),
                                 bf16_both_masks(64, kDefaultUpTo64, /*softcap=*/true));

}  // namespace

void add_forward_kernels_hdim64(detail::EmulatedKernelTable& table) {
  add_forward_configs<kConfigs>(table);
}

}  // namespace flashjit::kernels::emulated
