// The C API (flashjit_c.h) on the emulator backend: forward and backward through it give the
// same bits as the C++ API on the same inputs, and results within the float64 reference's
// bound; every bad argument returns its code with a message naming it and launches nothing;
// the last error is per thread and kept until the next failure; defaults match the C++ ones.
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "attention/check/attention_case.hpp"
#include "attention/check/attention_reference.hpp"
#include "attention/check/backward_case.hpp"
#include "cases/case_inputs.hpp"
#include "flashjit/flashjit.hpp"
#include "flashjit/flashjit_c.h"
#include "reference/checker.hpp"
#include "runtime/log.hpp"
#include "support/backward_case_builders.hpp"

namespace flashjit::testing {
namespace {

using case_inputs::RoundedTensor;

/// A C runtime on the emulator backend, destroyed at scope exit.
class CRuntime {
 public:
  CRuntime() {
    flashjit_runtime_options options;
    flashjit_runtime_options_init(&options);
    options.backend = FLASHJIT_BACKEND_EMULATOR;
    REQUIRE_MESSAGE(flashjit_runtime_create(&options, &runtime_) == FLASHJIT_OK,
                    flashjit_last_error());
  }
  ~CRuntime() { flashjit_runtime_destroy(runtime_); }
  CRuntime(const CRuntime&) = delete;
  CRuntime& operator=(const CRuntime&) = delete;
  operator flashjit_runtime*() const { return runtime_; }

