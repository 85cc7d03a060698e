// Uses an installed flashjit: one attention forward on the emulator backend, where every query
// sees a single key, so O must equal that key's V exactly. Prints PASS or says what differed.
// The head dim is the argument (default 64); one the emulator was not built with (72) makes it
// compile the kernel for the host, which needs the installed emulator archive.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <flashjit/flashjit.hpp>
#include <vector>

int main(int argc, char** argv) {
  const std::int64_t d = argc > 1 ? std::atoll(argv[1]) : 64;
  flashjit::Runtime rt({.backend = flashjit::Backend::emulator});
  flashjit::Attention attn;
  attn.heads_q = attn.heads_kv = 2;
  attn.seqlen_q = 8;
  attn.seqlen_k = 1;
  attn.head_dim = d;
  const auto q_count = static_cast<std::size_t>(2 * 8 * d),
             kv_count = static_cast<std::size_t>(2 * 1 * d);
  std::vector<std::uint16_t> q(q_count, 0x3f80), k(kv_count, 0x3f80), v(kv_count);
  for (std::size_t i = 0; i < kv_count; ++i) v[i] = static_cast<std::uint16_t>(0x3f80 + i);
  auto upload = [&](const std::vector<std::uint16_t>& host) {
    flashjit::DeviceBuffer buffer = rt.allocate(host.size() * 2);
    rt.copy_to_device(buffer.data(), host.data(), host.size() * 2);
    return buffer;
  };
  flashjit::DeviceBuffer qb = upload(q), kb = upload(k), vb = upload(v),
                         ob = rt.allocate(q_count * 2);
  auto view = [&](flashjit::DeviceBuffer& b, std::int64_t seqlen) {
    return flashjit::attention_tensor(b.data(), flashjit::DType::bf16, flashjit::Layout::bshd, 1,
                                      seqlen, 2, d);
  };
  rt.forward(attn, view(qb, 8), view(kb, 1), view(vb, 1), view(ob, 8), flashjit::TensorView{});
  std::vector<std::uint16_t> o(q_count);
  rt.copy_to_host(o.data(), ob.data(), o.size() * 2);
  const auto dims = static_cast<std::size_t>(d);
  for (std::size_t i = 0; i < q_count; ++i) {
    const std::size_t head = i / dims % 2, e = i % dims;
    if (o[i] != v[head * dims + e]) {
      std::printf("FAIL: O element %zu is 0x%04x, expected V's 0x%04x\n", i, o[i],
                  v[head * dims + e]);
      return 1;
    }
  }
  std::printf("PASS: flashjit %s from the installed package, head dim %lld\n", flashjit::kVersion,
              static_cast<long long>(d));
  return 0;
}
