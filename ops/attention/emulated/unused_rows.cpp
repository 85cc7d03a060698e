// The unused rows' fill (attention/inference/unused_rows_kernel.cuh), host-compiled for the
// emulator: o's and the gradients' two 16-bit types, and lse's fp32.
#include "attention/inference/unused_rows.hpp"

#include "attention/emulated/forward_shares.hpp"
#include "attention/inference/unused_rows_kernel.cuh"
#include "common/emulated_kernel.hpp"

namespace flashjit::kernels::emulated {
namespace {

constexpr DType kFillTypes[] = {DType::f16, DType::bf16, DType::f32};

}  // namespace

void add_unused_rows_kernels(detail::EmulatedKernelTable& table) {
  for_each_config<kFillTypes>([&]<DType D>() {
    table.add({unused_rows_spec(D, detail::kEmulatorArch),
               &HostLauncher<&unused_rows_kernel<Element<D>>>::launch});
  });
}

}  // namespace flashjit::kernels::emulated