 private:
  flashjit_runtime* runtime_ = nullptr;
};

Runtime& cpp_emulator() {
  static Runtime runtime(RuntimeOptions{.backend = Backend::emulator});
  return runtime;
}

/// The C descriptor of a C++ view.
flashjit_tensor c_tensor(const TensorView& view) {
  flashjit_tensor t{view.data, static_cast<int>(view.dtype), view.rank, {}, {}};
  for (int i = 0; i < view.rank; ++i) {
    t.shape[i] = view.shape[static_cast<std::size_t>(i)];
    t.strides[i] = view.strides[static_cast<std::size_t>(i)];
  }
  return t;
}

/// The C descriptor of a C++ attention call.
flashjit_attention c_attention(const Attention& a) {
  flashjit_attention c;
  flashjit_attention_init(&c);
  c.batch = a.batch;
  c.heads_q = a.heads_q;
  c.heads_kv = a.heads_kv;
  c.seqlen_q = a.seqlen_q;
  c.seqlen_k = a.seqlen_k;
  c.head_dim = a.head_dim;
  c.causal = a.causal ? 1 : 0;
  c.window_left = a.window_left;
  c.window_right = a.window_right;
  c.scale = a.scale.value_or(0.0f);
  c.softcap = a.softcap;
  c.deterministic = a.deterministic ? 1 : 0;
  return c;
}

/// One case's inputs, exactly representable in its dtype, in its layout.
struct Inputs {
  RoundedTensor q, k, v, dout;
};
Inputs make_inputs(const BackwardCase& c) {
  const reference::Problem& p = c.problem;
  using case_inputs::rounded_random;
  return {rounded_random(p.q_shape(), c.layout, c.seed, c.dtype),
          rounded_random(p.kv_shape(), c.layout, c.seed + 1, c.dtype),
          rounded_random(p.kv_shape(), c.layout, c.seed + 2, c.dtype),
          rounded_random(p.q_shape(), c.layout, c.seed + 3, c.dtype)};
}

/// A forward's and a backward's outputs, poisoned with NaN until written.
struct Outputs {
  std::vector<std::uint16_t> o, dq, dk, dv;
  std::vector<float> lse;
};
Outputs poisoned_outputs(const reference::Problem& p) {
  constexpr std::uint16_t kNaN16 = 0xffff;  // NaN in fp16 and in bf16
  const auto q_count = static_cast<std::size_t>(p.batch * p.seqlen_q * p.heads_q * p.head_dim);
  const auto kv_count = static_cast<std::size_t>(p.batch * p.seqlen_k * p.heads_kv * p.head_dim);
  const auto lse_count = static_cast<std::size_t>(p.batch * p.heads_q * p.seqlen_q);
  return {std::vector<std::uint16_t>(q_count, kNaN16), std::vector<std::uint16_t>(q_count, kNaN16),
          std::vector<std::uint16_t>(kv_count, kNaN16),
          std::vector<std::uint16_t>(kv_count, kNaN16),
          std::vector<float>(lse_count, std::numeric_limits<float>::quiet_NaN())};
}

/// The C++ views of a case's tensors (host memory: the emulator's).
struct Views {
  TensorView q, k, v, o, lse, dout, dq, dk, dv;
};
Views views_of(const BackwardCase& c, Inputs& in, Outputs& out) {
  const reference::Problem& p = c.problem;
  auto view = [&](std::vector<std::uint16_t>& bits, std::int64_t seqlen, std::int64_t heads) {
    return attention_tensor(bits.data(), c.dtype, case_inputs::library_layout(c.layout), p.batch,
                            seqlen, heads, p.head_dim);
  };
  return {view(in.q.bits, p.seqlen_q, p.heads_q),    view(in.k.bits, p.seqlen_k, p.heads_kv),
          view(in.v.bits, p.seqlen_k, p.heads_kv),   view(out.o, p.seqlen_q, p.heads_q),
          lse_tensor(out.lse.data(), c.attention()), view(in.dout.bits, p.seqlen_q, p.heads_q),
          view(out.dq, p.seqlen_q, p.heads_q),       view(out.dk, p.seqlen_k, p.heads_kv),
          view(out.dv, p.seqlen_k, p.heads_kv)};
}

/// Forward, then backward, through the C API.
Outputs run_c(const BackwardCase& c, Inputs& in) {
  Outputs out = poisoned_outputs(c.problem);
  const Views views = views_of(c, in, out);
  const flashjit_attention attn = c_attention(c.attention());
  const flashjit_tensor q = c_tensor(views.q), k = c_tensor(views.k), v = c_tensor(views.v),
                        o = c_tensor(views.o), lse = c_tensor(views.lse),
                        dout = c_tensor(views.dout), dq = c_tensor(views.dq),
                        dk = c_tensor(views.dk), dv = c_tensor(views.dv);
  const CRuntime runtime;
  REQUIRE_MESSAGE(
      flashjit_attention_forward(runtime, &attn, &q, &k, &v, &o, &lse, nullptr) == FLASHJIT_OK,
      flashjit_last_error());
  REQUIRE_MESSAGE(flashjit_attention_backward(runtime, &attn, &q, &k, &v, &o, &lse, &dout, &dq, &dk,
                                              &dv, nullptr) == FLASHJIT_OK,
                  flashjit_last_error());
  return out;
}

/// Forward, then backward, through the C++ API.
Outputs run_cpp(const BackwardCase& c, Inputs& in) {
  Outputs out = poisoned_outputs(c.problem);
  const Views v = views_of(c, in, out);
  cpp_emulator().forward(c.attention(), v.q, v.k, v.v, v.o, v.lse);
  cpp_emulator().backward(c.attention(), v.q, v.k, v.v, v.o, v.lse, v.dout, v.dq, v.dk, v.dv);
  return out;
}

std::vector<double> values_of(DType dtype, const std::vector<std::uint16_t>& bits) {
  std::vector<double> values;
  for (std::uint16_t b : bits) values.push_back(case_inputs::from_bits(dtype, b));
  return values;
}

/// The C API's results against the float64 reference, with the emulated suites' bounds: twice
/// the error of the plain computation in the input dtype.
void check_against_reference(const BackwardCase& c, const Inputs& in, const Outputs& out) {
  const reference::Problem& p = c.problem;
  const reference::ForwardResult exact = reference::forward(
      p, in.q.values.view(), in.k.values.view(), in.v.values.view(), {}, c.layout);
  const ForwardCase forward_case{
      .problem = p, .dtype = c.dtype, .layout = c.layout, .seed = c.seed};
  const double o_bound = std::max(2 * plain_attention_error(forward_case), 1e-6);
  CHECK_MESSAGE(
      reference::check_close(values_of(c.dtype, out.o), exact.out.values, o_bound, "O").ok,
      "O bound " << o_bound);
  constexpr double kLseTolerance = 1e-4;  // fp32 from exact inputs, as attention_case's
  const reference::CheckResult lse = reference::check_close(out.lse, exact.lse, kLseTolerance);
  CHECK_MESSAGE(lse.ok, lse);

  const reference::Gradients grads =
      reference::backward(p, in.q.values.view(), in.k.values.view(), in.v.values.view(),
                          in.dout.values.view(), c.layout);
  const PlainBackwardErrors plain = plain_backward_errors(c);
  const struct {
    const char* name;
    const std::vector<std::uint16_t>& actual;
    const reference::Tensor4& expected;
    double plain_error;
  } gradients[] = {{"dQ", out.dq, grads.dq, plain.dq},
                   {"dK", out.dk, grads.dk, plain.dk},
                   {"dV", out.dv, grads.dv, plain.dv}};
  for (const auto& g : gradients) {
    const double bound = std::max(2 * g.plain_error, 1e-5);
    const reference::CheckResult check =
        reference::check_close(values_of(c.dtype, g.actual), g.expected.values, bound, g.name);
    CHECK_MESSAGE(check.ok, g.name << " bound " << bound << ": " << check);
  }
}

bool bytes_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_CASE("C API: forward and backward give the C++ API's bits and the reference's values") {
  BackwardCase c = make_case(2, 1, 33, 47, 64);  // GQA 2:1, ragged lengths
  SUBCASE("causal, head dim 64, [B, L, H, D]") { c.problem.causal = true; }
  SUBCASE("window, softcap, scale, head dim 128, [B, H, L, D]") {
    c = make_case(1, 1, 40, 40, 128);
    c.layout = reference::Layout::bhsd;
    c.problem.window_left = 16;
    c.problem.window_right = 4;
    c.problem.softcap = 20;
    c.problem.softmax_scale = 0.3;
  }
  SUBCASE("batch 2, fp16") {
    c.problem.batch = 2;
    c.dtype = DType::f16;
  }
  // Another dQ kernel, whose sums round differently: dropped on the way, the flag shows in dQ.
  SUBCASE("deterministic") { c.deterministic = true; }
  INFO(c.name());
  Inputs in = make_inputs(c);
  const Outputs from_c = run_c(c, in);
  const Outputs from_cpp = run_cpp(c, in);
  CHECK(from_c.o == from_cpp.o);
  CHECK(bytes_equal(from_c.lse, from_cpp.lse));
  CHECK(from_c.dq == from_cpp.dq);
  CHECK(from_c.dk == from_cpp.dk);
  CHECK(from_c.dv == from_cpp.dv);
  check_against_reference(c, in, from_c);
}

TEST_CASE("C API: learnable sinks and their gradient give the C++ API's bits") {
  const BackwardCase c = make_case(2, 1, 21, 30, 64);
  Inputs in = make_inputs(c);
  std::vector<float> sinks = {0.75f, -0.5f}, grad_c(2, -1.0f), grad_cpp(2, -2.0f);
  // Through C: forward, then backward with the sinks' gradient.
  Outputs from_c = poisoned_outputs(c.problem);
  const Views cv = views_of(c, in, from_c);
  const flashjit_tensor sinks_t = c_tensor(TensorView::contiguous(sinks.data(), DType::f32, {2}));
  const flashjit_tensor grad_t = c_tensor(TensorView::contiguous(grad_c.data(), DType::f32, {2}));
  flashjit_attention attn = c_attention(c.attention());
  attn.sinks = &sinks_t;
  attn.sinks_grad = &grad_t;
  const flashjit_tensor q = c_tensor(cv.q), k = c_tensor(cv.k), v = c_tensor(cv.v),
                        o = c_tensor(cv.o), lse = c_tensor(cv.lse), dout = c_tensor(cv.dout),
                        dq = c_tensor(cv.dq), dk = c_tensor(cv.dk), dv = c_tensor(cv.dv);
  CRuntime runtime;
  REQUIRE(flashjit_attention_forward(runtime, &attn, &q, &k, &v, &o, &lse, nullptr) ==
          FLASHJIT_OK);
  REQUIRE(flashjit_attention_backward(runtime, &attn, &q, &k, &v, &o, &lse, &dout, &dq, &dk, &dv,
                                      nullptr) == FLASHJIT_OK);
  // Through C++, the same call.
  Outputs from_cpp = poisoned_outputs(c.problem);
  const Views pv = views_of(c, in, from_cpp);
  Attention a = c.attention();
  a.sinks = TensorView::contiguous(sinks.data(), DType::f32, {2});
  a.sinks_grad = TensorView::contiguous(grad_cpp.data(), DType::f32, {2});
  cpp_emulator().forward(a, pv.q, pv.k, pv.v, pv.o, pv.lse);
  cpp_emulator().backward(a, pv.q, pv.k, pv.v, pv.o, pv.lse, pv.dout, pv.dq, pv.dk, pv.dv);
  CHECK(from_c.o == from_cpp.o);
  CHECK(bytes_equal(from_c.lse, from_cpp.lse));
  CHECK(from_c.dq == from_cpp.dq);
  CHECK(bytes_equal(grad_c, grad_cpp));
  CHECK(grad_c[0] != -1.0f);  // written
  // A sink of the wrong shape is named.
  const flashjit_tensor wrong = c_tensor(TensorView::contiguous(sinks.data(), DType::f32, {1}));
  attn.sinks = &wrong;
  CHECK(flashjit_attention_forward(runtime, &attn, &q, &k, &v, &o, &lse, nullptr) ==
        FLASHJIT_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashjit_last_error()).find("'attention.sinks.shape'") != std::string::npos);
}

TEST_CASE("C API: dropout gives the C++ API's bits, and a bad probability is named") {
  const BackwardCase c = make_case(2, 1, 21, 30, 64);
  Inputs in = make_inputs(c);
  Outputs from_c = poisoned_outputs(c.problem);
  const Views cv = views_of(c, in, from_c);
  flashjit_attention attn = c_attention(c.attention());
  CHECK(attn.dropout_p == 0.0f);  // init: none
  attn.dropout_p = 0.25f;
  attn.dropout_seed = 0x1234'5678'9abcull;
  attn.dropout_offset = 12;
  const flashjit_tensor q = c_tensor(cv.q), k = c_tensor(cv.k), v = c_tensor(cv.v),
                        o = c_tensor(cv.o), lse = c_tensor(cv.lse), dout = c_tensor(cv.dout),
                        dq = c_tensor(cv.dq), dk = c_tensor(cv.dk), dv = c_tensor(cv.dv);
  CRuntime runtime;
  REQUIRE(flashjit_attention_forward(runtime, &attn, &q, &k, &v, &o, &lse, nullptr) ==
          FLASHJIT_OK);
  REQUIRE(flashjit_attention_backward(runtime, &attn, &q, &k, &v, &o, &lse, &dout, &dq, &dk, &dv,
                                      nullptr) == FLASHJIT_OK);
  Outputs from_cpp = poisoned_outputs(c.problem);
  const Views pv = views_of(c, in, from_cpp);
  Attention a = c.attention();
  a.dropout_p = 0.25f;
  a.dropout_seed = 0x1234'5678'9abcull;
  a.dropout_offset = 12;
  cpp_emulator().forward(a, pv.q, pv.k, pv.v, pv.o, pv.lse);
  cpp_emulator().backward(a, pv.q, pv.k, pv.v, pv.o, pv.lse, pv.dout, pv.dq, pv.dk, pv.dv);
  CHECK(from_c.o == from_cpp.o);
  CHECK(from_c.dq == from_cpp.dq);
  CHECK(from_c.dv == from_cpp.dv);
  attn.dropout_p = 1.0f;
  CHECK(flashjit_attention_forward(runtime, &attn, &q, &k, &v, &o, &lse, nullptr) ==
        FLASHJIT_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashjit_last_error()).find("attention.dropout_p") != std::string::npos);
}

/// A small valid forward/backward call in C, to break one argument at a time.
struct Call {
  BackwardCase c = make_case(1, 1, 8, 8, 64);
  Inputs in = make_inputs(c);
  Outputs out = poisoned_outputs(c.problem);
  Views views = views_of(c, in, out);
  flashjit_attention attn = c_attention(c.attention());
  flashjit_tensor q = c_tensor(views.q), k = c_tensor(views.k), v = c_tensor(views.v),
                  o = c_tensor(views.o), lse = c_tensor(views.lse), dout = c_tensor(views.dout),
                  dq = c_tensor(views.dq), dk = c_tensor(views.dk), dv = c_tensor(views.dv);
  const flashjit_attention* attn_arg = &attn;
  const flashjit_tensor *q_arg = &q, *v_arg = &v, *lse_arg = &lse, *dq_arg = &dq;
  CRuntime runtime;
  flashjit_runtime* runtime_arg = runtime;

