#pragma once
// What the ops' `flashjit autotune` problems share: the attention shapes its options describe.
#include <vector>

#include "flashjit/attention.hpp"
#include "op_commands.hpp"

namespace flashjit::tools {

/// Every attention shape `shape` describes, in a fixed order: each head dim, causal value,
/// sequence length (queries and keys) and batch·heads (split into heads of --heads each where
/// that divides it, else one batch). Throws InvalidArgument naming the option of a shape the
/// library refuses or that has no work to time.
std::vector<Attention> tune_attentions(const TuneShape& shape);

/// The library's checks of `attention`, reported against the autotune option that set the
/// field (`batch_flag` and `seqlen_q_flag` differ between the ops' problems).
void check_tune_attention(const Attention& attention, const char* batch_flag,
                          const char* seqlen_q_flag);

}  // namespace flashjit::tools
