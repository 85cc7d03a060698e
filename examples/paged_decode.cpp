// One decoding step of an inference engine: each sequence of the batch has a KV cache of its
// own length kept in fixed-size pages (in any order, found through a page table), and one new
// query token attends to all of it. flashjit packs the query heads that share a key/value head
// into one tile and splits the cache across CTAs when the batch alone would leave SMs idle;
// the splits merge exactly. The result is compared with a float64 CPU attention. Runs on GPU 0
// when there is one, else on the CPU emulator (the same kernel templates compiled for the host).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "flashjit/flashjit.hpp"

namespace {

using flashjit::DeviceBuffer;
using flashjit::Runtime;
using flashjit::TensorView;

// GQA 8:1, head dim 128; three sequences whose caches end mid-page.
constexpr std::int64_t kHeadsQ = 16, kHeadsKv = 2, kHeadDim = 128, kPageSize = 16;
const std::vector<std::int32_t> kLengths = {700, 35, 301};

template <class T>
DeviceBuffer to_device(Runtime& runtime, const std::vector<T>& values) {
  DeviceBuffer buffer = runtime.allocate(values.size() * sizeof(T));
  runtime.copy_to_device(buffer.data(), values.data(), buffer.size());
  return buffer;
}

/// GPU 0, or the emulator when this machine has none; says which.
Runtime open_runtime() {
  const flashjit::SystemInfo system = flashjit::query_system();
  if (!system.devices.empty()) {
    std::printf("running on GPU 0: %s\n", system.devices.front().name.c_str());
    return Runtime();
  }
  std::printf("running on the CPU emulator (no GPU: %s)\n", system.unavailable_reason.c_str());
  return Runtime(flashjit::RuntimeOptions{.backend = flashjit::Backend::emulator});
}

/// The cache: every page [kPageSize, kHeadsKv, kHeadDim] of K and V as bf16 bits, and which
/// page holds keys [p · kPageSize, (p + 1) · kPageSize) of each sequence (-1 past its length).
struct PagedCache {
  std::vector<std::uint16_t> k, v;
  std::vector<std::int32_t> page_table;  // [batch, max_pages]
  std::int64_t pages = 0, max_pages = 0;

