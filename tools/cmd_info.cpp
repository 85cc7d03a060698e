// `flashjit info`: version, NVRTC, driver and GPUs (or why there are none), the emulator's host
// compiler, kernel cache, tuning policy and database.
#include <cstdio>
#include <filesystem>

#include "autotune/tuning_db.hpp"
#include "autotune/tuning_state.hpp"
#include "commands.hpp"
#include "flashjit/device.hpp"
#include "flashjit/error.hpp"
#include "flashjit/version.hpp"
#include "format.hpp"
#include "runtime/compiler.hpp"
#include "runtime/host_compiler.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/template_sources.hpp"

namespace flashjit::tools {
namespace {

void print_devices(const SystemInfo& system) {
  if (system.driver_loaded && system.driver_version > 0) {
    std::printf("driver:      CUDA %d.%d\n", system.driver_version / 1000,
                system.driver_version % 1000 / 10);
  }
  if (system.devices.empty()) {
    std::printf("gpu:         none (%s)\n", system.unavailable_reason.c_str());
    std::printf("             kernels can still be compiled: flashjit compile --arch sm_90a\n");
  }
  for (const DeviceInfo& device : system.devices) {
    std::printf(
        "gpu %d:       %s, compute capability %d.%d (%s), %d SMs, %s shared memory per "
        "block, %s L2, %s memory\n",
        device.ordinal, device.name.c_str(), device.cc_major, device.cc_minor,
        device.arch().c_str(), device.sm_count, format_bytes(device.shared_memory_optin).c_str(),
        format_bytes(device.l2_bytes).c_str(), format_bytes(device.global_memory_bytes).c_str());
  }
}

void print_cache() {
  detail::KernelCache& cache = detail::KernelCache::process_cache();
  detail::DiskCache* disk = cache.disk();
  if (disk == nullptr) {
    std::printf("cache:       memory only (FLASHJIT_ALWAYS_COMPILE is set)\n");
    return;
  }
  std::uintmax_t bytes = 0;
  const auto entries = disk->list();
  for (const auto& entry : entries) bytes += entry.size;
  std::printf("cache:       %s (%zu kernels, %s)%s%s\n", disk->root().c_str(), entries.size(),
              format_bytes(bytes).c_str(), disk->degraded_reason().empty() ? "" : "; ",
              disk->degraded_reason().c_str());
}

// The policy and the database GPU 0 would use, or every database in the cache without a GPU.
// Returns the problem with the environment's policy ("" when there is none): info reports it
// rather than failing, since it is what info is run to find out.
std::string print_tuning(const SystemInfo& system) {
  const std::filesystem::path root = detail::DiskCache::default_root();
  std::string policy, problem;
  try {
    policy = autotune::tuning_policy_name(autotune::effective_policy(TuningPolicy::cached));
  } catch (const InvalidArgument& error) {
    problem = error.what();
    policy = "unusable (FLASHJIT_TUNING is not off, cached or auto: every runtime refuses it)";
  }
  if (!system.devices.empty()) {
    const DeviceInfo& device = system.devices.front();
    const autotune::TuningMeta meta =
        autotune::TuningMeta::for_device(device, system.driver_version);
    const std::filesystem::path path = autotune::database_path(root, meta);
    const autotune::TuningDatabase db = autotune::TuningDatabase::load(path, meta);
    std::printf("tuning:      policy %s; %s (%zu entries)%s%s\n", policy.c_str(), path.c_str(),
                db.entries().size(), db.problem().empty() ? "" : "; ", db.problem().c_str());
    return problem;
  }
  const std::filesystem::path folder = autotune::tuning_folder(root);
  const std::vector<std::filesystem::path> files = autotune::database_files(root);
  std::size_t entries = 0;
  for (const auto& file : files)
    entries += autotune::TuningDatabase::load_any(file).entries().size();
  std::printf("tuning:      policy %s; %s (%zu databases, %zu entries)\n", policy.c_str(),
              folder.c_str(), files.size(), entries);
  return problem;
}

/// The host compiler the emulator compiles kernels outside its build-time set with, or why it
/// has none.
void print_host_compiler() {
  const detail::HostToolchainLookup lookup = detail::find_host_toolchain();
  if (!lookup.toolchain) {
    std::printf("emulator:    built-in kernels only (%s). %s\n", lookup.problem.c_str(),
                lookup.remedy.c_str());
    return;
  }
  const std::string& version = lookup.toolchain->compiler.version;
  std::printf("emulator:    any kernel, compiled by %s (%s) with %s\n",
              lookup.toolchain->compiler.path.c_str(),
              version.substr(0, version.find('\n')).c_str(), lookup.toolchain->archive.c_str());
}

}  // namespace

Subcommand add_info_command(CLI::App& app) {
  CLI::App* info =
      app.add_subcommand("info", "Show the version, NVRTC, driver, GPUs and the kernel cache");
  return {info, [] {
            std::printf("flashjit:    %s\n", kVersion);
            std::printf("nvrtc:       %s\n", detail::nvrtc_version().c_str());
            std::printf("templates:   %s (%zu files)\n",
                        detail::TemplateSet::active().origin().c_str(),
                        detail::TemplateSet::active().files().size());
            const SystemInfo system = query_system();
            print_devices(system);
            print_host_compiler();
            print_cache();
            const std::string problem = print_tuning(system);
            if (problem.empty()) return 0;
            std::fflush(stdout);
            std::fprintf(stderr, "flashjit: error: %s\n", problem.c_str());
            return 1;
          }};
}

}  // namespace flashjit::tools
