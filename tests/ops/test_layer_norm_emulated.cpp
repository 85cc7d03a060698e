// layer_norm on the CPU emulator against the float64 reference: ragged row lengths (cached and
// streamed rows, one warp and many per row), every fused add, layer norm and RMS norm, every
// dtype, forward and backward; the backward against central differences of the float64
// forward; dγ and dβ bit-identical across runs; rows split over a cluster on sm_90a; rows
// whose mean dwarfs their spread; blocks of many row groups through the loads ahead; and the
// memory model's CTAs an SM by the forward's registers.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "layer_norm/layer_norm_case.hpp"
#include "support/emulator_runtime.hpp"

using namespace flashjit;
using flashjit::testing::LayerNormCase;

namespace {

constexpr DType kDTypes[] = {DType::f16, DType::bf16, DType::f32};

void check_forward(const LayerNormCase& c) {
  CAPTURE(c.name());
  const auto verdict = testing::run_layer_norm_case(testing::emulator(), c);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
}

void check_backward(const LayerNormCase& c) {
  CAPTURE(c.name());
  const auto verdict = testing::run_layer_norm_backward_case(testing::emulator(), c);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
}

/// Row lengths of every bucket and path: one warp per row (1, 7, 100), many warps (1000), and
/// the streamed rows longer than every bucket (4097, 65536); few rows, odd counts.
struct RaggedShape {
  std::int64_t rows, cols;
};
constexpr RaggedShape kRagged[] = {{3, 1}, {5, 7}, {3, 100}, {3, 1000}, {2, 4097}, {1, 65536}};

}  // namespace

TEST_CASE("forward over ragged row lengths, layer norm and RMS norm, every dtype") {
  for (DType dtype : kDTypes) {
    for (bool rms : {false, true}) {
      for (const RaggedShape& shape : kRagged) {
        check_forward({.rows = shape.rows, .cols = shape.cols, .dtype = dtype, .rms = rms});
      }
    }
  }
}

TEST_CASE("forward fused with bias, residual, both or neither, rows padded") {
  // 300 columns: rows in registers; 20000: rows in shared memory, read two vectors at a time
  // (the second past the row for some threads).
  for (DType dtype : kDTypes) {
    for (bool rms : {false, true}) {
      for (int fused = 0; fused < 4; ++fused) {
        for (std::int64_t cols : {300, 20000}) {
          LayerNormCase c{.rows = 5, .cols = cols, .dtype = dtype, .rms = rms};
          c.bias = fused & 1, c.residual = fused & 2, c.padded = true;
          c.seed = static_cast<std::uint64_t>(fused + 10);
          check_forward(c);
          c.write_sum = false;
          check_forward(c);
        }
      }
    }
  }
}

TEST_CASE("forward over more row groups than blocks: each block loads its next groups ahead") {
  // 10373 rows of 24: 649 groups of 16 rows (32 threads each in a 512-thread block) over the
  // emulator's 108 persistent blocks, 7 a block (6 in the last), the last group short. A block
  // loads up to four groups ahead of the one it works on (bf16: 16 bytes a thread a group; fp32:
  // 32 bytes, two ahead), so the loads wrap around their slots and run past the block's rows.
  for (DType dtype : {DType::bf16, DType::f32}) {
    LayerNormCase c{.rows = 10373, .cols = 24, .dtype = dtype, .bias = true, .residual = true};
    check_forward(c);
  }
}

TEST_CASE("backward over ragged row lengths, layer norm and RMS norm, every dtype") {
  for (DType dtype : kDTypes) {
    for (bool rms : {false, true}) {
      for (const RaggedShape& shape : kRagged) {
        LayerNormCase c{.rows = shape.rows, .cols = shape.cols, .dtype = dtype, .rms = rms};
        // RMS norm of one column has dx = rstd·g·ε/(x² + ε): a cancellation any fp32
        // computation of 1 − x̂² suffers at ε = 1e-5. At ε = 0.1 the row is well-conditioned.
        if (rms && shape.cols == 1) c.epsilon = 0.1f;
        check_backward(c);
      }
    }
  }
}

