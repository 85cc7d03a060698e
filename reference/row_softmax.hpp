#pragma once
// The float64 softmax of a row, as the references take it: the row's max subtracted first, and
// a row of only -inf (nothing visible) all zeros with LSE -inf rather than NaN. The attention
// reference applies it to each query row's scores; the softmax op's cases to whole matrices.
#include <cstdint>

namespace flashjit::reference {

/// Turns `n` scores into probabilities in place and returns their LSE (natural log).
double softmax_in_place(double* row, int64_t n);

/// Row softmax of a rows x cols matrix: y[r, :] = softmax(x[r, :]). `x` and `y` share
/// `row_stride` (elements between rows); columns are contiguous. A row of only -inf gives 0s.
void softmax_rows(const double* x, int64_t rows, int64_t cols, int64_t row_stride, double* y);

}  // namespace flashjit::reference