  flashjit_status forward() const {
    return flashjit_attention_forward(runtime_arg, attn_arg, q_arg, &k, v_arg, &o, lse_arg,
                                      nullptr);
  }
  flashjit_status backward() const {
    return flashjit_attention_backward(runtime_arg, attn_arg, q_arg, &k, v_arg, &o, lse_arg, &dout,
                                       dq_arg, &dk, &dv, nullptr);
  }
  /// Whether o and lse still hold their poison: the failed call launched nothing.
  bool outputs_untouched() const {
    return std::all_of(out.o.begin(), out.o.end(), [](std::uint16_t x) { return x == 0xffff; }) &&
           std::all_of(out.lse.begin(), out.lse.end(), [](float x) { return std::isnan(x); });
  }
};

/// Checks that the last call failed with `status` and a message naming `argument`.
void check_failure(flashjit_status actual, flashjit_status expected, const std::string& argument) {
  const std::string message = flashjit_last_error();
  CHECK_MESSAGE(actual == expected, flashjit_status_name(actual) << ": " << message);
  CHECK_MESSAGE(message.find("'" + argument + "'") != std::string::npos, message);
}

TEST_CASE("C API: a bad forward argument returns its code, names it, and launches nothing") {
  Call call;
  std::string argument;
  SUBCASE("NULL runtime") {
    call.runtime_arg = nullptr;
    argument = "runtime";
  }
  SUBCASE("NULL attention") {
    call.attn_arg = nullptr;
    argument = "attention";
  }
  SUBCASE("NULL q") {
    call.q_arg = nullptr;
    argument = "q";
  }
  SUBCASE("NULL v") {
    call.v_arg = nullptr;
    argument = "v";
  }
  SUBCASE("bad dtype code") {
    call.q.dtype = 7;
    argument = "q.dtype";
  }
  SUBCASE("negative dtype code") {
    call.k.dtype = -1;
    argument = "k.dtype";
  }
  SUBCASE("rank above 4") {
    call.o.rank = 5;
    argument = "o.rank";
  }
  SUBCASE("negative rank") {
    call.v.rank = -1;
    argument = "v.rank";
  }
  SUBCASE("fp32 inputs") {
    call.q.dtype = FLASHJIT_DTYPE_F32;
    argument = "q.dtype";  // valid code, refused by the op
  }
  SUBCASE("head_dim not a multiple of 8") {
    call.attn.head_dim = 12;
    argument = "attention.head_dim";
  }
  SUBCASE("head_dim above 256") {
    call.attn.head_dim = 264;
    argument = "attention.head_dim";
  }
  SUBCASE("NaN scale") {
    call.attn.scale = std::nanf("");
    argument = "attention.scale";
  }
  SUBCASE("wrong lse shape") {
    ++call.lse.shape[2];
    argument = "lse.shape";
  }
  SUBCASE("bf16 lse") {
    call.lse.dtype = FLASHJIT_DTYPE_BF16;
    argument = "lse.dtype";
  }
  CAPTURE(argument);
  check_failure(call.forward(), FLASHJIT_ERROR_INVALID_ARGUMENT, argument);
  CHECK(call.outputs_untouched());
}

TEST_CASE("C API: a bad backward argument returns its code and names it") {
  Call call;
  std::string argument;
  SUBCASE("NULL lse") {
    call.lse_arg = nullptr;
    argument = "lse";
  }
  SUBCASE("NULL dq") {
    call.dq_arg = nullptr;
    argument = "dq";
  }
  SUBCASE("bad dq rank") {
    call.dq.rank = 9;
    argument = "dq.rank";
  }
  SUBCASE("wrong lse shape") {
    call.lse.shape[0] = 2;
    argument = "lse.shape";
  }
  CAPTURE(argument);
  check_failure(call.backward(), FLASHJIT_ERROR_INVALID_ARGUMENT, argument);
}

TEST_CASE("C API: prepare makes a call's kernels ready, and names a bad argument") {
  Call call;
  CHECK_MESSAGE(
      flashjit_attention_prepare(call.runtime, &call.attn, FLASHJIT_DTYPE_BF16, 1) == FLASHJIT_OK,
      flashjit_last_error());
  check_failure(flashjit_attention_prepare(call.runtime, &call.attn, FLASHJIT_DTYPE_F32, 1),
                FLASHJIT_ERROR_INVALID_ARGUMENT, "dtype");
  // e4m3: the fp8 forward, which has no backward, and needs an sm_89 or later (this is an sm_80).
  check_failure(flashjit_attention_prepare(call.runtime, &call.attn, FLASHJIT_DTYPE_E4M3, 1),
                FLASHJIT_ERROR_INVALID_ARGUMENT, "backward");
  check_failure(flashjit_attention_prepare(call.runtime, &call.attn, FLASHJIT_DTYPE_E4M3, 0),
                FLASHJIT_ERROR_INVALID_ARGUMENT, "dtype");
  call.attn.head_dim = 7;
  check_failure(flashjit_attention_prepare(call.runtime, &call.attn, FLASHJIT_DTYPE_BF16, 0),
                FLASHJIT_ERROR_INVALID_ARGUMENT, "attention.head_dim");
  check_failure(flashjit_attention_prepare(nullptr, &call.attn, FLASHJIT_DTYPE_BF16, 0),
                FLASHJIT_ERROR_INVALID_ARGUMENT, "runtime");
  REQUIRE(call.forward() != FLASHJIT_OK);  // the same attention refused by the call itself
}

TEST_CASE("C API: lse may be skipped in the forward, and a scale <= 0 means unset") {
  Call call;
  REQUIRE_MESSAGE(call.forward() == FLASHJIT_OK, flashjit_last_error());
  const std::vector<std::uint16_t> unset = call.out.o;
  std::fill(call.out.o.begin(), call.out.o.end(), std::uint16_t{0xffff});
  std::fill(call.out.lse.begin(), call.out.lse.end(), std::numeric_limits<float>::quiet_NaN());

  SUBCASE("NULL lse") {
    call.lse_arg = nullptr;
    REQUIRE(call.forward() == FLASHJIT_OK);
    CHECK(call.out.o == unset);
    CHECK(std::all_of(call.out.lse.begin(), call.out.lse.end(),
                      [](float x) { return std::isnan(x); }));
  }
  SUBCASE("lse with NULL data") {
    call.lse.data = nullptr;
    call.lse.dtype = 42;  // not looked at: the tensor is skipped
    REQUIRE(call.forward() == FLASHJIT_OK);
    CHECK(call.out.o == unset);
  }
  SUBCASE("negative scale") {
    call.attn.scale = -2.0f;
    REQUIRE(call.forward() == FLASHJIT_OK);
    CHECK(call.out.o == unset);
  }
  SUBCASE("a scale of its own") {
    call.attn.scale = 0.5f;
    REQUIRE(call.forward() == FLASHJIT_OK);
    CHECK(call.out.o != unset);
  }
}

TEST_CASE("C API: an emulator runtime opens with any tuning policy") {
  for (const int tuning : {FLASHJIT_TUNING_OFF, FLASHJIT_TUNING_CACHED, FLASHJIT_TUNING_AUTO}) {
    flashjit_runtime_options options;
    flashjit_runtime_options_init(&options);
    options.backend = FLASHJIT_BACKEND_EMULATOR;
    options.tuning = tuning;
    flashjit_runtime* runtime = nullptr;
    CHECK_MESSAGE(flashjit_runtime_create(&options, &runtime) == FLASHJIT_OK,
                  flashjit_last_error());
    CHECK(runtime != nullptr);
    flashjit_runtime_destroy(runtime);
  }
}

