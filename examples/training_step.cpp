// The attention of one training step: the forward pass (keeping O and LSE for later), then the
// backward pass, which turns dL/dO from the layers above into dL/dQ, dL/dK and dL/dV. The
// gradients are compared with a float64 CPU computation of the same math (reference_gradients,
// below: only the public API and the standard library, so it builds against an installed
// flashjit). Runs on GPU 0 when there is one, else on the CPU emulator (the same kernel
// templates compiled for the host; slow, so the shape is small).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <tuple>
#include <vector>

#include "flashjit/flashjit.hpp"

namespace {

using flashjit::DeviceBuffer;
using flashjit::Runtime;

// Grouped-query attention: 4 query heads share 2 key/value heads; causal, as in a decoder.
constexpr std::int64_t kBatch = 2, kHeadsQ = 4, kHeadsKv = 2, kSeqlen = 128, kHeadDim = 64;

/// A bf16 tensor on the host: the bits the kernels read and the values the reference reads.
struct HostTensor {
  std::vector<std::uint16_t> bits;
  std::vector<double> values;
};

HostTensor random_bf16(std::size_t count, std::mt19937& random) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  HostTensor t;
  for (std::size_t i = 0; i < count; ++i) {
    t.bits.push_back(flashjit::bf16_bits_from_float(uniform(random)));
    t.values.push_back(flashjit::float_from_bf16_bits(t.bits.back()));
  }
  return t;
}

DeviceBuffer to_device(Runtime& runtime, const std::vector<std::uint16_t>& bits) {
  DeviceBuffer buffer = runtime.allocate(bits.size() * sizeof(std::uint16_t));
  runtime.copy_to_device(buffer.data(), bits.data(), buffer.size());
  return buffer;
}

std::vector<double> to_host(Runtime& runtime, const DeviceBuffer& buffer) {
  std::vector<std::uint16_t> bits(buffer.size() / sizeof(std::uint16_t));
  runtime.copy_to_host(bits.data(), buffer.data(), buffer.size());
  std::vector<double> values;
  for (std::uint16_t b : bits) values.push_back(flashjit::float_from_bf16_bits(b));
  return values;
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

/// The attention problem of this step, for the library.
flashjit::Attention attention_shape() {
  flashjit::Attention attention;
  attention.batch = kBatch;
  attention.heads_q = kHeadsQ;
  attention.heads_kv = kHeadsKv;
  attention.seqlen_q = attention.seqlen_k = kSeqlen;
  attention.head_dim = kHeadDim;
  attention.causal = true;
  return attention;
}

/// Element (b, token, head, d) of a [kBatch, kSeqlen, heads, kHeadDim] tensor.
std::size_t at(std::int64_t b, std::int64_t token, std::int64_t head, std::int64_t heads,
               std::int64_t d) {
  return static_cast<std::size_t>(((b * kSeqlen + token) * heads + head) * kHeadDim + d);
}

/// dQ, dK and dV in float64, one query row at a time, in the layout of the library's tensors.
struct Gradients {
  std::vector<double> dq, dk, dv;
};

/// The textbook backward of causal attention, P = softmax(scale · q kᵀ) row by row:
/// dV += Pᵀ dO, dP = dO Vᵀ, dS = P ∘ (dP − rowsum(dO ∘ O)), dQ = scale · dS K,
/// dK += scale · dSᵀ Q; query head h reads key/value head h / (kHeadsQ / kHeadsKv).
Gradients reference_gradients(const HostTensor& q, const HostTensor& k, const HostTensor& v,
                              const HostTensor& dout) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(kHeadDim));
  Gradients g{std::vector<double>(q.values.size()), std::vector<double>(k.values.size()),
              std::vector<double>(v.values.size())};
  auto dot = [](const std::vector<double>& a, std::size_t i, const std::vector<double>& b,
                std::size_t j) {
    double sum = 0;
    for (std::int64_t d = 0; d < kHeadDim; ++d) sum += a[i + d] * b[j + d];
    return sum;
  };
  for (std::int64_t b = 0; b < kBatch; ++b) {
    for (std::int64_t h = 0; h < kHeadsQ; ++h) {
      const std::int64_t hk = h / (kHeadsQ / kHeadsKv);
      for (std::int64_t i = 0; i < kSeqlen; ++i) {
        const std::size_t qi = at(b, i, h, kHeadsQ, 0);
        std::vector<double> p(static_cast<std::size_t>(i + 1)), dp(p.size());  // keys 0..i
        double max = -INFINITY, sum = 0, delta = 0;
        for (std::int64_t j = 0; j <= i; ++j) {
          p[j] = scale * dot(q.values, qi, k.values, at(b, j, hk, kHeadsKv, 0));
          max = std::max(max, p[j]);
        }
        for (double& x : p) sum += (x = std::exp(x - max));
        for (double& x : p) x /= sum;
        for (std::int64_t j = 0; j <= i; ++j) {  // delta = rowsum(dO ∘ O) = Σⱼ P dP
          dp[j] = dot(dout.values, qi, v.values, at(b, j, hk, kHeadsKv, 0));
          delta += p[j] * dp[j];
        }
        for (std::int64_t j = 0; j <= i; ++j) {
          const double ds = p[j] * (dp[j] - delta);
          for (std::int64_t d = 0; d < kHeadDim; ++d) {
            const std::size_t kj = at(b, j, hk, kHeadsKv, d);
            g.dv[kj] += p[j] * dout.values[qi + d];
            g.dk[kj] += scale * ds * q.values[qi + d];
            g.dq[qi + d] += scale * ds * k.values[kj];
          }
        }
      }
    }
  }
  return g;
}

