#include "attention/hopper/attention_forward_tma.hpp"

#include <algorithm>
#include <string>

#include "attention/attention_common.hpp"
#include "attention/attention_forward.hpp"
#include "attention/fp8/fp8_tma_space.cuh"
#include "attention/hopper/tma_forward_space.cuh"
#include "attention/parts/row_stats.cuh"
#include "tile/shared_layout.cuh"

namespace flashjit::kernels {
namespace {

/// A map's element and box: 16-bit elements in boxes one swizzle line wide (64 head-dim
/// elements: a panel of swizzled_tile) under that line's swizzle mode, or an fp8 cache's bytes in
/// boxes of whole padded rows without swizzle (the staging tile's row-major image,
/// tma_forward_loads.cuh).
struct MapElements {
  std::uint64_t bytes;
  std::uint32_t box_cols;
  emulator::TmaSwizzle swizzle;
};

/// TMA's swizzle mode of a line `bytes` wide (tile/shared_layout.cuh).
constexpr emulator::TmaSwizzle swizzle_of_line(int bytes) {
  return bytes == 128  ? emulator::TmaSwizzle::b128
         : bytes == 64 ? emulator::TmaSwizzle::b64
         : bytes == 32 ? emulator::TmaSwizzle::b32
                       : emulator::TmaSwizzle::none;
}

constexpr MapElements kSixteenBit{2, Swizzle128::kLineBytes / 2,
                                  swizzle_of_line(Swizzle128::kLineBytes)};

MapElements fp8_rows(std::int64_t head_dim) {
  return {1, static_cast<std::uint32_t>(tma_forward_padded_head_dim(static_cast<int>(head_dim))),
          emulator::TmaSwizzle::none};
}

/// The map of one [batch, seqlen, heads, head_dim] tensor: rank 4 over {head_dim, seqlen,
/// heads, batch}, boxes of `e.box_cols` head-dim elements by `box_rows` rows.
emulator::TensorMap head_tensor_map(const HeadTensor& t, std::int64_t batch, std::int64_t seqlen,
                                    std::int64_t heads, std::int64_t head_dim, int box_rows,
                                    MapElements e = kSixteenBit) {
  emulator::TensorMap map;
  map.element_bytes = static_cast<int>(e.bytes);
  map.rank = 4;
  map.global_address = t.data;
  const std::int64_t sizes[4] = {head_dim, seqlen, heads, batch};
  const index_t strides[4] = {1, t.row_stride, t.head_stride, t.batch_stride};
  for (std::size_t d = 0; d < 4; ++d) {
    // seqlen_k = 0 leaves every key block range empty, so K and V are never read; the driver
    // still wants a size of at least 1.
    map.dims[d] = static_cast<std::uint64_t>(std::max<std::int64_t>(1, sizes[d]));
    if (d == 0) continue;
    // TMA never steps along a dimension of size 1, but the driver checks its stride anyway
    // (a multiple of 16 bytes): give it the dense one, which is.
    const std::uint64_t dense = map.dims[d - 1] * (d == 1 ? e.bytes : map.strides[d - 1]);
    map.strides[d] = sizes[d] <= 1 ? std::max<std::uint64_t>(16, (dense + 15) / 16 * 16)
                                   : static_cast<std::uint64_t>(strides[d]) * e.bytes;
  }
  map.box = {e.box_cols, static_cast<std::uint32_t>(box_rows), 1, 1, 1};
  map.swizzle = e.swizzle;
  return map;
}

/// The maps of Q, K, V and a fourth tensor of O's shape (O or dO) with `fourth_rows` rows a box.
/// V's and O's are value_head_dim() wide: boxes past it load zeros and store nothing. K's and
/// V's elements are `kv` (an fp8 cache's: fp8_rows).
std::vector<emulator::TensorMap> attention_tma_maps(const HeadTensor& q, const HeadTensor& k,
                                                    const HeadTensor& v, const HeadTensor& fourth,
                                                    const Attention& a, int block_m, int block_n,
                                                    int fourth_rows, MapElements kv = kSixteenBit) {
  const std::int64_t value_dim = a.value_head_dim();
  return {head_tensor_map(q, a.batch, a.seqlen_q, a.heads_q, a.head_dim, block_m),
          head_tensor_map(k, a.batch, a.seqlen_k, a.heads_kv, a.head_dim, block_n, kv),
          head_tensor_map(v, a.batch, a.seqlen_k, a.heads_kv, value_dim, block_n, kv),
          head_tensor_map(fourth, a.batch, a.seqlen_q, a.heads_q, value_dim, fourth_rows)};
}

}  // namespace

std::vector<emulator::TensorMap> forward_tma_maps(const AttentionForwardParams& params,
                                                  const Attention& a, int block_m, int block_n) {
  return attention_tma_maps(params.q, params.k, params.v, params.o, a, block_m, block_n,
                            kTmaStoreRows);
}

std::vector<emulator::TensorMap> fp8_forward_tma_maps(const AttentionForwardParams& params,
                                                      const Attention& a, int block_m,
                                                      int block_n) {
  // Two e4m3 codes an element: the byte strides stay, counted in 16-bit elements. An odd one
  // (never the multiple of 16 bytes TMA needs) stays odd in bytes, so the map is refused.
  const auto pairs = [](HeadTensor t) {
    for (index_t* stride : {&t.row_stride, &t.head_stride, &t.batch_stride}) {
      *stride = *stride % 2 == 0 ? *stride / 2 : 1;
    }
    return t;
  };
  const MapElements values{
      1, static_cast<std::uint32_t>(fp8_tma_space::padded_head_dim(static_cast<int>(a.head_dim))),
      emulator::TmaSwizzle::none};
  return {
      head_tensor_map(pairs(params.q), a.batch, a.seqlen_q, a.heads_q, a.head_dim / 2, block_m),
      head_tensor_map(pairs(params.k), a.batch, a.seqlen_k, a.heads_kv, a.head_dim / 2, block_n),
      head_tensor_map(params.v, a.batch, a.seqlen_k, a.heads_kv, a.value_head_dim(), block_n,
                      values),
      head_tensor_map(params.o, a.batch, a.seqlen_q, a.heads_q, a.value_head_dim(), kTmaStoreRows)};
}

std::vector<emulator::TensorMap> backward_tma_maps(const TensorView& q, const TensorView& k,
                                                   const TensorView& v, const TensorView& dout,
                                                   int block_m, int block_n) {
  const auto map = [](const TensorView& t, int box_rows) {
    return head_tensor_map(head_tensor(t), t.shape[0], t.shape[1], t.shape[2], t.shape[3],
                           box_rows);
  };
  return {map(q, block_m), map(k, block_n), map(v, block_n), map(dout, block_m)};
}

std::vector<emulator::TensorMap> packed_tma_maps(const AttentionForwardParams& params,
                                                 const Attention& a, std::int64_t total_q,
                                                 std::int64_t total_k, int block_m, int block_n,
                                                 bool kv_e4m3) {
  Attention packed = a;  // each as a batch of one
  packed.batch = 1;
  packed.seqlen_q = total_q;
  packed.seqlen_k = total_k;
  return attention_tma_maps(params.q, params.k, params.v, params.o, packed, block_m, block_n,
                            kTmaStoreRows, kv_e4m3 ? fp8_rows(a.head_dim) : kSixteenBit);
}

emulator::TensorMap row_stats_tma_map(const float* stats, std::int64_t blocks) {
  emulator::TensorMap map;
  map.element_bytes = 4;
  map.rank = 2;
  map.global_address = stats;
  map.dims = {kRowStatFloats, static_cast<std::uint64_t>(std::max<std::int64_t>(1, blocks)), 1, 1,
              1};
  map.strides = {0, kRowStatFloats * 4, 0, 0, 0};
  map.box = {kRowStatFloats, 1, 1, 1, 1};
  map.swizzle = emulator::TmaSwizzle::none;
  return map;
}

std::string tma_maps_problem(const std::vector<emulator::TensorMap>& maps, const char* fourth) {
  const char* names[] = {"q", "k", "v", fourth};
  for (std::size_t i = 0; i < maps.size(); ++i) {
    const std::string problem = emulator::tensor_map_problem(maps[i]);
    if (!problem.empty()) return std::string(names[i]) + ": " + problem;
  }
  return "";
}

std::string tma_tensor_problem(const Attention& attention, const TensorView& q, const TensorView& k,
                               const TensorView& v, const TensorView& o) {
  const AttentionForwardParams params = forward_params(attention, q, k, v, o, {});
  return tma_maps_problem(forward_tma_maps(params, attention, 64, 64));
}

}  // namespace flashjit::kernels
