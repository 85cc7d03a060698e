// The layer norm ops' tuning workspace: the tensors of one call of the problem's shape, fused
// as the problem says, with every output a training step writes (the statistics included).
#include "autotune/workspace.hpp"
#include "kernels/layer_norm.hpp"

namespace flashjit::autotune {
namespace {

// x, gamma, beta, the fused adds' bias and residual and the forward's outputs y, sum, mean and
// rstd; for the backward, dy and its outputs dx, dgamma, dbeta and dbias, with mean and rstd
// from one run of the default forward on x.
class LayerNormWorkspace final : public TuningWorkspace {
 public:
  LayerNormWorkspace(detail::RuntimeBackend& backend, const TuningProblem& problem)
      : backend_(backend), problem_(problem), rng_(0x5eed) {
    const kernels::LayerNormShape& n = problem.norm;
    const bool backward = problem.op == TunedOp::layer_norm_backward;
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
    kernels::layer_norm(backend, options_, x_.view, gamma_.view, beta_.view, y_.view, mean_.view,
                        rstd_.view,
                        kernels::default_layer_norm_config(problem.dtype, n.rms, n.cols), nullptr);
    backend.synchronize(nullptr);
  }

  void run(const TunedConfig& config, Stream stream) override {
    if (const auto* backward = std::get_if<kernels::LayerNormBackwardConfig>(&config)) {
      kernels::layer_norm_backward(backend_, options_, x_.view, gamma_.view, mean_.view, rstd_.view,
                                   dy_.view, dx_.view, dgamma_.view, dbeta_.view, dbias_.view,
                                   *backward, stream);
    } else {
      kernels::layer_norm(backend_, options_, x_.view, gamma_.view, beta_.view, y_.view, mean_.view,
                          rstd_.view, std::get<kernels::LayerNormConfig>(config), stream);
    }
  }

  std::vector<float> outputs() override {
    const bool backward = problem_.op == TunedOp::layer_norm_backward;
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
      t.buffer = upload_16bit(backend_, problem_.dtype, count, rng_, random);
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
    if (t.view.dtype != DType::f32) return read_16bit(backend_, t.buffer, t.view.dtype);
    std::vector<float> values(t.buffer.size() / sizeof(float));
    backend_.copy_to_host(values.data(), t.buffer.data(), t.buffer.size());
    return values;
  }

  detail::RuntimeBackend& backend_;
  const TuningProblem& problem_;
  std::mt19937_64 rng_;
  LayerNorm options_;
  WorkspaceTensor x_, gamma_, beta_, bias_, residual_, sum_, y_, mean_, rstd_;
  WorkspaceTensor dy_, dx_, dgamma_, dbeta_, dbias_;
};

}  // namespace

std::unique_ptr<TuningWorkspace> make_layer_norm_workspace(detail::RuntimeBackend& backend,
                                                           const TuningProblem& problem) {
  return std::make_unique<LayerNormWorkspace>(backend, problem);
}

}  // namespace flashjit::autotune
