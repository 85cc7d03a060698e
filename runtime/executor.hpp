#pragma once
// Where kernels run: the CUDA GPU, or the CPU emulator running the same templates. Ops in
// The ops (ops/) build a spec, a launch shape and the argument list once, and hand them here; they
// do not know which backend runs them.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "device_context.hpp"
#include "kernel_spec.hpp"
#include "parallel.hpp"
#include "tensor_maps.hpp"

namespace flashjit::detail {

/// A global buffer a launch may touch. The emulator checks every access against these (and
/// names the buffer in its findings); the GPU path ignores them.
struct KernelBuffer {
  const void* data = nullptr;
  std::size_t bytes = 0;
  std::string name;  // the argument's name: "q", "lse", ...
};

/// Runs kernel launches on one backend.
class Executor {
 public:
  virtual ~Executor() = default;
  /// Launches `spec` with `args` (pointers to each argument by value, in parameter order,
  /// nullptr-terminated). The emulator runs it to completion and throws Error{kernel_fault}
  /// listing the first findings (out-of-bounds access, race, divergent barrier) if there are
  /// any. A spec outside the emulator's build-time kernels is compiled by the host compiler
  /// first (Error{compile} with its log when that fails), or, with no host compiler, refused
  /// with Error{unsupported}.
  virtual void launch(const KernelSpec& spec, const LaunchShape& shape, void** args,
                      const std::vector<KernelBuffer>& buffers) = 0;
  /// Whether this backend can run `spec` at all: a GPU compiles any spec; the emulator runs
  /// its build-time kernels, and any spec when a host C++ compiler is available.
  virtual bool has_kernel(const KernelSpec& spec) const = 0;
  /// Makes a call's kernels ready before its first launch: the missing ones are compiled
  /// concurrently (a backward's three kernels at once, not one at each launch in turn). A spec
  /// that fails here is left for its launch to report. The default does nothing.
  virtual void prepare(const std::vector<KernelSpec>& /*specs*/) {}
  /// The most clusters of `shape` (its cluster_x CTAs) of `spec` resident at once, for a
  /// persistent grid of clusters to size itself by: on a GPU the driver's count, which can be
  /// fewer than SMs times CTAs an SM over the cluster size (a cluster's CTAs share one GPC, and
  /// GPCs hold uneven numbers of SMs); 0 where the backend cannot say (the emulator models no
  /// GPCs; a driver that refuses the query), and the caller keeps its own count. The default
  /// says 0.
  virtual int resident_clusters(const KernelSpec& /*spec*/, const LaunchShape& /*shape*/) {
    return 0;
  }
  /// The kernel parameter holding `maps` in order (a struct of tma_descriptor fields) in this
  /// backend's form: cuTensorMapEncodeTiled's CUtensorMaps on the GPU (Error{driver} if the
  /// driver rejects one), pointers to copies of the maps on the emulator. Throws
  /// InvalidArgument (check_tensor_map) for a map the driver's rules reject.
  virtual TensorMapParameter tensor_maps(const std::vector<emulator::TensorMap>& maps) = 0;
};

/// Runs `make_ready` on each of `specs` on a pool sized to the machine (default_workers) and
/// returns when all are done; a failure is dropped, since the spec's launch meets it again and
/// reports it. One spec runs on the calling thread.
inline void prepare_concurrently(const std::vector<KernelSpec>& specs,
                                 const std::function<void(const KernelSpec&)>& make_ready) {
  if (specs.empty()) return;
  if (specs.size() == 1) {
    try {
      make_ready(specs.front());
    } catch (...) {  // reported by the launch
    }
    return;
  }
  run_ordered<bool>(
      static_cast<int>(specs.size()), default_workers(),
      [&](int i) {
        make_ready(specs[static_cast<std::size_t>(i)]);
        return true;
      },
      [](int, Outcome<bool>&) {});
}

/// prepare_concurrently over the specs that `ready` says are not ready yet and `found` does not
/// make ready on the calling thread (a kernel the disk cache holds is read in well under a
/// millisecond, less than a thread takes to start): what a backend's Executor::prepare does,
/// so that a call whose kernels are all cached spawns no thread.
inline void prepare_missing(const std::vector<KernelSpec>& specs,
                            const std::function<bool(const KernelSpec&)>& ready,
                            const std::function<bool(const KernelSpec&)>& found,
                            const std::function<void(const KernelSpec&)>& make_ready) {
  // A lookup that throws (NVRTC unusable, say) leaves its spec to make_ready, whose failure the
  // launch reports: prepare itself never throws.
  auto found_here = [&](const KernelSpec& spec) {
    try {
      return found(spec);
    } catch (...) {
      return false;
    }
  };
  std::vector<KernelSpec> missing;
  for (const KernelSpec& spec : specs) {
    if (!ready(spec) && !found_here(spec)) missing.push_back(spec);
  }
  order_longest_compiles_first(missing);
  prepare_concurrently(missing, make_ready);
}

/// The address a launch passes for one argument: the value itself, or the bytes of a
/// TensorMapParameter.
template <typename T>
const void* argument_address(const T& argument) {
  return &argument;
}
inline const void* argument_address(const TensorMapParameter& argument) { return argument.data(); }

/// Launches `spec` on `executor` with the given arguments (their types must match the kernel's
/// parameters exactly; a TensorMapParameter stands for a struct of tensor maps). A grid with no
/// blocks (an empty dimension of the problem) is not launched: it has no work, and CUDA
/// refuses a zero grid.
template <typename... Args>
void launch_kernel(Executor& executor, const KernelSpec& spec, const LaunchShape& shape,
                   const std::vector<KernelBuffer>& buffers, const Args&... args) {
  if (shape.grid_x == 0 || shape.grid_y == 0 || shape.grid_z == 0) return;
  // The driver and the emulator only read through these pointers.
  void* pointers[] = {const_cast<void*>(argument_address(args))..., nullptr};
  executor.launch(spec, shape, pointers, buffers);
}

}  // namespace flashjit::detail
