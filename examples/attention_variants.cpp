// Attention variants written as C++ expressions (Attention::score_mod and mask_mod) that
// flashjit compiles into its forward kernel, as FlexAttention does from Python: ALiBi, a T5-style
// relative-position bias read from a captured table, document masking of packed sequences (with
// a block mask built once and reused, which skips the other documents' key blocks), prefix-LM,
// and a sliding window that gives the built-in window's bits.
// Each is compared with a float64 attention computed here from the same formula. Runs on GPU 0
// when there is one, else on the CPU emulator (which compiles each variant's kernel for the host
// first, a few seconds each).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "flashjit/flashjit.hpp"

namespace {

using flashjit::Attention;
using flashjit::DeviceBuffer;
using flashjit::Runtime;
using flashjit::TensorView;

constexpr std::int64_t kBatch = 2, kHeadsQ = 4, kHeadsKv = 2, kSeqlen = 128, kHeadDim = 64;
constexpr std::size_t kCount = kBatch * kSeqlen * kHeadsQ * kHeadDim;  // q and o
constexpr std::size_t kKvCount = kBatch * kSeqlen * kHeadsKv * kHeadDim;

Runtime open_runtime() {
  const flashjit::SystemInfo system = flashjit::query_system();
  if (!system.devices.empty()) return Runtime();
  std::printf("running on the CPU emulator (no GPU: %s)\n", system.unavailable_reason.c_str());
  return Runtime(flashjit::RuntimeOptions{.backend = flashjit::Backend::emulator});
}

/// Random bf16 bits and their values.
struct Inputs {
  std::vector<std::uint16_t> q, k, v;
  std::vector<double> qx, kx, vx;
};
Inputs random_inputs() {
  std::mt19937 random(5);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Inputs in;
  const auto fill = [&](std::size_t n, std::vector<std::uint16_t>& bits, std::vector<double>& x) {
    for (std::size_t i = 0; i < n; ++i) {
      bits.push_back(flashjit::bf16_bits_from_float(uniform(random)));
      x.push_back(flashjit::float_from_bf16_bits(bits.back()));
    }
  };
  fill(kCount, in.q, in.qx);
  fill(kKvCount, in.k, in.kx);
  fill(kKvCount, in.v, in.vx);
  return in;
}

using ScoreFn =
    std::function<double(double, std::int64_t, std::int64_t, std::int64_t, std::int64_t)>;
using MaskFn = std::function<bool(std::int64_t, std::int64_t, std::int64_t, std::int64_t)>;

/// The largest |o − exact| over every output, exact in float64 from the same score and mask.
double worst_error(const Inputs& in, const std::vector<std::uint16_t>& o, const ScoreFn& score,
                   const MaskFn& mask) {
  double worst = 0;
  std::vector<double> p(kSeqlen);
  for (std::int64_t b = 0; b < kBatch; ++b) {
    for (std::int64_t h = 0; h < kHeadsQ; ++h) {
      const std::int64_t kv = h / (kHeadsQ / kHeadsKv);
      for (std::int64_t i = 0; i < kSeqlen; ++i) {
        double max = -INFINITY, sum = 0;
        for (std::int64_t j = 0; j < kSeqlen; ++j) {
          double dot = 0;
          for (std::int64_t d = 0; d < kHeadDim; ++d) {
            dot += in.qx[((b * kSeqlen + i) * kHeadsQ + h) * kHeadDim + d] *
                   in.kx[((b * kSeqlen + j) * kHeadsKv + kv) * kHeadDim + d];
          }
          p[j] = mask(b, h, i, j) ? score(dot / 8.0, b, h, i, j) : -INFINITY;
          max = std::max(max, p[j]);
        }
        for (double& x : p) sum += x = std::exp(x - max);
        for (std::int64_t d = 0; d < kHeadDim; ++d) {
          double exact = 0;
          for (std::int64_t j = 0; j < kSeqlen; ++j) {
            exact += p[j] / sum * in.vx[((b * kSeqlen + j) * kHeadsKv + kv) * kHeadDim + d];
          }
          const std::size_t at = ((b * kSeqlen + i) * kHeadsQ + h) * kHeadDim + d;
          worst = std::max(worst, std::abs(flashjit::float_from_bf16_bits(o[at]) - exact));
        }
      }
    }
  }
  return worst;
}

/// One forward of `a` on the inputs; O's bits.
std::vector<std::uint16_t> forward(Runtime& rt, const Inputs& in, const Attention& a) {
  const auto upload = [&](const std::vector<std::uint16_t>& bits) {
    DeviceBuffer buffer = rt.allocate(bits.size() * 2);
    rt.copy_to_device(buffer.data(), bits.data(), buffer.size());
    return buffer;
  };
  const DeviceBuffer q = upload(in.q), k = upload(in.k), v = upload(in.v);
  const DeviceBuffer o = rt.allocate(kCount * 2);
  const auto view = [](const DeviceBuffer& buffer, std::int64_t heads) {
    return flashjit::attention_tensor(buffer.data(), flashjit::DType::bf16, flashjit::Layout::bshd,
                                      kBatch, kSeqlen, heads, kHeadDim);
  };
  rt.forward(a, view(q, kHeadsQ), view(k, kHeadsKv), view(v, kHeadsKv), view(o, kHeadsQ),
             TensorView{});
  std::vector<std::uint16_t> out(kCount);
  rt.copy_to_host(out.data(), o.data(), out.size() * 2);
  return out;
}

const ScoreFn kPlainScore = [](double s, std::int64_t, std::int64_t, std::int64_t, std::int64_t) {
  return s;
};

}  // namespace

