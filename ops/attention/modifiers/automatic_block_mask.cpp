#include "attention/modifiers/automatic_block_mask.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attention/modifiers/block_mask.hpp"
#include "attention/modifiers/modifier_grammar.hpp"
#include "attention/parts/block_mask_params.cuh"
#include "flashjit/device_buffer.hpp"
#include "flashjit/error.hpp"

namespace flashjit::kernels {
namespace {

/// A built block mask and whether it skips enough to be worth running with (no buffer and
/// false for a mask that reads a capture).
struct KeptBlockMask {
  DeviceBuffer buffer;
  TensorView view;
  bool skips = false;
};

/// Whether mask_mod reads none of the call's captures.
bool reads_no_capture(const Attention& a) {
  if (a.captures.empty()) return true;
  try {
    check_modifier_grammar("attention.mask_mod", a.mask_mod,
                           ModifierScope{.has_score = false, .captures = {}});
    return true;
  } catch (const InvalidArgument&) {
    return false;  // it names a capture (or is malformed: the call's own checks say so)
  }
}

/// The keys [lo, hi) the built-in masks (causal, window) let rows [row0, row1) see, together.
std::pair<std::int64_t, std::int64_t> builtin_keys(const Attention& a, std::int64_t row0,
                                                   std::int64_t row1) {
  const std::int64_t diagonal = a.seqlen_k - a.seqlen_q;
  const std::int64_t right = a.causal ? 0 : a.window_right;
  const std::int64_t lo = a.window_left < 0 ? 0 : row0 + diagonal - a.window_left;
  const std::int64_t hi = right < 0 ? a.seqlen_k : row1 - 1 + diagonal + right + 1;
  return {std::clamp<std::int64_t>(lo, 0, a.seqlen_k), std::clamp<std::int64_t>(hi, 0, a.seqlen_k)};
}

/// Whether the entries skip at least an eighth of the 16-key tiles the built-in masks show.
bool skips_enough(const Attention& a, const std::vector<std::int32_t>& entries) {
  const std::int64_t slabs = block_mask_slabs(a);
  const auto tiles = [](std::int64_t lo, std::int64_t hi) {
    return hi <= lo ? 0 : (hi + kBlockMaskKeys - 1) / kBlockMaskKeys - lo / kBlockMaskKeys;
  };
  std::int64_t shown = 0, kept = 0;
  for (std::int64_t slab = 0; slab * 4 < static_cast<std::int64_t>(entries.size()); ++slab) {
    const std::int64_t row0 = (slab % slabs) * kBlockMaskRows;
    const auto [lo, hi] = builtin_keys(a, row0, std::min(row0 + kBlockMaskRows, a.seqlen_q));
    shown += tiles(lo, hi);
    kept += tiles(std::max<std::int64_t>(lo, entries[slab * 4 + kMaskLo]),
                  std::min<std::int64_t>(hi, entries[slab * 4 + kMaskHi]));
  }
  return 8 * (shown - kept) >= shown && shown > kept;
}

std::shared_ptr<const KeptBlockMask> build(detail::RuntimeBackend& backend, const Attention& a,
                                           Stream stream) {
  const std::int64_t count = a.batch * a.heads_q * block_mask_slabs(a) * 4;
  auto kept = std::make_shared<KeptBlockMask>();
  kept->buffer = backend.allocate_buffer(static_cast<std::size_t>(count) * 4);
  kept->view = TensorView::contiguous(kept->buffer.data(), DType::i32,
                                      {a.batch, a.heads_q, block_mask_slabs(a), 4});
  run_build_block_mask(backend, a, kept->view, stream);
  backend.synchronize(stream);
  std::vector<std::int32_t> entries(static_cast<std::size_t>(count));
  backend.copy_to_host(entries.data(), kept->buffer.data(), entries.size() * 4);
  kept->skips = skips_enough(a, entries);
  return kept;
}

}  // namespace

Attention with_automatic_block_mask(detail::RuntimeBackend& backend, const Attention& attention,
                                    Stream stream) {
  if (!attention.automatic_block_mask || attention.mask_mod.empty() ||
      attention.block_mask.data != nullptr || attention.batch <= 0 || attention.heads_q <= 0 ||
      attention.seqlen_q <= 0 || attention.seqlen_k <= 0) {
    return attention;
  }
  Attention mask_only = attention;  // what the builder reads: the mask and the sizes
  mask_only.score_mod.clear();
  mask_only.captures.clear();
  // The entries depend on the mask and sizes only; whether they skip enough also on causal
  // and the window, which the key holds too.
  const std::string key =
      "block_mask " + std::to_string(attention.batch) + "x" + std::to_string(attention.heads_q) +
      "x" + std::to_string(attention.seqlen_q) + "x" + std::to_string(attention.seqlen_k) +
      (attention.causal ? " causal" : "") + " window " + std::to_string(attention.window_left) +
      "," + std::to_string(attention.window_right) + " " + attention.mask_mod;
  // Whether the mask reads a capture is kept with the rest: a call parses the text once.
  const std::shared_ptr<const void> kept = backend.kept(key, [&]() -> std::shared_ptr<const void> {
    if (!reads_no_capture(attention)) return std::make_shared<KeptBlockMask>();  // none
    return build(backend, mask_only, stream);
  });
  const auto* mask = static_cast<const KeptBlockMask*>(kept.get());
  if (mask == nullptr || !mask->skips) return attention;
  Attention with = attention;
  with.block_mask = mask->view;
  return with;
}

}  // namespace flashjit::kernels
