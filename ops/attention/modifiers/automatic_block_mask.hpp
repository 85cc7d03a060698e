#pragma once
// Block masks without asking: a dense call with a mask modifier and no block mask of its own
// runs with one built from the modifier, once per (mask, sizes), kept by the backend for its
// life, so the blocks the mask hides are skipped by default (FlexAttention computes every block
// unless its caller builds one).
#include "flashjit/attention.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::kernels {

/// `attention` with the block mask it runs with. Its own when it has one; else, when mask_mod
/// reads no capture (whose values the runtime cannot know), the one built from mask_mod for its
/// sizes, if that lets the kernels skip at least an eighth of the 16-key tiles the built-in
/// masks (causal, window) let the query slabs see. Otherwise `attention` as it is. A mask and
/// size's first call builds the mask and waits for it on `stream` (make it before a CUDA graph
/// capture, as with workspaces).
Attention with_automatic_block_mask(detail::RuntimeBackend& backend, const Attention& attention,
                                    Stream stream);

}  // namespace flashjit::kernels