TEST_CASE("C API: an emulator modelling sm_90a runs the Hopper forward, as the C++ API's does") {
  flashjit_runtime_options options;
  flashjit_runtime_options_init(&options);
  options.backend = FLASHJIT_BACKEND_EMULATOR;
  options.emulated_arch = "sm_90a";
  flashjit_runtime* runtime = nullptr;
  REQUIRE_MESSAGE(flashjit_runtime_create(&options, &runtime) == FLASHJIT_OK,
                  flashjit_last_error());
  const BackwardCase c = make_case(2, 1, 70, 90, 64);  // head dim 64: the TMA forward
  Inputs in = make_inputs(c);
  Outputs from_c = poisoned_outputs(c.problem);
  const Views views = views_of(c, in, from_c);
  const flashjit_attention attn = c_attention(c.attention());
  const flashjit_tensor q = c_tensor(views.q), k = c_tensor(views.k), v = c_tensor(views.v),
                        o = c_tensor(views.o), lse = c_tensor(views.lse);
  const flashjit_status status =
      flashjit_attention_forward(runtime, &attn, &q, &k, &v, &o, &lse, nullptr);
  flashjit_runtime_destroy(runtime);
  REQUIRE_MESSAGE(status == FLASHJIT_OK, flashjit_last_error());

  Runtime hopper(RuntimeOptions{.backend = Backend::emulator, .emulated_arch = "sm_90a"});
  hopper.reset_emulated_work();
  Outputs from_cpp = poisoned_outputs(c.problem);
  const Views cpp_views = views_of(c, in, from_cpp);
  hopper.forward(c.attention(), cpp_views.q, cpp_views.k, cpp_views.v, cpp_views.o, cpp_views.lse);
  REQUIRE(hopper.emulated_work().size() == 1);
  CHECK(hopper.emulated_work().front().kernel.find(".tma.") != std::string::npos);
  CHECK(from_c.o == from_cpp.o);
  CHECK(bytes_equal(from_c.lse, from_cpp.lse));
}

TEST_CASE("C API: bad runtime options are refused by name") {
  flashjit_runtime_options options;
  flashjit_runtime_options_init(&options);
  options.backend = FLASHJIT_BACKEND_EMULATOR;
  // Not NULL: a failed call must overwrite it.
  flashjit_runtime* runtime = reinterpret_cast<flashjit_runtime*>(&options);
  std::string argument;
  SUBCASE("bad backend code") {
    options.backend = 2;
    argument = "options.backend";
  }
  SUBCASE("negative backend code") {
    options.backend = -1;
    argument = "options.backend";
  }
  SUBCASE("bad tuning code") {
    options.tuning = 3;
    argument = "options.tuning";
  }
  SUBCASE("negative tuning code") {
    options.tuning = -1;
    argument = "options.tuning";
  }
  SUBCASE("an arch the emulator does not model") {
    options.emulated_arch = "sm_75";
    argument = "emulated_arch";
  }
  CAPTURE(argument);
  check_failure(flashjit_runtime_create(&options, &runtime), FLASHJIT_ERROR_INVALID_ARGUMENT,
                argument);
  CHECK(runtime == nullptr);
  check_failure(flashjit_runtime_create(&options, nullptr), FLASHJIT_ERROR_INVALID_ARGUMENT, "out");
}

TEST_CASE("C API: the cuda backend without a GPU says which is missing") {
  const SystemInfo system = query_system();
  flashjit_runtime_options options;
  flashjit_runtime_options_init(&options);
  options.backend = FLASHJIT_BACKEND_CUDA;
  const flashjit_runtime_options* const passed_options[] = {&options, nullptr};  // NULL: defaults
  for (const flashjit_runtime_options* passed : passed_options) {
    flashjit_runtime* runtime = nullptr;
    const flashjit_status status = flashjit_runtime_create(passed, &runtime);
    if (!system.devices.empty()) {  // a GPU machine: the cuda backend, the default, opens
      CHECK_MESSAGE(status == FLASHJIT_OK, flashjit_last_error());
      flashjit_runtime_destroy(runtime);
      continue;
    }
    CHECK_MESSAGE((status == FLASHJIT_ERROR_NO_DRIVER || status == FLASHJIT_ERROR_NO_DEVICE),
                  flashjit_status_name(status));
    CHECK(runtime == nullptr);
    CHECK(std::strlen(flashjit_last_error()) > 0);
  }
}

TEST_CASE("C API: memory") {
  const CRuntime runtime;
  const std::vector<std::uint8_t> host = {1, 2, 3, 4, 5, 6, 7};
  void* data = nullptr;
  REQUIRE(flashjit_allocate(runtime, host.size(), &data) == FLASHJIT_OK);
  REQUIRE(data != nullptr);
  std::vector<std::uint8_t> back(host.size());
  CHECK(flashjit_copy_to_device(runtime, data, host.data(), host.size()) == FLASHJIT_OK);
  CHECK(flashjit_synchronize(runtime, nullptr) == FLASHJIT_OK);
  CHECK(flashjit_copy_to_host(runtime, back.data(), data, back.size()) == FLASHJIT_OK);
  CHECK(back == host);
  CHECK(flashjit_free(runtime, data) == FLASHJIT_OK);
  check_failure(flashjit_free(runtime, data), FLASHJIT_ERROR_INVALID_ARGUMENT, "data");  // twice
  CHECK(flashjit_free(runtime, nullptr) == FLASHJIT_OK);
  check_failure(flashjit_allocate(runtime, 8, nullptr), FLASHJIT_ERROR_INVALID_ARGUMENT, "out");
  check_failure(flashjit_allocate(nullptr, 8, &data), FLASHJIT_ERROR_INVALID_ARGUMENT, "runtime");
  CHECK(data == nullptr);
  check_failure(flashjit_copy_to_host(runtime, nullptr, back.data(), 1),
                FLASHJIT_ERROR_INVALID_ARGUMENT, "dst");
  check_failure(flashjit_copy_to_device(runtime, back.data(), nullptr, 1),
                FLASHJIT_ERROR_INVALID_ARGUMENT, "src");
  // Left allocated: freed with the runtime at scope exit.
  REQUIRE(flashjit_allocate(runtime, 64, &data) == FLASHJIT_OK);
}

TEST_CASE(
    "C API: a copy past the end of an allocation is refused, too large an allocation is "
    "OUT_OF_MEMORY") {
  const CRuntime runtime;
  void* data = nullptr;
  REQUIRE(flashjit_allocate(runtime, 256, &data) == FLASHJIT_OK);
  std::vector<std::uint8_t> host(4096, 7);
  auto* bytes = static_cast<std::uint8_t*>(data);
  check_failure(flashjit_copy_to_device(runtime, data, host.data(), 4096),
                FLASHJIT_ERROR_INVALID_ARGUMENT, "bytes");
  CHECK(std::string(flashjit_last_error()).find("3840 bytes past its end") != std::string::npos);
  check_failure(flashjit_copy_to_host(runtime, host.data(), bytes + 200, 57),
                FLASHJIT_ERROR_INVALID_ARGUMENT, "bytes");
  // Up to the last byte is fine, from the start or from inside.
  CHECK(flashjit_copy_to_device(runtime, bytes + 200, host.data(), 56) == FLASHJIT_OK);
  CHECK(flashjit_copy_to_host(runtime, host.data(), data, 256) == FLASHJIT_OK);
  CHECK(host[200] == 7);
  // Freed memory is no longer the runtime's to judge; a new block is judged by its own size.
  REQUIRE(flashjit_free(runtime, data) == FLASHJIT_OK);
  REQUIRE(flashjit_allocate(runtime, 16, &data) == FLASHJIT_OK);
  check_failure(flashjit_copy_to_device(runtime, data, host.data(), 17),
                FLASHJIT_ERROR_INVALID_ARGUMENT, "bytes");

  void* huge = nullptr;
  const flashjit_status status = flashjit_allocate(runtime, std::size_t(1) << 62, &huge);
  CHECK_MESSAGE(status == FLASHJIT_ERROR_OUT_OF_MEMORY, flashjit_status_name(status));
  CHECK(huge == nullptr);
  CHECK(std::string(flashjit_last_error()).find("could not allocate") != std::string::npos);
}

