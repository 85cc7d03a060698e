// Zero-size attention problems, as frameworks hand them around: a batch of 0 or a sequence of
// length 0 is a successful call. Where no output has an element, nothing is launched or
// written; where some do (no keys: every query row sees none; no queries: no key is seen),
// they get exactly what the mask defines: O = 0 and LSE = -inf, dQ = 0, dK = dV = 0.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "flashjit/flashjit.hpp"
#include "support/argument_cases.hpp"

namespace flashjit {
namespace {

Runtime& emulator() {
  static Runtime runtime(RuntimeOptions{.backend = Backend::emulator});
  return runtime;
}

Attention sized(std::int64_t batch, std::int64_t seqlen_q, std::int64_t seqlen_k) {
  Attention a;
  a.batch = batch;
  a.heads_q = 2;
  a.heads_kv = 1;
  a.seqlen_q = seqlen_q;
  a.seqlen_k = seqlen_k;
  a.head_dim = 64;
  a.causal = true;
  return a;
}

/// One [batch, seqlen, heads, head_dim] bf16 tensor in the emulator's memory, filled with
/// `fill` bits (0x3f80: 1.0; 0x7fc0: NaN, the poison an untouched output keeps). An empty one
/// has a null pointer, as frameworks give empty tensors.
struct Tensor {
  Tensor(const Attention& a, std::int64_t seqlen, std::int64_t heads, std::uint16_t fill)
      : count(a.batch * seqlen * heads * a.head_dim),
        buffer(emulator().allocate(std::size_t(count) * 2 + 1)) {
    bits.assign(std::size_t(count), fill);
    if (count > 0) emulator().copy_to_device(buffer.data(), bits.data(), bits.size() * 2);
    view = attention_tensor(count > 0 ? buffer.data() : nullptr, DType::bf16, Layout::bshd, a.batch,
                            seqlen, heads, a.head_dim);
  }
  std::vector<std::uint16_t> read() {
    if (count > 0) emulator().copy_to_host(bits.data(), buffer.data(), bits.size() * 2);
    return bits;
  }
  std::int64_t count;
  DeviceBuffer buffer;
  std::vector<std::uint16_t> bits;
  TensorView view;
};

constexpr std::uint16_t kOne = 0x3f80, kPoison = 0x7fc0;

bool all_equal(const std::vector<std::uint16_t>& bits, std::uint16_t value) {
  for (std::uint16_t b : bits) {
    if (b != value) return false;
  }
  return true;
}

struct Call {
  explicit Call(const Attention& attention)
      : a(attention),
        q(a, a.seqlen_q, a.heads_q, kOne),
        k(a, a.seqlen_k, a.heads_kv, kOne),
        v(a, a.seqlen_k, a.heads_kv, kOne),
        o(a, a.seqlen_q, a.heads_q, kPoison),
        dout(a, a.seqlen_q, a.heads_q, kOne),
        dq(a, a.seqlen_q, a.heads_q, kPoison),
        dk(a, a.seqlen_k, a.heads_kv, kPoison),
        dv(a, a.seqlen_k, a.heads_kv, kPoison),
        lse_count(a.batch * a.heads_q * a.seqlen_q),
        lse_buffer(emulator().allocate(std::size_t(lse_count) * 4 + 4)),
        lse(std::size_t(lse_count), std::numeric_limits<float>::quiet_NaN()) {
    if (lse_count > 0) emulator().copy_to_device(lse_buffer.data(), lse.data(), lse.size() * 4);
    lse_view = lse_tensor(lse_count > 0 ? static_cast<float*>(lse_buffer.data()) : nullptr, a);
  }
  void forward() { emulator().forward(a, q.view, k.view, v.view, o.view, lse_view); }
  void backward() {
    emulator().backward(a, q.view, k.view, v.view, o.view, lse_view, dout.view, dq.view, dk.view,
                        dv.view);
  }
  std::vector<float> read_lse() {
    if (lse_count > 0) emulator().copy_to_host(lse.data(), lse_buffer.data(), lse.size() * 4);
    return lse;
  }

  Attention a;
  Tensor q, k, v, o, dout, dq, dk, dv;
  std::int64_t lse_count;
  DeviceBuffer lse_buffer;
  std::vector<float> lse;
  TensorView lse_view;
};

TEST_CASE("a batch of 0, or no queries and no keys, is a no-op, forward and backward") {
  for (const Attention& a : {sized(0, 17, 33), sized(3, 0, 0)}) {
    Call call(a);
    CHECK_NOTHROW(call.forward());
    CHECK_NOTHROW(call.backward());
  }
}

TEST_CASE("no queries: the forward writes nothing, the backward's dK and dV are exactly 0") {
  Call call(sized(2, 0, 33));
  CHECK_NOTHROW(call.forward());
  CHECK_NOTHROW(call.backward());
  CHECK(all_equal(call.dk.read(), 0));
  CHECK(all_equal(call.dv.read(), 0));
}

TEST_CASE("no keys: O = 0 and LSE = -inf in the forward, dQ = 0 in the backward") {
  Call call(sized(2, 17, 0));
  call.forward();
  CHECK(all_equal(call.o.read(), 0));
  for (float x : call.read_lse()) CHECK((std::isinf(x) && x < 0));
  call.backward();
  CHECK(all_equal(call.dq.read(), 0));
}

TEST_CASE("empty tensors may have null pointers, but a non-empty one still may not") {
  Call call(sized(2, 17, 0));
  call.q.view.data = nullptr;  // q has 2 · 17 · 2 · 64 elements
  testing::check_names([&] { call.forward(); }, "q", "data pointer is null");
}

TEST_CASE("softmax over no rows is a no-op") {
  const TensorView x = TensorView::contiguous(nullptr, DType::bf16, {0, 128});
  const TensorView y = TensorView::contiguous(nullptr, DType::bf16, {0, 128});
  CHECK_NOTHROW(emulator().softmax(x, y));
}

}  // namespace
}  // namespace flashjit