  /// Element (sequence b, key j, kv head h, dim d) of K (or V) as a float.
  float at(const std::vector<std::uint16_t>& kv, std::size_t b, std::int64_t j, std::int64_t h,
           std::int64_t d) const {
    const std::int64_t page = page_table[b * max_pages + j / kPageSize];
    const std::int64_t row = page * kPageSize + j % kPageSize;
    return flashjit::float_from_bf16_bits(kv[(row * kHeadsKv + h) * kHeadDim + d]);
  }
};

PagedCache random_cache(std::mt19937& random) {
  PagedCache cache;
  for (std::int32_t length : kLengths) {
    cache.max_pages = std::max<std::int64_t>(cache.max_pages, (length + kPageSize - 1) / kPageSize);
    cache.pages += (length + kPageSize - 1) / kPageSize;
  }
  std::vector<std::int32_t> order(static_cast<std::size_t>(cache.pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(),
               random);  // pages in any order, as an allocator leaves them
  cache.page_table.assign(kLengths.size() * cache.max_pages, -1);
  std::size_t next = 0;
  for (std::size_t b = 0; b < kLengths.size(); ++b) {
    for (std::int64_t p = 0; p < (kLengths[b] + kPageSize - 1) / kPageSize; ++p) {
      cache.page_table[b * cache.max_pages + p] = order[next++];
    }
  }
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (auto* kv : {&cache.k, &cache.v}) {
    kv->resize(static_cast<std::size_t>(cache.pages * kPageSize * kHeadsKv * kHeadDim));
    for (std::uint16_t& x : *kv) x = flashjit::bf16_bits_from_float(uniform(random));
  }
  return cache;
}

/// O of query head h of sequence b in float64: softmax(q · Kᵀ / sqrt(d)) V over its keys.
std::vector<double> exact_row(const PagedCache& cache, const std::vector<std::uint16_t>& q,
                              std::size_t b, std::int64_t h) {
  const std::int64_t kv_head = h / (kHeadsQ / kHeadsKv);
  const std::uint16_t* q_row = &q[(b * kHeadsQ + h) * kHeadDim];
  std::vector<double> scores(static_cast<std::size_t>(kLengths[b]));
  for (std::int64_t j = 0; j < kLengths[b]; ++j) {
    double dot = 0;
    for (std::int64_t d = 0; d < kHeadDim; ++d) {
      dot += double(flashjit::float_from_bf16_bits(q_row[d])) * cache.at(cache.k, b, j, kv_head, d);
    }
    scores[j] = dot / std::sqrt(double(kHeadDim));
  }
  const double max = *std::max_element(scores.begin(), scores.end());
  double sum = 0;
  for (double& s : scores) sum += s = std::exp(s - max);
  std::vector<double> out(kHeadDim, 0.0);
  for (std::int64_t j = 0; j < kLengths[b]; ++j) {
    for (std::int64_t d = 0; d < kHeadDim; ++d) {
      out[d] += scores[j] / sum * cache.at(cache.v, b, j, kv_head, d);
    }
  }
  return out;
}

}  // namespace

int main() {
  try {
    Runtime runtime = open_runtime();
    std::mt19937 random(7);
    const PagedCache cache = random_cache(random);
    const auto batch = static_cast<std::int64_t>(kLengths.size());
    std::vector<std::uint16_t> q(static_cast<std::size_t>(batch * kHeadsQ * kHeadDim));
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (std::uint16_t& x : q) x = flashjit::bf16_bits_from_float(uniform(random));

    // One query token per sequence; seqlen_k is the longest cache, each sequence has its own.
    flashjit::Attention attention;
    attention.batch = batch;
    attention.heads_q = kHeadsQ;
    attention.heads_kv = kHeadsKv;
    attention.seqlen_q = 1;
    attention.seqlen_k = *std::max_element(kLengths.begin(), kLengths.end());
    attention.head_dim = kHeadDim;
    attention.causal = true;  // the new token sees every cached key

    const DeviceBuffer q_d = to_device(runtime, q), k_d = to_device(runtime, cache.k),
                       v_d = to_device(runtime, cache.v), o_d = runtime.allocate(q.size() * 2),
                       table_d = to_device(runtime, cache.page_table),
                       lengths_d = to_device(runtime, kLengths);
    const auto bf16 = flashjit::DType::bf16;
    flashjit::Sequences sequences;
    sequences.page_table =
        TensorView::contiguous(table_d.data(), flashjit::DType::i32, {batch, cache.max_pages});
    sequences.seqlens_k = TensorView::contiguous(lengths_d.data(), flashjit::DType::i32, {batch});
    const TensorView pages_shape_k =
        TensorView::contiguous(k_d.data(), bf16, {cache.pages, kPageSize, kHeadsKv, kHeadDim});
    const TensorView pages_shape_v =
        TensorView::contiguous(v_d.data(), bf16, {cache.pages, kPageSize, kHeadsKv, kHeadDim});
    runtime.forward(attention, sequences,
                    TensorView::contiguous(q_d.data(), bf16, {batch, 1, kHeadsQ, kHeadDim}),
                    pages_shape_k, pages_shape_v,
                    TensorView::contiguous(o_d.data(), bf16, {batch, 1, kHeadsQ, kHeadDim}),
                    TensorView{});  // no LSE wanted
    runtime.synchronize();

    std::vector<std::uint16_t> o(q.size());
    runtime.copy_to_host(o.data(), o_d.data(), o.size() * 2);
    double worst = 0;
    for (std::size_t b = 0; b < kLengths.size(); ++b) {
      for (std::int64_t h = 0; h < kHeadsQ; ++h) {
        const std::vector<double> exact = exact_row(cache, q, b, h);
        for (std::int64_t d = 0; d < kHeadDim; ++d) {
          const double got = flashjit::float_from_bf16_bits(o[(b * kHeadsQ + h) * kHeadDim + d]);
          worst = std::max(worst, std::abs(got - exact[d]));
        }
      }
    }
    // bf16 keeps 8 significant bits: outputs of magnitude < 1 round by up to 2^-9.
    std::printf(
        "decoded %zu sequences (%d, %d and %d cached keys in %lld shuffled pages of %lld)\n"
        "max abs error against float64: %.2e (bf16 rounding: about 2e-3)\n",
        kLengths.size(), kLengths[0], kLengths[1], kLengths[2], static_cast<long long>(cache.pages),
        static_cast<long long>(kPageSize), worst);
    return worst < 1e-2 ? 0 : 1;
  } catch (const flashjit::Error& e) {
    std::fprintf(stderr, "flashjit: %s\n", e.what());
    return 1;
  }
}
