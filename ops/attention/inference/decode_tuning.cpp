// attention-decode's tuning description (decode_tuning.hpp) and its workspace: the call shape a
// decoding step has, every sequence at the full context, so each candidate reads the whole
// cache.
#include "attention/inference/decode_tuning.hpp"

#include <algorithm>
#include <numeric>
#include <random>

#include "attention/inference/attention_inference.hpp"
#include "autotune/workspace.hpp"

namespace flashjit::autotune {

std::string TunedConfigTraits<kernels::InferenceConfig>::name(
    const kernels::InferenceConfig& config) {
  return TunedConfigTraits<kernels::ForwardConfig>::name(config.forward) + ".splits" +
         std::to_string(config.splits);
}

std::vector<detail::KernelSpec> TunedConfigTraits<kernels::InferenceConfig>::specs(
    const kernels::InferenceConfig& config, const std::string& arch) {
  return kernels::inference_specs(config, arch);
}

int TunedConfigTraits<kernels::InferenceConfig>::threads(const kernels::InferenceConfig& config,
                                                         const std::vector<detail::KernelSpec>&) {
  return config.forward.warps * 32;
}

}  // namespace flashjit::autotune

namespace flashjit::kernels {

using autotune::shape_bucket;
using autotune::TunedConfig;
using autotune::WorkspaceTensor;

namespace {

// The query tokens [batch, seqlen_q, heads_q, head_dim] and their outputs, and the cache: pages
// [num_pages, page_size, heads_kv, head_dim] found through a shuffled page table, or a dense
// [batch, seqlen_k, heads_kv, head_dim]; per-sequence key counts when the layout has them.
class DecodeWorkspace final : public autotune::TuningWorkspace {
 public:
  DecodeWorkspace(detail::RuntimeBackend& backend, const DecodeProblem& problem)
      : backend_(backend), problem_(problem), rng_(0x5eed) {
    const Attention& a = problem.attention;
    const CacheLayout cache = problem.cache;
    q_ = tensor({a.batch, a.seqlen_q, a.heads_q, a.head_dim}, true);
    o_ = tensor({a.batch, a.seqlen_q, a.heads_q, a.value_head_dim()}, false);
    lse_.buffer =
        backend.allocate_buffer(static_cast<std::size_t>(a.batch * a.heads_q * a.seqlen_q) * 4);
    lse_.view = lse_tensor(static_cast<float*>(lse_.buffer.data()), a);
    const DType kv = cache.kv_e4m3 ? DType::e4m3 : problem.dtype;
    if (cache.page_size > 0) {
      const std::int64_t pages = (a.seqlen_k + cache.page_size - 1) / cache.page_size;
      k_ = tensor({a.batch * pages, cache.page_size, a.heads_kv, a.head_dim}, true, kv);
      v_ = tensor({a.batch * pages, cache.page_size, a.heads_kv, a.value_head_dim()}, true, kv);
      // Shuffled, as a cache that has served many requests is: no two neighbours adjacent.
      std::vector<std::int32_t> table(static_cast<std::size_t>(a.batch * pages));
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), rng_);
      page_table_ = indices(table, {a.batch, pages});
      sequences_.page_table = page_table_.view;
    } else {
      k_ = tensor({a.batch, a.seqlen_k, a.heads_kv, a.head_dim}, true, kv);
      v_ = tensor({a.batch, a.seqlen_k, a.heads_kv, a.value_head_dim()}, true, kv);
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
    attention_forward_sequences(backend_, problem_.attention, sequences_, q_.view, k_.view, v_.view,
                                o_.view, lse_.view, config.get<InferenceConfig>(),
                                /*check_indices=*/false, stream);
  }

  std::vector<float> outputs() override {
    return autotune::read_16bit(backend_, o_.buffer, problem_.dtype);
  }

