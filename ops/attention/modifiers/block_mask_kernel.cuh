#pragma once
// Builds a block mask from a mask modifier (Runtime::build_block_mask): one thread per 16-row
// query slab of one (head, batch) walks the keys 16 at a time, evaluating the modifier for
// every (row, key) pair, and writes which keys any row sees and the longest run of key tiles
// every row sees (attention/parts/block_mask_params.cuh). Built once for a mask and reused by every
// forward with the same mask and sizes, as FlexAttention's create_block_mask.
#include "attention/parts/block_mask_params.cuh"
#include "attention/parts/modifiers.cuh"
#include "tile/memory.cuh"

namespace flashjit {

/// What the mask modifier makes of one key tile for one slab of rows.
struct TileVerdict {
  bool any;  // some row sees some key
  bool all;  // every row sees every key
};

template <class Modifiers>
FJ_DEVICE TileVerdict classify_tile(const CaptureTable& captures, int batch, int head, int row0,
                                    int rows, int key0, int keys) {
  TileVerdict verdict{false, true};
  for (int r = 0; r < rows; ++r) {
    for (int k = 0; k < keys; ++k) {
      const bool seen = Modifiers::mask(batch, head, row0 + r, key0 + k, captures);
      verdict.any = verdict.any || seen;
      verdict.all = verdict.all && seen;
    }
  }
  return verdict;
}

/// Grid (ceil(slabs / 128), heads_q, batch), 128 threads.
template <class Modifiers>
FJ_GLOBAL void __launch_bounds__(128) attention_block_mask_kernel(BlockMaskParams p) {
  static_assert(Modifiers::kMask, "a block mask is built from a mask modifier");
  const int slab = int(blockIdx.x) * 128 + int(threadIdx.x);
  if (slab >= p.slabs) return;
  const int head = blockIdx.y, batch = blockIdx.z;
  const int row0 = slab * kBlockMaskRows;
  const int rows = min_int(kBlockMaskRows, p.seqlen_q - row0);
  int lo = p.seqlen_k, hi = 0;   // keys some row sees
  int full_lo = 0, full_hi = 0;  // the longest run of tiles every row sees
  int run_lo = -1;               // the current run's first key, -1 outside one
  for (int key0 = 0; key0 < p.seqlen_k; key0 += kBlockMaskKeys) {
    const int keys = min_int(kBlockMaskKeys, p.seqlen_k - key0);
    const TileVerdict tile =
        classify_tile<Modifiers>(p.captures, batch, head, row0, rows, key0, keys);
    if (tile.any) {
      lo = min_int(lo, key0);
      hi = key0 + keys;
    }
    if (!tile.all) {
      run_lo = -1;
      continue;
    }
    if (run_lo < 0) run_lo = key0;
    if (key0 + keys - run_lo > full_hi - full_lo) {
      full_lo = run_lo;
      full_hi = key0 + keys;
    }
  }
  int* entry = p.ranges + batch * p.batch_stride + head * p.head_stride + slab * 4;
  store_global_raw(entry + kMaskLo, lo);
  store_global_raw(entry + kMaskHi, hi);
  store_global_raw(entry + kMaskFullLo, full_lo);
  store_global_raw(entry + kMaskFullHi, full_hi);
}

}  // namespace flashjit
