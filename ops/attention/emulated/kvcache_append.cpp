// The KV-cache append kernels (attention/inference/kvcache_append_kernel.cuh), host-compiled for
// the emulator: both dtypes, each rotation, into a 16-bit or an fp8 cache.
#include "attention/inference/kvcache_append.hpp"

#include "attention/emulated/forward_shares.hpp"
#include "attention/inference/kvcache_append_kernel.cuh"
#include "common/emulated_kernel.hpp"

namespace flashjit::kernels::emulated {
namespace {

struct AppendKernel {
  DType dtype;
  RotaryKind rotary;
  bool kv_e4m3;
};

constexpr AppendKernel kAppendKernels[] = {
    {DType::f16, RotaryKind::none, false},        {DType::f16, RotaryKind::half, false},
    {DType::f16, RotaryKind::interleaved, false}, {DType::bf16, RotaryKind::none, false},
    {DType::bf16, RotaryKind::half, false},       {DType::bf16, RotaryKind::interleaved, false},
    {DType::f16, RotaryKind::none, true},         {DType::f16, RotaryKind::half, true},
    {DType::f16, RotaryKind::interleaved, true},  {DType::bf16, RotaryKind::none, true},
    {DType::bf16, RotaryKind::half, true},        {DType::bf16, RotaryKind::interleaved, true}};

}  // namespace

void add_kvcache_append_kernels(detail::EmulatedKernelTable& table) {
  for_each_config<kAppendKernels>([&]<AppendKernel K>() {
    using Cache = select_type_t<K.kv_e4m3, e4m3_t, Element<K.dtype>>;
    using Config = KVCacheAppendConfig<Element<K.dtype>, K.rotary, Cache>;
    table.add({kvcache_append_spec(K.dtype, K.rotary, detail::kEmulatorArch, K.kv_e4m3),
               &HostLauncher<&kvcache_append_kernel<Config>>::launch});
  });
}

}  // namespace flashjit::kernels::emulated