TEST_CASE("backward fused with bias, residual, both or neither: dx, dgamma, dbeta, dbias") {
  for (DType dtype : kDTypes) {
    for (bool rms : {false, true}) {
      for (int fused = 0; fused < 4; ++fused) {
        LayerNormCase c{.rows = 7, .cols = 200, .dtype = dtype, .rms = rms};
        c.bias = fused & 1, c.residual = fused & 2, c.padded = true;
        c.seed = static_cast<std::uint64_t>(fused + 20);
        check_backward(c);
      }
    }
  }
}

TEST_CASE("backward over more rows than blocks: several rows summed per block, in order") {
  // 2000 rows of 24: 125 groups of 16 rows (32 threads each in a 512-thread block, their
  // partials added in shared memory), more groups than the emulator's 108 persistent blocks,
  // so some blocks take two; 260 rows of 1000: 65 groups of 4.
  check_backward({.rows = 2000, .cols = 24, .dtype = DType::bf16, .bias = true});
  check_backward({.rows = 260, .cols = 1000, .dtype = DType::f32, .rms = true});
  // 10373 rows of 24: 7 groups a block (6 in the last, its last group short), loaded two ahead
  // of the one a block works on, so the loads wrap around their slots.
  check_backward({.rows = 10373, .cols = 24, .dtype = DType::bf16, .residual = true});
}

TEST_CASE("dgamma, dbeta and dbias are the same bits on every run") {
  for (bool rms : {false, true}) {
    for (std::int64_t cols : {64, 5000}) {
      LayerNormCase c{.rows = 301, .cols = cols, .dtype = DType::f32, .rms = rms, .bias = true};
      if (cols > 1000) c.rows = 9;
      CAPTURE(c.name());
      const auto inputs = testing::layer_norm_inputs(c);
      const auto first = testing::run_layer_norm(testing::emulator(), c, inputs, true);
      const auto second = testing::run_layer_norm(testing::emulator(), c, inputs, true);
      CHECK(first.dgamma == second.dgamma);  // doubles widened from the fp32 bits: exact
      CHECK(first.dbeta == second.dbeta);
      CHECK(first.dbias == second.dbias);
      CHECK(first.dx == second.dx);
    }
  }
}

namespace {

/// Whether `runtime` ran a kernel whose name contains `part` since its work was last reset.
bool ran_kernel(Runtime& runtime, const std::string& part) {
  const auto work = runtime.emulated_work();
  return std::any_of(work.begin(), work.end(),
                     [&](const KernelWork& k) { return k.kernel.find(part) != std::string::npos; });
}

}  // namespace

TEST_CASE("sm_90a: rows past one block's shared memory split over a cluster, right and rerun") {
  Runtime& hopper = testing::hopper_emulator();
  struct Split {
    LayerNormCase c;
    const char* forward;   // the forward's kernel, by its cluster trait
    const char* backward;  // the backward's
  };
  const Split splits[] = {
      // Row, γ and β: 3 x 128 KiB, in two blocks; the backward's partials, x, dy and γ in four.
      {{.rows = 3, .cols = 65536, .dtype = DType::bf16},
       "layer_norm.bf16.ln.colsany.t1024.v8.x2",
       "layer_norm_backward.bf16.ln.colsany.t1024.v8.x4"},
      // fp32 with the bias: eight blocks for both; 65 528 columns leave the last block short.
      {{.rows = 2, .cols = 65528, .dtype = DType::f32, .bias = true, .residual = true},
       "layer_norm.fp32.ln.colsany.t1024.v4.x8",
       "layer_norm_backward.fp32.ln.colsany.t1024.v4.x8"},
      // RMS norm at 16 384 fp32: the forward fits one block; the backward takes two.
      {{.rows = 5, .cols = 16384, .dtype = DType::f32, .rms = true},
       "layer_norm.fp32.rms.colsany.t1024.v4.sm90a",
       "layer_norm_backward.fp32.rms.colsany.t1024.v4.x2"},
  };
  for (const Split& split : splits) {
    CAPTURE(split.c.name());
    hopper.reset_emulated_work();
    const auto forward = testing::run_layer_norm_case(hopper, split.c);
    CHECK_MESSAGE(forward.ok, forward.describe());
    CHECK(ran_kernel(hopper, split.forward));
    const auto backward = testing::run_layer_norm_backward_case(hopper, split.c);
    CHECK_MESSAGE(backward.ok, backward.describe());
    CHECK(ran_kernel(hopper, split.backward));
  }
  // The cluster's sums in rank order: the same bits on every run.
  const LayerNormCase c{.rows = 4, .cols = 65536, .dtype = DType::bf16, .bias = true};
  const auto inputs = testing::layer_norm_inputs(c);
  const auto first = testing::run_layer_norm(hopper, c, inputs, true);
  const auto second = testing::run_layer_norm(hopper, c, inputs, true);
  CHECK(first.y == second.y);
  CHECK(first.dx == second.dx);
  CHECK(first.dgamma == second.dgamma);
  CHECK(first.dbias == second.dbias);
}

