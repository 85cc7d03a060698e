#pragma once
// Kernel parameters made of TMA tensor maps. A kernel takes its maps as a struct of
// tma_descriptor fields (ops/tile/tma.cuh), whose form differs by backend: on the GPU each
// is the 128-byte CUtensorMap that cuTensorMapEncodeTiled writes; on the emulator each is a
// pointer to the decoded emulator::TensorMap, which must outlive the launch. Ops describe their
// maps once, decoded, and the executor encodes them (Executor::tensor_maps).
#include <cstddef>
#include <memory>
#include <vector>

#include "emulator/ptx_api.hpp"

namespace flashjit::detail {

/// The bytes of one kernel parameter holding tensor maps, in the form of the backend that made
/// it, and whatever those bytes point to. Move-only: the emulator's pointers point into it.
class TensorMapParameter {
 public:
  TensorMapParameter() = default;
  TensorMapParameter(TensorMapParameter&&) = default;
  TensorMapParameter& operator=(TensorMapParameter&&) = default;

  /// What a launch's argument pointer for this parameter points at.
  const void* data() const { return bytes_.data(); }
  std::size_t size() const { return bytes_.size(); }

  /// Appends `size` bytes (an encoded CUtensorMap).
  void append(const void* bytes, std::size_t size);
  /// Keeps a copy of `map` alive with the parameter and appends the pointer to it (the
  /// emulator's tma_descriptor).
  void append_pointer_to(const emulator::TensorMap& map);

 private:
  std::vector<unsigned char> bytes_;
  std::vector<std::unique_ptr<emulator::TensorMap>> kept_;
};

/// Throws Error{invalid_argument} naming `name` ("the tensor map of k") and the field the
/// driver would reject (emulator::tensor_map_problem) unless `map` is valid. Ops check their
/// tensors' strides and alignment first and take another path where TMA cannot read them, so
/// this firing means a bug in the op.
void check_tensor_map(const emulator::TensorMap& map, const char* name);

}  // namespace flashjit::detail
