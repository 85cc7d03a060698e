// An inference engine's decoding loop: every step, each sequence's new token brings a query, a
// key and a value; one call rotates the query and the key (RoPE), appends the key and value to
// the sequence's KV cache and attends to everything cached so far (Sequences::k_new, v_new and
// the rotary tables, FlashAttention's flash_attn_with_kvcache). The engine only advances the
// lengths. Each step's output is compared with a float64 attention over the rotated history kept
// here. Runs on GPU 0 when there is one, else on the CPU emulator.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "flashjit/flashjit.hpp"

namespace {

using flashjit::DeviceBuffer;
using flashjit::Runtime;
using flashjit::TensorView;

// Two sequences with 5 and 0 tokens cached, GQA 4:1, head dim 64, a cache of 16 tokens each.
constexpr std::int64_t kBatch = 2, kHeadsQ = 4, kHeadsKv = 1, kHeadDim = 64, kCapacity = 16;
constexpr int kSteps = 8;

Runtime open_runtime() {
  const flashjit::SystemInfo system = flashjit::query_system();
  if (!system.devices.empty()) return Runtime();
  std::printf("running on the CPU emulator (no GPU: %s)\n", system.unavailable_reason.c_str());
  return Runtime(flashjit::RuntimeOptions{.backend = flashjit::Backend::emulator});
}

/// RoPE's cos and sin of position p and pair i at [p · kHeadDim / 2 + i].
struct Rotary {
  std::vector<float> cos, sin;
  Rotary() {
    for (std::int64_t p = 0; p < kCapacity; ++p) {
      for (std::int64_t i = 0; i < kHeadDim / 2; ++i) {
        const double angle = double(p) * std::pow(10000.0, -2.0 * double(i) / kHeadDim);
        cos.push_back(float(std::cos(angle)));
        sin.push_back(float(std::sin(angle)));
      }
    }
  }
  /// x rotated at `position`, pairs (i, i + kHeadDim / 2), in float64.
  std::vector<double> rotate(const std::vector<double>& x, std::int64_t position) const {
    std::vector<double> out = x;
    for (std::int64_t i = 0; i < kHeadDim / 2; ++i) {
      const double c = cos[position * kHeadDim / 2 + i], s = sin[position * kHeadDim / 2 + i];
      out[i] = x[i] * c - x[i + kHeadDim / 2] * s;
      out[i + kHeadDim / 2] = x[i + kHeadDim / 2] * c + x[i] * s;
    }
    return out;
  }
};

/// Random bf16 rows as bits, and their values.
struct Rows {
  std::vector<std::uint16_t> bits;
  std::vector<double> values;
};
Rows random_rows(std::size_t count, std::mt19937& random) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Rows rows;
  for (std::size_t i = 0; i < count; ++i) {
    rows.bits.push_back(flashjit::bf16_bits_from_float(uniform(random)));
    rows.values.push_back(flashjit::float_from_bf16_bits(rows.bits.back()));
  }
  return rows;
}

DeviceBuffer to_device(Runtime& runtime, const void* data, std::size_t bytes) {
  DeviceBuffer buffer = runtime.allocate(bytes);
  runtime.copy_to_device(buffer.data(), data, bytes);
  return buffer;
}

/// softmax(q · Kᵀ / sqrt(d)) V in float64 over `keys` and `values` (rows of kHeadDim).
std::vector<double> exact_attention(const std::vector<double>& q,
                                    const std::vector<std::vector<double>>& keys,
                                    const std::vector<std::vector<double>>& values) {
  std::vector<double> p;
  for (const auto& k : keys) {
    double dot = 0;
    for (std::int64_t d = 0; d < kHeadDim; ++d) dot += q[d] * k[d];
    p.push_back(dot / std::sqrt(double(kHeadDim)));
  }
  const double max = *std::max_element(p.begin(), p.end());
  double sum = 0;
  for (double& x : p) sum += x = std::exp(x - max);
  std::vector<double> out(kHeadDim, 0.0);
  for (std::size_t j = 0; j < keys.size(); ++j) {
    for (std::int64_t d = 0; d < kHeadDim; ++d) out[d] += p[j] / sum * values[j][d];
  }
  return out;
}

}  // namespace

