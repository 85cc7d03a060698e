// The layer norm ops' tuning description (layer_norm_tuning.hpp) and their workspace: the
// tensors of one call of the problem's shape, fused as the problem says, with every output a
// training step writes (the statistics included).
#include "layer_norm/layer_norm_tuning.hpp"

#include <random>
#include <utility>

#include "autotune/workspace.hpp"
#include "layer_norm/layer_norm_space.cuh"

namespace flashjit::autotune {

std::string TunedConfigTraits<kernels::LayerNormConfig>::name(
    const kernels::LayerNormConfig& config) {
  const std::string bucket = config.max_cols > 0 ? std::to_string(config.max_cols) : "any";
  return "c" + bucket + ".t" + std::to_string(config.threads_per_row) + ".v" +
         std::to_string(config.vector_width);
}

std::vector<detail::KernelSpec> TunedConfigTraits<kernels::LayerNormConfig>::specs(
    const kernels::LayerNormConfig& config, const std::string& arch) {
  return {kernels::layer_norm_spec(config, arch)};
}

int TunedConfigTraits<kernels::LayerNormConfig>::threads(
    const kernels::LayerNormConfig&, const std::vector<detail::KernelSpec>& specs) {
  return specs.front().threads;  // the row kernel's block
}

std::string TunedConfigTraits<kernels::LayerNormBackwardConfig>::name(
    const kernels::LayerNormBackwardConfig& config) {
  return TunedConfigTraits<kernels::LayerNormConfig>::name(config.row);
}

std::vector<detail::KernelSpec> TunedConfigTraits<kernels::LayerNormBackwardConfig>::specs(
    const kernels::LayerNormBackwardConfig& config, const std::string& arch) {
  return {kernels::layer_norm_backward_spec(config.row, arch),
          kernels::layer_norm_param_grad_spec(config.row.dtype, arch)};
}

int TunedConfigTraits<kernels::LayerNormBackwardConfig>::threads(
    const kernels::LayerNormBackwardConfig&, const std::vector<detail::KernelSpec>& specs) {
  return specs.front().threads;  // the row kernel's block
}

}  // namespace flashjit::autotune

namespace flashjit::kernels {

using autotune::shape_bucket;
using autotune::TunedConfig;
using autotune::WorkspaceTensor;

namespace {

// The row kernel's config of a layer norm op's config.
const LayerNormConfig& row_config(const TunedConfig& config) {
  if (const auto* backward = config.get_if<LayerNormBackwardConfig>()) return backward->row;
  return config.get<LayerNormConfig>();
}

// The smallest bounded bucket of the space that holds rows of `cols`; 0 when none does.
int smallest_bucket(int cols) {
  for (int max_cols : layer_norm_space::kMaxColsBuckets) {
    if (max_cols >= cols) return max_cols;
  }
  return 0;
}

// x, gamma, beta, the fused adds' bias and residual and the forward's outputs y, sum, mean and
// rstd; for the backward, dy and its outputs dx, dgamma, dbeta and dbias, with mean and rstd
// from one run of the default forward on x.
class LayerNormWorkspace final : public autotune::TuningWorkspace {
 public:
  LayerNormWorkspace(detail::RuntimeBackend& backend, const LayerNormProblem& problem)
      : backend_(backend), problem_(problem), rng_(0x5eed) {
    const LayerNormShape& n = problem.norm;
    const bool backward = problem.backward;
    options_.rms = n.rms;
    x_ = tensor({n.rows, n.cols}, true);
    gamma_ = tensor({n.cols}, true);
    if (!n.rms) beta_ = tensor({n.cols}, true);
    if (!backward && n.bias) options_.bias = (bias_ = tensor({n.cols}, true)).view;
    if (!backward && n.residual)
      options_.residual = (residual_ = tensor({n.rows, n.cols}, true)).view;
    if (!backward && (n.bias || n.residual))
      options_.sum = (sum_ = tensor({n.rows, n.cols}, false)).view;
    y_ = tensor({n.rows, n.cols}, false);
    if (!n.rms) mean_ = statistic(n.rows);
    rstd_ = statistic(n.rows);
    if (!backward) return;
    dy_ = tensor({n.rows, n.cols}, true);
    dx_ = tensor({n.rows, n.cols}, false);
    dgamma_ = tensor({n.cols}, false);
    if (!n.rms) dbeta_ = tensor({n.cols}, false);
    if (n.bias) dbias_ = tensor({n.cols}, false);
    // The backward reads the statistics of its x: the default forward's.
    layer_norm(backend, options_, x_.view, gamma_.view, beta_.view, y_.view, mean_.view, rstd_.view,
               default_layer_norm_config(problem.dtype, n.rms, n.cols), nullptr);
    backend.synchronize(nullptr);
  }

