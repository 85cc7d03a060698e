#include "tune_support.hpp"

#include "flashjit/error.hpp"
#include "format.hpp"

namespace flashjit::tools {

void check_tune_attention(const Attention& attention, const char* batch_flag,
                          const char* seqlen_q_flag) {
  validate_attention_flags(attention, {{"attention.batch", batch_flag},
                                       {"attention.heads_q", "--heads"},
                                       {"attention.heads_kv", "--heads-kv"},
                                       {"attention.seqlen_q", seqlen_q_flag},
                                       {"attention.seqlen_k", "--seqlen"},
                                       {"attention.head_dim", "--head-dim"}});
  if (attention.batch < 1) throw InvalidArgument(batch_flag, "must be at least 1 to be timed");
  if (attention.seqlen_q < 1)
    throw InvalidArgument(seqlen_q_flag, "must be at least 1 to be timed");
  if (attention.seqlen_k < 1) throw InvalidArgument("--seqlen", "must be at least 1 to be timed");
}

std::vector<Attention> tune_attentions(const TuneShape& shape) {
  std::vector<Attention> list;
  for (int head_dim : shape.head_dims) {
    for (bool causal : shape.causal) {
      for (std::int64_t seqlen : shape.seqlens) {
        for (std::int64_t bh : shape.batch_heads) {
          Attention a;
          const std::int64_t heads = bh % shape.heads == 0 ? shape.heads : bh;
          a.batch = bh / heads;
          a.heads_q = heads;
          a.heads_kv = shape.heads_kv > 0 && heads == shape.heads ? shape.heads_kv : heads;
          a.seqlen_q = a.seqlen_k = seqlen;
          a.head_dim = head_dim;
          a.causal = causal;
          check_tune_attention(a, "--batch-heads", "--seqlen");
          list.push_back(a);
        }
      }
    }
  }
  return list;
}

}  // namespace flashjit::tools
