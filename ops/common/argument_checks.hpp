#pragma once
// Checks shared by every op's argument validation. Each throws InvalidArgument naming the
// argument ("q", "q.shape", ...) and what is accepted. Names are string views and messages are
// made only on the way out: a call that passes its checks allocates nothing here.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "flashjit/tensor.hpp"

namespace flashjit::kernels {

/// Whether an optional tensor argument was given: a view with null data is absent.
inline bool present(const TensorView& view) { return view.data != nullptr; }

/// `view` has data aligned to its element size (non-null unless a size is 0: an empty tensor),
/// exactly `rank` dimensions, sizes and strides >= 0, and an extent addressable with 64-bit
/// offsets.
void check_tensor(const TensorView& view, std::string_view name, int rank);

/// `view` (of the right rank) has exactly the sizes `expected`; `dims` names them for the
/// message, e.g. "[batch, seqlen_q, heads_q, head_dim]". Throws InvalidArgument(name + ".shape").
void check_shape(const TensorView& view, std::string_view name,
                 std::initializer_list<std::int64_t> expected, std::string_view dims);

/// `view`'s data pointer is a multiple of `bytes` (vector loads and cp.async need it).
void check_aligned(const TensorView& view, std::string_view name, std::int64_t bytes);

/// No two elements of `view` share an address (what an output needs): ordered by stride, each
/// dimension of size > 1 steps over the whole extent of the smaller ones. This rejects a few
/// exotic interleavings that would be safe; no layout a framework produces is among them.
void check_no_self_overlap(const TensorView& view, std::string_view name);

/// `view` holds values: fp16, bf16 or fp32 (int32 is for index arrays only).
void check_value_dtype(const TensorView& view, std::string_view name);

/// `view` has the same dtype as `reference`.
void check_same_dtype(const TensorView& view, const TensorView& reference, std::string_view name,
                      std::string_view reference_name);

/// What the other tensor of an overlap check is to the call, for the message.
enum class Role { input, output };

/// `output` is either exactly `input` (same data, shape and strides: in place) or shares no
/// element with it.
void check_no_partial_overlap(const TensorView& output, const TensorView& input,
                              std::string_view output_name, std::string_view input_name);

/// `output` shares no element with `other` (memory_overlap.hpp: decided by elements, so
/// interleaved slices of one buffer pass). `other_role` words the message.
void check_disjoint(const TensorView& output, const TensorView& other, std::string_view output_name,
                    std::string_view other_name, Role other_role);

}  // namespace flashjit::kernels
