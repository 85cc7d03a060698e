// The C API's multi-scale attention (flashjit_multiscale_forward and _backward) on the emulator:
// the same bits as the C++ API for a mask tensor's forward and backward (with dM), the C++
// defaults, and bad arguments returned as codes naming them.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "flashjit/flashjit.hpp"
#include "flashjit/flashjit_c.h"
#include "support/random_values.hpp"

namespace {

using namespace flashjit;
using testing::random_bf16;

constexpr std::int64_t kBatch = 2, kHeads = 2, kSeq = 24, kDim = 16;
constexpr std::size_t kElements = kBatch * kSeq * kHeads * kDim;
constexpr std::size_t kRows = kBatch * kHeads * kSeq;
constexpr std::size_t kMask = kHeads * kSeq * kSeq;

std::vector<float> random_mask(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(kMask);
  for (float& v : values) v = uniform(rng);
  return values;
}

/// Every buffer of one call, in one runtime's memory: inputs uploaded, outputs zeroed.
template <class Upload>
std::vector<void*> make_buffers(Upload upload) {
  std::vector<void*> b;
  for (std::uint64_t seed : {1, 2, 3, 4})
    b.push_back(upload(random_bf16(kElements, seed)));  // q k v dout
  b.push_back(upload(random_mask(5)));                  // mask
  for (int i = 0; i < 4; ++i)
    b.push_back(upload(std::vector<std::uint16_t>(kElements, 0)));  // o dq dk dv
  b.push_back(upload(std::vector<float>(kRows, 0.0f)));             // rowsum
  b.push_back(upload(std::vector<float>(kMask, 0.0f)));             // dmask
  return b;
}
enum Slot { kQ, kK, kV, kDout, kMaskSlot, kO, kDq, kDk, kDv, kRowsum, kDmask };

flashjit_tensor heads(void* data) {
  return {data,
          FLASHJIT_DTYPE_BF16,
          4,
          {kBatch, kSeq, kHeads, kDim},
          {kSeq * kHeads * kDim, kHeads * kDim, kDim, 1}};
}
flashjit_tensor mask3(void* data) {
  return {data, FLASHJIT_DTYPE_F32, 3, {kHeads, kSeq, kSeq}, {kSeq * kSeq, kSeq, 1}};
}
flashjit_tensor rows3(void* data) {
  return {data, FLASHJIT_DTYPE_F32, 3, {kBatch, kHeads, kSeq}, {kHeads * kSeq, kSeq, 1}};
}

TensorView view(const flashjit_tensor& t) {
  TensorView v;
  v.data = t.data;
  v.dtype = t.dtype == FLASHJIT_DTYPE_F32 ? DType::f32 : DType::bf16;
  v.rank = t.rank;
  for (int i = 0; i < t.rank; ++i) {
    v.shape[static_cast<std::size_t>(i)] = t.shape[i];
    v.strides[static_cast<std::size_t>(i)] = t.strides[i];
  }
  return v;
}

}  // namespace

