#pragma once
// Host side of captured tensors (Attention::captures): their checks, the kernels' table of them
// (attention/captures.cuh) and the buffers a launch registers for the emulator's checks.
#include <vector>

#include "attention/captures.cuh"
#include "flashjit/attention.hpp"
#include "runtime/executor.hpp"

namespace flashjit::kernels {

/// Checks attention.captures: at most kMaxCaptures; each name an identifier that is not
/// reserved (score, b, h, q_idx, kv_idx, captures, "__…", "flashjit…") and not another's; each
/// tensor rank 1 to 4, fp32, fp16, bf16 or int32, non-null unless empty, strides >= 0. Throws
/// InvalidArgument naming "attention.captures[i].name", "attention.captures[i].tensor…".
void check_captures(const Attention& attention);

/// The kernels' table of a validated call's captures (unused slots null).
CaptureTable capture_table(const Attention& attention);

/// Adds each capture's tensor to `buffers` ("capture.<name>"), for the emulator's checks.
void add_capture_buffers(const Attention& attention, std::vector<detail::KernelBuffer>& buffers);

}  // namespace flashjit::kernels
