#include "layer_norm_case.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "cases/unit_roundoff.hpp"

namespace flashjit::testing {
namespace {

/// `value` rounded to `dtype` through float, as the kernels' conversions round.
double round_to(DType dtype, double value) {
  const auto f = static_cast<float>(value);
  if (dtype == DType::f16) return float_from_f16_bits(f16_bits_from_float(f));
  if (dtype == DType::bf16) return float_from_bf16_bits(bf16_bits_from_float(f));
  return f;
}

std::vector<double> random_values(std::size_t count, double mean, double spread, DType dtype,
                                  std::mt19937_64& rng) {
  std::normal_distribution<double> normal(mean, spread);
  std::vector<double> values(count);
  for (double& v : values) v = round_to(dtype, normal(rng));
  return values;
}

/// A [rows, cols] (or [cols]) tensor's bytes in the case's dtype, rows `stride` apart; the
/// bytes no element covers stay poisoned (0xff).
struct DeviceTensor {
  DType dtype;
  std::int64_t rows, cols, stride;
  std::vector<unsigned char> bytes;
  DeviceBuffer buffer;

  DeviceTensor(Runtime& runtime, DType type, std::int64_t r, std::int64_t c, std::int64_t s,
               const std::vector<double>& values = {})
      : dtype(type),
        rows(r),
        cols(c),
        stride(s),
        bytes(static_cast<std::size_t>(std::max<std::int64_t>(1, r * s)) * dtype_size(type), 0xff),
        buffer(runtime.allocate(bytes.size())) {
    for (std::size_t i = 0; i < values.size(); ++i) set(i, values[i]);
    runtime.copy_to_device(buffer.data(), bytes.data(), bytes.size());
  }
  std::size_t offset(std::size_t i) const {
    const auto row = static_cast<std::int64_t>(i) / cols, col = static_cast<std::int64_t>(i) % cols;
    return static_cast<std::size_t>(row * stride + col) * dtype_size(dtype);
  }
  void set(std::size_t i, double value) {
    const auto f = static_cast<float>(value);
    unsigned char* at = &bytes[offset(i)];
    if (dtype == DType::f32) return std::memcpy(at, &f, 4), void();
    const std::uint16_t bits =
        dtype == DType::f16 ? f16_bits_from_float(f) : bf16_bits_from_float(f);
    std::memcpy(at, &bits, 2);
  }
  double get(std::size_t i) const {
    const unsigned char* at = &bytes[offset(i)];
    if (dtype == DType::f32) {
      float f;
      std::memcpy(&f, at, 4);
      return f;
    }
    std::uint16_t bits;
    std::memcpy(&bits, at, 2);
    return dtype == DType::f16 ? float_from_f16_bits(bits) : float_from_bf16_bits(bits);
  }
  /// Every element, after copying the device's bytes back; `padding_ok` false if a byte
  /// between rows was written.
  std::vector<double> read(Runtime& runtime, bool& padding_ok) {
    runtime.copy_to_host(bytes.data(), buffer.data(), bytes.size());
    std::vector<double> values(static_cast<std::size_t>(rows * cols));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = get(i);
    const std::size_t element = dtype_size(dtype);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = cols; c < stride; ++c) {
        const std::size_t at = static_cast<std::size_t>(r * stride + c) * element;
        padding_ok &= std::all_of(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                                  bytes.begin() + static_cast<std::ptrdiff_t>(at + element),
                                  [](unsigned char b) { return b == 0xff; });
      }
    }
    return values;
  }
  TensorView rows_view() const {
    return TensorView::strided(buffer.data(), dtype, {rows, cols}, {stride, 1});
  }
  TensorView vector_view() const {
    return TensorView::contiguous(buffer.data(), dtype, {rows * cols});
  }
  /// A [rows] view of a one-column tensor: its elements `stride` apart.
  TensorView column_view() const {
    return TensorView::strided(buffer.data(), dtype, {rows}, {stride});
  }
};

double rms_of(const std::vector<double>& values) {
  double squares = 0;
  for (double v : values) squares += v * v;
  return values.empty() ? 0.0 : std::sqrt(squares / double(values.size()));
}