TEST_CASE("C API: the last error is per thread and kept until the next failure") {
  const auto fail_with_null_runtime = [] { return flashjit_synchronize(nullptr, nullptr); };
  std::string fresh_thread;
  std::thread([&] { fresh_thread = flashjit_last_error(); }).join();
  CHECK(fresh_thread.empty());  // no call has failed on that thread

  REQUIRE(fail_with_null_runtime() == FLASHJIT_ERROR_INVALID_ARGUMENT);
  const std::string first = flashjit_last_error();
  CHECK(first.find("'runtime'") != std::string::npos);

  // Another thread's failures are its own.
  std::string other_before, other_after;
  std::thread([&] {
    other_before = flashjit_last_error();
    flashjit_runtime_create(nullptr, nullptr);
    other_after = flashjit_last_error();
  }).join();
  CHECK(other_before.empty());
  CHECK(other_after.find("'out'") != std::string::npos);
  CHECK(flashjit_last_error() == first);

  // A successful call leaves the message; the next failure replaces it.
  const CRuntime runtime;
  REQUIRE(flashjit_synchronize(runtime, nullptr) == FLASHJIT_OK);
  CHECK(flashjit_last_error() == first);
  REQUIRE(flashjit_free(runtime, &fresh_thread) == FLASHJIT_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashjit_last_error()).find("'data'") != std::string::npos);
}

TEST_CASE("C API: status names") {
  std::set<std::string> names;
  for (int code = FLASHJIT_OK; code <= FLASHJIT_ERROR_OUT_OF_MEMORY; ++code) {
    const std::string name = flashjit_status_name(static_cast<flashjit_status>(code));
    CHECK(name.rfind("FLASHJIT_", 0) == 0);
    CHECK(name != "FLASHJIT_UNKNOWN_STATUS");
    names.insert(name);
  }
  CHECK(names.size() == FLASHJIT_ERROR_OUT_OF_MEMORY + 1);  // one name each
  CHECK(std::string(flashjit_status_name(FLASHJIT_OK)) == "FLASHJIT_OK");
  CHECK(std::string(flashjit_status_name(FLASHJIT_ERROR_NO_DEVICE)) == "FLASHJIT_ERROR_NO_DEVICE");
  CHECK(std::string(flashjit_status_name(FLASHJIT_ERROR_INTERNAL)) == "FLASHJIT_ERROR_INTERNAL");
  CHECK(std::string(flashjit_status_name(FLASHJIT_ERROR_OUT_OF_MEMORY)) ==
        "FLASHJIT_ERROR_OUT_OF_MEMORY");
  CHECK(std::string(flashjit_status_name(static_cast<flashjit_status>(12))) ==
        "FLASHJIT_UNKNOWN_STATUS");
  // The codes are ABI: fixed numbers.
  CHECK(FLASHJIT_ERROR_INVALID_ARGUMENT == 1);
  CHECK(FLASHJIT_ERROR_KERNEL_FAULT == 9);
  CHECK(FLASHJIT_ERROR_INTERNAL == 10);
  CHECK(FLASHJIT_ERROR_OUT_OF_MEMORY == 11);
}

TEST_CASE("C API: defaults and version are the C++ API's") {
  const RuntimeOptions cpp_options;
  flashjit_runtime_options options;
  std::memset(&options, 0x5a, sizeof options);
  flashjit_runtime_options_init(&options);
  CHECK(options.device == cpp_options.device);
  CHECK(options.backend == FLASHJIT_BACKEND_CUDA);
  CHECK(options.tuning == FLASHJIT_TUNING_CACHED);
  CHECK(cpp_options.tuning == TuningPolicy::cached);
  CHECK(options.emulated_arch == nullptr);
  CHECK(cpp_options.emulated_arch == "sm_80");

  const Attention cpp;
  flashjit_attention attn;
  std::memset(&attn, 0x5a, sizeof attn);
  flashjit_attention_init(&attn);
  CHECK(attn.batch == cpp.batch);
  CHECK(attn.heads_q == cpp.heads_q);
  CHECK(attn.heads_kv == cpp.heads_kv);
  CHECK(attn.seqlen_q == cpp.seqlen_q);
  CHECK(attn.seqlen_k == cpp.seqlen_k);
  CHECK(attn.head_dim == cpp.head_dim);
  CHECK(attn.causal == 0);
  CHECK(attn.window_left == -1);
  CHECK(attn.window_right == -1);
  CHECK(attn.scale == 0.0f);  // unset
  CHECK(attn.softcap == cpp.softcap);
  CHECK(attn.deterministic == 0);
  CHECK(attn.score_mod == nullptr);
  CHECK(attn.mask_mod == nullptr);
  CHECK(attn.captures == nullptr);
  CHECK(attn.num_captures == 0);
  CHECK(attn.sinks == nullptr);
  CHECK(attn.sinks_grad == nullptr);

  flashjit_runtime_options_init(nullptr);  // ignored, as documented
  flashjit_attention_init(nullptr);
  flashjit_runtime_destroy(nullptr);
  CHECK(std::string(flashjit_version()) == kVersion);
}

TEST_CASE("C API: kept messages are taken in order, with their kinds, then none") {
  flashjit_keep_messages(1);
  flashjit::detail::emit_message(flashjit::detail::MessageKind::notice, "compiling a kernel");
  CHECK(flashjit::detail::warn_once("c-api-test-topic", "a problem worked around"));
  CHECK_FALSE(flashjit::detail::warn_once("c-api-test-topic", "given once per topic"));
  int kind = -1;
  const char* text = nullptr;
  REQUIRE(flashjit_take_message(&kind, &text) == 1);
  CHECK(kind == FLASHJIT_MESSAGE_NOTICE);
  CHECK(std::string(text) == "compiling a kernel");
  REQUIRE(flashjit_take_message(&kind, &text) == 1);
  CHECK(kind == FLASHJIT_MESSAGE_WARNING);
  CHECK(std::string(text) == "a problem worked around");
  CHECK(flashjit_take_message(&kind, &text) == 0);
  CHECK(flashjit_take_message(nullptr, &text) == 0);
  flashjit_keep_messages(0);  // back to stderr for the other tests
  flashjit::detail::emit_message(flashjit::detail::MessageKind::notice, "printed, not kept");
  CHECK(flashjit_take_message(&kind, &text) == 0);
}

TEST_CASE("C API: score and mask modifiers reach the kernel, and bad ones are named") {
  // On 8 x 8, "kv_idx <= q_idx" is causal: the modifier must give the built-in mask's bits.
  Call causal;
  causal.attn.causal = 1;
  REQUIRE(causal.forward() == FLASHJIT_OK);
  Call modified;
  const std::string text = "kv_idx <= q_idx";  // the C API reads it during the call only
  modified.attn.mask_mod = text.c_str();
  REQUIRE(modified.forward() == FLASHJIT_OK);
  CHECK(modified.out.o == causal.out.o);
  CHECK(bytes_equal(modified.out.lse, causal.out.lse));

  Call bad;
  bad.attn.score_mod = "score; return 0";
  check_failure(bad.forward(), FLASHJIT_ERROR_INVALID_ARGUMENT, "attention.score_mod");
  CHECK(bad.outputs_untouched());
}

TEST_CASE("C API: captures reach the kernel by name, and missing or nameless ones are named") {
  // Two documents of 4 tokens: the mask reading captured ids must give the bits of the same
  // mask written with the indices.
  Call written;
  const std::string by_index = "q_idx / 4 == kv_idx / 4";
  written.attn.mask_mod = by_index.c_str();
  REQUIRE(written.forward() == FLASHJIT_OK);
  std::vector<std::int32_t> doc = {0, 0, 0, 0, 1, 1, 1, 1};
  flashjit_capture capture{
      "doc", {doc.data(), FLASHJIT_DTYPE_I32, 1, {8, 0, 0, 0}, {1, 0, 0, 0}}, nullptr};
  const std::string by_capture = "doc[q_idx] == doc[kv_idx]";
  Call captured;
  captured.attn.mask_mod = by_capture.c_str();
  captured.attn.captures = &capture;
  captured.attn.num_captures = 1;
  REQUIRE(captured.forward() == FLASHJIT_OK);
  CHECK(captured.out.o == written.out.o);
  CHECK(bytes_equal(captured.out.lse, written.out.lse));

  Call missing;
  missing.attn.mask_mod = by_capture.c_str();
  check_failure(missing.forward(), FLASHJIT_ERROR_INVALID_ARGUMENT, "attention.mask_mod");
  CHECK(missing.outputs_untouched());
  Call nameless;
  nameless.attn.mask_mod = by_capture.c_str();
  flashjit_capture unnamed = capture;
  unnamed.name = nullptr;
  nameless.attn.captures = &unnamed;
  nameless.attn.num_captures = 1;
  check_failure(nameless.forward(), FLASHJIT_ERROR_INVALID_ARGUMENT, "attention.captures[0].name");
  CHECK(nameless.outputs_untouched());
}