 private:
  /// A tensor of `dtype` (the problem's by default), random in [-1, 1] or zero; an fp8
  /// cache's values are e4m3 codes of such values.
  WorkspaceTensor tensor(std::initializer_list<std::int64_t> shape, bool random) {
    return tensor(shape, random, problem_.dtype);
  }
  WorkspaceTensor tensor(std::initializer_list<std::int64_t> shape, bool random, DType dtype) {
    std::int64_t count = 1;
    for (std::int64_t n : shape) count *= n;
    WorkspaceTensor t;
    if (dtype == DType::e4m3) {
      std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
      std::vector<std::uint8_t> codes(static_cast<std::size_t>(count));
      for (std::uint8_t& code : codes) code = e4m3_bits_from_float(random ? uniform(rng_) : 0.0f);
      t.buffer = backend_.allocate_buffer(codes.size());
      backend_.copy_to_device(t.buffer.data(), codes.data(), codes.size());
    } else {
      t.buffer = autotune::upload_16bit(backend_, dtype, count, rng_, random);
    }
    t.view = TensorView::contiguous(t.buffer.data(), dtype, shape);
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
  DecodeProblem problem_;
  std::mt19937_64 rng_;
  WorkspaceTensor q_, k_, v_, o_, lse_, page_table_, seqlens_k_;
  Sequences sequences_;
};

// The key's name of a decoding call's cache.
std::string cache_name(CacheLayout cache) {
  const std::string format = cache.kv_e4m3 ? "-e4m3" : "";
  if (cache.page_size > 0) return "paged" + std::to_string(cache.page_size) + format;
  return (cache.varlen ? "varlen" : "dense") + format;
}

}  // namespace

DecodeProblem::DecodeProblem(DType dtype_, const Attention& attention_, CacheLayout cache_,
                             int sm_count_)
    : attention(attention_), cache(cache_), sm_count(sm_count_) {
  dtype = dtype_;
}

std::string_view DecodeProblem::op() const { return "attention-decode"; }

std::string DecodeProblem::key() const {
  const Attention& a = attention;
  const auto bucket = [](std::int64_t n) { return std::to_string(shape_bucket(n)); };
  const std::int64_t group = a.heads_kv > 0 ? a.heads_q / a.heads_kv : 0;
  return attention_key_head(dtype, a.head_dim, mask_key(a), a.softcap > 0.0f, false,
                            value_dim_key(a)) +
         "/" + cache_name(cache) + "/q" + bucket(a.seqlen_q) + "/k" + bucket(a.seqlen_k) + "/b" +
         bucket(a.batch) + "/hkv" + bucket(a.heads_kv) + "/g" + bucket(group);
}

autotune::ShapeFields DecodeProblem::shape_fields() const {
  const Attention& a = attention;
  const std::int64_t group = a.heads_kv > 0 ? a.heads_q / a.heads_kv : 0;
  return {a.head_dim,
          static_cast<std::int64_t>(forward_mask_kind(a)),
          a.softcap > 0.0f,
          shape_bucket(a.seqlen_q),
          shape_bucket(a.seqlen_k),
          shape_bucket(a.batch),
          shape_bucket(a.heads_kv),
          shape_bucket(group),
          cache.varlen,
          cache.page_size,
          value_dim_key(a),
          cache.kv_e4m3};
}

std::string DecodeProblem::describe() const {
  const Attention& a = attention;
  return std::string(op()) + " " + std::string(dtype_name(dtype)) + " " +
         head_dim_name(a.head_dim, value_dim_key(a)) + " batch " + std::to_string(a.batch) + " x " +
         std::to_string(a.seqlen_q) + " queries, context " + std::to_string(a.seqlen_k) +
         ", heads " + std::to_string(a.heads_q) + ":" + std::to_string(a.heads_kv) + ", " +
         (cache.page_size > 0 ? "pages of " + std::to_string(cache.page_size)
                              : std::string("dense cache")) +
         (cache.kv_e4m3 ? " (e4m3)" : "") + (a.causal ? " causal" : "");
}

bool DecodeProblem::empty() const {
  return attention.batch == 0 || attention.seqlen_q == 0 || attention.seqlen_k == 0;
}

double DecodeProblem::flops() const { return attention_flops(attention, attention.causal, false); }

double DecodeProblem::bytes() const {
  const Attention& a = attention;
  return static_cast<double>(a.batch * a.seqlen_k * a.heads_kv *
                             (a.head_dim + a.value_head_dim())) *
         static_cast<double>(cache.kv_e4m3 ? 1 : dtype_size(dtype));
}

TunedConfig DecodeProblem::default_config(const std::string& arch) const {
  // Without a device, the SMs of the arch's usual part: an H100 SXM's, an A100's.
  const int sms = sm_count > 0 ? sm_count : arch.rfind("sm_90", 0) == 0 ? 132 : 108;
  return default_inference_config(attention, cache, dtype, arch, sms, 0);
}

std::vector<TunedConfig> DecodeProblem::space() const {
  std::vector<TunedConfig> configs;
  for (const InferenceConfig& c : decode_configs(attention, cache, dtype)) configs.emplace_back(c);
  return configs;
}

void DecodeProblem::prune_for_size(std::vector<autotune::Candidate>& candidates) const {
  // A decoding call's tile rows are its queries times the query heads packed with them.
  const std::int64_t rows = shape_bucket(attention.seqlen_q * packed_group(attention));
  const std::int64_t keys = shape_bucket(attention.seqlen_k);
  const auto tiles = [](const TunedConfig& config) {
    const ForwardConfig& f = config.get<InferenceConfig>().forward;
    return TileSize{f.block_m, f.block_n};
  };
  // Each kernel's tiles against its own smallest: the decode kernel's 16 rows do not make the
  // mma.sync kernel's 64 redundant (which of them is faster is the timing's to find).
  for (const bool decode : {false, true}) {
    std::vector<std::size_t> members;
    std::vector<autotune::Candidate> family;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      const bool on_decode =
          candidates[i].config.get<InferenceConfig>().forward.path() == ForwardPath::decode;
      if (on_decode != decode) continue;
      members.push_back(i);
      family.push_back(candidates[i]);
    }
    prune_tiles_for_size(family, rows, keys, tiles);
    for (std::size_t j = 0; j < members.size(); ++j) {
      candidates[members[j]].pruned = family[j].pruned;
    }
  }
  for (autotune::Candidate& c : candidates) {
    if (!c.pruned.empty() || c.is_default) continue;
    const InferenceConfig& config = c.config.get<InferenceConfig>();
    if (config.splits > 1 && config.splits * config.forward.block_n > keys) {
      c.pruned = "splits " + std::to_string(config.splits) + " x Bc " +
                 std::to_string(config.forward.block_n) + " > " + std::to_string(keys) +
                 " keys (a split would get no key block)";
    }
  }
}

std::unique_ptr<autotune::TuningWorkspace> DecodeProblem::workspace(
    detail::RuntimeBackend& backend) const {
  return std::make_unique<DecodeWorkspace>(backend, *this);
}

}  // namespace flashjit::kernels
