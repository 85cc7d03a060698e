// Every bad argument to merge_states (both forms) is a named error, raised before anything is
// launched or written.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "merge_states/merge_states.hpp"
#include "support/argument_cases.hpp"
#include "support/emulator_runtime.hpp"

using namespace flashjit;
using flashjit::kernels::validate_merge_state_pair_arguments;
using flashjit::kernels::validate_merge_states_arguments;
using flashjit::testing::check_names;

namespace {

constexpr std::int64_t kPartials = 3, kTokens = 5, kHeads = 2, kHeadDim = 64;

/// A valid N-way call over host arrays; each subcase breaks one argument.
struct MergeCall : testing::ArgumentChecks<MergeCall> {
  std::vector<float> parts_o = std::vector<float>(kPartials * kTokens * kHeads * kHeadDim);
  std::vector<float> parts_lse = std::vector<float>(kPartials * kTokens * kHeads);
  std::vector<float> o_data = std::vector<float>(kTokens * kHeads * kHeadDim);
  std::vector<float> lse_data = std::vector<float>(kTokens * kHeads);
  TensorView partial_o =
      TensorView::contiguous(parts_o.data(), DType::f32, {kPartials, kTokens, kHeads, kHeadDim});
  TensorView partial_lse =
      TensorView::contiguous(parts_lse.data(), DType::f32, {kPartials, kTokens, kHeads});
  TensorView o = TensorView::contiguous(o_data.data(), DType::f32, {kTokens, kHeads, kHeadDim});
  TensorView lse = TensorView::contiguous(lse_data.data(), DType::f32, {kTokens, kHeads});

  void validate() const { validate_merge_states_arguments(partial_o, partial_lse, o, lse); }
};

/// A valid in-place call; each subcase breaks one argument.
struct PairCall : testing::ArgumentChecks<PairCall> {
  std::vector<float> a = std::vector<float>(kTokens * kHeads * kHeadDim);
  std::vector<float> b = std::vector<float>(kTokens * kHeads * kHeadDim);
  std::vector<float> a_lse = std::vector<float>(kTokens * kHeads);
  std::vector<float> b_lse = std::vector<float>(kTokens * kHeads);
  TensorView o_a = TensorView::contiguous(a.data(), DType::f32, {kTokens, kHeads, kHeadDim});
  TensorView lse_a = TensorView::contiguous(a_lse.data(), DType::f32, {kTokens, kHeads});
  TensorView o_b = TensorView::contiguous(b.data(), DType::f32, {kTokens, kHeads, kHeadDim});
  TensorView lse_b = TensorView::contiguous(b_lse.data(), DType::f32, {kTokens, kHeads});

  void validate() const { validate_merge_state_pair_arguments(o_a, lse_a, o_b, lse_b); }
};

}  // namespace

TEST_CASE("merge_states rejects each bad argument by name") {
  MergeCall call;
  CHECK_NOTHROW(call.validate());
  call.rejects_each({
      {"null partials", [](MergeCall& c) { c.partial_o.data = nullptr; }, "partial_o"},
      {"num_partials 0", [](MergeCall& c) { c.partial_o.shape[0] = 0; }, "partial_o.shape"},
      {"head_dim 0", [](MergeCall& c) { c.partial_o.shape[3] = 0; }, "partial_o.shape"},
      {"head_dim over 1024", [](MergeCall& c) { c.partial_o.shape[3] = 1025; }, "partial_o.shape"},
      {"partials of rank 3", [](MergeCall& c) { c.partial_o.rank = 3; }, "partial_o.rank"},
      {"head_dim stride not 1",
       [](MergeCall& c) {
         c.partial_o.strides = {1280, 256, 128, 2};
       },
       "partial_o.strides"},
      {"int32 partials", [](MergeCall& c) { c.partial_o.dtype = DType::i32; }, "partial_o.dtype"},
      {"int32 output", [](MergeCall& c) { c.o.dtype = DType::i32; }, "o.dtype"},
      {"LSE in fp16", [](MergeCall& c) { c.partial_lse.dtype = DType::f16; }, "partial_lse.dtype"},
      {"LSE count differs from O's", [](MergeCall& c) { c.partial_lse.shape[0] = 2; },
       "partial_lse.shape"},
      {"LSE tokens differ from O's", [](MergeCall& c) { c.partial_lse.shape[1] = 4; },
       "partial_lse.shape"},
      {"output dtype neither fp32 nor the input's",
       [](MergeCall& c) {
         c.partial_o.dtype = DType::f16;
         c.o.dtype = DType::bf16;
       },
       "o.dtype"},
      {"output shape", [](MergeCall& c) { c.o.shape[1] = 1; }, "o.shape"},
      {"output elements sharing addresses",
       [](MergeCall& c) {
         c.o.strides = {64, 0, 1};
       },
       "o.strides"},
      {"merged LSE dtype", [](MergeCall& c) { c.lse.dtype = DType::bf16; }, "lse.dtype"},
      {"merged LSE shape", [](MergeCall& c) { c.lse.shape[0] = 6; }, "lse.shape"},
      {"output over the partials", [](MergeCall& c) { c.o.data = c.parts_o.data() + kHeadDim; },
       "o"},
      {"merged LSE over the partial LSEs", [](MergeCall& c) { c.lse.data = c.parts_lse.data(); },
       "lse"},
      {"merged LSE inside the output", [](MergeCall& c) { c.lse.data = c.o_data.data(); }, "o"},
  });
}

