#include "autotune/workspace.hpp"

#include <cstdint>

namespace flashjit::autotune {

DeviceBuffer upload_16bit(detail::RuntimeBackend& backend, DType dtype, std::int64_t count,
                          std::mt19937_64& rng, bool random) {
  if (dtype == DType::e4m3) {  // one byte an element
    DeviceBuffer buffer = backend.allocate_buffer(static_cast<std::size_t>(count));
    std::vector<std::uint8_t> host(static_cast<std::size_t>(count), 0);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (std::uint8_t& x : host) x = random ? e4m3_bits_from_float(normal(rng)) : 0;
    backend.copy_to_device(buffer.data(), host.data(), host.size());
    return buffer;
  }
  DeviceBuffer buffer = backend.allocate_buffer(static_cast<std::size_t>(count) * 2);
  std::vector<std::uint16_t> host(static_cast<std::size_t>(count), 0);
  if (random) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const bool f16 = dtype == DType::f16;
    for (std::uint16_t& x : host) {
      const float value = normal(rng);
      x = f16 ? f16_bits_from_float(value) : bf16_bits_from_float(value);
    }
  }
  backend.copy_to_device(buffer.data(), host.data(), host.size() * 2);
  return buffer;
}

std::vector<float> read_16bit(detail::RuntimeBackend& backend, const DeviceBuffer& buffer,
                              DType dtype) {
  std::vector<std::uint16_t> bits(buffer.size() / 2);
  backend.copy_to_host(bits.data(), buffer.data(), bits.size() * 2);
  std::vector<float> values(bits.size());
  const bool f16 = dtype == DType::f16;
  for (std::size_t i = 0; i < bits.size(); ++i) {
    values[i] = f16 ? float_from_f16_bits(bits[i]) : float_from_bf16_bits(bits[i]);
  }
  return values;
}

}  // namespace flashjit::autotune
