// The emulator backend: host memory, and launches run to completion on the CPU SIMT emulator
// by the host-compiled kernels of the emulated kernel table, or, for any other spec, by a
// kernel the host compiler builds at run time (host_kernels.hpp). Nothing here touches the
// driver.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>
#include <optional>
#include <string>

#include "emulated_kernel_table.hpp"
#include "emulator/fiber.hpp"
#include "flashjit/error.hpp"
#include "host_kernels.hpp"
#include "kernel_cache.hpp"
#include "runtime_backend.hpp"

namespace flashjit::detail {
namespace {

// Kernels are chosen for this device, so the emulator models a real one: an A100 (sm_80), an
// L40S (sm_89) or an H100 (sm_90a).
DeviceInfo emulator_device_info(const std::string& arch) {
  struct Model {
    int cc_major, cc_minor, sm_count, shared_kib, l2_mib;
  };
  const Model model = arch == "sm_90a"  ? Model{9, 0, 132, 227, 50}
                      : arch == "sm_89" ? Model{8, 9, 142, 99, 96}
                                        : Model{8, 0, 108, 163, 40};
  DeviceInfo info;
  info.name = "flashjit CPU emulator";
  info.cc_major = model.cc_major;
  info.cc_minor = model.cc_minor;
  info.sm_count = model.sm_count;
  info.shared_memory_optin = static_cast<std::size_t>(model.shared_kib) * 1024;
  info.l2_bytes = static_cast<std::size_t>(model.l2_mib) * 1024 * 1024;
  info.global_memory_bytes = static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) *
                             static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return info;
}

// As cuMemAlloc's: every vector access a kernel may make is aligned.
constexpr std::align_val_t kAlignment{256};

/// The fiber stacks of every emulated launch in the process, whichever copy of the emulator
/// runs it (launches take turns: EmulatorBackend::launch holds a lock).
emulator::FiberStacks& process_fiber_stacks() {
  static emulator::FiberStacks stacks;
  return stacks;
}

// The memory system of the GPU `info` describes, for the emulator's memory model.
emulator::ModelledGpu modelled_gpu(const DeviceInfo& info) {
  emulator::ModelledGpu gpu;
  gpu.sms = static_cast<unsigned>(info.sm_count);
  gpu.l2_bytes = info.l2_bytes;
  gpu.shared_bytes_per_sm = info.cc_major >= 9 ? 228 * 1024 : 164 * 1024;
  return gpu;
}

// The CTAs of `spec` an SM of `gpu` holds by ptxas's registers for it too (the kernel cache's
// entry for the same spec, compiled on a miss), at most `limit`; `limit` when threads and
// shared memory already allow one CTA only, or when no compile is to be had (FLASHJIT_NO_JIT, a
// compile error). Threads and shared memory alone once counted four 512-thread layer-norm
// blocks an SM where the registers held one.
unsigned ctas_by_registers(const KernelSpec& spec, const LaunchShape& shape,
                           const emulator::ModelledGpu& gpu) {
  const unsigned limit = gpu.ctas_per_sm_limit;
  const int threads = static_cast<int>(shape.block_x * shape.block_y * shape.block_z);
  if (emulator::resident_ctas_per_sm(gpu, static_cast<unsigned>(threads),
                                     shape.dynamic_shared_bytes) <= 1) {
    return limit;  // no compile: registers cannot lower one
  }
  try {
    const CacheLookup lookup = KernelCache::process_cache().get(spec);
    const ResourceUsage& r = lookup.entry->kernel.resources;
    const int shared = r.static_shared_bytes + static_cast<int>(shape.dynamic_shared_bytes);
    const int blocks =
        blocks_per_sm(r.registers, threads, shared, arch_shared_memory_limit(spec.arch), spec.arch);
    return blocks > 0 ? std::min(limit, static_cast<unsigned>(blocks)) : limit;
  } catch (const Error&) {
    return limit;
  }
}

// The public form of a launch's memory counters.
MemoryCounters public_memory(const emulator::MemoryCounters& m) {
  MemoryCounters out;
  out.modelled = m.modelled;
  out.shared_requests = m.shared_requests;
  out.shared_wavefronts = m.shared_wavefronts;
  out.shared_ideal_wavefronts = m.shared_ideal_wavefronts;
  out.wgmma_core_matrices = m.wgmma_core_matrices;
  out.wgmma_wavefronts = m.wgmma_wavefronts;
  out.global_requests = m.global_requests;
  out.global_bytes = m.global_bytes;
  out.global_sector_bytes = m.global_sector_bytes;
  out.bytes_in_flight_per_cta = m.bytes_in_flight_per_cta;
  out.ctas_per_sm = m.ctas_per_sm;
  out.bytes_in_flight_per_sm = m.bytes_in_flight_per_cta * m.ctas_per_sm;
  out.dram_bytes_read = m.dram_bytes_read;
  out.dram_bytes_written = m.dram_bytes_written;
  for (const emulator::SiteCounters& s : m.sites) {
    out.sites.push_back({s.site, s.instruction, emulator::to_string(s.kind), s.requests,
                         s.wavefronts, s.ideal_wavefronts, s.bytes, s.sector_bytes});
  }
  return out;
}

emulator::LaunchConfig launch_config(const KernelSpec& spec, const LaunchShape& shape,
                                     const std::vector<KernelBuffer>& buffers) {
  emulator::LaunchConfig config;
  config.stacks = &process_fiber_stacks();
  config.kernel_name = spec.display_name();
  config.grid = {shape.grid_x, shape.grid_y, shape.grid_z};
  config.block = {shape.block_x, shape.block_y, shape.block_z};
  config.cluster = {shape.cluster_x, 1, 1};
  config.shared_bytes = shape.dynamic_shared_bytes;
  config.overlaps_previous_grid = shape.overlap_previous;
  for (const KernelBuffer& buffer : buffers) {
    config.buffers.push_back({buffer.data, buffer.bytes, buffer.name});
  }
  return config;
}

// The first few findings: one bug usually fires in every thread, and a message of 64 lines
// buries the line that matters.
std::string fault_message(const KernelSpec& spec, const emulator::Report& report) {
  constexpr std::size_t kShown = 4;
  const std::size_t total = report.findings.size() + report.suppressed;
  std::string message =
      "the emulator found " + std::to_string(total) + " fault(s) in " + spec.display_name() + ":";
  for (std::size_t i = 0; i < report.findings.size() && i < kShown; ++i) {
    message += "\n  " + report.findings[i].message;
  }
  if (total > kShown) message += "\n  (" + std::to_string(total - kShown) + " more)";
  return message;
}

class EmulatorBackend final : public RuntimeBackend, public Executor {
 public:
  EmulatorBackend(const EmulatedKernelTable& kernels, const std::string& arch, bool model_memory)
      : info_(emulator_device_info(arch)), kernels_(kernels) {
    if (model_memory) memory_model_ = modelled_gpu(info_);
  }
  ~EmulatorBackend() override { release_held_buffers(); }
  EmulatorBackend(const EmulatorBackend&) = delete;
  EmulatorBackend& operator=(const EmulatorBackend&) = delete;