double fp32_statistics_bound(const LayerNormCase& c) {
  return 4 * unit_roundoff(DType::f32) * (1 + std::sqrt(double(c.cols)));
}

}  // namespace

std::string LayerNormCase::name() const {
  std::ostringstream s;
  s << "r" << rows << ".c" << cols << "." << dtype_name(dtype) << (rms ? ".rms" : ".ln")
    << (bias ? ".bias" : "") << (residual ? ".residual" : "")
    << (fused() && !write_sum ? ".no_sum" : "") << (padded ? ".padded" : "");
  if (offset != 0) s << ".offset" << offset;
  s << ".eps" << epsilon << ".seed" << seed;
  return s.str();
}

LayerNormInputs layer_norm_inputs(const LayerNormCase& c) {
  std::mt19937_64 rng(c.seed);
  const auto elements = static_cast<std::size_t>(c.rows * c.cols);
  const auto cols = static_cast<std::size_t>(c.cols);
  LayerNormInputs in;
  in.input = random_values(elements, c.offset, 1.0, c.dtype, rng);
  if (c.residual) in.residual = random_values(elements, 0.0, 1.0, c.dtype, rng);
  if (c.bias) in.bias = random_values(cols, 0.0, 0.5, c.dtype, rng);
  in.gamma = random_values(cols, 1.0, 0.5, c.dtype, rng);
  if (!c.rms) in.beta = random_values(cols, 0.0, 0.5, c.dtype, rng);
  in.dy = random_values(elements, 0.0, 1.0, c.dtype, rng);
  in.x = in.input;
  if (!c.fused()) return in;
  for (std::size_t i = 0; i < elements; ++i) {
    auto x = static_cast<float>(in.input[i]);  // the kernel's fp32 sum, in its order
    if (c.bias) x += static_cast<float>(in.bias[i % cols]);
    if (c.residual) x += static_cast<float>(in.residual[i]);
    in.x[i] = round_to(c.dtype, x);
  }
  return in;
}

LayerNormOutputs run_layer_norm(Runtime& runtime, const LayerNormCase& c, const LayerNormInputs& in,
                                bool backward) {
  const std::int64_t stride = c.cols + (c.padded ? 8 : 0);
  auto rows = [&](const std::vector<double>& values) {
    return DeviceTensor(runtime, c.dtype, c.rows, c.cols, stride, values);
  };
  auto vector = [&](const std::vector<double>& values, DType dtype) {
    return DeviceTensor(runtime, dtype, 1, values.empty() ? c.cols : std::int64_t(values.size()),
                        values.empty() ? c.cols : std::int64_t(values.size()), values);
  };
  // Padded, the statistics are every other element (a column of a [rows, 2] tensor): a kernel
  // that ignored their stride would write, or read, the poisoned elements between.
  auto stats = [&] { return DeviceTensor(runtime, DType::f32, c.rows, 1, c.padded ? 2 : 1); };
  DeviceTensor input = rows(in.input), residual = rows(in.residual), sum = rows({}), y = rows({});
  DeviceTensor bias = vector(in.bias, c.dtype), gamma = vector(in.gamma, c.dtype);
  DeviceTensor beta = vector(in.beta, c.dtype), mean = stats(), rstd = stats();
  LayerNorm options{.epsilon = c.epsilon, .rms = c.rms};
  if (c.bias) options.bias = bias.vector_view();
  if (c.residual) options.residual = residual.rows_view();
  const bool sum_written = c.fused() && (c.write_sum || backward);
  if (sum_written) options.sum = sum.rows_view();
  const TensorView beta_view = c.rms ? TensorView{} : beta.vector_view();
  const TensorView mean_view = c.rms ? TensorView{} : mean.column_view();
  runtime.layer_norm(options, input.rows_view(), gamma.vector_view(), beta_view, y.rows_view(),
                     mean_view, rstd.column_view());
  runtime.synchronize();
  LayerNormOutputs out;
  out.y = y.read(runtime, out.untouched_padding);
  if (sum_written) out.sum = sum.read(runtime, out.untouched_padding);
  if (!c.rms) out.mean = mean.read(runtime, out.untouched_padding);
  out.rstd = rstd.read(runtime, out.untouched_padding);
  bool unused = true;
  if (!backward) return out;

  DeviceTensor dy = rows(in.dy), dx = rows({}), dgamma = vector({}, c.dtype);
  DeviceTensor dbeta = vector({}, c.dtype), dbias = vector({}, c.dtype);
  const TensorView x_view = sum_written ? sum.rows_view() : input.rows_view();
  runtime.layer_norm_backward(
      LayerNorm{.epsilon = c.epsilon, .rms = c.rms}, x_view, gamma.vector_view(), mean_view,
      rstd.column_view(), dy.rows_view(), dx.rows_view(), dgamma.vector_view(),
      c.rms ? TensorView{} : dbeta.vector_view(), c.bias ? dbias.vector_view() : TensorView{});
  runtime.synchronize();
  out.dx = dx.read(runtime, out.untouched_padding);
  out.dgamma = dgamma.read(runtime, unused);
  if (!c.rms) out.dbeta = dbeta.read(runtime, unused);
  if (c.bias) out.dbias = dbias.read(runtime, unused);
  return out;
}

