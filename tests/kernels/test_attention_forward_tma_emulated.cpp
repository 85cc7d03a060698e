// The warp-specialized Hopper forward (templates/attention/tma_forward_kernel.cuh) on the CPU
// emulator against the float64 reference, launched directly with its traits and with the
// tensor maps built here the way a host builds them (from each tensor's strides, bshd or bhsd):
// the runtime does not select it yet. The bar is the forward suite's: a relative L2 error of O
// at most twice that of a plain attention in the input dtype, LSE close, every output written
// (outputs start as NaN), and a clean report (races, proxy fences, mbarrier and TMA protocol).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attention/tma_forward_kernel.cuh"
#include "cases/attention_case.hpp"
#include "cases/case_inputs.hpp"
#include "emulator/launch.hpp"
#include "flashjit/attention.hpp"
#include "kernels/attention_forward.hpp"
#include "runtime/compiler.hpp"
#include "runtime/template_sources.hpp"

namespace flashjit::testing {
namespace {

namespace em = flashjit::emulator;
using namespace case_inputs;

/// The tensor map of one attention tensor as AttentionTmaMaps documents it: rank 4 over
/// {head_dim, seqlen, heads, batch} with the HeadTensor's strides (elements, so bshd and bhsd
/// alike), boxes of 64 head-dim elements by `box_rows` rows, 128-byte swizzle.
em::TensorMap tensor_map(const HeadTensor& t, std::int64_t batch, std::int64_t seqlen,
                         std::int64_t heads, std::int64_t head_dim, int box_rows) {
  em::TensorMap map;
  map.element_bytes = 2;
  map.rank = 4;
  map.global_address = t.data;
  map.dims = {static_cast<std::uint64_t>(head_dim), static_cast<std::uint64_t>(seqlen),
              static_cast<std::uint64_t>(heads), static_cast<std::uint64_t>(batch), 1};
  map.strides = {0, static_cast<std::uint64_t>(t.row_stride) * 2,
                 static_cast<std::uint64_t>(t.head_stride) * 2,
                 static_cast<std::uint64_t>(t.batch_stride) * 2, 0};
  map.box = {64, static_cast<std::uint32_t>(box_rows), 1, 1, 1};
  map.swizzle = em::TmaSwizzle::b128;
  return map;
}

template <class Traits>
em::Report launch(const ForwardCase& c, std::vector<std::uint16_t>& q,
                  std::vector<std::uint16_t>& k, std::vector<std::uint16_t>& v,
                  std::vector<std::uint16_t>& o, std::vector<float>& lse) {
  const Attention a = c.attention();
  const flashjit::Layout layout = library_layout(c.layout);
  auto view = [&](std::vector<std::uint16_t>& bits, std::int64_t seqlen, std::int64_t heads) {
    return attention_tensor(bits.data(), c.dtype, layout, a.batch, seqlen, heads, a.head_dim);
  };
  const AttentionForwardParams params = kernels::forward_params(
      a, view(q, a.seqlen_q, a.heads_q), view(k, a.seqlen_k, a.heads_kv),
      view(v, a.seqlen_k, a.heads_kv), view(o, a.seqlen_q, a.heads_q), lse_tensor(lse.data(), a));
  const em::TensorMap q_map =
      tensor_map(params.q, a.batch, a.seqlen_q, a.heads_q, a.head_dim, Traits::kBlockM);
  const em::TensorMap k_map =
      tensor_map(params.k, a.batch, a.seqlen_k, a.heads_kv, a.head_dim, Traits::kBlockN);
  const em::TensorMap v_map =
      tensor_map(params.v, a.batch, a.seqlen_k, a.heads_kv, a.head_dim, Traits::kBlockN);
  for (const em::TensorMap* map : {&q_map, &k_map, &v_map}) {
    const std::string problem = em::tensor_map_problem(*map);
    REQUIRE_MESSAGE(problem.empty(), problem);
  }
  em::LaunchConfig config{
      .kernel_name = "attention_forward_tma",
      .grid = {static_cast<unsigned>((a.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM),
               static_cast<unsigned>(a.heads_q), static_cast<unsigned>(a.batch)},
      .block = {Traits::kThreads},
      .shared_bytes = Traits::kSharedBytes,
      .buffers = {em::buffer_of(q.data(), q.size(), "q"), em::buffer_of(k.data(), k.size(), "k"),
                  em::buffer_of(v.data(), v.size(), "v"), em::buffer_of(o.data(), o.size(), "o"),
                  em::buffer_of(lse.data(), lse.size(), "lse")}};
  const AttentionTmaMaps maps{{&q_map}, {&k_map}, {&v_map}};
  return em::launch(&attention_forward_tma_kernel<Traits>, config, params, maps);
}

/// Runs `c` with Br = BlockM, Bc = BlockN (the mask kind and dtype the case needs) and judges
/// it against the reference.
template <int HeadDim, int BlockM, int BlockN>
void check_case(const ForwardCase& c) {
  INFO(c.name() << " br" << BlockM << ".bc" << BlockN);
  const reference::Problem& p = c.problem;
  RoundedTensor q = rounded_random(p.q_shape(), c.layout, c.seed, c.dtype);
  RoundedTensor k = rounded_random(p.kv_shape(), c.layout, c.seed + 1, c.dtype);
  RoundedTensor v = rounded_random(p.kv_shape(), c.layout, c.seed + 2, c.dtype);
  std::vector<std::uint16_t> o(q.bits.size(), kPoison);
  std::vector<float> lse(static_cast<std::size_t>(p.batch * p.heads_q * p.seqlen_q), std::nanf(""));
  const bool window = kernels::forward_mask_kind(c.attention()) == MaskKind::window;
  const bool softcap = p.softcap > 0;
  em::Report report;
  auto run = [&]<typename T, MaskKind Mask, bool Softcap>() {
    report = launch<TmaForwardTraits<T, HeadDim, BlockM, BlockN, Mask, Softcap>>(c, q.bits, k.bits,
                                                                                 v.bits, o, lse);
  };
  const bool f16 = c.dtype == DType::f16;
  if (f16 && window) run.template operator()<half_t, MaskKind::window, false>();
  if (f16 && !window) run.template operator()<half_t, MaskKind::none, false>();
  if (!f16 && window && softcap) run.template operator()<bfloat16_t, MaskKind::window, true>();
  if (!f16 && window && !softcap) run.template operator()<bfloat16_t, MaskKind::window, false>();
  if (!f16 && !window && softcap) run.template operator()<bfloat16_t, MaskKind::none, true>();
  if (!f16 && !window && !softcap) run.template operator()<bfloat16_t, MaskKind::none, false>();
  REQUIRE_MESSAGE(report.clean(), report);
  // Both products on the tensor cores through wgmma.
  CHECK(report.work.tensor_flops > 0);

  const reference::ForwardResult expected =
      reference::forward(p, q.values.view(), k.values.view(), v.values.view(), {}, c.layout);
  const double plain = plain_attention_error(c);
  const reference::CheckResult out =
      reference::check_close(widen(c.dtype, o), expected.out.values, 2 * plain, "O");
  CHECK_MESSAGE(out.ok, out << " (plain " << plain << ")");
  const reference::CheckResult lse_check = reference::check_close(lse, expected.lse, 1e-5, "LSE");
  CHECK_MESSAGE(lse_check.ok, lse_check);
}

ForwardCase make_case(std::int64_t batch, std::int64_t heads_q, std::int64_t heads_kv,
                      std::int64_t seqlen_q, std::int64_t seqlen_k, std::int64_t head_dim,
                      DType dtype = DType::bf16) {
  ForwardCase c;
  c.problem.batch = batch;
  c.problem.heads_q = heads_q;
  c.problem.heads_kv = heads_kv;
  c.problem.seqlen_q = seqlen_q;
  c.problem.seqlen_k = seqlen_k;
  c.problem.head_dim = head_dim;
  c.dtype = dtype;
  c.seed = static_cast<std::uint64_t>(seqlen_q * 131 + seqlen_k * 7 + head_dim);
  return c;
}

}  // namespace

TEST_CASE("TMA forward on the emulator: ragged lengths, both dtypes, one and two warpgroups") {
  for (std::int64_t length : {1, 17, 63, 129, 200}) {
    for (DType dtype : {DType::bf16, DType::f16}) {
      check_case<64, 64, 64>(make_case(1, 2, 2, length, length, 64, dtype));
    }
    check_case<128, 128, 64>(make_case(1, 1, 1, length, length, 128));
  }
}

TEST_CASE("TMA forward on the emulator: causal with seqlen_q above and below seqlen_k") {
  for (auto [seqlen_q, seqlen_k] : {std::pair{100, 300}, std::pair{300, 100}, std::pair{1, 65}}) {
    ForwardCase c = make_case(1, 2, 2, seqlen_q, seqlen_k, 64);
    c.problem.causal = true;
    check_case<64, 128, 64>(c);
    check_case<64, 64, 128>(c);
  }
}

TEST_CASE("TMA forward on the emulator: head dims, GQA 8:1, bhsd, windows and softcap") {
  check_case<192, 64, 64>(make_case(1, 1, 1, 70, 70, 192));
  check_case<256, 64, 64>(make_case(1, 1, 1, 65, 65, 256, DType::f16));
  check_case<64, 128, 128>(make_case(2, 8, 1, 90, 150, 64));  // GQA 8:1, two batches
  ForwardCase bhsd = make_case(1, 2, 1, 77, 77, 128);
  bhsd.layout = reference::Layout::bhsd;
  check_case<128, 64, 64>(bhsd);
  check_case<128, 128, 128>(bhsd);
  ForwardCase window = make_case(1, 1, 1, 200, 200, 64);
  window.problem.window_left = 40;
  window.problem.window_right = 10;
  check_case<64, 64, 64>(window);
  check_case<64, 128, 64>(window);
  ForwardCase softcap = make_case(1, 1, 1, 129, 129, 64);
  softcap.problem.softcap = 30.0;
  check_case<64, 64, 64>(softcap);
}

// A producer warp beside two consumer warpgroups (288 threads) leaves ptxas 168 registers a
// thread, as a third warpgroup would: Br 128 fits with Bc 64, and Bc 128 with Br 64. Br 128
// with Bc 128 spills (16 bytes) until setmaxnreg moves the producer's registers to the
// consumers (not done yet).
TEST_CASE("TMA forward: NVRTC builds it for sm_90a, its PTX issues wgmma and TMA, no spills") {
  for (const std::string tiles : {"128, 64", "64, 128"}) {
    for (const std::string mask : {"none", "window"}) {
      CAPTURE(tiles);
      CAPTURE(mask);
      detail::KernelSpec spec;
      spec.op = "attention-forward";
      spec.header = "attention/tma_forward_kernel.cuh";
      spec.name_expression =
          "flashjit::attention_forward_tma_kernel<flashjit::TmaForwardTraits<"
          "flashjit::bfloat16_t, 128, " +
          tiles + ", flashjit::MaskKind::" + mask + ", false>>";
      spec.readable_name = "attention_forward.hdim128.bf16.tma." + mask;
      spec.arch = "sm_90a";
      const detail::CompiledKernel kernel =
          detail::compile_kernel(spec, detail::TemplateSet::embedded());
      CHECK(kernel.cubin.substr(1, 3) == "ELF");
      CHECK(kernel.resources.registers > 0);
      CHECK(kernel.resources.spill_bytes() == 0);
      CHECK(kernel.resources.stack_bytes == 0);
      const std::string ptx = detail::compile_ptx(spec, detail::TemplateSet::embedded());
      CHECK(ptx.find(".target sm_90a") != std::string::npos);
      CHECK(ptx.find("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16") !=
            std::string::npos);  // O += P V (N = head dim 128)
      CHECK(ptx.find("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier") !=
            std::string::npos);
      CHECK(ptx.find("mbarrier.try_wait.parity") != std::string::npos);
      CHECK(ptx.find("ldmatrix") == std::string::npos);  // no product is fed by ldmatrix
    }
  }
}

}  // namespace flashjit::testing
