#include "attention/inference/attention_inference_config.hpp"

#include <algorithm>
#include <iterator>

#include "attention/decode/decode_space.cuh"
#include "attention/hopper/tma_forward_space.cuh"
#include "attention/modifiers/score_modifiers.hpp"
#include "common/argument_checks.hpp"
#include "merge_states/merge_states.hpp"

namespace flashjit::kernels {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

CacheLayout cache_layout(const Sequences& s, std::int64_t page_size, DType kv_dtype) {
  CacheLayout layout;
  layout.kv_e4m3 = kv_dtype == DType::e4m3;
  // (An fp8 cache takes the varlen specialization, whose blocks read the descale factors.)
  layout.varlen = present(s.cu_seqlens_q) || present(s.cu_seqlens_k) || present(s.seqlens_k) ||
                  present(s.seqused_q) || present(s.page_table) || layout.kv_e4m3;
  layout.page_size = present(s.page_table) ? page_size : 0;
  return layout;
}

bool values_in_keys(const TensorView& k, const TensorView& v) {
  if (k.data != v.data || k.dtype != v.dtype || k.rank != 4 || v.rank != 4) return false;
  for (int d = 0; d < 3; ++d) {
    if (k.strides[d] != v.strides[d]) return false;
  }
  return true;
}

bool runs_wide(const Attention& a) { return a.head_dim > attention_forward_space::kMaxHeadDim; }

int packed_group(const Attention& a) {
  const auto heads_per_kv = static_cast<int>(a.heads_q / a.heads_kv);
  return heads_per_kv > 1 && a.seqlen_q < 64 ? heads_per_kv : 1;
}

std::int64_t query_blocks(const InferenceConfig& config, const Attention& a) {
  const int group = config.forward.pack_gqa ? static_cast<int>(a.heads_q / a.heads_kv) : 1;
  return ceil_div(a.seqlen_q * group, config.forward.block_m);
}

InferenceConfig with_layout(ForwardConfig tile, const Attention& a, CacheLayout layout,
                            int splits) {
  tile.varlen = layout.varlen;
  tile.paged = layout.page_size > 0;
  tile.kv_e4m3 = layout.kv_e4m3;
  // The mma.sync kernel's fp8 staging ring has two slots (the decode kernel's rings any).
  if (tile.kv_e4m3 && tile.path() == ForwardPath::mma_sync) tile.stages = 2;
  tile.pack_gqa = packed_group(a) > 1;
  tile.split = splits > 1;
  // V in the keys only where the call's v is k's columns (the tile may still load V itself).
  if (!layout.values_in_keys && tile.path() == ForwardPath::wide) {
    tile.wide().values_in_keys = false;
  }
  return {tile, splits};
}

int choose_splits(std::int64_t blocks, std::int64_t key_blocks, int sm_count,
                  std::int64_t least_blocks) {
  if (blocks <= 0 || sm_count <= 0 || blocks >= sm_count) return 1;
  const std::int64_t fill = ceil_div(sm_count, blocks);  // splits that give every SM a CTA
  const std::int64_t most = std::max<std::int64_t>(1, key_blocks / least_blocks);
  return static_cast<int>(
      std::clamp<std::int64_t>(fill, 1, std::min<std::int64_t>(most, kMaxSplits)));
}

std::int64_t least_blocks_per_split(const ForwardConfig& c) {
  if (c.path() != ForwardPath::wide) return 2;
  const std::int64_t partial = std::int64_t{c.block_m} * c.head_dim_v() * 8;
  const std::int64_t block_keys = std::int64_t{c.block_n} * c.head_dim * 2;
  return std::max<std::int64_t>(2, ceil_div(partial, block_keys));
}

bool runs_decode_kernel(const Attention& a, CacheLayout) {
  // Every cache layout the inference forward takes (16-bit or fp8, dense or paged), with or
  // without score and mask modifiers; not dropout, which the mma.sync kernels alone carry.
  return a.seqlen_q <= kMaxDecodeQueries && a.seqlen_q * packed_group(a) <= 32 && !runs_wide(a) &&
         a.dropout_p <= 0.0f;
}

int choose_decode_splits(std::int64_t ctas, std::int64_t key_rounds, int sm_count) {
  if (ctas <= 0 || sm_count <= 0 || ctas >= sm_count) return 1;
  const std::int64_t one_wave = sm_count / ctas;
  const std::int64_t most = std::max<std::int64_t>(1, key_rounds / 2);
  return static_cast<int>(
      std::clamp<std::int64_t>(one_wave, 1, std::min<std::int64_t>(most, kMaxSplits)));
}

namespace {

/// The decode kernel's config for a call, split `splits` ways (0: by choose_decode_splits);
/// std::nullopt where its tiles do not fit the arch.
std::optional<InferenceConfig> default_decode_config(const Attention& a, CacheLayout layout,
                                                     DType dtype, const std::string& arch,
                                                     int sm_count, int splits) {
  const std::int64_t rows = a.seqlen_q * packed_group(a);
  const std::optional<ForwardConfig> tile =
      decode_forward_config(dtype, static_cast<int>(a.head_dim), forward_mask_kind(a),
                            a.softcap > 0.0f, arch, rows, layout.kv_e4m3);
  if (!tile) return std::nullopt;
  if (splits == 0) {
    const InferenceConfig unsplit = with_layout(*tile, a, layout, 1);
    const std::int64_t ctas = query_blocks(unsplit, a) * (a.heads_q / packed_group(a)) * a.batch;
    const std::int64_t round = std::int64_t{tile->block_n} * tile->warps;
    splits = choose_decode_splits(ctas, ceil_div(a.seqlen_k, round), sm_count);
  }
  return with_layout(*tile, a, layout, splits);
}

}  // namespace

InferenceConfig default_inference_config(const Attention& a, CacheLayout layout, DType dtype,
                                         const std::string& arch, int sm_count, int splits) {
  if (runs_decode_kernel(a, layout)) {
    if (auto decode = default_decode_config(a, layout, dtype, arch, sm_count, splits)) {
      return *decode;
    }
  }
  const std::int64_t rows = a.seqlen_q * packed_group(a);
  // Score and mask modifiers take the dense forward's tiles for them (16 rows a warp: their
  // index arithmetic fits in registers there).
  const ForwardConfig tile =
      runs_wide(a) ? wide_forward_config(dtype, static_cast<int>(a.head_dim),
                                         static_cast<int>(a.value_head_dim()), forward_mask_kind(a),
                                         a.softcap > 0.0f, layout.values_in_keys, arch, rows)
      : score_modifiers(a).empty()
          ? mma_sync_forward_config(dtype, static_cast<int>(a.head_dim), forward_mask_kind(a),
                                    a.softcap > 0.0f, arch, rows, /*inference=*/true)
          : modifiers_forward_config(dtype, a, arch);
  InferenceConfig config = with_layout(tile, a, layout, 1);
  if (splits == 0) {
    const std::int64_t ctas = query_blocks(config, a) * (a.heads_q / packed_group(a)) * a.batch;
    splits = choose_splits(ctas, ceil_div(a.seqlen_k, tile.block_n), sm_count,
                           least_blocks_per_split(tile));
  }
  return with_layout(tile, a, layout, splits);
}

std::vector<InferenceConfig> decode_configs(const Attention& a, CacheLayout layout, DType dtype) {
  std::vector<InferenceConfig> configs;
  for (const ForwardConfig& tile : forward_configs(dtype, static_cast<int>(a.head_dim),
                                                   forward_mask_kind(a), a.softcap > 0.0f)) {
    if (tile.path() != ForwardPath::mma_sync) continue;  // the inference layouts' only path
    if (layout.kv_e4m3 && tile.stages != 2) continue;    // (with_layout would make it a twin)
    for (int splits : kDecodeSplits) {
      const InferenceConfig config = with_layout(tile, a, layout, splits);
      if (config.forward.valid()) configs.push_back(config);
    }
  }
  if (!runs_decode_kernel(a, layout)) return configs;
  const int rows = attention_decode_space::tile_rows(a.seqlen_q * packed_group(a));
  for (const ForwardConfig& tile :
       decode_forward_tiles(dtype, static_cast<int>(a.head_dim), forward_mask_kind(a),
                            a.softcap > 0.0f, rows, layout.kv_e4m3)) {
    for (int splits : kDecodeSplits) {
      const InferenceConfig config = with_layout(tile, a, layout, splits);
      if (config.forward.valid()) configs.push_back(config);
    }
  }
  return configs;
}

std::vector<detail::KernelSpec> inference_specs(const InferenceConfig& config,
                                                const std::string& arch) {
  std::vector<detail::KernelSpec> specs = {forward_spec(config.forward, arch)};
  if (config.splits > 1 && config.forward.path() != ForwardPath::decode) {
    const MergeStatesConfig merge = default_merge_states_config(
        DType::f32, config.forward.dtype, config.forward.head_dim, /*in_place=*/false);
    specs.push_back(merge_states_spec(merge, arch));
  }
  return specs;
}

std::optional<ForwardConfig> packed_prefill_tma_config(DType dtype, int head_dim, MaskKind mask,
                                                       bool softcap, const std::string& arch,
                                                       bool kv_e4m3) {
  ForwardConfig config = default_forward_config(dtype, head_dim, mask, softcap, arch);
  if (config.path() != ForwardPath::tma) return std::nullopt;
  config.tma().persistent = false;  // the sequences' tiles are uneven: one CTA each
  config.tma().cluster = false;     // nor do two CTAs walk the same keys
  config.varlen = true;
  config.kv_e4m3 = kv_e4m3;
  // An fp8 cache's staging slots need shared memory the 16-bit default may fill: the widest
  // smaller key block that leaves room for them.
  if (kv_e4m3) {
    const int default_block_n = config.block_n;
    for (auto n = std::rbegin(kTmaBlockN); !config.valid() && n != std::rend(kTmaBlockN); ++n) {
      if (*n < default_block_n) config.block_n = *n;
    }
  }
  if (!config.valid()) return std::nullopt;
  return config;
}

std::vector<ForwardConfig> inference_forward_configs(DType dtype, int head_dim, MaskKind mask,
                                                     const std::string& arch) {
  const ForwardConfig prefill =
      mma_sync_forward_config(dtype, head_dim, mask, false, arch, kMaxSeqlen, true);
  const ForwardConfig decode = mma_sync_forward_config(dtype, head_dim, mask, false, arch, 1, true);
  std::vector<ForwardConfig> configs;
  const auto add = [&](ForwardConfig config, bool paged, bool pack, bool split) {
    config.varlen = true;
    config.paged = paged;
    config.pack_gqa = pack;
    config.split = split;
    configs.push_back(config);
  };
  add(prefill, false, false, false);  // packed prefill
  if (auto tma = packed_prefill_tma_config(dtype, head_dim, mask, false, arch)) {
    configs.push_back(*tma);  // packed prefill on sm_90a
  }
  add(prefill, true, false, false);  // prefill or append on a paged cache
  for (bool split : {false, true}) {
    add(decode, false, true, split);  // decoding, dense or packed cache
    add(decode, true, true, split);   // decoding on a paged cache
  }
  // The decode kernel's defaults: on a dense cache and on pages, unsplit and split.
  if (auto tile = decode_forward_config(dtype, head_dim, mask, false, arch, 16)) {
    for (bool split : {false, true}) {
      add(*tile, false, true, split);
      add(*tile, true, true, split);
    }
  }
  return configs;
}

}  // namespace flashjit::kernels
