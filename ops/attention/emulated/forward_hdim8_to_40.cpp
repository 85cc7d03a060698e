// Forward kernels for the emulator: the defaults of the small head dims.
#include "attention/emulated/forward_kernels.hpp"

namespace flashjit::kernels::emulated {
namespace {

constexpr auto kConfigs =
    concat(every_dtype_and_mask(8, kDefaultUpTo64), every_dtype_and_mask(16, kDefaultUpTo64),
           every_dtype_and_mask(32, kDefaultUpTo64), every_dtype_and_mask(40, kDefaultUpTo64));

}  // namespace

void add_forward_kernels_hdim8_to_40(detail::EmulatedKernelTable& table) {
  add_forward_configs<kConfigs>(table);
}

}  // namespace flashjit::kernels::emulated
