// The sinks' kernels (attention/sinks/sinks_kernel.cuh), host-compiled for the emulator: the
// forward's pass and the gradient, for o's two 16-bit types. Both ops' calls use them; they
// sit with the forward's share.
#include "attention/emulated/forward_shares.hpp"
#include "attention/sinks/attention_sinks.hpp"
#include "attention/sinks/sinks_kernel.cuh"
#include "common/emulated_kernel.hpp"

namespace flashjit::kernels::emulated {
namespace {

constexpr DType kSinkTypes[] = {DType::f16, DType::bf16};

}  // namespace

void add_sinks_kernels(detail::EmulatedKernelTable& table) {
  for_each_config<kSinkTypes>([&]<DType D>() {
    table.add({sinks_spec(D, false, detail::kEmulatorArch),
               &HostLauncher<&attention_sinks_kernel<Element<D>>>::launch});
    table.add({sinks_spec(D, true, detail::kEmulatorArch),
               &HostLauncher<&attention_sink_gradient_kernel<Element<D>>>::launch});
  });
}

}  // namespace flashjit::kernels::emulated