TEST_CASE("merge_state_in_place rejects each bad argument by name") {
  PairCall call;
  CHECK_NOTHROW(call.validate());
  call.rejects_each({
      {"null a", [](PairCall& c) { c.o_a.data = nullptr; }, "o_a"},
      {"int32 a", [](PairCall& c) { c.o_a.dtype = DType::i32; }, "o_a.dtype"},
      {"int32 b", [](PairCall& c) { c.o_b.dtype = DType::i32; }, "o_b.dtype"},
      {"dtypes differ", [](PairCall& c) { c.o_b.dtype = DType::f16; }, "o_b.dtype"},
      {"LSE in bf16", [](PairCall& c) { c.lse_b.dtype = DType::bf16; }, "lse_b.dtype"},
      {"b's shape", [](PairCall& c) { c.o_b.shape[2] = 32; }, "o_b.shape"},
      {"a's LSE shape", [](PairCall& c) { c.lse_a.shape[1] = 3; }, "lse_a.shape"},
      {"head_dim over 1024", [](PairCall& c) { c.o_a.shape[2] = 2000; }, "o_a.shape"},
      {"b over a", [](PairCall& c) { c.o_b.data = c.a.data(); }, "o_a"},
      {"a's LSE over a", [](PairCall& c) { c.lse_a.data = c.a.data(); }, "o_a"},
  });
}

TEST_CASE("a rejected merge writes nothing") {
  Runtime& runtime = testing::emulator();
  MergeCall call;
  DeviceBuffer o = runtime.allocate(call.o_data.size() * 4);
  DeviceBuffer lse = runtime.allocate(call.lse_data.size() * 4);
  const std::vector<unsigned char> poison(call.o_data.size() * 4, 0xab);
  runtime.copy_to_device(o.data(), poison.data(), poison.size());
  runtime.copy_to_device(lse.data(), poison.data(), call.lse_data.size() * 4);
  DeviceBuffer parts_o = runtime.allocate(call.parts_o.size() * 4);
  DeviceBuffer parts_lse = runtime.allocate(call.parts_lse.size() * 4);
  runtime.copy_to_device(parts_o.data(), call.parts_o.data(), call.parts_o.size() * 4);
  runtime.copy_to_device(parts_lse.data(), call.parts_lse.data(), call.parts_lse.size() * 4);
  TensorView partial_o = call.partial_o, partial_lse = call.partial_lse, o_view = call.o,
             lse_view = call.lse;
  partial_o.data = parts_o.data();
  partial_lse.data = parts_lse.data();
  o_view.data = o.data();
  lse_view.data = lse.data();
  partial_lse.shape[2] = 1;  // the one bad argument
  check_names([&] { runtime.merge_states(partial_o, partial_lse, o_view, lse_view); },
              "partial_lse.shape");
  check_names([&] { runtime.merge_state_in_place(o_view, lse_view, o_view, lse_view); }, "o_a");
  std::vector<unsigned char> after(poison.size());
  runtime.copy_to_host(after.data(), o.data(), after.size());
  CHECK(after == poison);
  after.resize(call.lse_data.size() * 4);
  runtime.copy_to_host(after.data(), lse.data(), after.size());
  CHECK(std::all_of(after.begin(), after.end(), [](unsigned char b) { return b == 0xab; }));
}
