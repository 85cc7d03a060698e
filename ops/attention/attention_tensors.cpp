// The tensor helpers of include/flashjit/attention.hpp: views of contiguous attention tensors in
// either common layout, always in the logical order [batch, seqlen, heads, head_dim].
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

#include "flashjit/attention.hpp"
#include "flashjit/error.hpp"

namespace flashjit {
namespace {

/// Throws InvalidArgument(name) unless every size is >= 0 (0: an empty tensor), and
/// InvalidArgument("shape") unless the element count fits int64 (so the strides below cannot
/// overflow).
void check_sizes(std::initializer_list<std::pair<const char*, std::int64_t>> sizes) {
  std::int64_t count = 1;
  for (const auto& [name, size] : sizes) {
    if (size < 0) {
      throw InvalidArgument(name, "is " + std::to_string(size) + "; must be >= 0");
    }
    if (size > 0 && count > std::numeric_limits<std::int64_t>::max() / size) {
      throw InvalidArgument("shape", "the element count overflows 64 bits");
    }
    count *= size;
  }
}

}  // namespace

TensorView attention_tensor(void* data, DType dtype, Layout layout, std::int64_t batch,
                            std::int64_t seqlen, std::int64_t heads, std::int64_t head_dim) {
  check_sizes({{"batch", batch}, {"seqlen", seqlen}, {"heads", heads}, {"head_dim", head_dim}});
  const std::int64_t batch_stride = seqlen * heads * head_dim;
  if (layout == Layout::bshd) {
    return TensorView::strided(data, dtype, {batch, seqlen, heads, head_dim},
                               {batch_stride, heads * head_dim, head_dim, 1});
  }
  return TensorView::strided(data, dtype, {batch, seqlen, heads, head_dim},
                             {batch_stride, head_dim, seqlen * head_dim, 1});
}

TensorView lse_tensor(float* data, const Attention& attention) {
  check_sizes({{"attention.batch", attention.batch},
               {"attention.heads_q", attention.heads_q},
               {"attention.seqlen_q", attention.seqlen_q}});
  return TensorView::contiguous(data, DType::f32,
                                {attention.batch, attention.heads_q, attention.seqlen_q});
}

}  // namespace flashjit