TEST_CASE("C API: multi-scale attention forward and backward give the C++ API's bits") {
  flashjit_runtime_options options;
  flashjit_runtime_options_init(&options);
  options.backend = FLASHJIT_BACKEND_EMULATOR;
  flashjit_runtime* runtime = nullptr;
  REQUIRE(flashjit_runtime_create(&options, &runtime) == FLASHJIT_OK);
  std::vector<void*> c_blocks;
  const auto c_upload = [&](const auto& values) {
    const std::size_t bytes = values.size() * sizeof(values[0]);
    void* data = nullptr;
    REQUIRE(flashjit_allocate(runtime, bytes, &data) == FLASHJIT_OK);
    REQUIRE(flashjit_copy_to_device(runtime, data, values.data(), bytes) == FLASHJIT_OK);
    c_blocks.push_back(data);
    return data;
  };
  const std::vector<void*> c = make_buffers(c_upload);
  flashjit_multiscale_attention attention;
  flashjit_multiscale_attention_init(&attention);
  CHECK(attention.mask == FLASHJIT_MULTISCALE_DECAY);
  CHECK(attention.scale == 0.0f);
  attention.batch = kBatch;
  attention.heads_q = attention.heads_kv = kHeads;
  attention.seqlen_q = attention.seqlen_k = kSeq;
  attention.head_dim = kDim;
  attention.mask = FLASHJIT_MULTISCALE_TENSOR;
  const flashjit_tensor q = heads(c[kQ]), k = heads(c[kK]), v = heads(c[kV]),
                        dout = heads(c[kDout]), o = heads(c[kO]), dq = heads(c[kDq]),
                        dk = heads(c[kDk]), dv = heads(c[kDv]), mask = mask3(c[kMaskSlot]),
                        dmask = mask3(c[kDmask]), rowsum = rows3(c[kRowsum]);
  REQUIRE_MESSAGE(flashjit_multiscale_forward(runtime, &attention, &q, &k, &v, &mask, &o, &rowsum,
                                              nullptr) == FLASHJIT_OK,
                  flashjit_last_error());
  REQUIRE_MESSAGE(
      flashjit_multiscale_backward(runtime, &attention, &q, &k, &v, &mask, &o, &rowsum, &dout, &dq,
                                   &dk, &dv, &dmask, nullptr) == FLASHJIT_OK,
      flashjit_last_error());

  Runtime cpp(RuntimeOptions{.backend = Backend::emulator});
  std::vector<DeviceBuffer> kept;
  const std::vector<void*> p = make_buffers([&](const auto& values) {
    const std::size_t bytes = values.size() * sizeof(values[0]);
    kept.push_back(cpp.allocate(bytes));
    cpp.copy_to_device(kept.back().data(), values.data(), bytes);
    return kept.back().data();
  });
  const MultiScaleAttention a{kBatch, kHeads, kHeads, kSeq,
                              kSeq,   kDim,   0.0f,   MultiScaleMask::tensor};
  cpp.multiscale_forward(a, view(heads(p[kQ])), view(heads(p[kK])), view(heads(p[kV])),
                         view(mask3(p[kMaskSlot])), view(heads(p[kO])), view(rows3(p[kRowsum])));
  cpp.multiscale_backward(a, view(heads(p[kQ])), view(heads(p[kK])), view(heads(p[kV])),
                          view(mask3(p[kMaskSlot])), view(heads(p[kO])), view(rows3(p[kRowsum])),
                          view(heads(p[kDout])), view(heads(p[kDq])), view(heads(p[kDk])),
                          view(heads(p[kDv])), view(mask3(p[kDmask])));
  const auto same = [&](Slot slot, std::size_t bytes) {
    std::vector<unsigned char> from_c(bytes), from_cpp(bytes);
    REQUIRE(flashjit_copy_to_host(runtime, from_c.data(), c[slot], bytes) == FLASHJIT_OK);
    cpp.copy_to_host(from_cpp.data(), p[slot], bytes);
    return from_c == from_cpp;
  };
  for (Slot slot : {kO, kDq, kDk, kDv}) CHECK(same(slot, kElements * 2));
  CHECK(same(kRowsum, kRows * 4));
  CHECK(same(kDmask, kMask * 4));

  // Bad arguments: a status and a message naming the argument.
  const int bad = 7;  // no enumerator: what a caller from another language might pass
  static_assert(sizeof(attention.mask) == sizeof bad);
  std::memcpy(&attention.mask, &bad, sizeof bad);
  CHECK(flashjit_multiscale_forward(runtime, &attention, &q, &k, &v, &mask, &o, &rowsum, nullptr) ==
        FLASHJIT_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashjit_last_error()).find("attention.mask") != std::string::npos);
  attention.mask =
      FLASHJIT_MULTISCALE_DECAY;  // a [heads] rate tensor expected, not a [h, q, k] one
  CHECK(flashjit_multiscale_forward(runtime, &attention, &q, &k, &v, &mask, &o, &rowsum, nullptr) ==
        FLASHJIT_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashjit_last_error()).find("mask") != std::string::npos);
  for (void* block : c_blocks) flashjit_free(runtime, block);
  flashjit_runtime_destroy(runtime);
}
