#pragma once
// The runtime of the CPU emulator backend for the suites that run kernels on it.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <random>
#include <vector>

#include "flashjit/runtime.hpp"

namespace flashjit::testing {

/// The emulator's runtime, opened once per test binary and shared by its tests.
inline Runtime& emulator() {
  static Runtime runtime(RuntimeOptions{.backend = Backend::emulator});
  return runtime;
}

/// The emulator's runtime as an sm_90a (the Hopper paths: TMA, wgmma), opened once per test
/// binary.
inline Runtime& hopper_emulator() {
  static Runtime runtime(RuntimeOptions{.backend = Backend::emulator, .emulated_arch = "sm_90a"});
  return runtime;
}

/// `count` bf16 values uniform in [-2, 2) from `random` (truncated from float), in `runtime`'s
/// memory.
inline DeviceBuffer random_bf16_buffer(Runtime& runtime, std::size_t count, std::mt19937& random) {
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  std::vector<std::uint16_t> values(count);
  for (std::uint16_t& x : values) {
    const float f = uniform(random);
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    x = static_cast<std::uint16_t>(bits >> 16);
  }
  DeviceBuffer buffer = runtime.allocate(count * 2);
  runtime.copy_to_device(buffer.data(), values.data(), count * 2);
  return buffer;
}

/// a.mask_mod's block mask built on `runtime` into a buffer of its own (returned, to keep while
/// the calls run) and set as a.block_mask.
inline DeviceBuffer attach_block_mask(Runtime& runtime, Attention& a) {
  const std::int64_t slabs = (a.seqlen_q + 15) / 16;
  DeviceBuffer mask = runtime.allocate(static_cast<std::size_t>(a.batch * a.heads_q * slabs * 16));
  a.block_mask = TensorView::contiguous(mask.data(), DType::i32, {a.batch, a.heads_q, slabs, 4});
  runtime.build_block_mask(a, a.block_mask);
  return mask;
}

/// `bytes` of the emulator's memory, each `fill` (a poison the tests look for afterwards).
inline DeviceBuffer filled_buffer(std::size_t bytes, unsigned char fill) {
  DeviceBuffer buffer = emulator().allocate(bytes);
  const std::vector<unsigned char> bytes_of(bytes, fill);
  emulator().copy_to_device(buffer.data(), bytes_of.data(), bytes);
  return buffer;
}

/// Whether every byte of `buffer` (the emulator's) is still `fill`.
inline bool holds_only(const DeviceBuffer& buffer, unsigned char fill) {
  std::vector<unsigned char> bytes(buffer.size());
  emulator().copy_to_host(bytes.data(), buffer.data(), bytes.size());
  for (unsigned char x : bytes)
    if (x != fill) return false;
  return true;
}

/// The global bytes read and written by every kernel of `work`, summed.
inline double global_bytes(const std::vector<KernelWork>& work) {
  double bytes = 0;
  for (const KernelWork& kernel : work) {
    bytes += double(kernel.work.global_bytes_read) + double(kernel.work.global_bytes_written);
  }
  return bytes;
}

/// The LSE's and O's bits of one forward of `a` on `runtime` on random bf16 inputs (seeded, so
/// two calls see the same inputs); with `block_mask`, a.mask_mod's block mask built first and
/// used. The emulated work is the forward's alone. Every key block is computed without a block
/// mask unless `automatic` lets the runtime build one.
inline std::vector<std::uint32_t> forward_bits(Attention a, bool block_mask = false,
                                               Runtime& runtime = emulator(),
                                               bool automatic = false) {
  a.automatic_block_mask = automatic;
  const auto count = [](std::initializer_list<std::int64_t> shape) {
    std::size_t n = 1;
    for (std::int64_t s : shape) n *= static_cast<std::size_t>(s);
    return n;
  };
  const std::size_t nq = count({a.batch, a.seqlen_q, a.heads_q, a.head_dim});
  const std::size_t nk = count({a.batch, a.seqlen_k, a.heads_kv, a.head_dim});
  const std::size_t nlse = count({a.batch, a.heads_q, a.seqlen_q});
  std::mt19937 random(7);
  const auto upload = [&](std::size_t n) { return random_bf16_buffer(runtime, n, random); };
  const DeviceBuffer q = upload(nq), k = upload(nk), v = upload(nk);
  const DeviceBuffer o = runtime.allocate(nq * 2), lse = runtime.allocate(nlse * 4);
  const DeviceBuffer mask = block_mask ? attach_block_mask(runtime, a) : DeviceBuffer();
  runtime.reset_emulated_work();  // the forward's alone
  runtime.forward(
      a,
      TensorView::contiguous(q.data(), DType::bf16, {a.batch, a.seqlen_q, a.heads_q, a.head_dim}),
      TensorView::contiguous(k.data(), DType::bf16, {a.batch, a.seqlen_k, a.heads_kv, a.head_dim}),
      TensorView::contiguous(v.data(), DType::bf16, {a.batch, a.seqlen_k, a.heads_kv, a.head_dim}),
      TensorView::contiguous(o.data(), DType::bf16, {a.batch, a.seqlen_q, a.heads_q, a.head_dim}),
      TensorView::contiguous(lse.data(), DType::f32, {a.batch, a.heads_q, a.seqlen_q}));
  std::vector<std::uint16_t> out(nq);
  std::vector<std::uint32_t> bits(nlse);
  runtime.copy_to_host(out.data(), o.data(), nq * 2);
  runtime.copy_to_host(bits.data(), lse.data(), nlse * 4);
  bits.insert(bits.end(), out.begin(), out.end());
  return bits;
}

}  // namespace flashjit::testing
