#include "argument_checks.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "flashjit/error.hpp"
#include "memory_overlap.hpp"

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

void check_tensor(const TensorView& view, const std::string& name, int rank) {
  if (view.rank != rank) {
    throw InvalidArgument(name + ".rank", "is " + std::to_string(view.rank) + "; expected " +
                                              std::to_string(rank) + " dimensions");
  }
  const auto element = static_cast<std::int64_t>(dtype_size(view.dtype));
  if (reinterpret_cast<std::uintptr_t>(view.data) % static_cast<std::uintptr_t>(element) != 0) {
    throw InvalidArgument(
        name, "data pointer is not aligned to its " + std::to_string(element) + "-byte elements");
  }
  std::int64_t last_offset = 0;  // in elements; checked so that it cannot overflow
  for (int d = 0; d < rank; ++d) {
    // Not "[" + std::to_string(d) + "]": GCC 12 warns -Wrestrict on it at -O2 and above (a
    // false positive, GCC bug 105329).
    const std::string dim = std::string("[").append(std::to_string(d)).append("]");
    if (view.shape[d] < 0) {
      throw InvalidArgument(
          name + ".shape",
          "dimension " + dim + " is " + std::to_string(view.shape[d]) + "; sizes must be >= 0");
    }
    if (view.strides[d] < 0) {
      throw InvalidArgument(name + ".strides", "stride " + dim +
                                                   " is negative; strides must "
                                                   "be >= 0");
    }
    const std::int64_t limit = std::numeric_limits<std::int64_t>::max() / element - last_offset;
    if (view.strides[d] != 0 && view.shape[d] - 1 > limit / view.strides[d]) {
      throw InvalidArgument(name + ".shape", "the tensor's extent overflows 64-bit offsets");
    }
    if (view.shape[d] > 0) last_offset += (view.shape[d] - 1) * view.strides[d];
  }
  // An empty tensor addresses nothing, so its pointer may be null (as frameworks give it).
  const bool empty = std::any_of(view.shape.begin(), view.shape.begin() + rank,
                                 [](std::int64_t size) { return size == 0; });
  if (view.data == nullptr && !empty) throw InvalidArgument(name, "data pointer is null");
}

void check_shape(const TensorView& view, const std::string& name,
                 std::initializer_list<std::int64_t> expected, const std::string& dims) {
  const bool same = static_cast<std::size_t>(view.rank) == expected.size() &&
                    std::equal(expected.begin(), expected.end(), view.shape.begin());
  if (!same) {
    throw InvalidArgument(
        name + ".shape",
        "is " + shape_string(view.shape.data(), static_cast<std::size_t>(view.rank)) +
            "; expected " + dims + " = " + shape_string(expected.begin(), expected.size()));
  }
}

void check_aligned(const TensorView& view, const std::string& name, std::int64_t bytes) {
  if (reinterpret_cast<std::uintptr_t>(view.data) % static_cast<std::uintptr_t>(bytes) != 0) {
    throw InvalidArgument(name, "data pointer is not " + std::to_string(bytes) +
                                    "-byte aligned; the kernel loads " + std::to_string(bytes) +
                                    "-byte vectors");
  }
}

void check_no_self_overlap(const TensorView& view, const std::string& name) {
  if (view.numel() == 0) return;  // no element to share an address
  std::vector<int> dims;  // dimensions actually stepped along, innermost (smallest stride) first
  for (int d = 0; d < view.rank; ++d) {
    if (view.shape[d] > 1) dims.push_back(d);
  }
  std::sort(dims.begin(), dims.end(),
            [&](int a, int b) { return view.strides[a] < view.strides[b]; });
  std::int64_t extent = 1;  // elements spanned by the dimensions checked so far
  for (int d : dims) {
    if (view.strides[d] < extent) {
      throw InvalidArgument(name + ".strides",
                            "stride [" + std::to_string(d) +
                                "] makes elements share addresses; "
                                "an output needs a distinct address per element");
    }
    extent = view.strides[d] * view.shape[d];  // check_tensor ruled out overflow
  }
}

void check_value_dtype(const TensorView& view, const std::string& name) {
  if (view.dtype != DType::f16 && view.dtype != DType::bf16 && view.dtype != DType::f32) {
    throw InvalidArgument(name + ".dtype", "is " + std::string(dtype_name(view.dtype)) +
                                               "; must be fp16, bf16 or fp32");
  }
}

void check_same_dtype(const TensorView& view, const TensorView& reference, const std::string& name,
                      const std::string& reference_name) {
  if (view.dtype != reference.dtype) {
    throw InvalidArgument(name + ".dtype", "is " + std::string(dtype_name(view.dtype)) +
                                               "; must match " + reference_name + " (" +
                                               std::string(dtype_name(reference.dtype)) + ")");
  }
}

void check_no_partial_overlap(const TensorView& output, const TensorView& input,
                              const std::string& output_name, const std::string& input_name) {
  const bool identical =
      output.data == input.data && output.shape == input.shape && output.strides == input.strides;
  if (!identical) check_disjoint(output, input, output_name, input_name, Role::input);
}

void check_disjoint(const TensorView& output, const TensorView& other,
                    const std::string& output_name, const std::string& other_name,
                    Role other_role) {
  const Sharing sharing = shared_memory(output, other);
  if (sharing == Sharing::none) return;
  const std::string other_text =
      std::string(other_role == Role::input ? "input" : "output") + " '" + other_name + "'";
  const std::string rule =
      "; a tensor the call writes must share no element with another tensor of the call";
  if (sharing == Sharing::some) {
    throw InvalidArgument(output_name, "shares elements with " + other_text + rule);
  }
  throw InvalidArgument(output_name, "may share elements with " + other_text +
                                         " (their address ranges meet and their strides do "
                                         "not nest, so flashjit could not prove them apart)" +
                                         rule);
}

}  // namespace flashjit::kernels
