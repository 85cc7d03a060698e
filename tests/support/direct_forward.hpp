#pragma once
// What the emulated suites of forward kernels launched directly share (the Hopper forwards,
// which the runtime does not select everywhere, or at all yet): a case's buffers as a kernel
// takes them, the choice of traits by the case's dtype, mask kind and softcap, and the verdict
// against the float64 reference at the forward suite's bar (O within twice a plain attention's
// error in the input dtype, LSE close, outputs poisoned so that unwritten elements fail).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "attention/attention_forward.hpp"
#include "attention/check/attention_case.hpp"
#include "cases/case_inputs.hpp"
#include "emulator/launch.hpp"
#include "emulator/ptx_api.hpp"
#include "flashjit/attention.hpp"
#include "support/forward_case_builders.hpp"
#include "tile/numeric.cuh"

namespace flashjit::testing {

/// A case's inputs rounded to its dtype, and its outputs poisoned (O NaN bits, LSE NaN).
struct DirectForwardBuffers {
  case_inputs::RoundedTensor q, k, v;
  std::vector<std::uint16_t> o;
  std::vector<float> lse;
  std::vector<int> tile_counter = {0};  // the persistent masked TMA forward's, left zero
};

/// The inputs the runtime's case runner draws for `c` (same seeds), and poisoned outputs.
inline DirectForwardBuffers direct_forward_buffers(const ForwardCase& c) {
  const reference::Problem& p = c.problem;
  DirectForwardBuffers b{case_inputs::rounded_random(p.q_shape(), c.layout, c.seed, c.dtype),
                         case_inputs::rounded_random(p.kv_shape(), c.layout, c.seed + 1, c.dtype),
                         case_inputs::rounded_random(p.v_shape(), c.layout, c.seed + 2, c.dtype),
                         {},
                         {}};
  b.o.assign(static_cast<std::size_t>(p.batch * p.seqlen_q * p.heads_q * p.value_dim()),
             case_inputs::kPoison);
  b.lse.assign(static_cast<std::size_t>(p.batch * p.heads_q * p.seqlen_q), std::nanf(""));
  return b;
}

/// The kernel arguments of `c` over `b`'s buffers, as the runtime fills them.
inline AttentionForwardParams direct_forward_params(const ForwardCase& c, DirectForwardBuffers& b) {
  const Attention a = c.attention();
  const flashjit::Layout layout = case_inputs::library_layout(c.layout);
  auto view = [&](std::vector<std::uint16_t>& bits, std::int64_t seqlen, std::int64_t heads,
                  std::int64_t head_dim) {
    return attention_tensor(bits.data(), c.dtype, layout, a.batch, seqlen, heads, head_dim);
  };
  const std::int64_t value_dim = a.value_head_dim();
  AttentionForwardParams params = kernels::forward_params(
      a, view(b.q.bits, a.seqlen_q, a.heads_q, a.head_dim),
      view(b.k.bits, a.seqlen_k, a.heads_kv, a.head_dim),
      view(b.v.bits, a.seqlen_k, a.heads_kv, value_dim),
      view(b.o, a.seqlen_q, a.heads_q, value_dim), lse_tensor(b.lse.data(), a));
  params.tile_counter = b.tile_counter.data();
  return params;
}

/// The emulator launch of a forward kernel over `b`: grid (ceil(seqlen_q / Traits::kBlockM),
/// heads_q, batch), Traits::kThreads threads, Traits::kSharedBytes, every buffer registered.
template <class Traits>
emulator::LaunchConfig direct_forward_launch(const ForwardCase& c, DirectForwardBuffers& b,
                                             const char* kernel_name) {
  const Attention a = c.attention();
  namespace em = flashjit::emulator;
  return {.kernel_name = kernel_name,
          .grid = {static_cast<unsigned>((a.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM),
                   static_cast<unsigned>(a.heads_q), static_cast<unsigned>(a.batch)},
          .block = {Traits::kThreads},
          .shared_bytes = Traits::kSharedBytes,
          .buffers = {em::buffer_of(b.q.bits.data(), b.q.bits.size(), "q"),
                      em::buffer_of(b.k.bits.data(), b.k.bits.size(), "k"),
                      em::buffer_of(b.v.bits.data(), b.v.bits.size(), "v"),
                      em::buffer_of(b.o.data(), b.o.size(), "o"),
                      em::buffer_of(b.lse.data(), b.lse.size(), "lse"),
                      em::buffer_of(b.tile_counter.data(), b.tile_counter.size(), "tile_counter")}};
}

/// The tensor map of one attention tensor as AttentionTmaMaps documents it: rank 4 over
/// {head_dim, seqlen, heads, batch} with the HeadTensor's strides (elements, so bshd and bhsd
/// alike), boxes of 64 head-dim elements by `box_rows` rows, 128-byte swizzle.
inline emulator::TensorMap tensor_map(const HeadTensor& t, std::int64_t batch, std::int64_t seqlen,
                                      std::int64_t heads, std::int64_t head_dim, int box_rows) {
  emulator::TensorMap map;
  map.element_bytes = 2;
  map.rank = 4;
  map.global_address = t.data;
  map.dims = {static_cast<std::uint64_t>(head_dim), static_cast<std::uint64_t>(seqlen),
              static_cast<std::uint64_t>(heads), static_cast<std::uint64_t>(batch), 1};
  map.strides = {0, static_cast<std::uint64_t>(t.row_stride) * 2,
                 static_cast<std::uint64_t>(t.head_stride) * 2,
                 static_cast<std::uint64_t>(t.batch_stride) * 2, 0};
  map.box = {64, static_cast<std::uint32_t>(box_rows), 1, 1, 1};
  map.swizzle = emulator::TmaSwizzle::b128;
  return map;
}

/// Which of a forward kernel's element types and softcap forms a dispatch instantiates beside
/// bf16 without softcap (both mask kinds always): each is a kernel to build, so a test file
/// that instantiates many tile configs compiles only the forms its cases use.
struct ForwardVariants {
  bool f16 = true;
  bool softcap = true;
};

/// Picks ForwardVariants at a call site by argument: `check_case<...>(c, kWithF16)`.
template <ForwardVariants V>
struct ForwardVariantsTag {};

/// Calls `launch.template operator()<T, Mask, Softcap>()` with the element type, mask kind and
/// softcap flag `c` needs, as the runtime picks a specialization; fails the test when `c` needs
/// a form `V` leaves out.
template <ForwardVariants V = ForwardVariants{}, class Launch>
void dispatch_forward_traits(const ForwardCase& c, Launch&& launch) {
  const bool window = kernels::forward_mask_kind(c.attention()) == MaskKind::window;
  const bool softcap = c.problem.softcap > 0;
  const bool f16 = c.dtype == DType::f16;
  if ((f16 && !V.f16) || (softcap && !V.softcap)) {
    FAIL(c.name() << " needs the " << (f16 && !V.f16 ? "f16" : "softcap")
                  << " kernels, which this call does not build: pass a ForwardVariantsTag "
                     "with them");
    return;
  }
  auto with_mask = [&]<typename T, bool Softcap>() {
    if (window) {
      launch.template operator()<T, MaskKind::window, Softcap>();
    } else {
      launch.template operator()<T, MaskKind::none, Softcap>();
    }
  };
  auto with_softcap = [&]<typename T>() {
    if constexpr (V.softcap) {
      if (softcap) return with_mask.template operator()<T, true>();
    }
    with_mask.template operator()<T, false>();
  };
  if constexpr (V.f16) {
    if (f16) return with_softcap.template operator()<half_t>();
  }
  with_softcap.template operator()<bfloat16_t>();
}

/// Checks the outputs in `b` against the float64 reference of `c`.
inline void check_direct_forward(const ForwardCase& c, const DirectForwardBuffers& b) {
  const reference::ForwardResult expected = reference::forward(
      c.problem, b.q.values.view(), b.k.values.view(), b.v.values.view(), {}, c.layout);
  const double plain = plain_attention_error(c);
  const reference::CheckResult out =
      reference::check_close(case_inputs::widen(c.dtype, b.o), expected.out.values, 2 * plain, "O");
  CHECK_MESSAGE(out.ok, out << " (plain " << plain << ")");
  const reference::CheckResult lse = reference::check_close(b.lse, expected.lse, 1e-5, "LSE");
  CHECK_MESSAGE(lse.ok, lse);
}

/// make_case with `batch` batches and `dtype`.
inline ForwardCase batched_case(std::int64_t batch, std::int64_t heads_q, std::int64_t heads_kv,
                                std::int64_t seqlen_q, std::int64_t seqlen_k, std::int64_t head_dim,
                                DType dtype = DType::bf16) {
  ForwardCase c = make_case(heads_q, heads_kv, seqlen_q, seqlen_k, head_dim);
  c.problem.batch = batch;
  c.dtype = dtype;
  return c;
}

}  // namespace flashjit::testing
