#include "tensor_maps.hpp"

#include <string>

#include "flashjit/error.hpp"

namespace flashjit::detail {

void TensorMapParameter::append(const void* bytes, std::size_t size) {
  const auto* first = static_cast<const unsigned char*>(bytes);
  bytes_.insert(bytes_.end(), first, first + size);
}

void TensorMapParameter::append_pointer_to(const emulator::TensorMap& map) {
  kept_.push_back(std::make_unique<emulator::TensorMap>(map));
  const emulator::TensorMap* pointer = kept_.back().get();
  append(&pointer, sizeof pointer);
}

void check_tensor_map(const emulator::TensorMap& map, const char* name) {
  const std::string problem = emulator::tensor_map_problem(map);
  if (!problem.empty()) throw InvalidArgument(name, "cannot be encoded: " + problem);
}

}  // namespace flashjit::detail
