#pragma once
// A runtime backend over the CPU emulator whose launches are recorded (each kernel's name and
// shape) before they run, for tests of what an op launches. Derive from it to answer one of the
// executor's questions differently (resident_clusters, as a GPU's driver would).
#include <string>
#include <utility>
#include <vector>

#include "common/builtin_kernels.hpp"
#include "runtime/forwarding_backend.hpp"

namespace flashjit::testing {

class LaunchRecordingBackend : public detail::ForwardingBackend, public detail::Executor {
 public:
  explicit LaunchRecordingBackend(const std::string& arch)
      : ForwardingBackend(
            detail::open_emulator_backend(kernels::emulated::builtin_kernels(), arch)) {}
  std::vector<std::pair<std::string, detail::LaunchShape>> launches;

  detail::Executor& executor() override { return *this; }
  void launch(const detail::KernelSpec& spec, const detail::LaunchShape& shape, void** args,
              const std::vector<detail::KernelBuffer>& buffers) override {
    launches.emplace_back(spec.display_name(), shape);
    inner().executor().launch(spec, shape, args, buffers);
  }
  bool has_kernel(const detail::KernelSpec& spec) const override {
    return const_cast<LaunchRecordingBackend*>(this)->inner().executor().has_kernel(spec);
  }
  void prepare(const std::vector<detail::KernelSpec>& specs) override {
    inner().executor().prepare(specs);
  }
  int resident_clusters(const detail::KernelSpec& spec, const detail::LaunchShape& shape) override {
    return inner().executor().resident_clusters(spec, shape);
  }
  detail::TensorMapParameter tensor_maps(const std::vector<emulator::TensorMap>& maps) override {
    return inner().executor().tensor_maps(maps);
  }
};

}  // namespace flashjit::testing
