#pragma once
// Host side of appending to a KV cache in the inference forward (Sequences::k_new, v_new and the
// rotary tables): the arguments' checks, the kernel's spec, and the launch that writes the new
// rows into the cache and the rotated queries into a workspace, after which the attention runs on
// the grown cache as a plain inference call.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attention/inference/kvcache_append_params.cuh"
#include "flashjit/attention.hpp"
#include "flashjit/device_buffer.hpp"
#include "runtime/kernel_spec.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::kernels {

struct InferenceTensors;

/// Whether the call appends (k_new or v_new given).
bool appends(const Sequences& sequences);

/// Whether a rotating call places query i of a sequence at its cached count + i (causal or
/// windowed, FlashAttention's rule; past the new keys when there are more queries), rather
/// than every query at the cached count. The tables must hold each sequence's cached count
/// plus the larger of seqlen_new and, when this holds, its query count.
bool rotary_queries_advance(const Attention& attention, const Sequences& sequences);

/// The rotation a call asks for: none without tables, else its pairing.
RotaryKind rotary_kind(const Sequences& sequences);

/// Checks the append's arguments of a call whose other arguments `tensors` validated: k_new and
/// v_new [batch, seqlen_new, heads_kv, head_dim] in the cache's dtype, the rotary tables, the
/// layouts an append works with (q dense or packed, seqlens_k, keys not packed) and that the
/// cache, now written, shares no memory with anything else. Throws InvalidArgument naming the
/// argument ("sequences.k_new.shape", "sequences.rotary_cos", ...). Returns seqlen_new (0
/// without append).
std::int64_t validate_append_arguments(const Attention& attention, const Sequences& sequences,
                                       const InferenceTensors& tensors, const TensorView& q,
                                       const TensorView& o, const TensorView& lse);

/// The append kernel for q's `dtype` and `rotary`, on `arch`, into a cache of q's dtype or
/// (`kv_e4m3`) an fp8 e4m3 one.
detail::KernelSpec kvcache_append_spec(DType dtype, RotaryKind rotary, const std::string& arch,
                                       bool kv_e4m3 = false);

/// Every append kernel (each dtype, rotation and cache type), for the compile matrix.
std::vector<detail::KernelSpec> kvcache_append_specs(const std::string& arch);

/// What the attention after an append reads: the grown lengths (and the rotated queries) in a
/// workspace freed in the stream's order.
struct AppendedCache {
  DeviceBuffer workspace;
  Sequences sequences;  // seqlens_k: the counts after the append; no append members
  TensorView q;         // the rotated queries, or the call's q
};

/// Appends the validated, index-checked call's new rows to its cache on `backend` (queued on
/// `stream`) and returns what the attention reads instead of the call's own lengths and q.
AppendedCache append_to_cache(detail::RuntimeBackend& backend, const Attention& attention,
                              const Sequences& sequences, const InferenceTensors& tensors,
                              Stream stream);

}  // namespace flashjit::kernels