TEST_CASE("C API: a capture count past the array is refused before any entry is read") {
  // One real entry ending where a page the process may not read begins: reading a second entry
  // would fault, so a call that returns at all did not read past the count's limit.
  const long page = ::sysconf(_SC_PAGESIZE);
  void* pages = ::mmap(nullptr, static_cast<std::size_t>(2 * page), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(pages != MAP_FAILED);
  REQUIRE(::mprotect(static_cast<char*>(pages) + page, static_cast<std::size_t>(page), PROT_NONE) ==
          0);
  auto* last = reinterpret_cast<flashjit_capture*>(static_cast<char*>(pages) + page) - 1;
  std::vector<std::int32_t> doc = {0, 0, 0, 0, 1, 1, 1, 1};
  *last = {"doc", {doc.data(), FLASHJIT_DTYPE_I32, 1, {8, 0, 0, 0}, {1, 0, 0, 0}}, nullptr};
  const std::string by_capture = "doc[q_idx] == doc[kv_idx]";
  for (int count : {FLASHJIT_MAX_CAPTURES + 1, std::numeric_limits<int>::max(), -1}) {
    INFO(count);
    Call call;
    call.attn.mask_mod = by_capture.c_str();
    call.attn.captures = last;
    call.attn.num_captures = count;
    check_failure(call.forward(), FLASHJIT_ERROR_INVALID_ARGUMENT, "attention.num_captures");
    CHECK(call.outputs_untouched());
  }
  Call one;  // the same entry with its true count runs
  one.attn.mask_mod = by_capture.c_str();
  one.attn.captures = last;
  one.attn.num_captures = 1;
  CHECK(one.forward() == FLASHJIT_OK);
  ::munmap(pages, static_cast<std::size_t>(2 * page));
}

/// Random fp32 values in [-2, 2), the same for the same seed.
std::vector<float> random_floats(std::size_t count, unsigned seed) {
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) {
    seed = seed * 1664525u + 1013904223u;
    values[i] = static_cast<float>(seed >> 8) / static_cast<float>(1 << 22) - 2.0f;
  }
  return values;
}

/// A C-allocated copy of `values` on the emulator runtime `rt`.
void* c_upload(flashjit_runtime* rt, const std::vector<float>& values) {
  void* data = nullptr;
  REQUIRE(flashjit_allocate(rt, values.size() * 4, &data) == FLASHJIT_OK);
  REQUIRE(flashjit_copy_to_device(rt, data, values.data(), values.size() * 4) == FLASHJIT_OK);
  return data;
}

std::vector<float> c_download(flashjit_runtime* rt, const void* data, std::size_t count) {
  std::vector<float> values(count);
  REQUIRE(flashjit_copy_to_host(rt, values.data(), data, count * 4) == FLASHJIT_OK);
  return values;
}

TEST_CASE("C API: merge_states and merge_state_in_place give the C++ API's bits") {
  CRuntime rt;
  Runtime& cpp = cpp_emulator();
  constexpr std::int64_t kParts = 3, kTokens = 7, kHeads = 2, kDim = 40;
  const auto parts_o = random_floats(kParts * kTokens * kHeads * kDim, 1);
  auto parts_lse = random_floats(kParts * kTokens * kHeads, 2);
  parts_lse[5] = -std::numeric_limits<float>::infinity();  // a partial that saw no key
  const std::size_t o_count = kTokens * kHeads * kDim, lse_count = kTokens * kHeads;
  const auto o_view = [&](void* data) {
    return TensorView::contiguous(data, DType::f32, {kTokens, kHeads, kDim});
  };
  const auto lse_view = [&](void* data) {
    return TensorView::contiguous(data, DType::f32, {kTokens, kHeads});
  };
  const TensorView c_parts_o =
      TensorView::contiguous(c_upload(rt, parts_o), DType::f32, {kParts, kTokens, kHeads, kDim});
  const TensorView c_parts_lse =
      TensorView::contiguous(c_upload(rt, parts_lse), DType::f32, {kParts, kTokens, kHeads});
  const TensorView c_o = o_view(c_upload(rt, std::vector<float>(o_count)));
  const TensorView c_lse = lse_view(c_upload(rt, std::vector<float>(lse_count)));
  const flashjit_tensor po = c_tensor(c_parts_o), pl = c_tensor(c_parts_lse), o = c_tensor(c_o),
                        lse = c_tensor(c_lse);
  REQUIRE_MESSAGE(flashjit_merge_states(rt, &po, &pl, &o, &lse, nullptr) == FLASHJIT_OK,
                  flashjit_last_error());

  DeviceBuffer cpp_parts_o = case_inputs::upload(cpp, parts_o);
  DeviceBuffer cpp_parts_lse = case_inputs::upload(cpp, parts_lse);
  DeviceBuffer cpp_o = cpp.allocate(o_count * 4), cpp_lse = cpp.allocate(lse_count * 4);
  cpp.merge_states(
      TensorView::contiguous(cpp_parts_o.data(), DType::f32, {kParts, kTokens, kHeads, kDim}),
      TensorView::contiguous(cpp_parts_lse.data(), DType::f32, {kParts, kTokens, kHeads}),
      o_view(cpp_o.data()), lse_view(cpp_lse.data()));
  std::vector<float> expected_o(o_count), expected_lse(lse_count);
  cpp.copy_to_host(expected_o.data(), cpp_o.data(), o_count * 4);
  cpp.copy_to_host(expected_lse.data(), cpp_lse.data(), lse_count * 4);
  CHECK(bytes_equal(c_download(rt, c_o.data, o_count), expected_o));
  CHECK(bytes_equal(c_download(rt, c_lse.data, lse_count), expected_lse));

  // In place: a = partial 0, b = partial 1, through both APIs.
  const TensorView c_a = o_view(c_upload(rt, parts_o)), c_a_lse = lse_view(c_upload(rt, parts_lse));
  TensorView c_b = o_view(static_cast<float*>(c_parts_o.data) + o_count);
  TensorView c_b_lse = lse_view(static_cast<float*>(c_parts_lse.data) + lse_count);
  const flashjit_tensor a = c_tensor(c_a), a_lse = c_tensor(c_a_lse), b = c_tensor(c_b),
                        b_lse = c_tensor(c_b_lse);
  REQUIRE_MESSAGE(flashjit_merge_state_in_place(rt, &a, &a_lse, &b, &b_lse, nullptr) == FLASHJIT_OK,
                  flashjit_last_error());
  cpp.copy_to_device(cpp_o.data(), parts_o.data(), o_count * 4);
  cpp.copy_to_device(cpp_lse.data(), parts_lse.data(), lse_count * 4);
  cpp.merge_state_in_place(o_view(cpp_o.data()), lse_view(cpp_lse.data()),
                           o_view(static_cast<float*>(cpp_parts_o.data()) + o_count),
                           lse_view(static_cast<float*>(cpp_parts_lse.data()) + lse_count));
  cpp.copy_to_host(expected_o.data(), cpp_o.data(), o_count * 4);
  cpp.copy_to_host(expected_lse.data(), cpp_lse.data(), lse_count * 4);
  CHECK(bytes_equal(c_download(rt, c_a.data, o_count), expected_o));
  CHECK(bytes_equal(c_download(rt, c_a_lse.data, lse_count), expected_lse));

  SUBCASE("NULL lse skips the merged LSE") {
    CHECK(flashjit_merge_states(rt, &po, &pl, &o, nullptr, nullptr) == FLASHJIT_OK);
  }
  SUBCASE("a bad argument returns its code, names it, and writes nothing") {
    const std::vector<float> before = c_download(rt, c_o.data, o_count);
    flashjit_tensor bad_lse = pl;
    bad_lse.dtype = FLASHJIT_DTYPE_BF16;
    CHECK(flashjit_merge_states(rt, &po, &bad_lse, &o, &lse, nullptr) ==
          FLASHJIT_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(flashjit_last_error()).find("partial_lse.dtype") != std::string::npos);
    CHECK(flashjit_merge_states(rt, &po, &pl, nullptr, &lse, nullptr) ==
          FLASHJIT_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(flashjit_last_error()).find("'o'") != std::string::npos);
    CHECK(flashjit_merge_state_in_place(rt, &a, &a_lse, &a, &b_lse, nullptr) ==
          FLASHJIT_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(flashjit_last_error()).find("'o_a'") != std::string::npos);
    CHECK(bytes_equal(c_download(rt, c_o.data, o_count), before));
  }
  SUBCASE("an int32 O is an invalid argument naming the tensor and the accepted dtypes") {
    const auto rejects_int32 = [](const std::function<flashjit_status()>& call,
                                  const std::string& argument) {
      CHECK(call() == FLASHJIT_ERROR_INVALID_ARGUMENT);
      const std::string message = flashjit_last_error();
      CHECK_MESSAGE(message.find(argument) != std::string::npos, message);
      CHECK_MESSAGE(message.find("fp16, bf16 or fp32") != std::string::npos, message);
    };
    flashjit_tensor int_po = po, int_o = o, int_a = a, int_b = b;
    int_po.dtype = int_o.dtype = int_a.dtype = int_b.dtype = FLASHJIT_DTYPE_I32;
    rejects_int32([&] { return flashjit_merge_states(rt, &int_po, &pl, &o, &lse, nullptr); },
                  "partial_o.dtype");
    rejects_int32([&] { return flashjit_merge_states(rt, &po, &pl, &int_o, &lse, nullptr); },
                  "o.dtype");
    rejects_int32(
        [&] { return flashjit_merge_state_in_place(rt, &int_a, &a_lse, &b, &b_lse, nullptr); },
        "o_a.dtype");
    rejects_int32(
        [&] { return flashjit_merge_state_in_place(rt, &a, &a_lse, &int_b, &b_lse, nullptr); },
        "o_b.dtype");
  }
}

}  // namespace
}  // namespace flashjit::testing

