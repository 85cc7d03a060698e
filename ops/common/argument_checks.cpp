#include "common/argument_checks.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include "common/memory_overlap.hpp"
#include "flashjit/error.hpp"

namespace flashjit::kernels {
namespace {

std::string shape_string(const std::int64_t* sizes, std::size_t count) {
  std::string text = "[";
  for (std::size_t d = 0; d < count; ++d) {
    text += (d > 0 ? ", " : "") + std::to_string(sizes[d]);
  }
  return text + "]";
}

}  // namespace

void check_tensor(const TensorView& view, std::string_view name, int rank) {
  if (view.rank != rank) {
    throw InvalidArgument(
        std::string(name) + ".rank",
        "is " + std::to_string(view.rank) + "; expected " + std::to_string(rank) + " dimensions");
  }
  const auto element = static_cast<std::int64_t>(dtype_size(view.dtype));
  if (reinterpret_cast<std::uintptr_t>(view.data) % static_cast<std::uintptr_t>(element) != 0) {
    throw InvalidArgument(std::string(name), "data pointer is not aligned to its " +
                                                 std::to_string(element) + "-byte elements");
  }
  std::int64_t last_offset = 0;  // in elements; checked so that it cannot overflow
  for (int d = 0; d < rank; ++d) {
    // Not "[" + std::to_string(d) + "]": GCC 12 warns -Wrestrict on it at -O2 and above (a
    // false positive, GCC bug 105329). Made only for a message.
    auto dim = [d] { return std::string("[").append(std::to_string(d)).append("]"); };
    if (view.shape[d] < 0) {
      throw InvalidArgument(
          std::string(name) + ".shape",
          "dimension " + dim() + " is " + std::to_string(view.shape[d]) + "; sizes must be >= 0");
    }
    if (view.strides[d] < 0) {
      throw InvalidArgument(std::string(name) + ".strides", "stride " + dim() +
                                                                " is negative; strides must "
                                                                "be >= 0");
    }
    // The last element's offset, in bytes too, without overflowing (no division: this runs
    // on every call).
    std::int64_t span = 0;
    if (view.shape[d] > 0 && (__builtin_mul_overflow(view.shape[d] - 1, view.strides[d], &span) ||
                              __builtin_add_overflow(last_offset, span, &last_offset) ||
                              __builtin_mul_overflow(last_offset, element, &span))) {
      throw InvalidArgument(std::string(name) + ".shape",
                            "the tensor's extent overflows 64-bit offsets");
    }
  }
  // An empty tensor addresses nothing, so its pointer may be null (as frameworks give it).
  const bool empty = std::any_of(view.shape.begin(), view.shape.begin() + rank,
                                 [](std::int64_t size) { return size == 0; });
  if (view.data == nullptr && !empty) {
    throw InvalidArgument(std::string(name), "data pointer is null");
  }
}

void check_shape(const TensorView& view, std::string_view name,
                 std::initializer_list<std::int64_t> expected, std::string_view dims) {
  const bool same = static_cast<std::size_t>(view.rank) == expected.size() &&
                    std::equal(expected.begin(), expected.end(), view.shape.begin());
  if (!same) {
    throw InvalidArgument(std::string(name) + ".shape",
                          "is " +
                              shape_string(view.shape.data(), static_cast<std::size_t>(view.rank)) +
                              "; expected " + std::string(dims) + " = " +
                              shape_string(expected.begin(), expected.size()));
  }
}

void check_aligned(const TensorView& view, std::string_view name, std::int64_t bytes) {
  if (reinterpret_cast<std::uintptr_t>(view.data) % static_cast<std::uintptr_t>(bytes) != 0) {
    throw InvalidArgument(std::string(name), "data pointer is not " + std::to_string(bytes) +
                                                 "-byte aligned; the kernel loads " +
                                                 std::to_string(bytes) + "-byte vectors");
  }
}

void check_no_self_overlap(const TensorView& view, std::string_view name) {
  if (view.numel() == 0) return;  // no element to share an address
  // The dimensions actually stepped along, innermost (smallest stride) first.
  std::array<int, TensorView::kMaxRank> dims{};
  int count = 0;
  for (int d = 0; d < view.rank; ++d) {
    if (view.shape[d] > 1) dims[count++] = d;
  }
  for (int i = 1; i < count; ++i) {  // insertion sort by stride: at most kMaxRank of them
    for (int j = i; j > 0 && view.strides[dims[j]] < view.strides[dims[j - 1]]; --j) {
      std::swap(dims[j], dims[j - 1]);
    }
  }
  std::int64_t extent = 1;  // elements spanned by the dimensions checked so far
  for (int i = 0; i < count; ++i) {
    const int d = dims[i];
    if (view.strides[d] < extent) {
      throw InvalidArgument(std::string(name) + ".strides",
                            "stride [" + std::to_string(d) +
                                "] makes elements share addresses; "
                                "an output needs a distinct address per element");
    }
    extent = view.strides[d] * view.shape[d];  // check_tensor ruled out overflow
  }
}

void check_value_dtype(const TensorView& view, std::string_view name) {
  if (view.dtype != DType::f16 && view.dtype != DType::bf16 && view.dtype != DType::f32) {
    throw InvalidArgument(
        std::string(name) + ".dtype",
        "is " + std::string(dtype_name(view.dtype)) + "; must be fp16, bf16 or fp32");
  }
}

void check_same_dtype(const TensorView& view, const TensorView& reference, std::string_view name,
                      std::string_view reference_name) {
  if (view.dtype != reference.dtype) {
    throw InvalidArgument(std::string(name) + ".dtype",
                          "is " + std::string(dtype_name(view.dtype)) + "; must match " +
                              std::string(reference_name) + " (" +
                              std::string(dtype_name(reference.dtype)) + ")");
  }
}

void check_no_partial_overlap(const TensorView& output, const TensorView& input,
                              std::string_view output_name, std::string_view input_name) {
  const bool identical =
      output.data == input.data && output.shape == input.shape && output.strides == input.strides;
  if (!identical) check_disjoint(output, input, output_name, input_name, Role::input);
}

void check_disjoint(const TensorView& output, const TensorView& other, std::string_view output_name,
                    std::string_view other_name, Role other_role) {
  const Sharing sharing = shared_memory(output, other);
  if (sharing == Sharing::none) return;
  const std::string other_text = std::string(other_role == Role::input ? "input" : "output") +
                                 " '" + std::string(other_name) + "'";
  const std::string rule =
      "; a tensor the call writes must share no element with another tensor of the call";
  if (sharing == Sharing::some) {
    throw InvalidArgument(std::string(output_name), "shares elements with " + other_text + rule);
  }
  throw InvalidArgument(std::string(output_name),
                        "may share elements with " + other_text +
                            " (their address ranges meet and their strides do "
                            "not nest, so flashjit could not prove them apart)" +
                            rule);
}

}  // namespace flashjit::kernels
