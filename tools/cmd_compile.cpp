// `flashjit compile`: compiles ops' specializations into the kernel cache, for the local GPU
// or for any --arch without one.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "common/op_registry.hpp"
#include "flashjit/device.hpp"
#include "flashjit/error.hpp"
#include "format.hpp"
#include "runtime/compiler.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/kernel_spec.hpp"
#include "runtime/parallel.hpp"

namespace flashjit::tools {
namespace {

struct CompileOptions {
  std::string arch;
  std::vector<std::string> ops;
  bool all = false;
  int jobs = detail::default_workers();
  std::string emit_ptx;  // a directory for each kernel's PTX; empty: none written
  std::vector<std::string> matches;  // only kernels whose names contain one; empty: all
};

// The directory --emit-ptx names, created if missing; checked before anything compiles.
std::filesystem::path ptx_directory(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error || !std::filesystem::is_directory(dir)) {
    throw InvalidArgument("--emit-ptx", "'" + dir + "' is not a directory that can be created (" +
                                            (error ? error.message() : "a file is in the way") +
                                            ")");
  }
  return dir;
}

// Writes `<dir>/<kernel>.ptx` for every spec (a second NVRTC run per kernel, stopping at PTX);
// returns how many failed, each said on stderr.
int write_ptx(const std::vector<detail::KernelSpec>& specs, const std::filesystem::path& dir,
              int jobs) {
  int failed = 0;
  detail::run_ordered<std::string>(
      static_cast<int>(specs.size()), jobs,
      [&](int i) {
        return detail::compile_ptx(specs[static_cast<std::size_t>(i)],
                                   detail::TemplateSet::active());
      },
      [&](int i, detail::Outcome<std::string>& outcome) {
        const detail::KernelSpec& spec = specs[static_cast<std::size_t>(i)];
        const std::filesystem::path file = dir / (spec.display_name() + ".ptx");
        std::string problem;
        if (outcome.error) {
          try {
            std::rethrow_exception(outcome.error);
          } catch (const std::exception& error) {
            problem = error.what();
            problem = problem.substr(0, problem.find('\n'));
          }
        } else {
          std::ofstream out(file, std::ios::binary);
          out << outcome.value;
          if (!out.flush()) problem = "cannot write " + file.string();
        }
        if (!problem.empty()) {
          ++failed;
          std::fprintf(stderr, "flashjit: error: PTX of %s: %s\n", spec.display_name().c_str(),
                       problem.c_str());
        }
      });
  std::printf("wrote the PTX of %zu kernels to %s\n",
              specs.size() - static_cast<std::size_t>(failed), dir.c_str());
  return failed;
}

// The name column fits the longest name listed (attention names run to ~70 characters), so
// the resource columns line up for every op.
int name_width(const std::vector<detail::KernelSpec>& specs) {
  std::size_t width = 44;
  for (const detail::KernelSpec& spec : specs) width = std::max(width, spec.display_name().size());
  return static_cast<int>(width);
}

/// One kernel: registers, spills, shared memory per block as launched (static + dynamic) and
/// the CTAs of it an SM of the arch holds at once (from registers, shared memory and threads);
/// then ptxas's performance advisories, one indented line each.
void print_line(const detail::KernelSpec& spec, const detail::CacheEntry& entry, int width,
                const char* outcome) {
  const detail::ResourceUsage& r = entry.kernel.resources;
  const int shared = r.static_shared_bytes + spec.dynamic_shared_bytes;
  const int ctas = detail::blocks_per_sm(r.registers, spec.threads, shared,
                                         detail::arch_shared_memory_limit(spec.arch), spec.arch);
  std::printf("%-*s %-7s regs %3d  spill %4d B  smem %9s  ctas/SM %2d  %s\n", width,
              entry.display_name.c_str(), entry.arch.c_str(), r.registers, r.spill_bytes(),
              format_bytes(static_cast<std::uintmax_t>(shared)).c_str(), ctas, outcome);
  for (const std::string& advisory : r.advisories) {
    std::printf("  ptxas advisory %s\n", advisory.c_str());
  }
  std::fflush(stdout);
}

}  // namespace

std::string target_arch(const std::string& requested) {
  if (!requested.empty()) {
    detail::validate_arch(requested);
    return requested;
  }
  SystemInfo system = query_system();
  if (system.devices.empty()) {
    throw Error(ErrorKind::no_device, system.unavailable_reason +
                                          "; pass --arch (e.g. --arch sm_90a) to compile without "
                                          "a GPU");
  }
  return system.devices.front().arch();
}

