#pragma once
// CUDA's dim3, spelled for the host: the shape of a grid or block and a thread's or block's
// index within one.

namespace flashjit::emulator {

/// A 3-D extent or index; unspecified extents default to 1 as in CUDA.
struct Dim3 {
  unsigned x = 1;
  unsigned y = 1;
  unsigned z = 1;

  /// The number of points in the extent.
  constexpr unsigned long long volume() const { return static_cast<unsigned long long>(x) * y * z; }
};

}  // namespace flashjit::emulator
