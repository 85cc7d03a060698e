#pragma once
// Dropout for the float64 reference: the kernels' mask (attention/parts/dropout.cuh)
// regenerated on the host from the same counter-based generator, as the factor the reference
// multiplies each probability by.
#include <cstdint>

#include "attention/check/attention_reference.hpp"

namespace flashjit::testing {

/// Sets `problem`'s dropout: the library's dropout_p, dropout_seed and dropout_offset, and
/// reference::Problem::dropout, which gives 0 for the (b, h, i, j) the kernels drop and
/// 1 / (1 − p) for those they keep. `p` in [0, 1). `first_batch`: the batch entry of the
/// problem's b = 0 (a variable-length call's sequence, checked as a problem of its own).
void set_dropout(reference::Problem& problem, float p, std::uint64_t seed, std::uint64_t offset,
                 std::int64_t first_batch = 0);

}  // namespace flashjit::testing