  Backend kind() const override { return Backend::emulator; }
  const DeviceInfo& info() const override { return info_; }

  // Filled with 0xff bytes (NaN in every float type), so that reading memory no one wrote
  // shows up in results instead of passing as zeros.
  void* allocate(std::size_t bytes) override {
    if (bytes == 0) bytes = 1;
    void* data = ::operator new(bytes, kAlignment, std::nothrow);
    if (data == nullptr) {
      throw Error(ErrorKind::out_of_memory, "the emulator could not allocate " +
                                                std::to_string(bytes) + " bytes of host memory");
    }
    std::memset(data, 0xff, bytes);
    return data;
  }

  void free(void* data) noexcept override { ::operator delete(data, kAlignment); }

  // Launches run to completion when made, so stream order is program order.
  void* allocate_on_stream(std::size_t bytes, Stream /*stream*/) override {
    return allocate(bytes);
  }
  void free_on_stream(void* data, Stream /*stream*/) noexcept override { free(data); }

  void copy_to_device(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  // Launches run to completion before they return.
  void synchronize(Stream /*stream*/) override {}

  Executor& executor() override { return *this; }
  DeviceContext* context() override { return nullptr; }
  std::vector<KernelWork>* counted_work() override { return &work_; }

  void launch(const KernelSpec& spec, const LaunchShape& shape, void** args,
              const std::vector<KernelBuffer>& buffers) override;
  bool has_kernel(const KernelSpec& spec) const override {
    return kernels_.find(spec.name_expression) != nullptr || host_kernels_.available();
  }
  // The specs outside the build-time table not built yet are built by the host compiler
  // concurrently. A warm call spawns nothing.
  void prepare(const std::vector<KernelSpec>& specs) override {
    if (!host_kernels_.available()) return;
    prepare_missing(
        specs,
        [this](const KernelSpec& spec) {
          return kernels_.find(spec.name_expression) != nullptr || host_kernels_.has_launcher(spec);
        },
        // Not looked up ahead: the host kernel cache has no lookup that stops short of a
        // compile (seconds of the host compiler, which the pool's workers share out).
        [](const KernelSpec&) { return false; },
        [this](const KernelSpec& spec) { host_kernels_.launcher(spec); });
  }
  TensorMapParameter tensor_maps(const std::vector<emulator::TensorMap>& maps) override {
    TensorMapParameter parameter;
    for (const emulator::TensorMap& map : maps) {
      check_tensor_map(map, "tensor map");
      parameter.append_pointer_to(map);
    }
    return parameter;
  }

 private:
  /// The table's launcher of `spec`, else one the host compiler builds (seconds, once per
  /// cache); Error{unsupported} when there is no host compiler either.
  EmulatedLauncher launcher(const KernelSpec& spec);
  /// Adds a launch's counters to its kernel's.
  void count(const KernelSpec& spec, const emulator::Report& report);

  DeviceInfo info_;
  const EmulatedKernelTable& kernels_;
  HostKernels host_kernels_;
  std::vector<KernelWork> work_;  // a handful of kernels: a linear search finds one
  std::optional<emulator::ModelledGpu> memory_model_;
};

void EmulatorBackend::count(const KernelSpec& spec, const emulator::Report& report) {
  const emulator::WorkCounters& counted = report.work;
  const std::string name = spec.display_name();
  auto it = std::find_if(work_.begin(), work_.end(),
                         [&](const KernelWork& k) { return k.kernel == name; });
  if (it == work_.end()) it = work_.insert(work_.end(), KernelWork{name, 0, {}});
  ++it->launches;
  it->work += WorkCounters{.tensor_flops = counted.tensor_flops,
                           .shared_bytes_read = counted.shared_bytes_read,
                           .shared_bytes_written = counted.shared_bytes_written,
                           .global_bytes_read = counted.global_bytes_read,
                           .global_bytes_written = counted.global_bytes_written,
                           .barriers = counted.barriers,
                           .ctas = counted.ctas,
                           .ldmatrix_bytes = counted.ldmatrix_bytes,
                           .kv_loads_ahead = counted.kv_loads_ahead,
                           .q_loads_ahead = counted.q_loads_ahead,
                           .memory = public_memory(report.memory)};
}

EmulatedLauncher EmulatorBackend::launcher(const KernelSpec& spec) {
  if (const EmulatedKernel* kernel = kernels_.find(spec.name_expression)) return kernel->launch;
  if (!host_kernels_.available()) {
    throw Error(ErrorKind::unsupported,
                missing_kernel_message(kernels_, spec, host_kernels_.unavailable_reason(),
                                       host_kernels_.unavailable_remedy()));
  }
  return host_kernels_.launcher(spec);
}

void EmulatorBackend::launch(const KernelSpec& spec, const LaunchShape& shape, void** args,
                             const std::vector<KernelBuffer>& buffers) {
  if (shape.dynamic_shared_bytes > info_.shared_memory_optin) {
    throw InvalidArgument("dynamic_shared_bytes", spec.display_name() + " asks for " +
                                                      std::to_string(shape.dynamic_shared_bytes) +
                                                      " bytes; " + info_.name + " (as " +
                                                      info_.arch() + ") allows at most " +
                                                      std::to_string(info_.shared_memory_optin));
  }
  const EmulatedLauncher kernel = launcher(spec);  // before the lock: a compile takes seconds
  emulator::LaunchConfig config = launch_config(spec, shape, buffers);
  config.memory_model = memory_model_;
  if (config.memory_model) {  // before the lock too: the compile for the registers
    config.memory_model->ctas_per_sm_limit = ctas_by_registers(spec, shape, *config.memory_model);
  }
  emulator::Report report;
  {
    static std::mutex emulator_mutex;  // the emulator runs one launch at a time per process
    std::lock_guard lock(emulator_mutex);
    try {
      report = kernel(config, args);
      count(spec, report);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& error) {  // a launch the emulator refuses (block too large)
      throw Error(ErrorKind::kernel_fault,
                  "the emulator cannot launch " + spec.display_name() + ": " + error.what());
    }
  }
  if (!report.clean()) throw Error(ErrorKind::kernel_fault, fault_message(spec, report));
}

}  // namespace

std::unique_ptr<RuntimeBackend> open_emulator_backend(const EmulatedKernelTable& kernels,
                                                      const std::string& arch, bool model_memory) {
  if (arch != "sm_80" && arch != "sm_89" && arch != "sm_90a") {
    throw InvalidArgument("emulated_arch", "'" + arch +
                                               "' is not a GPU the emulator models; it models "
                                               "sm_80 (A100), sm_89 (L40S) and sm_90a (H100)");
  }
  return std::make_unique<EmulatorBackend>(kernels, arch, model_memory);
}

}  // namespace flashjit::detail
