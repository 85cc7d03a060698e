// The tile library's Hopper device code through NVRTC for sm_90a: the probe kernels of
// tests/templates/testing/hopper_device.cuh compile to a cubin, and their PTX carries the
// instructions the wrappers promise. They are test-only templates, read with the library's
// from the directory the build assembles (FLASHJIT_PROBE_TEMPLATE_DIR, tests/CMakeLists.txt).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "runtime/compiler.hpp"

namespace flashjit::testing {
namespace {

const detail::TemplateSet& probe_templates() {
  static const detail::TemplateSet templates =
      detail::TemplateSet::from_directory(FLASHJIT_PROBE_TEMPLATE_DIR);
  return templates;
}

detail::KernelSpec probe_spec(const std::string& name_expression) {
  return detail::KernelSpec{.op = "testing",
                            .header = "testing/hopper_device.cuh",
                            .name_expression = "flashjit::testing::" + name_expression,
                            .readable_name = "hopper_device_probe",
                            .options = {},
                            .arch = "sm_90a",
                            .role = "probe"};
}

bool has(const std::string& ptx, const std::string& text) {
  return ptx.find(text) != std::string::npos;
}

int occurrences(const std::string& ptx, const std::string& text) {
  int count = 0;
  for (auto at = ptx.find(text); at != std::string::npos; at = ptx.find(text, at + 1)) ++count;
  return count;
}

}  // namespace

TEST_CASE("setmaxnreg: NVRTC builds the register budget wrappers for sm_90a") {
  const detail::KernelSpec spec = probe_spec("register_budget_probe<40, 232>");
  const detail::CompiledKernel kernel = detail::compile_kernel(spec, probe_templates());
  CHECK(kernel.cubin.substr(1, 3) == "ELF");
  const std::string ptx = detail::compile_ptx(spec, probe_templates());
  CHECK(has(ptx, ".target sm_90a"));
  CHECK(has(ptx, "setmaxnreg.dec.sync.aligned.u32 40;"));
  CHECK(has(ptx, "setmaxnreg.inc.sync.aligned.u32 232;"));
}

TEST_CASE("wgmma: NVRTC builds SS and RS, f16 and bf16, for N from 8 to 256") {
  const std::vector<int> ns = {8, 16, 24, 64, 80, 96, 112, 128, 176, 192, 256};
  std::string list;
  for (const int n : ns) list += (list.empty() ? "" : ", ") + std::to_string(n);
  const detail::KernelSpec spec = probe_spec("wgmma_n_probe<" + list + ">");
  const detail::CompiledKernel kernel = detail::compile_kernel(spec, probe_templates());
  CHECK(kernel.cubin.substr(1, 3) == "ELF");
  const std::string ptx = detail::compile_ptx(spec, probe_templates());
  for (const int n : ns) {
    CAPTURE(n);
    for (const char* type : {"f16", "bf16"}) {
      const std::string name =
          "wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) + "k16.f32." + type + "." + type;
      CHECK(occurrences(ptx, name) == 3);  // two SS (K- or MN-major) and one RS
    }
  }
}

TEST_CASE("clusters: NVRTC builds the cluster barrier, multicast TMA and remote arrivals") {
  const detail::KernelSpec spec = probe_spec("cluster_probe<2>");
  const detail::CompiledKernel kernel = detail::compile_kernel(spec, probe_templates());
  CHECK(kernel.cubin.substr(1, 3) == "ELF");
  const std::string ptx = detail::compile_ptx(spec, probe_templates());
  CHECK(has(ptx, ".reqnctapercluster 2, 1, 1"));
  CHECK(has(ptx, "%cluster_ctarank"));
  CHECK(occurrences(ptx, "barrier.cluster.arrive.release.aligned;") == 2);
  CHECK(occurrences(ptx, "barrier.cluster.wait.acquire.aligned;") == 2);
  for (const char* rank : {"2d", "3d", "4d"}) {
    CAPTURE(rank);
    CHECK(has(ptx, std::string("cp.async.bulk.tensor.") + rank +
                       ".shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"));
  }
  CHECK(has(ptx, "mapa.shared::cluster.u32"));
  CHECK(has(ptx, "mbarrier.arrive.release.cluster.shared::cluster.b64"));
}

TEST_CASE("bulk reduce: NVRTC builds the fp32 reduce-add and both bulk waits for sm_90a") {
  const detail::KernelSpec spec = probe_spec("bulk_reduce_probe");
  const detail::CompiledKernel kernel = detail::compile_kernel(spec, probe_templates());
  CHECK(kernel.cubin.substr(1, 3) == "ELF");
  const std::string ptx = detail::compile_ptx(spec, probe_templates());
  CHECK(has(ptx, "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32"));
  CHECK(has(ptx, "fence.proxy.async.shared::cta;"));
  CHECK(has(ptx, "cp.async.bulk.commit_group;"));
  CHECK(has(ptx, "cp.async.bulk.wait_group.read 0;"));
  CHECK(has(ptx, "cp.async.bulk.wait_group 0;"));
}

}  // namespace flashjit::testing