namespace {

/// Σ y·dy of the float64 forward on x = input + bias + residual (no rounding).
double loss(const LayerNormCase& c, const testing::LayerNormInputs& in) {
  std::vector<double> x = in.input;
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] += in.bias[i % in.bias.size()] + in.residual[i];
  }
  const auto y = reference::layer_norm(c.shape(), x, in.gamma, in.beta).y;
  double total = 0;
  for (std::size_t i = 0; i < y.size(); ++i) total += y[i] * in.dy[i];
  return total;
}

/// Central differences of loss() with respect to every element of `values` (a member of `in`).
std::vector<double> central_differences(const LayerNormCase& c, testing::LayerNormInputs in,
                                        std::vector<double> testing::LayerNormInputs::*values) {
  constexpr double kStep = 1e-5;
  std::vector<double> grads;
  for (std::size_t i = 0; i < (in.*values).size(); ++i) {
    const double saved = (in.*values)[i];
    (in.*values)[i] = saved + kStep;
    const double up = loss(c, in);
    (in.*values)[i] = saved - kStep;
    const double down = loss(c, in);
    (in.*values)[i] = saved;
    grads.push_back((up - down) / (2 * kStep));
  }
  return grads;
}

}  // namespace

TEST_CASE("the backward matches central differences of the float64 forward (tiny shape)") {
  for (bool rms : {false, true}) {
    LayerNormCase c{.rows = 3, .cols = 5, .dtype = DType::f32, .rms = rms};
    c.bias = c.residual = true;
    c.seed = 5;
    CAPTURE(c.name());
    const auto in = testing::layer_norm_inputs(c);
    const auto numeric_dinput = central_differences(c, in, &testing::LayerNormInputs::input);
    const auto numeric_dresidual = central_differences(c, in, &testing::LayerNormInputs::residual);
    const auto numeric_dbias = central_differences(c, in, &testing::LayerNormInputs::bias);
    const auto numeric_dgamma = central_differences(c, in, &testing::LayerNormInputs::gamma);
    // The float64 analytic gradient agrees with the differences to their truncation error.
    const auto analytic = reference::layer_norm_backward(c.shape(), in.x, in.gamma, in.dy);
    CHECK(reference::check_close(analytic.dx, numeric_dinput, 1e-6, "analytic dx").ok);
    CHECK(reference::check_close(analytic.dbias, numeric_dbias, 1e-6, "analytic dbias").ok);
    CHECK(reference::check_close(analytic.dgamma, numeric_dgamma, 1e-6, "analytic dgamma").ok);
    // So does the kernel, to fp32's precision: dx is the gradient of input and of residual.
    const auto out = testing::run_layer_norm(testing::emulator(), c, in, true);
    constexpr double kFp32 = 1e-5;
    const auto dx_vs_input = reference::check_close(out.dx, numeric_dinput, kFp32, "dinput");
    const auto dx_vs_residual =
        reference::check_close(out.dx, numeric_dresidual, kFp32, "dresidual");
    const auto dbias = reference::check_close(out.dbias, numeric_dbias, kFp32, "dbias");
    const auto dgamma = reference::check_close(out.dgamma, numeric_dgamma, kFp32, "dgamma");
    CHECK_MESSAGE(dx_vs_input.ok, dx_vs_input);
    CHECK_MESSAGE(dx_vs_residual.ok, dx_vs_residual);
    CHECK_MESSAGE(dbias.ok, dbias);
    CHECK_MESSAGE(dgamma.ok, dgamma);
    if (!rms) {
      const auto numeric_dbeta = central_differences(c, in, &testing::LayerNormInputs::beta);
      CHECK(reference::check_close(analytic.dbeta, numeric_dbeta, 1e-6, "analytic dbeta").ok);
      const auto dbeta = reference::check_close(out.dbeta, numeric_dbeta, kFp32, "dbeta");
      CHECK_MESSAGE(dbeta.ok, dbeta);
    }
  }
}

