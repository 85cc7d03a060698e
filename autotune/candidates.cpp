#include "autotune/candidates.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "autotune/layer_norm_candidates.hpp"
#include "autotune/multiscale_candidates.hpp"
#include "flashjit/error.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/parallel.hpp"
#include "runtime/template_sources.hpp"

namespace flashjit::autotune {
namespace {

using kernels::BackwardConfig;
using kernels::ForwardConfig;
using kernels::InferenceConfig;

MaskKind problem_mask(const TuningProblem& problem) {
  return kernels::forward_mask_kind(problem.attention);
}

bool problem_softcap(const TuningProblem& problem) { return problem.attention.softcap > 0.0f; }

int problem_head_dim(const TuningProblem& problem) {
  return static_cast<int>(problem.attention.head_dim);
}

// Whether the tuner times `config`: every config, except in the deterministic backward, whose
// dK/dV and dQ kernels run one after the other on outputs of their own, so that neither tile's
// time depends on the other's. There it times every dK/dV tile beside the default's dQ tile and
// every dQ tile beside the default's dK/dV tile (n + m - 1 runs instead of n x m), and then
// the pair of the two fastest (tuner.cpp).
bool timed_alone(const TunedConfig& config, const TunedConfig& fallback) {
  const TunedConfig tiles =
      attention_tiles(config);  // multi-scale attention's backward pairs the same way
  const auto* backward = std::get_if<BackwardConfig>(&tiles);
  if (backward == nullptr || !backward->deterministic) return true;
  const TunedConfig fallback_tiles = attention_tiles(fallback);
  const auto& base = std::get<BackwardConfig>(fallback_tiles);
  return backward->key == base.key || backward->query == base.query;
}

}  // namespace

Candidate make_candidate(const TunedConfig& config, const std::string& arch) {
  Candidate candidate;
  candidate.config = config;
  candidate.name = config_name(config);
  candidate.specs = config_specs(config, arch);
  candidate.shared_bytes = std::visit([](const auto& c) { return c.shared_bytes(); }, config);
  const TunedConfig tiles =
      attention_tiles(config);  // multi-scale attention runs attention's tiles
  if (is_layer_norm_config(config)) {
    candidate.threads = candidate.specs.front().threads;  // the row kernel's block
  } else if (const auto* backward = std::get_if<BackwardConfig>(&tiles)) {
    candidate.threads = backward->key.warps * 32;  // the main kernel's
  } else if (const auto* inference = std::get_if<InferenceConfig>(&config)) {
    candidate.threads = inference->forward.warps * 32;
  } else {
    candidate.threads = std::get<ForwardConfig>(tiles).warps * 32;
  }
  return candidate;
}

namespace {

// Query rows (Br) and keys (Bc) per block of a config's main kernel.
struct Tiles {
  int block_m;
  int block_n;
};
Tiles tiles_of(const TunedConfig& config) {
  if (is_multiscale_config(config)) return tiles_of(attention_tiles(config));
  if (const auto* forward = std::get_if<ForwardConfig>(&config)) {
    return {forward->block_m, forward->block_n};
  }
  if (const auto* inference = std::get_if<InferenceConfig>(&config)) {
    return {inference->forward.block_m, inference->forward.block_n};
  }
  const auto& backward = std::get<BackwardConfig>(config);
  return {backward.key.block_m, backward.key.block_n};
}

std::string kib(int bytes) { return std::to_string((bytes + 1023) / 1024) + " KB"; }

// The smallest Br and Bc among the candidates: a tile larger than the problem is pruned only
// when a smaller one exists.
Tiles smallest_tiles(const std::vector<Candidate>& candidates) {
  Tiles smallest{1 << 30, 1 << 30};
  for (const Candidate& c : candidates) {
    const Tiles t = tiles_of(c.config);
    smallest.block_m = std::min(smallest.block_m, t.block_m);
    smallest.block_n = std::min(smallest.block_n, t.block_n);
  }
  return smallest;
}

}  // namespace

const char* tuned_op_name(TunedOp op) {
  switch (op) {
    case TunedOp::attention_forward:
      return "attention-forward";
    case TunedOp::attention_backward:
      return "attention-backward";
    case TunedOp::attention_decode:
      return "attention-decode";
    case TunedOp::layer_norm:
      return "layernorm";
    case TunedOp::layer_norm_backward:
      return "layernorm-backward";
    case TunedOp::multiscale_forward:
      return "multiscale-forward";
    case TunedOp::multiscale_backward:
      return "multiscale-backward";
  }
  return "?";
}

TunedOp parse_tuned_op(const std::string& name, const std::string& argument) {
  for (TunedOp op : {TunedOp::attention_forward, TunedOp::attention_backward,
                     TunedOp::attention_decode, TunedOp::layer_norm, TunedOp::layer_norm_backward,
                     TunedOp::multiscale_forward, TunedOp::multiscale_backward}) {
    if (name == tuned_op_name(op)) return op;
  }
  throw InvalidArgument(argument, "'" + name +
                                      "' is not a tunable op; the autotuner tunes "
                                      "attention-forward, attention-backward, "
                                      "attention-decode, layernorm, layernorm-backward, "
                                      "multiscale-forward and multiscale-backward");
}

namespace {

// The key's name of a decoding call's cache.
std::string cache_name(kernels::CacheLayout cache) {
  if (cache.page_size > 0) return "paged" + std::to_string(cache.page_size);
  return cache.varlen ? "varlen" : "dense";
}

// The SMs a decode problem's default split count fills.
int problem_sm_count(const TuningProblem& problem, const std::string& arch) {
  if (problem.sm_count > 0) return problem.sm_count;
  return arch.rfind("sm_90", 0) == 0 ? 132 : 108;  // an H100 SXM's, an A100's
}

}  // namespace

TuningProblem make_problem(TunedOp op, DType dtype, const Attention& attention) {
  TuningProblem problem;
  problem.op = op;
  problem.dtype = dtype;
  problem.attention = attention;
  return problem;
}

TuningKey tuning_key(const TuningProblem& problem) {
  const Attention& a = problem.attention;
  TuningKey key;
  key.op = tuned_op_name(problem.op);
  // Any template change may move the optimum, so the whole set's digest is part of the key.
  key.template_hash = detail::TemplateSet::active().digest().substr(0, 16);
  key.dtype = std::string(dtype_name(problem.dtype));
  if (is_layer_norm(problem.op)) {
    fill_layer_norm_key(problem, key);
    return key;
  }
  key.head_dim = problem_head_dim(problem);
  key.mask = problem_mask(problem) == MaskKind::window ? "window" : "none";
  if (is_multiscale(problem.op)) {
    key.mask = problem.multiscale_mask == MultiScaleMask::decay ? "decay" : "tensor";
  }
  key.softcap = problem_softcap(problem);
  key.deterministic = problem.op == TunedOp::attention_backward && a.deterministic;
  key.seqlen_q = a.seqlen_q;
  key.seqlen_k = a.seqlen_k;
  key.batch_heads = a.batch * a.heads_q;
  if (problem.op == TunedOp::attention_decode) {
    key.cache = cache_name(problem.cache);
    key.batch = a.batch;
    key.heads_kv = a.heads_kv;
    key.group = a.heads_kv > 0 ? a.heads_q / a.heads_kv : 0;
    key.batch_heads = 0;
  }
  return key;
}

double problem_flops(const TuningProblem& problem) {
  if (is_layer_norm(problem.op)) return 0;  // memory-bound: see problem_bytes
  const Attention& a = problem.attention;
  const bool windowed = a.window_left >= 0 || (!a.causal && a.window_right >= 0);
  const double full = static_cast<double>(a.seqlen_q) * static_cast<double>(a.seqlen_k);
  // FlashAttention's convention, so that TFLOP/s compare with the peers': every pair, halved
  // for causal; only a sliding window, which it does not define, counts the pairs it keeps.
  // Multi-scale attention's decay mask is causal: its blocks above the diagonal are skipped.
  const bool causal =
      a.causal || (is_multiscale(problem.op) && problem.multiscale_mask == MultiScaleMask::decay);
  const double pairs = windowed ? kernels::visible_pairs(a) : causal ? full / 2 : full;
  const double forward =
      4.0 * static_cast<double>(a.batch * a.heads_q) * pairs * static_cast<double>(a.head_dim);
  const bool backward =
      problem.op == TunedOp::attention_backward || problem.op == TunedOp::multiscale_backward;
  return backward ? 2.5 * forward : forward;
}

bool problem_empty(const TuningProblem& problem) {
  if (is_layer_norm(problem.op)) return problem.norm.rows == 0;
  const Attention& a = problem.attention;
  return a.batch == 0 || a.seqlen_q == 0 || a.seqlen_k == 0;
}

double problem_bytes(const TuningProblem& problem) {
  if (is_layer_norm(problem.op)) return layer_norm_bytes(problem);
  if (problem.op != TunedOp::attention_decode) return 0;
  const Attention& a = problem.attention;
  return 2.0 * static_cast<double>(a.batch * a.seqlen_k * a.heads_kv * a.head_dim) *
         static_cast<double>(dtype_size(problem.dtype));
}

namespace {
/// The forward config name's mark of the kernel it runs (the mma.sync path has none).
const char* path_suffix(kernels::ForwardPath path) {
  switch (path) {
    case kernels::ForwardPath::wgmma:
      return ".wgmma";
    case kernels::ForwardPath::tma:
      return ".tma";
    case kernels::ForwardPath::mma_sync:
      break;
  }
  return "";
}
}  // namespace

std::string config_name(const TunedConfig& config) {
  if (is_multiscale_config(config)) return config_name(attention_tiles(config));
  if (is_layer_norm_config(config)) {
    return layer_norm_config_name(row_config(config));
  }
  if (const auto* f = std::get_if<ForwardConfig>(&config)) {
    return "br" + std::to_string(f->block_m) + ".bc" + std::to_string(f->block_n) + ".w" +
           std::to_string(f->warps) + ".s" + std::to_string(f->stages) +
           (f->q_in_registers ? ".qreg" : "") + path_suffix(f->path) +
           (f->overlap ? ".overlap" : "") + (f->pingpong ? ".pingpong" : "") +
           (f->p_in_shared ? ".pshared" : "") + (f->persistent ? ".persistent" : "") +
           (f->cluster ? ".cluster2" : "");
  }
  if (const auto* inference = std::get_if<InferenceConfig>(&config)) {
    return config_name(inference->forward) + ".splits" + std::to_string(inference->splits);
  }
  const auto& b = std::get<BackwardConfig>(config);
  std::string name = "br" + std::to_string(b.key.block_m) + ".bc" + std::to_string(b.key.block_n) +
                     ".w" + std::to_string(b.key.warps) + ".s" + std::to_string(b.key.stages);
  if (b.deterministic) {
    name += ".dq.br" + std::to_string(b.query.block_m) + ".bc" + std::to_string(b.query.block_n) +
            ".w" + std::to_string(b.query.warps);
  }
  return name;
}

std::vector<detail::KernelSpec> config_specs(const TunedConfig& config, const std::string& arch) {
  if (is_multiscale_config(config)) return multiscale_specs(config, arch);
  if (const auto* forward = std::get_if<ForwardConfig>(&config)) {
    return {kernels::forward_spec(*forward, arch)};
  }
  if (const auto* inference = std::get_if<InferenceConfig>(&config)) {
    return kernels::inference_specs(*inference, arch);
  }
  if (const auto* norm = std::get_if<kernels::LayerNormConfig>(&config)) {
    return {kernels::layer_norm_spec(*norm, arch)};
  }
  if (const auto* norm = std::get_if<kernels::LayerNormBackwardConfig>(&config)) {
    return {kernels::layer_norm_backward_spec(norm->row, arch),
            kernels::layer_norm_param_grad_spec(norm->row.dtype, arch)};
  }
  return kernels::backward_specs(std::get<BackwardConfig>(config), arch).in_order();
}

TunedConfig default_config(const TuningProblem& problem, const std::string& arch) {
  if (is_layer_norm(problem.op)) return layer_norm_default(problem);  // the same on every arch
  if (is_multiscale(problem.op)) return multiscale_default(problem, arch);
  const int head_dim = problem_head_dim(problem);
  const MaskKind mask = problem_mask(problem);
  const bool softcap = problem_softcap(problem);
  if (problem.op == TunedOp::attention_forward) {
    return kernels::default_forward_config(problem.dtype, head_dim, mask, softcap, arch);
  }
  if (problem.op == TunedOp::attention_decode) {
    return kernels::default_inference_config(problem.attention, problem.cache, problem.dtype, arch,
                                             problem_sm_count(problem, arch), 0);
  }
  return kernels::default_backward_config(problem.dtype, head_dim, mask, softcap,
                                          problem.attention.deterministic, arch);
}

std::vector<TunedConfig> space_configs(const TuningProblem& problem) {
  if (is_layer_norm(problem.op)) return layer_norm_space(problem);
  if (is_multiscale(problem.op)) return multiscale_space(problem);
  const int head_dim = problem_head_dim(problem);
  const MaskKind mask = problem_mask(problem);
  const bool softcap = problem_softcap(problem);
  std::vector<TunedConfig> configs;
  if (problem.op == TunedOp::attention_forward) {
    for (const ForwardConfig& c :
         kernels::forward_configs(problem.dtype, head_dim, mask, softcap)) {
      configs.emplace_back(c);
    }
  } else if (problem.op == TunedOp::attention_decode) {
    for (const InferenceConfig& c :
         kernels::decode_configs(problem.attention, problem.cache, problem.dtype)) {
      configs.emplace_back(c);
    }
  } else {
    for (const BackwardConfig& c : kernels::backward_configs(problem.dtype, head_dim, mask, softcap,
                                                             problem.attention.deterministic)) {
      configs.emplace_back(c);
    }
  }
  return configs;
}

std::vector<Candidate> enumerate_candidates(const TuningProblem& problem, const std::string& arch) {
  const TunedConfig fallback = default_config(problem, arch);
  std::vector<Candidate> candidates;
  for (const TunedConfig& config : space_configs(problem)) {
    if (!timed_alone(config, fallback)) continue;
    const auto* forward = std::get_if<ForwardConfig>(&config);
    if (forward != nullptr && !kernels::runs_on(*forward, arch)) continue;  // Hopper: sm_90a
    candidates.push_back(make_candidate(config, arch));
    candidates.back().is_default = config == fallback;
  }
  // attention-decode's default split count fills the device's SMs, which the space's powers of
  // two may miss: it is timed anyway, as every winner must beat it.
  if (std::none_of(candidates.begin(), candidates.end(),
                   [](const Candidate& c) { return c.is_default; })) {
    candidates.push_back(make_candidate(fallback, arch));
    candidates.back().is_default = true;
  }
  return candidates;
}

std::string cannot_run(const TunedConfig& config, const TuningProblem& problem) {
  if (!is_layer_norm(problem.op)) return "";
  const kernels::LayerNormConfig& row = row_config(config);
  if (kernels::layer_norm_covers(row, problem.norm.cols)) return "";
  return "c" + std::to_string(row.max_cols) + " holds rows of at most " +
         std::to_string(row.max_cols) + " columns, not " + std::to_string(problem.norm.cols);
}

namespace {

// Attention's tiles larger than the problem (see prune_static).
void prune_attention_tiles(std::vector<Candidate>& candidates, const TuningProblem& problem) {
  const Tiles smallest = smallest_tiles(candidates);
  const Attention& a = problem.attention;
  const bool decode = problem.op == TunedOp::attention_decode;
  // A decoding call's tile rows are its queries times the query heads packed with them.
  const std::int64_t rows = shape_bucket(a.seqlen_q * (decode ? kernels::packed_group(a) : 1));
  const std::int64_t keys = shape_bucket(a.seqlen_k);
  for (Candidate& c : candidates) {
    if (!c.pruned.empty() || c.is_default) continue;
    const Tiles t = tiles_of(c.config);
    if (t.block_m > smallest.block_m && t.block_m > rows) {
      c.pruned = "Br " + std::to_string(t.block_m) + " > " + std::to_string(rows) +
                 " query rows (a smaller Br covers them)";
    } else if (t.block_n > smallest.block_n && t.block_n > keys) {
      c.pruned = "Bc " + std::to_string(t.block_n) + " > " + std::to_string(keys) +
                 " keys (a smaller Bc covers them)";
    } else if (const auto* inference = std::get_if<InferenceConfig>(&c.config);
               inference != nullptr && inference->splits > 1 &&
               inference->splits * t.block_n > keys) {
      c.pruned = "splits " + std::to_string(inference->splits) + " x Bc " +
                 std::to_string(t.block_n) + " > " + std::to_string(keys) +
                 " keys (a split would get no key block)";
    }
  }
}

}  // namespace

void prune_static(std::vector<Candidate>& candidates, const TuningProblem& problem,
                  int shared_limit) {
  for (Candidate& c : candidates) {
    if (!c.pruned.empty()) continue;
    if (c.shared_bytes > shared_limit) {
      c.pruned = "shared memory " + kib(c.shared_bytes) + " > the device's " + kib(shared_limit);
    } else {
      c.pruned = cannot_run(c.config, problem);
    }
  }
  if (is_layer_norm(problem.op)) {
    prune_layer_norm_buckets(candidates, problem);
  } else {
    prune_attention_tiles(candidates, problem);
  }
}

int blocks_per_sm(int registers, int threads, int shared_bytes, int shared_limit,
                  const std::string& arch) {
  constexpr int kRegistersPerSm = 64 * 1024;
  constexpr int kMaxBlocksPerSm = 32;
  const bool consumer = arch.rfind("sm_86", 0) == 0 || arch.rfind("sm_89", 0) == 0;
  const int threads_per_sm = consumer ? 1536 : 2048;
  if (threads <= 0 || threads > 1024 || shared_bytes > shared_limit) return 0;
  // Registers are allocated per warp in units of 256 (8 per thread, rounded up).
  const int per_thread = (std::max(registers, 1) + 7) / 8 * 8;
  const int warps = (threads + 31) / 32;
  int blocks = std::min(kMaxBlocksPerSm, threads_per_sm / (warps * 32));
  blocks = std::min(blocks, kRegistersPerSm / (per_thread * 32 * warps));
  if (shared_bytes > 0) blocks = std::min(blocks, shared_limit / shared_bytes);
  return std::max(blocks, 0);
}

void prune_on_resources(std::vector<Candidate>& candidates, const std::string& arch,
                        int shared_limit, int jobs, const std::function<void(int, int)>& progress) {
  // Flatten (candidate, spec) pairs of the candidates still in the running.
  struct Job {
    std::size_t candidate;
    std::size_t spec;
  };
  std::vector<Job> work;
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    if (!candidates[c].pruned.empty()) continue;
    candidates[c].resources.assign(candidates[c].specs.size(), {});
    for (std::size_t s = 0; s < candidates[c].specs.size(); ++s) work.push_back({c, s});
  }
  detail::KernelCache& cache = detail::KernelCache::process_cache();
  const int total = static_cast<int>(work.size());
  int done = 0;
  detail::run_ordered<detail::CacheLookup>(
      total, jobs,
      [&](int i) {
        const Job& job = work[static_cast<std::size_t>(i)];
        return cache.get(candidates[job.candidate].specs[job.spec]);
      },
      [&](int i, detail::Outcome<detail::CacheLookup>& outcome) {
        const Job& job = work[static_cast<std::size_t>(i)];
        Candidate& c = candidates[job.candidate];
        const detail::KernelSpec& spec = c.specs[job.spec];
        if (progress) progress(++done, total);
        if (!c.pruned.empty()) return;
        if (outcome.error) {
          try {
            std::rethrow_exception(outcome.error);
          } catch (const std::exception& error) {
            const std::string message = error.what();
            c.pruned =
                "compile failed (" + spec.role + "): " + message.substr(0, message.find('\n'));
          }
          return;
        }
        const detail::ResourceUsage& r = outcome.value.entry->kernel.resources;
        c.resources[job.spec] = r;
        c.pruned = resource_problem(spec, r, shared_limit, arch);
      });
}

std::string resource_problem(const detail::KernelSpec& spec, const detail::ResourceUsage& r,
                             int shared_limit, const std::string& arch) {
  // Each kernel as it is launched (the delta pre-pass has its own block shape).
  const int shared = spec.dynamic_shared_bytes + r.static_shared_bytes;
  if (r.spill_bytes() > 0) {
    return "spills " + std::to_string(r.spill_bytes()) + " B in " + spec.role;
  }
  if (!r.advisories.empty()) return "ptxas advisory in " + spec.role + ": " + r.advisories.front();
  if (blocks_per_sm(r.registers, spec.threads, shared, shared_limit, arch) == 0) {
    return "zero occupancy in " + spec.role + " (" + std::to_string(r.registers) +
           " registers x " + std::to_string(spec.threads) + " threads, " + kib(shared) +
           " shared)";
  }
  return "";
}

}  // namespace flashjit::autotune
