// attention-decode's tuning workspace: the call shape a decoding step has, every sequence at
// the full context, so each candidate reads the whole cache.
#include <algorithm>
#include <numeric>

#include "autotune/workspace.hpp"
#include "kernels/attention_inference.hpp"

namespace flashjit::autotune {
namespace {

// The query tokens [batch, seqlen_q, heads_q, head_dim] and their outputs, and the cache: pages
// [num_pages, page_size, heads_kv, head_dim] found through a shuffled page table, or a dense
// [batch, seqlen_k, heads_kv, head_dim]; per-sequence key counts when the layout has them.
class DecodeWorkspace final : public TuningWorkspace {
 public:
  DecodeWorkspace(detail::RuntimeBackend& backend, const TuningProblem& problem)
      : backend_(backend), problem_(problem), rng_(0x5eed) {
    const Attention& a = problem.attention;
    const kernels::CacheLayout cache = problem.cache;
    q_ = tensor({a.batch, a.seqlen_q, a.heads_q, a.head_dim}, true);
    o_ = tensor({a.batch, a.seqlen_q, a.heads_q, a.head_dim}, false);
    lse_.buffer =
        backend.allocate_buffer(static_cast<std::size_t>(a.batch * a.heads_q * a.seqlen_q) * 4);
    lse_.view = lse_tensor(static_cast<float*>(lse_.buffer.data()), a);
    if (cache.page_size > 0) {
      const std::int64_t pages = (a.seqlen_k + cache.page_size - 1) / cache.page_size;
      k_ = tensor({a.batch * pages, cache.page_size, a.heads_kv, a.head_dim}, true);
      v_ = tensor({a.batch * pages, cache.page_size, a.heads_kv, a.head_dim}, true);
      // Shuffled, as a cache that has served many requests is: no two neighbours adjacent.
      std::vector<std::int32_t> table(static_cast<std::size_t>(a.batch * pages));
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), rng_);
      page_table_ = indices(table, {a.batch, pages});
      sequences_.page_table = page_table_.view;
    } else {
      k_ = tensor({a.batch, a.seqlen_k, a.heads_kv, a.head_dim}, true);
      v_ = tensor({a.batch, a.seqlen_k, a.heads_kv, a.head_dim}, true);
    }
    if (cache.varlen) {
      const std::vector<std::int32_t> lengths(static_cast<std::size_t>(a.batch),
                                              static_cast<std::int32_t>(a.seqlen_k));
      seqlens_k_ = indices(lengths, {a.batch});
      sequences_.seqlens_k = seqlens_k_.view;
    }
  }

  void run(const TunedConfig& config, Stream stream) override {
    // The tuner's own arrays are in range: the device-side check would only add a launch.
    kernels::attention_forward_sequences(backend_, problem_.attention, sequences_, q_.view, k_.view,
                                         v_.view, o_.view, lse_.view,
                                         std::get<kernels::InferenceConfig>(config),
                                         /*check_indices=*/false, stream);
  }

  std::vector<float> outputs() override { return read_16bit(backend_, o_.buffer, problem_.dtype); }

 private:
  WorkspaceTensor tensor(std::initializer_list<std::int64_t> shape, bool random) {
    std::int64_t count = 1;
    for (std::int64_t n : shape) count *= n;
    WorkspaceTensor t;
    t.buffer = upload_16bit(backend_, problem_.dtype, count, rng_, random);
    t.view = TensorView::contiguous(t.buffer.data(), problem_.dtype, shape);
    return t;
  }

  WorkspaceTensor indices(const std::vector<std::int32_t>& values,
                          std::initializer_list<std::int64_t> shape) {
    WorkspaceTensor t;
    t.buffer = backend_.allocate_buffer(values.size() * sizeof(std::int32_t));
    backend_.copy_to_device(t.buffer.data(), values.data(), values.size() * sizeof(std::int32_t));
    t.view = TensorView::contiguous(t.buffer.data(), DType::i32, shape);
    return t;
  }

  detail::RuntimeBackend& backend_;
  const TuningProblem& problem_;
  std::mt19937_64 rng_;
  WorkspaceTensor q_, k_, v_, o_, lse_, page_table_, seqlens_k_;
  Sequences sequences_;
};

}  // namespace

std::unique_ptr<TuningWorkspace> make_decode_workspace(detail::RuntimeBackend& backend,
                                                       const TuningProblem& problem) {
  return std::make_unique<DecodeWorkspace>(backend, problem);
}

}  // namespace flashjit::autotune