namespace {

/// The relative error of each row's variance as `variance_of` computes it, against the
/// float64 two-pass variance of the same values.
template <class VarianceOf>
std::vector<double> variance_errors(const LayerNormCase& c, const std::vector<double>& x,
                                    VarianceOf variance_of) {
  std::vector<double> errors;
  for (std::int64_t r = 0; r < c.rows; ++r) {
    const double* row = &x[static_cast<std::size_t>(r * c.cols)];
    double mean = 0, squares = 0;
    for (std::int64_t j = 0; j < c.cols; ++j) mean += row[j] / double(c.cols);
    for (std::int64_t j = 0; j < c.cols; ++j) squares += (row[j] - mean) * (row[j] - mean);
    const double exact = squares / double(c.cols);
    errors.push_back(std::fabs(variance_of(r, row) - exact) / exact);
  }
  return errors;
}

}  // namespace

TEST_CASE("rows of 1e4 + N(0, 1) keep their variance: two passes on chip, not E[x²] − E[x]²") {
  // 4096 columns: held in registers (512 threads, 16 warps merged); 20000: the shared stash.
  for (std::int64_t cols : {4096, 20000}) {
    LayerNormCase c{.rows = 3, .cols = cols, .dtype = DType::f32, .offset = 1e4, .seed = 9};
    CAPTURE(c.name());
    const auto in = testing::layer_norm_inputs(c);
    const auto out = testing::run_layer_norm(testing::emulator(), c, in, false);
    // flashjit's variance, from the rstd it wrote: 1/rstd² − ε.
    const auto flashjit_errors = variance_errors(c, in.x, [&](std::int64_t r, const double*) {
      const double rstd = out.rstd[static_cast<std::size_t>(r)];
      return 1.0 / (rstd * rstd) - double(c.epsilon);
    });
    // The naive one-pass formula in fp32 loses it: E[x²] ~ 1e8 has an ulp of 8.
    const auto naive_errors = variance_errors(c, in.x, [&](std::int64_t, const double* row) {
      float sum = 0, squares = 0;
      for (std::int64_t j = 0; j < c.cols; ++j) {
        const auto x = static_cast<float>(row[j]);
        sum += x;
        squares += x * x;
      }
      const float mean = sum / float(c.cols);
      return double(squares / float(c.cols) - mean * mean);
    });
    for (std::size_t r = 0; r < flashjit_errors.size(); ++r) {
      CAPTURE(r);
      CHECK(flashjit_errors[r] < 1e-5);
      CHECK(naive_errors[r] > 1e-5);  // so this test can fail
    }
  }
}