namespace flashjit::testing {

TEST_CASE(
    "C API: the inference forward (paged, split, appending with rotary) gives the C++ API's bits") {
  CRuntime rt;
  Runtime& cpp = cpp_emulator();
  // Two sequences of 2 queries against 20 and 40 keys in pages of 16, GQA 4:1, 3 splits; the
  // last 2 keys of each arrive with the call, rotated (interleaved pairs) with q.
  constexpr std::int64_t kBatch = 2, kQ = 2, kHq = 8, kHkv = 2, kDim = 64, kPages = 5, kPage = 16;
  Attention a;
  a.batch = kBatch;
  a.heads_q = kHq;
  a.heads_kv = kHkv;
  a.seqlen_q = kQ;
  a.seqlen_k = 40;
  a.head_dim = kDim;
  a.causal = true;
  const std::vector<std::int32_t> table = {3, 0, -1, 4, 1, 2}, lengths = {18, 38};
  const std::vector<float> cos = random_floats(40 * kDim / 2, 6),
                           sin = random_floats(40 * kDim / 2, 7);
  const auto bits = [](std::size_t count, unsigned seed) {
    std::vector<float> values = random_floats(count, seed);
    std::vector<std::uint16_t> out;
    for (float x : values) out.push_back(bf16_bits_from_float(x));
    return out;
  };
  const auto q = bits(kBatch * kQ * kHq * kDim, 3), k = bits(kPages * kPage * kHkv * kDim, 4),
             v = bits(kPages * kPage * kHkv * kDim, 5), k_new = bits(kBatch * kQ * kHkv * kDim, 8),
             v_new = bits(kBatch * kQ * kHkv * kDim, 9);
  void* cache_k = nullptr;  // the last call's key cache, which the append writes
  // One call through each API, each on its own runtime's copies.
  const auto call = [&](auto upload, auto run) {
    void* q_data = upload(q.data(), q.size() * 2);
    void* k_data = upload(k.data(), k.size() * 2);
    void* v_data = upload(v.data(), v.size() * 2);
    void* o_data = upload(std::vector<std::uint16_t>(q.size()).data(), q.size() * 2);
    void* lse_data = upload(std::vector<float>(kBatch * kHq * kQ).data(), kBatch * kHq * kQ * 4);
    void* table_data = upload(table.data(), table.size() * 4);
    void* lengths_data = upload(lengths.data(), lengths.size() * 4);
    Sequences s;
    s.page_table = TensorView::contiguous(table_data, DType::i32, {kBatch, 3});
    s.seqlens_k = TensorView::contiguous(lengths_data, DType::i32, {kBatch});
    s.splits = 3;
    s.k_new = TensorView::contiguous(upload(k_new.data(), k_new.size() * 2), DType::bf16,
                                     {kBatch, kQ, kHkv, kDim});
    s.v_new = TensorView::contiguous(upload(v_new.data(), v_new.size() * 2), DType::bf16,
                                     {kBatch, kQ, kHkv, kDim});
    s.rotary_cos =
        TensorView::contiguous(upload(cos.data(), cos.size() * 4), DType::f32, {40, kDim / 2});
    s.rotary_sin =
        TensorView::contiguous(upload(sin.data(), sin.size() * 4), DType::f32, {40, kDim / 2});
    s.rotary_interleaved = true;
    cache_k = k_data;
    run(s, TensorView::contiguous(q_data, DType::bf16, {kBatch, kQ, kHq, kDim}),
        TensorView::contiguous(k_data, DType::bf16, {kPages, kPage, kHkv, kDim}),
        TensorView::contiguous(v_data, DType::bf16, {kPages, kPage, kHkv, kDim}),
        TensorView::contiguous(o_data, DType::bf16, {kBatch, kQ, kHq, kDim}),
        TensorView::contiguous(lse_data, DType::f32, {kBatch, kHq, kQ}));
    return std::pair{o_data, lse_data};
  };
  std::vector<DeviceBuffer> cpp_buffers;
  const auto [cpp_o, cpp_lse] = call(
      [&](const void* data, std::size_t bytes) {
        cpp_buffers.push_back(cpp.allocate(bytes));
        cpp.copy_to_device(cpp_buffers.back().data(), data, bytes);
        return cpp_buffers.back().data();
      },
      [&](const Sequences& s, auto... views) { cpp.forward(a, s, views...); });
  void* const cpp_cache_k = cache_k;
  const flashjit_attention attn = c_attention(a);
  flashjit_status status = FLASHJIT_OK;
  const auto [c_o, c_lse] = call(
      [&](const void* data, std::size_t bytes) {
        void* out = nullptr;
        REQUIRE(flashjit_allocate(rt, bytes, &out) == FLASHJIT_OK);
        REQUIRE(flashjit_copy_to_device(rt, out, data, bytes) == FLASHJIT_OK);
        return out;
      },
      [&](const Sequences& s, const TensorView& qv, const TensorView& kv, const TensorView& vv,
          const TensorView& ov, const TensorView& lv) {
        const flashjit_tensor ct = c_tensor(s.page_table), cl = c_tensor(s.seqlens_k),
                              cq = c_tensor(qv), ck = c_tensor(kv), cv = c_tensor(vv),
                              co = c_tensor(ov), clse = c_tensor(lv), ckn = c_tensor(s.k_new),
                              cvn = c_tensor(s.v_new), ccos = c_tensor(s.rotary_cos),
                              csin = c_tensor(s.rotary_sin);
        flashjit_sequences cs;
        flashjit_sequences_init(&cs);
        CHECK(cs.splits == 0);
        CHECK((cs.k_new == nullptr && cs.rotary_cos == nullptr && cs.rotary_interleaved == 0));
        cs.page_table = &ct;
        cs.seqlens_k = &cl;
        cs.splits = s.splits;
        cs.k_new = &ckn;
        cs.v_new = &cvn;
        cs.rotary_cos = &ccos;
        cs.rotary_sin = &csin;
        cs.rotary_interleaved = 1;
        status = flashjit_attention_forward_sequences(rt, &attn, &cs, &cq, &ck, &cv, &co, &clse,
                                                      nullptr);
      });
  REQUIRE_MESSAGE(status == FLASHJIT_OK, flashjit_last_error());
  std::vector<float> from_cpp(q.size() / 2), from_c(q.size() / 2);  // the bf16 O, as bytes
  cpp.copy_to_host(from_cpp.data(), cpp_o, q.size() * 2);
  REQUIRE(flashjit_copy_to_host(rt, from_c.data(), c_o, q.size() * 2) == FLASHJIT_OK);
  CHECK(bytes_equal(from_c, from_cpp));
  CHECK(bytes_equal(c_download(rt, c_lse, kBatch * kHq * kQ), [&] {
    std::vector<float> l(kBatch * kHq * kQ);
    cpp.copy_to_host(l.data(), cpp_lse, l.size() * 4);
    return l;
  }()));
  CHECK(std::isfinite(c_download(rt, c_lse, 1)[0]));
  std::vector<float> cache_from_cpp(k.size() / 2), cache_from_c(k.size() / 2);  // bf16, as bytes
  cpp.copy_to_host(cache_from_cpp.data(), cpp_cache_k, k.size() * 2);
  REQUIRE(flashjit_copy_to_host(rt, cache_from_c.data(), cache_k, k.size() * 2) == FLASHJIT_OK);
  CHECK(bytes_equal(cache_from_c, cache_from_cpp));
  CHECK_FALSE(bytes_equal(cache_from_c, [&] {  // the append wrote into the cache
    std::vector<float> before(k.size() / 2);
    std::memcpy(before.data(), k.data(), k.size() * 2);
    return before;
  }()));

  SUBCASE("NULL sequences is named") {
    CHECK(flashjit_attention_forward_sequences(rt, &attn, nullptr, nullptr, nullptr, nullptr,
                                               nullptr, nullptr,
                                               nullptr) == FLASHJIT_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(flashjit_last_error()).find("'sequences'") != std::string::npos);
  }
}

}  // namespace flashjit::testing

