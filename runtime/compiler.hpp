#pragma once
// NVRTC: one KernelSpec in, one CUBIN and its resource report out.
#include <string>
#include <vector>

#include "kernel_spec.hpp"
#include "template_sources.hpp"

namespace flashjit::detail {

/// What ptxas reported for a kernel. Shared memory is the static part; dynamic shared memory
/// is a launch-time quantity computed by the op.
struct ResourceUsage {
  int registers = 0;
  int static_shared_bytes = 0;
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
  int stack_bytes = 0;
  /// ptxas's performance advisories, one per line as "C7514: wgmma.mma_async instructions are
  /// serialized due to ...": what the compiler could not overlap or keep in its fast path
  /// (its "(C75xx) Potential Performance Loss" lines, without the function's mangled name).
  /// Empty for a kernel ptxas had nothing to say about; a default config must keep it so.
  std::vector<std::string> advisories;

  /// Spill stores plus spill loads: zero for a kernel that keeps everything in registers.
  int spill_bytes() const { return spill_store_bytes + spill_load_bytes; }
};

/// A compiled kernel ready to load: the CUBIN, the mangled entry name and its resources.
struct CompiledKernel {
  std::string lowered_name;
  std::string cubin;
  ResourceUsage resources;
  double compile_ms = 0;
};

/// "13.0" for the NVRTC this process uses.
std::string nvrtc_version();

/// The complete, sorted NVRTC option list for `spec` (arch, language standard, resource
/// report, FLASHJIT_LINEINFO, and the spec's own options).
std::vector<std::string> nvrtc_options(const KernelSpec& spec);

/// Compiles `spec` from `templates`. Throws Error{compile} with NVRTC's log, which names the
/// template file and line of each error.
CompiledKernel compile_kernel(const KernelSpec& spec, const TemplateSet& templates);

/// The PTX of `spec`, compiled for its arch's virtual architecture (compute_90a for sm_90a):
/// what ptxas turns into the cubin, to read and diff (`flashjit compile --emit-ptx`). Throws
/// as compile_kernel does.
std::string compile_ptx(const KernelSpec& spec, const TemplateSet& templates);

/// Parses ptxas' verbose report (the part of NVRTC's log for `lowered_name`): the resources
/// and the performance advisories (parse_advisories).
ResourceUsage parse_resource_report(const std::string& log);

/// ptxas's performance advisories in `log`, in order, each once: every line with a code C75xx
/// or the words "Potential Performance Loss", as "C7514: <what ptxas says>" with the
/// "Potential Performance Loss:" prefix and the trailing "in the function '...'" removed.
std::vector<std::string> parse_advisories(const std::string& log);

}  // namespace flashjit::detail
