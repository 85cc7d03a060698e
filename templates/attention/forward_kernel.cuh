#pragma once
// FlashAttention-2 forward (DESIGN.md section 1). STUB: the signature is final, the body is
// being written.
#include "attention/forward_traits.cuh"
#include "attention/params.cuh"

namespace flashjit {

/// Grid (ceil(seqlen_q / kBlockM), heads_q, batch), block kThreads, dynamic shared memory
/// Config::kSharedBytes. One CTA computes kBlockM query rows of one head.
template <class Config>
FJ_GLOBAL void __launch_bounds__(Config::kThreads)
    attention_forward_kernel(AttentionForwardParams params) {
  (void)params;
}

}  // namespace flashjit