int main() {
  try {
    Runtime runtime = open_runtime();
    std::mt19937 random(11);
    const Rotary rotary;
    std::vector<std::int32_t> lengths = {5, 0};
    // The cache [batch, capacity, heads_kv, head_dim]; sequence 0's first 5 keys (already
    // rotated, as an engine's prefill leaves them) and values, kept here in float64 too.
    const std::size_t row = kHeadsKv * kHeadDim;
    Rows k_cache = random_rows(kBatch * kCapacity * row, random);
    Rows v_cache = random_rows(kBatch * kCapacity * row, random);
    std::vector<std::vector<std::vector<double>>> keys(kBatch), values(kBatch);
    for (std::int64_t j = 0; j < lengths[0]; ++j) {
      keys[0].emplace_back(k_cache.values.begin() + j * row,
                           k_cache.values.begin() + (j + 1) * row);
      values[0].emplace_back(v_cache.values.begin() + j * row,
                             v_cache.values.begin() + (j + 1) * row);
    }
    const auto bf16 = flashjit::DType::bf16, i32 = flashjit::DType::i32;
    const DeviceBuffer k_d = to_device(runtime, k_cache.bits.data(), k_cache.bits.size() * 2);
    const DeviceBuffer v_d = to_device(runtime, v_cache.bits.data(), v_cache.bits.size() * 2);
    const DeviceBuffer cos_d = to_device(runtime, rotary.cos.data(), rotary.cos.size() * 4);
    const DeviceBuffer sin_d = to_device(runtime, rotary.sin.data(), rotary.sin.size() * 4);
    const DeviceBuffer lengths_d = runtime.allocate(kBatch * 4);
    const DeviceBuffer o_d = runtime.allocate(kBatch * kHeadsQ * kHeadDim * 2);

    flashjit::Attention attention{.batch = kBatch,
                                  .heads_q = kHeadsQ,
                                  .heads_kv = kHeadsKv,
                                  .seqlen_q = 1,
                                  .seqlen_k = kCapacity,
                                  .head_dim = kHeadDim,
                                  .causal = true};
    double worst = 0;
    for (int step = 0; step < kSteps; ++step) {
      const Rows q = random_rows(kBatch * kHeadsQ * kHeadDim, random);
      const Rows k_new = random_rows(kBatch * row, random),
                 v_new = random_rows(kBatch * row, random);
      const DeviceBuffer q_d = to_device(runtime, q.bits.data(), q.bits.size() * 2);
      const DeviceBuffer k_new_d = to_device(runtime, k_new.bits.data(), k_new.bits.size() * 2);
      const DeviceBuffer v_new_d = to_device(runtime, v_new.bits.data(), v_new.bits.size() * 2);
      runtime.copy_to_device(lengths_d.data(), lengths.data(), kBatch * 4);
      flashjit::Sequences sequences;
      sequences.seqlens_k = TensorView::contiguous(lengths_d.data(), i32, {kBatch});
      sequences.k_new =
          TensorView::contiguous(k_new_d.data(), bf16, {kBatch, 1, kHeadsKv, kHeadDim});
      sequences.v_new =
          TensorView::contiguous(v_new_d.data(), bf16, {kBatch, 1, kHeadsKv, kHeadDim});
      sequences.rotary_cos =
          TensorView::contiguous(cos_d.data(), flashjit::DType::f32, {kCapacity, kHeadDim / 2});
      sequences.rotary_sin =
          TensorView::contiguous(sin_d.data(), flashjit::DType::f32, {kCapacity, kHeadDim / 2});
      runtime.forward(
          attention, sequences,
          TensorView::contiguous(q_d.data(), bf16, {kBatch, 1, kHeadsQ, kHeadDim}),
          TensorView::contiguous(k_d.data(), bf16, {kBatch, kCapacity, kHeadsKv, kHeadDim}),
          TensorView::contiguous(v_d.data(), bf16, {kBatch, kCapacity, kHeadsKv, kHeadDim}),
          TensorView::contiguous(o_d.data(), bf16, {kBatch, 1, kHeadsQ, kHeadDim}), TensorView{});
      std::vector<std::uint16_t> o(kBatch * kHeadsQ * kHeadDim);
      runtime.copy_to_host(o.data(), o_d.data(), o.size() * 2);
      for (std::int64_t b = 0; b < kBatch; ++b) {
        const std::int64_t position = lengths[b];  // the new token's
        const std::vector<double> k(k_new.values.begin() + b * row,
                                    k_new.values.begin() + (b + 1) * row);
        keys[b].push_back(rotary.rotate(k, position));
        values[b].emplace_back(v_new.values.begin() + b * row,
                               v_new.values.begin() + (b + 1) * row);
        for (std::int64_t h = 0; h < kHeadsQ; ++h) {
          const auto first = q.values.begin() + (b * kHeadsQ + h) * kHeadDim;
          const std::vector<double> exact =
              exact_attention(rotary.rotate(std::vector<double>(first, first + kHeadDim), position),
                              keys[b], values[b]);
          for (std::int64_t d = 0; d < kHeadDim; ++d) {
            const double got = flashjit::float_from_bf16_bits(o[(b * kHeadsQ + h) * kHeadDim + d]);
            worst = std::max(worst, std::abs(got - exact[d]));
          }
        }
        ++lengths[b];  // the engine advances the lengths; the call does not
      }
    }
    std::printf(
        "decoded %d steps of %lld sequences, appending and rotating each new key\n"
        "max abs error against float64: %.2e (bf16 rounding: about 1e-2 at most)\n",
        kSteps, static_cast<long long>(kBatch), worst);
    return worst < 2e-2 ? 0 : 1;
  } catch (const flashjit::Error& e) {
    std::fprintf(stderr, "flashjit: %s\n", e.what());
    return 1;
  }
}
