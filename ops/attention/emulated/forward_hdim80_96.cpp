// Forward kernels for the emulator: the defaults at head dims 80 and 96.
#include "attention/emulated/forward_kernels.hpp"

namespace flashjit::kernels::emulated {
namespace {

constexpr auto kConfigs =
    concat(every_dtype_and_mask(80, kDefaultUpTo96), every_dtype_and_mask(96, kDefaultUpTo96));

}  // namespace

void add_forward_kernels_hdim80_96(detail::EmulatedKernelTable& table) {
  add_forward_configs<kConfigs>(table);
}

}  // namespace flashjit::kernels::emulated
