#include "attention/check/dropout_mask.hpp"

#include <stdexcept>

#include "attention/attention_common.hpp"
#include "attention/parts/dropout.cuh"

namespace flashjit::testing {

void set_dropout(reference::Problem& problem, float p, std::uint64_t seed, std::uint64_t offset,
                 std::int64_t first_batch) {
  if (!(p >= 0.0f && p < 1.0f)) throw std::invalid_argument("set_dropout: p must be in [0, 1)");
  problem.dropout_p = p;
  problem.dropout_seed = seed;
  problem.dropout_offset = offset;
  Attention attention;  // the kernels' parameters, filled as the library fills them
  attention.dropout_p = p;
  attention.dropout_seed = seed;
  attention.dropout_offset = offset;
  const DropoutParams d = kernels::dropout_params(attention);
  const double kept = 1.0 / (1.0 - static_cast<double>(p));
  const std::int64_t heads = problem.heads_q;
  problem.dropout = [d, kept, heads, first_batch](std::int64_t b, std::int64_t h, std::int64_t i,
                                                  std::int64_t j) {
    const int batch_head = static_cast<int>((first_batch + b) * heads + h);
    return dropout_keeps(d, batch_head, static_cast<int>(i), static_cast<int>(j)) ? kept : 0.0;
  };
}

}  // namespace flashjit::testing