std::string LayerNormVerdict::describe() const {
  std::ostringstream s;
  s << "bound " << bound;
  for (const reference::CheckResult& check : checks) s << "\n" << check.describe();
  return s.str();
}

LayerNormVerdict run_layer_norm_case(Runtime& runtime, const LayerNormCase& c) {
  const LayerNormInputs in = layer_norm_inputs(c);
  const LayerNormOutputs out = run_layer_norm(runtime, c, in, false);
  const reference::LayerNormResult expected =
      reference::layer_norm(c.shape(), in.x, in.gamma, in.beta);
  LayerNormVerdict verdict;
  const double statistics = fp32_statistics_bound(c);
  verdict.bound = 2 * unit_roundoff(c.dtype) + statistics;
  verdict.checks.push_back(reference::check_close(out.y, expected.y, verdict.bound, "y"));
  verdict.checks.push_back(reference::check_close(out.rstd, expected.rstd, statistics, "rstd"));
  if (!c.rms) {
    // μ's error scales with the row's values (|x|·2^-24 per step), not with μ, which may be ~0.
    const double mean_bound = statistics * std::max(1.0, rms_of(in.x) / rms_of(expected.mean));
    verdict.checks.push_back(reference::check_close(out.mean, expected.mean, mean_bound, "mean"));
  }
  if (!out.sum.empty()) {
    verdict.checks.push_back(reference::check_close(out.sum, in.x, 0.0, "sum (bit-exact)"));
  }
  verdict.ok = out.untouched_padding;
  for (const reference::CheckResult& check : verdict.checks) verdict.ok &= check.ok;
  if (!out.untouched_padding)
    verdict.checks.back().report += "\nan output's row padding was written";
  return verdict;
}

LayerNormVerdict run_layer_norm_backward_case(Runtime& runtime, const LayerNormCase& c) {
  const LayerNormInputs in = layer_norm_inputs(c);
  const LayerNormOutputs out = run_layer_norm(runtime, c, in, true);
  const reference::LayerNormGradients expected =
      reference::layer_norm_backward(c.shape(), in.x, in.gamma, in.dy);
  LayerNormVerdict verdict;
  verdict.bound = 2 * (2 * unit_roundoff(c.dtype) + fp32_statistics_bound(c));
  verdict.checks.push_back(reference::check_close(out.dx, expected.dx, verdict.bound, "dx"));
  verdict.checks.push_back(
      reference::check_close(out.dgamma, expected.dgamma, verdict.bound, "dgamma"));
  if (!c.rms) {
    verdict.checks.push_back(
        reference::check_close(out.dbeta, expected.dbeta, verdict.bound, "dbeta"));
  }
  if (c.bias) {
    verdict.checks.push_back(
        reference::check_close(out.dbias, expected.dbias, verdict.bound, "dbias"));
  }
  verdict.ok = out.untouched_padding;
  for (const reference::CheckResult& check : verdict.checks) verdict.ok &= check.ok;
  if (!out.untouched_padding)
    verdict.checks.back().report += "\nan output's row padding was written";
  return verdict;
}

}  // namespace flashjit::testing
