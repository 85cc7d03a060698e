// The sinks' kernels (attention/sinks/sinks_kernel.cuh), host-compiled for the emulator: the
// forward's pass and the gradient's partial sums, for o's two 16-bit types, and the gradient's
// ordered sum. Both ops' calls use them; they
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
    table.add({sinks_spec(SinkKernel::apply, D, detail::kEmulatorArch),
               &HostLauncher<&attention_sinks_kernel<Element<D>>>::launch});
    table.add({sinks_spec(SinkKernel::gradient, D, detail::kEmulatorArch),
               &HostLauncher<&attention_sink_gradient_kernel<Element<D>>>::launch});
  });
  table.add({sinks_spec(SinkKernel::gradient_sum, DType::f32, detail::kEmulatorArch),
             &HostLauncher<&attention_sink_gradient_sum_kernel>::launch});
}

}  // namespace flashjit::kernels::emulated
