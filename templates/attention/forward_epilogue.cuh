#pragma once
// The end of the forward pass: a warp's normalized O rows go out through shared memory (so
// global writes are whole 16-byte chunks of consecutive columns) and the LSE goes straight out.
#include "attention/forward_pipeline.cuh"
#include "tile/register_tile.cuh"

namespace flashjit {

/// Writes this warp's rows [warp_row0, warp_row0 + Rows) of O (rounded to T) and of LSE for
/// the block's first `rows` rows. Staging reuses the warp's own rows of the Q tile, which only
/// this warp ever read.
template <class Traits, int Rows, int HeadDim>
FJ_DEVICE void store_output(const acc_tile<Rows, HeadDim>& o, const row_vec<Rows>& lse,
                            typename KeyValuePipeline<Traits>::QTile staging,
                            const HeadSlice<typename Traits::Element>& slice, int warp_row0,
                            int rows, int lane) {
  using T = typename Traits::Element;
  using Acc = acc_tile<Rows, HeadDim>;
#pragma unroll
  for (int s = 0; s < Acc::kSlabs; ++s)
#pragma unroll
    for (int g = 0; g < Acc::kGroups; ++g)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        T* pair = staging.at(warp_row0 + fragment_row(s, half, lane), fragment_col(g, 0, lane));
        store_shared(reinterpret_cast<unsigned*>(pair), 0,
                     pack2<T>(o.frag[s][g][2 * half], o.frag[s][g][2 * half + 1]));
      }
  __syncwarp();
  store_rows_from_shared<Rows, Traits::kHeadDim>(slice.o + warp_row0 * slice.o_row_stride,
                                                 slice.o_row_stride, staging, warp_row0,
                                                 rows - warp_row0, lane);
  if (slice.lse == nullptr || lane % 4 != 0) return;  // a quad's lanes hold the same LSE
#pragma unroll
  for (int s = 0; s < Acc::kSlabs; ++s)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = warp_row0 + fragment_row(s, half, lane);
      if (row < rows) store_global(slice.lse, row, lse.v[2 * s + half]);
    }
}

}  // namespace flashjit
