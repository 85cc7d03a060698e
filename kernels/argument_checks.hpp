#pragma once
// Checks shared by every op's argument validation. Each throws InvalidArgument naming the
// argument ("q", "q.shape", ...) and what is accepted.
#include <string>

#include "flashjit/tensor.hpp"

namespace flashjit::kernels {

/// `view` has non-null data aligned to its element size, exactly `rank` dimensions, every size
/// >= 1, non-negative strides, and an extent addressable with 64-bit offsets.
void check_tensor(const TensorView& view, const std::string& name, int rank);

/// `view` has the same dtype as `reference`.
void check_same_dtype(const TensorView& view, const TensorView& reference,
                      const std::string& name, const std::string& reference_name);

/// `output` is either exactly `input` (same data, shape and strides: in place) or does not
/// overlap its memory at all.
void check_no_partial_overlap(const TensorView& output, const TensorView& input,
                              const std::string& output_name, const std::string& input_name);

/// `output` does not overlap `input`'s memory at all.
void check_disjoint(const TensorView& output, const TensorView& input,
                    const std::string& output_name, const std::string& input_name);

}  // namespace flashjit::kernels
