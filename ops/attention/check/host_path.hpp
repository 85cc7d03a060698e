#pragma once
// The host work of an attention call whose kernel is cached, timed without a GPU: what
// `flashjit bench --first-result --arch` reports as host_path_us and decode_host_path_us.
#include <string>

#include "flashjit/attention.hpp"
#include "flashjit/dtype.hpp"

namespace flashjit::tools {

/// Runtime::forward's host work for `attention` on a device like `arch`'s (validation, the
/// config as the cached tuning policy memoizes it, spec, params, grid and the TMA maps'
/// description), in microseconds per call over `calls` calls after a warm-up. The driver's part
/// (the function's lookup, tensor-map encoding, the launch) is not in it.
double forward_host_path_us(const Attention& attention, DType dtype, const std::string& arch,
                            int calls);

/// Runtime::forward_sequences' host work for decoding one token a sequence of `attention`'s
/// batch, heads and head dim over a paged cache of seqlen_k keys (pages of 16), on a device
/// like `arch`'s: validation, the decoding config (cached tuning policy), splits, params, the
/// held counters and workspace, the launch's arguments; microseconds per call over `calls`
/// calls after a warm-up. The launches are built and not run (no GPU, and the emulator would
/// time itself); the driver's part is not in it.
double decode_host_path_us(const Attention& attention, DType dtype, const std::string& arch,
                           int calls);

}  // namespace flashjit::tools
