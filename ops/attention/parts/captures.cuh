#pragma once
// Tensors the caller's modifiers read (Attention::captures): a bias table, document ids. The
// kernels' params carry a CaptureTable (host and device share this header); the modifiers'
// struct opens each slot as a CaptureView (attention/parts/capture_view.cuh).
#include "tile/platform.cuh"

namespace flashjit {

/// Captures a call may pass, and their largest rank.
inline constexpr int kMaxCaptures = 4;
inline constexpr int kMaxCaptureRank = 4;

/// One captured tensor: its first element and its strides in elements (unused ones 0); with a
/// gradient (Capture::grad), where the backward adds it (the same strides), else null.
struct CaptureSlot {
  const void* data;
  index_t strides[kMaxCaptureRank];
  float* grad;
};

/// The captures of a call, in the order the caller listed them (unused slots null).
struct CaptureTable {
  CaptureSlot slot[kMaxCaptures];
};

}  // namespace flashjit
