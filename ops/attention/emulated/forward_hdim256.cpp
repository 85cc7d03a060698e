// Forward kernels for the emulator: the defaults at head dim 256.
#include "attention/emulated/forward_kernels.hpp"

namespace flashjit::kernels::emulated {
namespace {

constexpr auto kConfigs = every_dtype_and_mask(256, kDefault256);

}  // namespace

void add_forward_kernels_hdim256(detail::EmulatedKernelTable& table) {
  add_forward_configs<kConfigs>(table);
}

}  // namespace flashjit::kernels::emulated