int compile_into_cache(const std::vector<detail::KernelSpec>& specs, const std::string& arch,
                       int jobs) {
  const int width = name_width(specs);
  detail::KernelCache& cache = detail::KernelCache::process_cache();
  const auto start = std::chrono::steady_clock::now();
  int compiled = 0, cached = 0, failed = 0, advised = 0;
  // Cached kernels are read on this thread first; workers start only for kernels to compile.
  std::vector<std::optional<detail::CacheLookup>> found;
  for (const detail::KernelSpec& spec : specs) {
    try {
      found.push_back(cache.find(spec));
    } catch (const Error&) {
      found.emplace_back();  // get() meets the same problem and reports it as this kernel's
    }
  }
  const bool all_found = std::all_of(found.begin(), found.end(), [](const auto& f) { return f; });
  detail::run_ordered<detail::CacheLookup>(
      static_cast<int>(specs.size()), all_found ? 1 : jobs,
      [&](int i) {
        const std::size_t at = static_cast<std::size_t>(i);
        return found[at] ? *found[at] : cache.get(specs[at]);
      },
      [&](int i, detail::Outcome<detail::CacheLookup>& outcome) {
        if (outcome.error) {
          ++failed;
          try {
            std::rethrow_exception(outcome.error);
          } catch (const std::exception& error) {
            // The first failure is shown whole (NVRTC's log); later ones by their first line,
            // since one template error usually breaks every config.
            std::string message = error.what();
            if (failed > 1) message = message.substr(0, message.find('\n'));
            std::fprintf(stderr, "flashjit: error: %s: %s\n",
                         specs[static_cast<std::size_t>(i)].display_name().c_str(),
                         message.c_str());
          }
          return;
        }
        const bool fresh = outcome.value.source == detail::CacheSource::compiled;
        (fresh ? compiled : cached) += 1;
        advised += outcome.value.entry->kernel.resources.advisories.empty() ? 0 : 1;
        const double ms = outcome.value.entry->kernel.compile_ms;
        print_line(specs[static_cast<std::size_t>(i)], *outcome.value.entry, width,
                   fresh ? format_duration_ms(ms).c_str() : "cached");
      });
  const double elapsed =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const detail::DiskCache* disk = cache.disk();
  std::printf(
      "%zu kernels for %s: %d compiled, %d cached, %d failed, %d with ptxas advisories in %s "
      "(cache: %s)\n",
      specs.size(), arch.c_str(), compiled, cached, failed, advised,
      format_duration_ms(elapsed).c_str(), disk ? disk->root().c_str() : "memory only");
  return failed;
}

namespace {

int run_compile(const CompileOptions& options) {
  const std::string arch = target_arch(options.arch);
  const std::filesystem::path ptx_dir =
      options.emit_ptx.empty() ? std::filesystem::path() : ptx_directory(options.emit_ptx);
  const kernels::SpecSet set = options.all ? kernels::SpecSet::all : kernels::SpecSet::defaults;
  std::vector<detail::KernelSpec> specs;
  for (const kernels::OpInfo& op : kernels::ops()) {
    bool wanted = options.ops.empty();
    for (const std::string& name : options.ops) wanted |= kernels::find_op(name).name == op.name;
    if (!wanted) continue;
    for (detail::KernelSpec& spec : op.specs(arch, set)) {
      const std::string name = spec.display_name();
      bool matched = options.matches.empty();
      for (const std::string& text : options.matches) matched |= name.find(text) != name.npos;
      if (matched) specs.push_back(std::move(spec));
    }
  }
  if (specs.empty() && !options.matches.empty()) {
    throw InvalidArgument("--match", "no kernel of the ops chosen for " + arch +
                                         " has a name containing it (the names are those "
                                         "`flashjit compile` prints)");
  }
  int failed = compile_into_cache(specs, arch, options.jobs);
  if (!ptx_dir.empty()) failed += write_ptx(specs, ptx_dir, options.jobs);
  return failed == 0 ? 0 : 1;
}

}  // namespace

Subcommand add_compile_command(CLI::App& app) {
  auto options = std::make_shared<CompileOptions>();
  CLI::App* compile = app.add_subcommand(
      "compile", "Compile kernel specializations into the cache (no GPU needed with --arch)");
  compile->add_option("--arch", options->arch, "Target such as sm_80 or sm_90a (default: GPU 0)");
  compile->add_option("--op", options->ops, "Op to compile (repeatable; default: every op)")
      ->delimiter(',');
  compile->add_flag("--all", options->all,
                    "Every config of each op's space, not just the defaults");
  compile
      ->add_option("-j,--jobs", options->jobs,
                   "Parallel compiles (default: one a hardware thread, as many as memory holds "
                   "at 1 GiB each)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  compile->add_option("--match", options->matches,
                      "Only the kernels whose names contain TEXT (repeatable: any of them)");
  compile->add_option(
      "--emit-ptx", options->emit_ptx,
      "Also write each kernel's PTX to DIR/<kernel>.<arch>.ptx (created if missing)");
  return {compile, [options] { return run_compile(*options); }};
}

}  // namespace flashjit::tools