namespace flashjit::testing {

TEST_CASE("C API: the backward of a variable-length batch gives the C++ API's bits") {
  CRuntime rt;
  Runtime& cpp = cpp_emulator();
  constexpr std::int64_t kH = 2, kDim = 32, kTotalQ = 8, kTotalK = 11;
  Attention a;
  a.batch = 2;
  a.heads_q = kH;
  a.heads_kv = kH;
  a.seqlen_q = 5;
  a.seqlen_k = 7;
  a.head_dim = kDim;
  a.causal = true;
  const std::vector<std::int32_t> cu_q = {0, 3, 8}, cu_k = {0, 4, 11};
  const auto bits = [](std::size_t count, unsigned seed) {
    std::vector<std::uint16_t> out;
    for (float x : random_floats(count, seed)) out.push_back(bf16_bits_from_float(x));
    return out;
  };
  const auto q = bits(kTotalQ * kH * kDim, 7), k = bits(kTotalK * kH * kDim, 8),
             v = bits(kTotalK * kH * kDim, 9), dout = bits(kTotalQ * kH * kDim, 10);
  // Runs forward and backward through one API; returns dq, dk, dv as bytes.
  const auto run = [&](auto upload, auto forward, auto backward, auto download) {
    const auto q_view = [&](void* p) {
      return TensorView::contiguous(p, DType::bf16, {kTotalQ, kH, kDim});
    };
    const auto k_view = [&](void* p) {
      return TensorView::contiguous(p, DType::bf16, {kTotalK, kH, kDim});
    };
    Sequences s;
    s.cu_seqlens_q = TensorView::contiguous(upload(cu_q.data(), 12), DType::i32, {3});
    s.cu_seqlens_k = TensorView::contiguous(upload(cu_k.data(), 12), DType::i32, {3});
    const std::vector<std::uint16_t> zeros_q(q.size()), zeros_k(k.size());
    const TensorView qv = q_view(upload(q.data(), q.size() * 2)),
                     kv = k_view(upload(k.data(), k.size() * 2)),
                     vv = k_view(upload(v.data(), v.size() * 2)),
                     ov = q_view(upload(zeros_q.data(), q.size() * 2)),
                     dov = q_view(upload(dout.data(), q.size() * 2)),
                     dqv = q_view(upload(zeros_q.data(), q.size() * 2)),
                     dkv = k_view(upload(zeros_k.data(), k.size() * 2)),
                     dvv = k_view(upload(zeros_k.data(), k.size() * 2));
    const std::vector<float> zeros_lse(kH * kTotalQ);
    const TensorView lse = TensorView::contiguous(upload(zeros_lse.data(), zeros_lse.size() * 4),
                                                  DType::f32, {kH, kTotalQ});
    forward(s, qv, kv, vv, ov, lse);
    backward(s, qv, kv, vv, ov, lse, dov, dqv, dkv, dvv);
    std::vector<std::uint16_t> out(q.size() + 2 * k.size());
    download(out.data(), dqv.data, q.size() * 2);
    download(out.data() + q.size(), dkv.data, k.size() * 2);
    download(out.data() + q.size() + k.size(), dvv.data, k.size() * 2);
    return out;
  };
  std::vector<DeviceBuffer> buffers;
  const auto from_cpp = run(
      [&](const void* data, std::size_t bytes) {
        buffers.push_back(cpp.allocate(bytes));
        cpp.copy_to_device(buffers.back().data(), data, bytes);
        return buffers.back().data();
      },
      [&](const Sequences& s, auto... views) { cpp.forward(a, s, views...); },
      [&](const Sequences& s, auto... views) { cpp.backward(a, s, views...); },
      [&](void* dst, const void* src, std::size_t bytes) { cpp.copy_to_host(dst, src, bytes); });
  const flashjit_attention attn = c_attention(a);
  const auto c_sequences = [&](const Sequences& s, flashjit_tensor& cq, flashjit_tensor& ck) {
    cq = c_tensor(s.cu_seqlens_q);
    ck = c_tensor(s.cu_seqlens_k);
    flashjit_sequences cs;
    flashjit_sequences_init(&cs);
    cs.cu_seqlens_q = &cq;
    cs.cu_seqlens_k = &ck;
    return cs;
  };
  const auto from_c = run(
      [&](const void* data, std::size_t bytes) {
        void* out = nullptr;
        REQUIRE(flashjit_allocate(rt, bytes, &out) == FLASHJIT_OK);
        REQUIRE(flashjit_copy_to_device(rt, out, data, bytes) == FLASHJIT_OK);
        return out;
      },
      [&](const Sequences& s, const TensorView& qv, const TensorView& kv, const TensorView& vv,
          const TensorView& ov, const TensorView& lv) {
        flashjit_tensor cq, ck;
        const flashjit_sequences cs = c_sequences(s, cq, ck);
        const flashjit_tensor t[] = {c_tensor(qv), c_tensor(kv), c_tensor(vv), c_tensor(ov),
                                     c_tensor(lv)};
        REQUIRE_MESSAGE(flashjit_attention_forward_sequences(rt, &attn, &cs, &t[0], &t[1], &t[2],
                                                             &t[3], &t[4], nullptr) == FLASHJIT_OK,
                        flashjit_last_error());
      },
      [&](const Sequences& s, const TensorView& qv, const TensorView& kv, const TensorView& vv,
          const TensorView& ov, const TensorView& lv, const TensorView& dov, const TensorView& dqv,
          const TensorView& dkv, const TensorView& dvv) {
        flashjit_tensor cq, ck;
        flashjit_sequences cs = c_sequences(s, cq, ck);
        const flashjit_tensor t[] = {c_tensor(qv),  c_tensor(kv),  c_tensor(vv),
                                     c_tensor(ov),  c_tensor(lv),  c_tensor(dov),
                                     c_tensor(dqv), c_tensor(dkv), c_tensor(dvv)};
        REQUIRE_MESSAGE(flashjit_attention_backward_sequences(rt, &attn, &cs, &t[0], &t[1], &t[2],
                                                              &t[3], &t[4], &t[5], &t[6], &t[7],
                                                              &t[8], nullptr) == FLASHJIT_OK,
                        flashjit_last_error());
        cs.splits = 2;  // forward-only: refused by name, nothing written
        CHECK(flashjit_attention_backward_sequences(rt, &attn, &cs, &t[0], &t[1], &t[2], &t[3],
                                                    &t[4], &t[5], &t[6], &t[7], &t[8],
                                                    nullptr) == FLASHJIT_ERROR_INVALID_ARGUMENT);
        CHECK(std::string(flashjit_last_error()).find("sequences.splits") != std::string::npos);
      },
      [&](void* dst, const void* src, std::size_t bytes) {
        REQUIRE(flashjit_copy_to_host(rt, dst, src, bytes) == FLASHJIT_OK);
      });
  CHECK(from_c == from_cpp);
  CHECK(std::any_of(from_c.begin(), from_c.end(), [](std::uint16_t b) { return b != 0; }));
}

}  // namespace flashjit::testing