int main() {
  try {
    Runtime rt = open_runtime();
    const Inputs in = random_inputs();
    const Attention base{.batch = kBatch,
                         .heads_q = kHeadsQ,
                         .heads_kv = kHeadsKv,
                         .seqlen_q = kSeqlen,
                         .seqlen_k = kSeqlen,
                         .head_dim = kHeadDim};
    bool ok = true;
    const auto report = [&](const char* name, double worst) {
      std::printf("%-40s max abs error against float64: %.2e\n", name, worst);
      ok = ok && worst < 2e-2;  // bf16 outputs round by up to about 4e-3 here
    };

    // ALiBi: head h's slope 4^-(h+1) times the distance to the key, causal.
    Attention alibi = base;
    alibi.causal = true;
    alibi.score_mod = "score - (q_idx - kv_idx) / float(1 << (2 * h + 2))";
    report("ALiBi (causal)",
           worst_error(
               in, forward(rt, in, alibi),
               [](double s, std::int64_t, std::int64_t h, std::int64_t i, std::int64_t j) {
                 return s - double(i - j) / double(1 << (2 * h + 2));
               },
               [](std::int64_t, std::int64_t, std::int64_t i, std::int64_t j) { return j <= i; }));

    // T5-style relative-position bias: a learned scalar per head and bucket of the distance to
    // the key, read from a captured fp32 table [heads_q, buckets] (log-spaced buckets, as T5's:
    // one per distance up to 8 tokens back, then widths growing by √2, all from 64 in the last).
    constexpr int kBuckets = 16;
    std::vector<float> table(kHeadsQ * kBuckets);
    for (std::size_t i = 0; i < table.size(); ++i) table[i] = 0.25f * std::sin(0.7f * float(i));
    const DeviceBuffer bias = rt.allocate(table.size() * 4);
    rt.copy_to_device(bias.data(), table.data(), bias.size());
    const auto bucket = [](std::int64_t distance) {  // the expression's buckets, on the host
      if (distance < 8) return distance;
      if (distance >= 64) return std::int64_t{kBuckets - 1};
      return 8 + std::int64_t(std::log2(double(distance) / 8.0) * 2.0);
    };
    Attention t5 = base;
    t5.causal = true;
    t5.captures = {
        {"bias", TensorView::contiguous(bias.data(), flashjit::DType::f32, {kHeadsQ, kBuckets})}};
    // score_mod also runs on pairs the causal mask then hides (in key blocks the diagonal
    // crosses), where q_idx - kv_idx < 0: the index is clamped so it stays inside the table.
    t5.score_mod =
        "score + bias[h][q_idx - kv_idx < 0    ? 0"
        "              : q_idx - kv_idx < 8    ? q_idx - kv_idx"
        "              : q_idx - kv_idx >= 64 ? 15"
        "                                     : 8 + int(log2f((q_idx - kv_idx) / 8.0f) * 2.0f)]";
    report("T5 relative bias (captured table)",
           worst_error(
               in, forward(rt, in, t5),
               [&](double s, std::int64_t, std::int64_t h, std::int64_t i, std::int64_t j) {
                 return s + table[static_cast<std::size_t>(h * kBuckets + bucket(i - j))];
               },
               [](std::int64_t, std::int64_t, std::int64_t i, std::int64_t j) { return j <= i; }));

    // Packed documents of 32 tokens, causal within each; the block mask is built once and would
    // serve every layer's call with this mask and these sizes.
    Attention documents = base;
    documents.causal = true;
    documents.mask_mod = "q_idx / 32 == kv_idx / 32";
    const std::int64_t slabs = (kSeqlen + 15) / 16;
    const DeviceBuffer block_mask = rt.allocate(kBatch * kHeadsQ * slabs * 4 * 4);
    documents.block_mask = TensorView::contiguous(block_mask.data(), flashjit::DType::i32,
                                                  {kBatch, kHeadsQ, slabs, 4});
    rt.build_block_mask(documents, documents.block_mask);
    report("document masking (block mask, causal)",
           worst_error(in, forward(rt, in, documents), kPlainScore,
                       [](std::int64_t, std::int64_t, std::int64_t i, std::int64_t j) {
                         return j <= i && i / 32 == j / 32;
                       }));

    // Prefix-LM: a 16-token prefix every token sees, causal after it.
    Attention prefix = base;
    prefix.mask_mod = "kv_idx <= q_idx || kv_idx < 16";
    report("prefix-LM (16 tokens)", worst_error(in, forward(rt, in, prefix), kPlainScore,
                                                [](std::int64_t, std::int64_t, std::int64_t i,
                                                   std::int64_t j) { return j <= i || j < 16; }));

    // A sliding window of 32 keys written as a mask gives the built-in window's bits.
    Attention window = base;
    window.causal = true;
    window.window_left = 31;
    Attention written = base;
    written.mask_mod = "kv_idx <= q_idx && q_idx - kv_idx <= 31";
    const bool same = forward(rt, in, window) == forward(rt, in, written);
    std::printf("%-40s %s\n", "sliding window as a mask_mod",
                same ? "the built-in window's bits" : "DIFFERS from the built-in window");
    ok = ok && same;
    std::printf("%s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  } catch (const flashjit::Error& e) {
    std::fprintf(stderr, "flashjit: %s\n", e.what());
    return 1;
  }
}
