#include "flashjit/tensor.hpp"

#include <algorithm>
#include <string>

#include "flashjit/error.hpp"

namespace flashjit {
namespace {

int checked_rank(std::size_t rank, const char* argument) {
  if (rank == 0 || rank > TensorView::kMaxRank) {
    throw InvalidArgument(argument, "rank " + std::to_string(rank) + " is not supported; 1 to " +
                                        std::to_string(TensorView::kMaxRank) + " dimensions");
  }
  return static_cast<int>(rank);
}

}  // namespace

TensorView TensorView::contiguous(void* data, DType dtype,
                                  std::initializer_list<std::int64_t> shape) {
  TensorView view;
  view.data = data;
  view.dtype = dtype;
  view.rank = checked_rank(shape.size(), "shape");
  std::copy(shape.begin(), shape.end(), view.shape.begin());
  std::int64_t stride = 1;
  for (int d = view.rank - 1; d >= 0; --d) {
    view.strides[d] = stride;
    stride *= view.shape[d];
  }
  return view;
}

TensorView TensorView::strided(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                               std::initializer_list<std::int64_t> strides) {
  if (shape.size() != strides.size()) {
    throw InvalidArgument("strides", "has " + std::to_string(strides.size()) +
                                         " entries but shape has " + std::to_string(shape.size()));
  }
  TensorView view = contiguous(data, dtype, shape);
  std::copy(strides.begin(), strides.end(), view.strides.begin());
  return view;
}

std::int64_t TensorView::numel() const {
  std::int64_t count = 1;
  for (int d = 0; d < rank; ++d) count *= shape[d];
  return count;
}

std::int64_t TensorView::span_bytes() const {
  if (numel() == 0) return 0;
  std::int64_t last = 0;
  for (int d = 0; d < rank; ++d) last += (shape[d] - 1) * strides[d];
  return (last + 1) * static_cast<std::int64_t>(dtype_size(dtype));
}

}  // namespace flashjit
