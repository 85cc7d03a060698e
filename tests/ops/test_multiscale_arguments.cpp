// Bad input to multi-scale attention on the emulator: each is an InvalidArgument naming the
// argument, thrown before anything is launched, and the outputs keep their poison (nothing
// written).
#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "flashjit/error.hpp"
#include "flashjit/flashjit.hpp"
#include "support/emulator_runtime.hpp"

namespace flashjit::testing {
namespace {

constexpr std::int64_t kBatch = 1, kHeads = 2, kSeq = 16, kDim = 32;

/// A valid call's tensors (decay mask), outputs filled with 0x7f bytes.
struct Call {
  MultiScaleAttention attention{kBatch, kHeads, kHeads, kSeq,
                                kSeq,   kDim,   0.0f,   MultiScaleMask::decay};
  std::vector<DeviceBuffer> buffers;
  TensorView q, k, v, o, dout, dq, dk, dv, rates, mask, rowsum, dmask;
  std::vector<TensorView> outputs;  // as made: what a test breaks is a copy

  Call() {
    q = heads(0);
    k = heads(0);
    v = heads(0);
    dout = heads(0);
    o = heads(0x7f);
    dq = heads(0x7f);
    dk = heads(0x7f);
    dv = heads(0x7f);
    rates = floats({kHeads}, 0);
    mask = floats({kHeads, kSeq, kSeq}, 0);
    rowsum = floats({kBatch, kHeads, kSeq}, 0x7f);
    dmask = floats({kHeads, kSeq, kSeq}, 0x7f);
    outputs = {o, dq, dk, dv, rowsum, dmask};
  }
  TensorView buffer(std::size_t bytes, unsigned char fill) {
    buffers.push_back(emulator().allocate(bytes));
    const std::vector<unsigned char> bytes_of(bytes, fill);
    emulator().copy_to_device(buffers.back().data(), bytes_of.data(), bytes);
    return {buffers.back().data(), DType::bf16, 0, {}, {}};
  }
  TensorView heads(unsigned char fill) {
    TensorView t = buffer(kBatch * kSeq * kHeads * kDim * 2, fill);
    return attention_tensor(t.data, DType::bf16, Layout::bshd, kBatch, kSeq, kHeads, kDim);
  }
  TensorView floats(std::initializer_list<std::int64_t> shape, unsigned char fill) {
    std::int64_t count = 1;
    for (std::int64_t n : shape) count *= n;
    TensorView t = buffer(static_cast<std::size_t>(count) * 4, fill);
    return TensorView::contiguous(t.data, DType::f32, shape);
  }
  void forward() { emulator().multiscale_forward(attention, q, k, v, rates, o, rowsum); }
  void backward() {
    emulator().multiscale_backward(attention, q, k, v, rates, o, rowsum, dout, dq, dk, dv, {});
  }
  bool untouched(const TensorView& t) const {
    std::vector<unsigned char> bytes(static_cast<std::size_t>(t.span_bytes()));
    emulator().copy_to_host(bytes.data(), t.data, bytes.size());
    for (unsigned char b : bytes)
      if (b != 0x7f) return false;
    return true;
  }
  bool outputs_untouched() const {
    for (const TensorView& t : outputs)
      if (!untouched(t)) return false;
    return true;
  }
};

void check_rejected(Call& call, const std::function<void(Call&)>& run,
                    const std::string& argument) {
  CAPTURE(argument);
  try {
    run(call);
    FAIL("accepted; expected InvalidArgument(" << argument << ")");
  } catch (const InvalidArgument& e) {
    CHECK_MESSAGE(e.argument() == argument, e.what());
  }
  CHECK(call.outputs_untouched());
}

const auto kForward = [](Call& c) { c.forward(); };
const auto kBackward = [](Call& c) { c.backward(); };

}  // namespace

TEST_CASE("multi-scale attention: bad sizes, scale and tensors are named, nothing written") {
  {
    Call c;
    c.attention.head_dim = 100;
    check_rejected(c, kForward, "attention.head_dim");
  }
  {
    Call c;
    c.attention.heads_kv = 3;
    check_rejected(c, kForward, "attention.heads_kv");
  }
  {
    Call c;
    c.attention.scale = -1.0f;
    check_rejected(c, kForward, "attention.scale");
  }
  {
    Call c;
    c.q.dtype = DType::f32;
    check_rejected(c, kForward, "q.dtype");
  }
  {
    Call c;
    c.k.shape[1] = kSeq - 1;
    check_rejected(c, kForward, "k.shape");
  }
  {
    Call c;
    c.o = c.q;  // the output over an input
    check_rejected(c, kForward, "o");
  }
  {
    Call c;
    c.rowsum.shape[2] = kSeq + 1;
    check_rejected(c, kForward, "rowsum.shape");
  }
}

TEST_CASE("multi-scale attention: the mask argument must match the mask kind") {
  {
    Call c;
    c.rates = c.mask;  // a tensor where the decay takes rates
    check_rejected(c, kForward, "mask.rank");
  }
  {
    Call c;
    c.rates.shape[0] = kHeads + 1;
    check_rejected(c, kForward, "mask.shape");
  }
  {
    Call c;
    c.attention.mask = MultiScaleMask::tensor;  // rates where the tensor is expected
    check_rejected(c, kForward, "mask.rank");
  }
  {
    Call c;
    c.attention.mask = MultiScaleMask::tensor;
    c.rates = c.mask;
    c.rates.dtype = DType::bf16;
    check_rejected(c, kForward, "mask.dtype");
  }
}

TEST_CASE("multi-scale attention backward: missing r, dM with the decay, bad gradients") {
  {
    Call c;
    c.rowsum = {};
    check_rejected(c, kBackward, "rowsum");
  }
  {
    Call c;
    check_rejected(
        c,
        [](Call& call) {
          emulator().multiscale_backward(call.attention, call.q, call.k, call.v, call.rates, call.o,
                                         call.rowsum, call.dout, call.dq, call.dk, call.dv,
                                         call.dmask);
        },
        "dmask");
  }
  {
    Call c;
    c.dq.shape[2] = 1;
    check_rejected(c, kBackward, "dq.shape");
  }
  {
    Call c;
    c.dv = c.dk;  // two gradients in one buffer
    check_rejected(c, kBackward, "dv");
  }
}

}  // namespace flashjit::testing
