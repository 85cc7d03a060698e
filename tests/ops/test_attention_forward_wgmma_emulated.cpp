// The Hopper forward (ops/attention/hopper/wgmma_forward_kernel.cuh) on the CPU emulator against
// the float64 reference, launched directly with its traits, so that tiles and head dims the
// runtime does not offer yet (no device PTX for their wgmma N) are proven too; the runtime's
// own use of it is tested in test_attention_forward_emulated. The bar is the forward suite's
// (support/direct_forward.hpp).
#include <doctest/doctest.h>

#include <string>

#include "attention/hopper/wgmma_forward_kernel.cuh"
#include "runtime/compiler.hpp"
#include "runtime/template_sources.hpp"
#include "support/direct_forward.hpp"

namespace flashjit::testing {
namespace {

namespace em = flashjit::emulator;

/// Runs `c` with Br = BlockM, Bc = BlockN (the mask kind and dtype the case needs) and judges
/// it against the reference.
template <int HeadDim, int BlockM, int BlockN>
void check_case(const ForwardCase& c) {
  INFO(c.name() << " br" << BlockM << ".bc" << BlockN);
  DirectForwardBuffers buffers = direct_forward_buffers(c);
  em::Report report;
  dispatch_forward_traits(c, [&]<typename T, MaskKind Mask, bool Softcap>() {
    using Traits = WgmmaForwardTraits<T, HeadDim, BlockM, BlockN, Mask, Softcap>;
    report = em::launch(&attention_forward_wgmma_kernel<Traits>,
                        direct_forward_launch<Traits>(c, buffers, "attention_forward_wgmma"),
                        direct_forward_params(c, buffers));
  });
  REQUIRE_MESSAGE(report.clean(), report);
  CHECK(report.work.tensor_flops > 0);  // both products on wgmma
  check_direct_forward(c, buffers);
}

}  // namespace

TEST_CASE("Hopper forward on the emulator: ragged lengths, both dtypes, Br 64 and 128") {
  for (std::int64_t length : {1, 17, 63, 129, 200}) {
    for (DType dtype : {DType::bf16, DType::f16}) {
      check_case<64, 64, 64>(batched_case(1, 2, 2, length, length, 64, dtype));
    }
    check_case<128, 128, 64>(batched_case(1, 1, 1, length, length, 128));
  }
}

TEST_CASE("Hopper forward on the emulator: causal with seqlen_q above and below seqlen_k") {
  for (auto [seqlen_q, seqlen_k] : {std::pair{100, 300}, std::pair{300, 100}, std::pair{1, 65}}) {
    ForwardCase c = batched_case(1, 2, 2, seqlen_q, seqlen_k, 64);
    c.problem.causal = true;
    check_case<64, 128, 64>(c);
    check_case<64, 64, 128>(c);
  }
}

TEST_CASE("Hopper forward on the emulator: head dims, GQA 8:1, bhsd, windows and softcap") {
  check_case<96, 64, 64>(batched_case(1, 1, 1, 129, 129, 96));
  check_case<192, 64, 64>(batched_case(1, 1, 1, 70, 70, 192));
  check_case<256, 64, 64>(batched_case(1, 1, 1, 65, 65, 256));
  check_case<64, 128, 128>(batched_case(2, 8, 1, 90, 150, 64));  // GQA 8:1, two batches
  ForwardCase bhsd = batched_case(1, 2, 1, 77, 77, 128);
  bhsd.layout = reference::Layout::bhsd;
  check_case<128, 64, 64>(bhsd);
  ForwardCase window = batched_case(1, 1, 1, 200, 200, 64);
  window.problem.window_left = 40;
  window.problem.window_right = 10;
  check_case<64, 64, 64>(window);
  ForwardCase softcap = batched_case(1, 1, 1, 129, 129, 64);
  softcap.problem.softcap = 30.0;
  check_case<64, 64, 64>(softcap);
}

TEST_CASE("Hopper forward with a smaller value head dim: V's and O's 32 and 64 of 64 and 128") {
  ForwardCase narrow = batched_case(1, 2, 1, 100, 130, 64);  // GQA 2:1
  narrow.problem.head_dim_v = 32;
  narrow.problem.causal = true;
  check_case<64, 64, 64>(narrow);
  ForwardCase half = batched_case(1, 2, 1, 77, 77, 128);
  half.problem.head_dim_v = 64;
  half.layout = reference::Layout::bhsd;
  check_case<128, 64, 64>(half);
}

TEST_CASE("Hopper forward: NVRTC builds it for sm_90a, its PTX issues wgmma, nothing spills") {
  for (const char* mask : {"none", "window"}) {
    CAPTURE(mask);
    detail::KernelSpec spec;
    spec.op = "attention-forward";
    spec.header = "attention/hopper/wgmma_forward_kernel.cuh";
    spec.name_expression = std::string("flashjit::attention_forward_wgmma_kernel<flashjit::") +
                           "WgmmaForwardTraits<flashjit::bfloat16_t, 128, 128, 128, " +
                           "flashjit::MaskKind::" + mask + ", false>>";
    spec.readable_name = std::string("attention_forward.hdim128.bf16.wgmma.") + mask;
    spec.arch = "sm_90a";
    const detail::CompiledKernel kernel =
        detail::compile_kernel(spec, detail::TemplateSet::embedded());
    CHECK(kernel.cubin.substr(1, 3) == "ELF");
    CHECK(kernel.resources.registers > 0);
    CHECK(kernel.resources.spill_bytes() == 0);
    CHECK(kernel.resources.stack_bytes == 0);
    const std::string ptx = detail::compile_ptx(spec, detail::TemplateSet::embedded());
    CHECK(ptx.find(".target sm_90a") != std::string::npos);
    CHECK(ptx.find("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16") != std::string::npos);
    CHECK(ptx.find("wgmma.fence.sync.aligned") != std::string::npos);
    CHECK(ptx.find("ldmatrix") == std::string::npos);  // no product is fed by ldmatrix
  }
}

}  // namespace flashjit::testing
