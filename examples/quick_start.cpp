// One causal attention forward on GPU 0, or on the CPU emulator when this machine has none.
#include <cstdio>
#include <vector>

#include "flashjit/flashjit.hpp"

int main() {
  using namespace flashjit;
  const SystemInfo system = query_system();  // the driver and its GPUs, or why there are none
  const bool gpu = !system.devices.empty();
  if (!gpu) std::printf("no GPU (%s): the CPU emulator\n", system.unavailable_reason.c_str());
  Runtime rt({.backend = gpu ? Backend::cuda : Backend::emulator});
  // 4 query heads share 1 key/value head (MQA); 128 tokens; head_dim 64 (the default).
  const Attention attn{.heads_q = 4, .seqlen_q = 128, .seqlen_k = 128, .causal = true};
  auto view = [](const DeviceBuffer& b, std::int64_t heads) {  // [batch, seqlen, heads, dim]
    return attention_tensor(b.data(), DType::bf16, Layout::bshd, 1, 128, heads, 64);
  };
  std::vector<std::uint16_t> x(128 * 4 * 64), o_host(x.size());  // bf16 bits
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = bf16_bits_from_float(float(i % 13) / 13 - 0.5f);
  const DeviceBuffer q = rt.allocate(2 * x.size()), kv = rt.allocate(2 * x.size() / 4),
                     o = rt.allocate(2 * x.size());
  rt.copy_to_device(q.data(), x.data(), q.size());
  rt.copy_to_device(kv.data(), x.data(), kv.size());  // K = V: one buffer, for brevity
  rt.forward(attn, view(q, 4), view(kv, 1), view(kv, 1), view(o, 4), /*lse=*/TensorView{});
  rt.copy_to_host(o_host.data(), o.data(), o.size());
  // Causal: query 0 sees key 0 alone, so each head's output row 0 is V's row 0, exactly.
  bool ok = true;
  for (int i = 0; i < 4 * 64; ++i) ok = ok && o_host[i] == x[i % 64];
  std::printf("%s on %s\n", ok ? "PASS" : "FAIL", rt.device().name.c_str());
  return ok ? 0 : 1;
}