TEST_CASE("memory model: an SM holds the layer-norm forward blocks its registers allow") {
  // A 512-thread block: threads and shared memory alone would put four on an SM, ptxas's
  // registers (over 64 a thread: the row, γ, β, the bias and the rows loaded ahead) one, as
  // the forward's grid counts on. The model takes the registers of the same kernel compiled for
  // the modelled GPU.
  Runtime modelled(RuntimeOptions{
      .backend = Backend::emulator, .emulated_arch = "sm_90a", .model_memory = true});
  REQUIRE(testing::run_layer_norm_case(modelled, {.rows = 64, .cols = 4096}).ok);
  bool found = false;
  for (const KernelWork& kernel : modelled.emulated_work()) {
    if (kernel.kernel.rfind("layer_norm.", 0) != 0) continue;  // the forward's
    found = true;
    CAPTURE(kernel.kernel);
    REQUIRE(kernel.work.memory.modelled);
    CHECK(kernel.work.memory.ctas_per_sm == 1);
  }
  CHECK(found);
}

namespace {

/// The row kernels' (not the parameter gradients') work of each case's forward and backward,
/// run on the sm_90a emulator with its memory model.
std::vector<KernelWork> modelled_row_kernels(const std::vector<LayerNormCase>& cases) {
  Runtime modelled(RuntimeOptions{
      .backend = Backend::emulator, .emulated_arch = "sm_90a", .model_memory = true});
  for (const LayerNormCase& c : cases) {
    REQUIRE(testing::run_layer_norm_case(modelled, c).ok);
    REQUIRE(testing::run_layer_norm_backward_case(modelled, c).ok);
  }
  std::vector<KernelWork> kernels;
  for (const KernelWork& kernel : modelled.emulated_work()) {
    if (kernel.kernel.find("param_grad") != std::string::npos) continue;
    REQUIRE(kernel.work.memory.modelled);
    kernels.push_back(kernel);
  }
  return kernels;
}

}  // namespace

TEST_CASE("memory model: the layer-norm rows loaded ahead are in flight until they are used") {
  // 36 KB an SM is what 4.8 TB/s needs at 1 µs over 132 SMs. The bounded forward keeps six
  // row groups of 16 bytes a thread ahead (512 threads), its backward three of x and dy, the
  // unbounded forward's first pass two vectors (1024 threads), the unbounded backward's two of
  // x and dy: 48 KB, 48 KB, 32 KB and 64 KB, where a vector a thread used at its load was 8 to
  // 16 KB. 1024 rows give each block more groups than it loads ahead.
  const LayerNormCase bounded{.rows = 1024, .cols = 4096, .dtype = DType::bf16};
  const LayerNormCase unbounded{.rows = 264, .cols = 16384, .dtype = DType::bf16};
  int checked = 0;
  for (const KernelWork& kernel : modelled_row_kernels({bounded, unbounded})) {
    CAPTURE(kernel.kernel);
    const bool x_and_dy = kernel.kernel.find("backward.bf16.ln.colsany") != std::string::npos;
    const bool in_registers = kernel.kernel.find(".cols4096.") != std::string::npos;
    const unsigned least = x_and_dy ? 65536u : in_registers ? 49152u : 32768u;
    CHECK(kernel.work.memory.bytes_in_flight_per_cta >= least);
    ++checked;
  }
  CHECK(checked == 4);
}

TEST_CASE("memory model: a row of 1536 columns keeps its block's threads busy, 36 KB an SM") {
  // The smallest bucket holding a row is at least half full: 1536 columns take the 2048
  // bucket's 256 threads (192 of them load), two rows a block. In the 4096 bucket (the
  // smallest before the 2048 one) 192 of its 512 threads loaded: 12.8 KB an SM in flight
  // (18 KB with this kernel's six groups ahead).
  const LayerNormCase c{.rows = 2048, .cols = 1536, .dtype = DType::bf16};  // 7 groups a block
  int checked = 0;
  for (const KernelWork& kernel : modelled_row_kernels({c})) {
    CAPTURE(kernel.kernel);
    CHECK(kernel.kernel.find(".cols2048.t256.v8.") != std::string::npos);
    CHECK(kernel.work.memory.bytes_in_flight_per_sm >= 36864u);
    ++checked;
  }
  CHECK(checked == 2);
}
