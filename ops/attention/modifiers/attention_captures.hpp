#pragma once
// Host side of captured tensors (Attention::captures): their checks, the kernels' table of them
// (attention/parts/captures.cuh) and the buffers a launch registers for the emulator's checks.
#include <initializer_list>
#include <vector>

#include "attention/parts/captures.cuh"
#include "flashjit/attention.hpp"
#include "runtime/executor.hpp"

namespace flashjit::kernels {

/// Checks attention.captures: at most kMaxCaptures; each name an identifier that is not
/// reserved (score, b, h, q_idx, kv_idx, captures, "__…", "flashjit…") and not another's; each
/// tensor rank 1 to 4, fp32, fp16, bf16 or int32, non-null unless empty, strides >= 0. Throws
/// InvalidArgument naming "attention.captures[i].name", "attention.captures[i].tensor…".
void check_captures(const Attention& attention);

/// A tensor of the call, for check_capture_gradients_disjoint: its view, name and role.
struct CallTensor {
  const TensorView* view;
  const char* name;
  bool written;  ///< an output of the call (dq, dk, dv), not an input
};

/// Each capture's gradient (Capture::grad, which the backward writes) shares no element with
/// the call's `tensors`, with any capture or with another gradient: InvalidArgument naming
/// "attention.captures[i].grad" and the other. check_gradients_disjoint calls it.
void check_capture_gradients_disjoint(const Attention& attention,
                                      std::initializer_list<CallTensor> tensors);

/// The kernels' table of a validated call's captures (unused slots null).
CaptureTable capture_table(const Attention& attention);

/// Adds each capture's tensor to `buffers` ("capture.<name>"), for the emulator's checks.
void add_capture_buffers(const Attention& attention, std::vector<detail::KernelBuffer>& buffers);

}  // namespace flashjit::kernels
