#pragma once
// An fp8 cache's descale factors as the forward kernels read them (the mma.sync forward's
// ForwardBlock, the Hopper forward's consumers).
#include "attention/parts/forward_params.cuh"
#include "tile/memory.cuh"

namespace flashjit {

/// An fp8 cache's factor for sequence `batch`'s key/value head `head` (1 without factors).
FJ_DEVICE float descale_at(const CacheDescale& d, int batch, int head) {
  return d.data == nullptr ? 1.0f
                           : load_global(d.data, batch * d.batch_stride + head * d.head_stride);
}

}  // namespace flashjit
