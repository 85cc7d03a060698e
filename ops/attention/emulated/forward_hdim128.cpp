// Forward kernels for the emulator: the defaults at head dim 128, with softcap for bf16.
#include "attention/emulated/forward_kernels.hpp"

namespace flashjit::kernels::emulated {
namespace {

constexpr auto kConfigs = concat(every_dtype_and_mask(128, kDefaultUpTo128),
                                 bf16_both_masks(128, kDefaultUpTo128, /*softcap=*/true));

}  // namespace

void add_forward_kernels_hdim128(detail::EmulatedKernelTable& table) {
  add_forward_configs<kConfigs>(table);
}

}  // namespace flashjit::kernels::emulated