  void run(const TunedConfig& config, Stream stream) override {
    if (const auto* backward = config.get_if<LayerNormBackwardConfig>()) {
      layer_norm_backward(backend_, options_, x_.view, gamma_.view, mean_.view, rstd_.view,
                          dy_.view, dx_.view, dgamma_.view, dbeta_.view, dbias_.view, *backward,
                          stream);
    } else {
      layer_norm(backend_, options_, x_.view, gamma_.view, beta_.view, y_.view, mean_.view,
                 rstd_.view, config.get<LayerNormConfig>(), stream);
    }
  }

  std::vector<float> outputs() override {
    const bool backward = problem_.backward;
    const std::vector<const WorkspaceTensor*> written =
        backward ? std::vector<const WorkspaceTensor*>{&dx_, &dgamma_, &dbeta_, &dbias_}
                 : std::vector<const WorkspaceTensor*>{&y_, &sum_, &mean_, &rstd_};
    std::vector<float> all;
    for (const WorkspaceTensor* t : written) {
      if (t->view.data == nullptr) continue;  // absent in this problem
      const std::vector<float> part = read(*t);
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  }

 private:
  // A tensor of the problem's dtype: standard normal values when `random`, else zeros.
  WorkspaceTensor tensor(std::initializer_list<std::int64_t> shape, bool random) {
    std::int64_t count = 1;
    for (std::int64_t n : shape) count *= n;
    WorkspaceTensor t;
    if (problem_.dtype == DType::f32) {
      t.buffer = upload_floats(count, random);
    } else {
      t.buffer = autotune::upload_16bit(backend_, problem_.dtype, count, rng_, random);
    }
    t.view = TensorView::contiguous(t.buffer.data(), problem_.dtype, shape);
    return t;
  }

  // An fp32 [rows] statistic.
  WorkspaceTensor statistic(std::int64_t rows) {
    WorkspaceTensor t;
    t.buffer = upload_floats(rows, false);
    t.view = TensorView::contiguous(t.buffer.data(), DType::f32, {rows});
    return t;
  }

  DeviceBuffer upload_floats(std::int64_t count, bool random) {
    std::vector<float> host(static_cast<std::size_t>(count), 0.0f);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    if (random) {
      for (float& x : host) x = normal(rng_);
    }
    DeviceBuffer buffer = backend_.allocate_buffer(host.size() * sizeof(float));
    backend_.copy_to_device(buffer.data(), host.data(), host.size() * sizeof(float));
    return buffer;
  }

  std::vector<float> read(const WorkspaceTensor& t) {
    if (t.view.dtype != DType::f32) return autotune::read_16bit(backend_, t.buffer, t.view.dtype);
    std::vector<float> values(t.buffer.size() / sizeof(float));
    backend_.copy_to_host(values.data(), t.buffer.data(), t.buffer.size());
    return values;
  }

  detail::RuntimeBackend& backend_;
  LayerNormProblem problem_;
  std::mt19937_64 rng_;
  LayerNorm options_;
  WorkspaceTensor x_, gamma_, beta_, bias_, residual_, sum_, y_, mean_, rstd_;
  WorkspaceTensor dy_, dx_, dgamma_, dbeta_, dbias_;
};

}  // namespace

LayerNormProblem::LayerNormProblem(bool backward_, DType dtype_, const LayerNormShape& norm_)
    : backward(backward_), norm(norm_) {
  dtype = dtype_;
}

std::string_view LayerNormProblem::op() const {
  return backward ? "layer-norm-backward" : "layer-norm";
}

std::string LayerNormProblem::key() const {
  std::string fused = norm.rms ? "rms" : "ln";
  if (norm.bias) fused += backward ? ".dbias" : ".bias";
  if (norm.residual && !backward) fused += ".residual";
  return std::string(dtype_name(dtype)) + "/c" + std::to_string(shape_bucket(norm.cols)) + "/r" +
         std::to_string(shape_bucket(norm.rows)) + "/" + fused;
}

autotune::ShapeFields LayerNormProblem::shape_fields() const {
  return {shape_bucket(norm.rows), shape_bucket(norm.cols), norm.rms, norm.bias,
          norm.residual && !backward};  // as the key
}

std::string LayerNormProblem::describe() const {
  return std::string(op()) + " " + std::string(dtype_name(dtype)) + " " +
         std::to_string(norm.rows) + " rows x " + std::to_string(norm.cols) + " cols, " +
         (norm.rms ? "RMS norm" : "layer norm") +
         (norm.bias ? (backward ? ", dbias" : ", + bias") : "") +
         (norm.residual ? ", + residual" : "");
}

bool LayerNormProblem::empty() const { return norm.rows == 0; }

double LayerNormProblem::bytes() const {
  const LayerNormShape& n = norm;
  const double element = static_cast<double>(dtype_size(dtype));
  const double row = static_cast<double>(n.rows) * n.cols * element;  // one [rows, cols] tensor
  const double column = n.cols * element;                             // one [cols] vector
  const double statistics = static_cast<double>(n.rows) * 4.0 * (n.rms ? 1 : 2);  // rstd, mean
  const double betas = n.rms ? 0 : column;
  if (backward) {
    // x, dy, dx; gamma, dgamma, dbeta, dbias; mean and rstd.
    return 3 * row + 2 * column + betas + (n.bias ? column : 0) + statistics;
  }
  // x, y, then residual and sum; gamma, beta, bias; mean and rstd.
  const bool fused = n.bias || n.residual;
  return 2 * row + (n.residual ? row : 0) + (fused ? row : 0) + column + betas +
         (n.bias ? column : 0) + statistics;
}

TunedConfig LayerNormProblem::default_config(
    const std::string& /*arch: the same on every arch*/) const {
  const LayerNormConfig config = default_layer_norm_config(dtype, norm.rms, norm.cols);
  if (backward) return LayerNormBackwardConfig{config};
  return config;
}

std::vector<TunedConfig> LayerNormProblem::space() const {
  std::vector<TunedConfig> configs;
  for (const LayerNormConfig& config : layer_norm_configs()) {
    if (config.dtype != dtype || config.rms != norm.rms) continue;
    if (backward) {
      configs.emplace_back(LayerNormBackwardConfig{config});
    } else {
      configs.emplace_back(config);
    }
  }
  return configs;
}

std::string LayerNormProblem::cannot_run(const TunedConfig& config) const {
  const LayerNormConfig& row = row_config(config);
  if (layer_norm_covers(row, norm.cols)) return "";
  return "c" + std::to_string(row.max_cols) + " holds rows of at most " +
         std::to_string(row.max_cols) + " columns, not " + std::to_string(norm.cols);
}

void LayerNormProblem::prune_for_size(std::vector<autotune::Candidate>& candidates) const {
  const int cols = norm.cols;
  const int holding = smallest_bucket(cols);
  if (holding == 0) return;  // only the unbounded bucket holds the row
  for (autotune::Candidate& c : candidates) {
    if (!c.pruned.empty() || c.is_default) continue;
    const int bucket = row_config(c.config).max_cols;
    if (bucket > holding) {
      // Built piece by piece into a new string: GCC 12 warns -Wrestrict (a false positive, GCC
      // bug 105329) at -O2 and above on "literal" + std::to_string(...), and on assigning a
      // literal to the existing string, as emulator/launch.cpp notes.
      std::string why = "c";
      why += std::to_string(bucket);
      why += " > c";
      why += std::to_string(holding);
      why += ", the smallest bucket that holds ";
      why += std::to_string(cols);
      why += " columns (the same work, more idle registers)";
      c.pruned = std::move(why);
    }
  }
}

std::unique_ptr<autotune::TuningWorkspace> LayerNormProblem::workspace(
    detail::RuntimeBackend& backend) const {
  return std::make_unique<LayerNormWorkspace>(backend, *this);
}

}  // namespace flashjit::kernels
