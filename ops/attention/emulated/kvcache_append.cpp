// The KV-cache append kernels (attention/kvcache_append_kernel.cuh), host-compiled for the
// emulator: both dtypes, each rotation.
#include "attention/kvcache_append.hpp"

#include "attention/emulated/forward_shares.hpp"
#include "attention/kvcache_append_kernel.cuh"
#include "common/emulated_kernel.hpp"

namespace flashjit::kernels::emulated {
namespace {

struct AppendKernel {
  DType dtype;
  RotaryKind rotary;
};

constexpr AppendKernel kAppendKernels[] = {
    {DType::f16, RotaryKind::none},        {DType::f16, RotaryKind::half},
    {DType::f16, RotaryKind::interleaved}, {DType::bf16, RotaryKind::none},
    {DType::bf16, RotaryKind::half},       {DType::bf16, RotaryKind::interleaved}};

}  // namespace

void add_kvcache_append_kernels(detail::EmulatedKernelTable& table) {
  for_each_config<kAppendKernels>([&]<AppendKernel K>() {
    using Config = KVCacheAppendConfig<Element<K.dtype>, K.rotary>;
    table.add({kvcache_append_spec(K.dtype, K.rotary, detail::kEmulatorArch),
               &HostLauncher<&kvcache_append_kernel<Config>>::launch});
  });
}

}  // namespace flashjit::kernels::emulated