/// The relative L2 error of `actual` against `expected`: ‖actual − expected‖ / ‖expected‖.
double relative_l2(const std::vector<double>& actual, const std::vector<double>& expected) {
  double error = 0, norm = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    error += (actual[i] - expected[i]) * (actual[i] - expected[i]);
    norm += expected[i] * expected[i];
  }
  return std::sqrt(error / norm);
}

}  // namespace

int main() {
  try {
    Runtime runtime = open_runtime();
    const flashjit::Attention attention = attention_shape();
    const auto q_count = static_cast<std::size_t>(kBatch * kSeqlen * kHeadsQ * kHeadDim);
    const auto kv_count = static_cast<std::size_t>(kBatch * kSeqlen * kHeadsKv * kHeadDim);
    std::mt19937 random(2024);
    const HostTensor q = random_bf16(q_count, random), k = random_bf16(kv_count, random),
                     v = random_bf16(kv_count, random);
    const HostTensor dout = random_bf16(q_count, random);  // dL/dO, from the layers above

    // Every tensor is [batch, seqlen, heads, head_dim] in memory (FlashAttention's layout).
    auto tensor = [&](const DeviceBuffer& buffer, std::int64_t heads) {
      return flashjit::attention_tensor(buffer.data(), flashjit::DType::bf16,
                                        flashjit::Layout::bshd, kBatch, kSeqlen, heads, kHeadDim);
    };
    const DeviceBuffer q_d = to_device(runtime, q.bits), k_d = to_device(runtime, k.bits),
                       v_d = to_device(runtime, v.bits), dout_d = to_device(runtime, dout.bits);
    const DeviceBuffer o_d = runtime.allocate(q_count * 2), dq_d = runtime.allocate(q_count * 2),
                       dk_d = runtime.allocate(kv_count * 2), dv_d = runtime.allocate(kv_count * 2);
    const DeviceBuffer lse_d = runtime.allocate(kBatch * kHeadsQ * kSeqlen * sizeof(float));
    const flashjit::TensorView lse =
        flashjit::lse_tensor(static_cast<float*>(lse_d.data()), attention);

    // Forward: O, and the log-sum-exp of each row, which backward needs to recompute P.
    runtime.forward(attention, tensor(q_d, kHeadsQ), tensor(k_d, kHeadsKv), tensor(v_d, kHeadsKv),
                    tensor(o_d, kHeadsQ), lse);
    // Backward: dK and dV sum over the query heads that share each key/value head.
    runtime.backward(attention, tensor(q_d, kHeadsQ), tensor(k_d, kHeadsKv), tensor(v_d, kHeadsKv),
                     tensor(o_d, kHeadsQ), lse, tensor(dout_d, kHeadsQ), tensor(dq_d, kHeadsQ),
                     tensor(dk_d, kHeadsKv), tensor(dv_d, kHeadsKv));
    runtime.synchronize();

    const Gradients expected = reference_gradients(q, k, v, dout);

    std::printf(
        "gradient errors against the float64 reference (relative L2; bf16 keeps 8 significant\n"
        "bits, so a few 1e-3 is its rounding):\n");
    bool ok = true;
    for (const auto& [name, buffer, exact] : {std::tuple{"dQ", &dq_d, &expected.dq},
                                              {"dK", &dk_d, &expected.dk},
                                              {"dV", &dv_d, &expected.dv}}) {
      const double error = relative_l2(to_host(runtime, *buffer), *exact);
      std::printf("  %s  %.2e\n", name, error);
      ok = ok && error <= 1e-2;  // far above bf16's rounding, so only a broken kernel fails
    }
    return ok ? 0 : 1;
  } catch (const flashjit::Error& error) {
    std::fprintf(stderr, "training step example: %s\n", error.what());
    return 1;
  }
}
