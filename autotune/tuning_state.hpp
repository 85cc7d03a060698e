#pragma once
// A runtime's side of the tuning database: its policy, its file, and what it has read or
// learned (DESIGN.md section 6). It answers the ops' config question (kernels::ConfigChoice)
// for forward() and backward().
#include <compare>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <variant>

#include "autotune/candidates.hpp"
#include "autotune/tuning_db.hpp"
#include "flashjit/device.hpp"
#include "flashjit/tuning.hpp"
#include "kernels/config_choice.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::autotune {

/// The policy a runtime runs with: FLASHJIT_TUNING ("off", "cached" or "auto") when set, else
/// `requested`. Throws InvalidArgument("FLASHJIT_TUNING") for any other value.
TuningPolicy effective_policy(TuningPolicy requested);

/// The policy's name: "off", "cached", "auto".
const char* tuning_policy_name(TuningPolicy policy);

class TuningState final : public kernels::ConfigChoice {
 public:
  /// The database of `backend`'s device (database_path under the kernel cache's root) with the
  /// meta of this process (and the driver's version on the cuda backend); nothing is read until
  /// the first lookup. `backend` is where shapes are tuned under the automatic policy; it must
  /// outlive this state.
  TuningState(TuningPolicy policy, detail::RuntimeBackend& backend);

  /// choose_config for a forward call.
  kernels::ForwardConfig forward_config(const Attention& attention, DType dtype) override;
  /// choose_config for a backward call.
  kernels::BackwardConfig backward_config(const Attention& attention, DType dtype) override;
  /// choose_config for a decoding call (attention-decode, on this backend's SM count).
  kernels::InferenceConfig decode_config(const Attention& attention, kernels::CacheLayout cache,
                                         DType dtype) override;
  /// choose_config for a layer norm call (layernorm).
  kernels::LayerNormConfig layer_norm_config(const kernels::LayerNormShape& shape,
                                             DType dtype) override;
  /// choose_config for a layer norm backward call (layernorm-backward).
  kernels::LayerNormBackwardConfig layer_norm_backward_config(const kernels::LayerNormShape& shape,
                                                              DType dtype) override;
  /// choose_config for a multi-scale attention forward call (multiscale-forward).
  kernels::MultiScaleForwardConfig multiscale_forward_config(const MultiScaleAttention& attention,
                                                             DType dtype) override;
  /// choose_config for a multi-scale attention backward call (multiscale-backward).
  kernels::MultiScaleBackwardConfig multiscale_backward_config(const MultiScaleAttention& attention,
                                                               DType dtype) override;

  /// The backend this state tunes on.
  detail::RuntimeBackend& backend() const { return backend_; }
  TuningPolicy policy() const { return policy_; }
  const std::filesystem::path& database() const { return database_; }
  const TuningMeta& meta() const { return meta_; }

  /// The winner recorded for `key`: learned in this runtime, else read from the database (read
  /// once, at the first lookup; a corrupt or mismatched file is ignored with one warning).
  std::optional<std::string> winner(const TuningKey& key);
  /// Records an entry this runtime measured, so later lookups see it without re-reading.
  void remember(const TuningKey& key, const TuningEntry& entry);

  /// Held while this runtime tunes a shape under the automatic policy.
  std::mutex& tuning_mutex() { return tuning_mutex_; }

  /// What a call's choice depends on, as plain values: the tuning key without the template
  /// digest (fixed in a process) and with the sizes already bucketed. Building it takes no
  /// string or allocation, so the launch path can look a repeated shape up cheaply.
  struct ShapeClass {
    TunedOp op;
    DType dtype;
    std::int64_t head_dim;
    MaskKind mask;
    bool softcap;
    std::int64_t seqlen_q_bucket, seqlen_k_bucket, batch_heads_bucket;
    bool deterministic;  // the backward's mode (false for the forward)
    // attention-decode's (0 for the other ops): its key's batch, key/value heads and group
    // buckets (batch_heads_bucket is 0), and the cache's layout.
    std::int64_t batch_bucket, heads_kv_bucket, group_bucket;
    bool varlen;
    std::int64_t page_size;
    // The layer norm ops' (0 or false for the others; the attention fields are then 0): its
    // key's row and column buckets, the norm and the fused adds.
    std::int64_t rows_bucket, cols_bucket;
    bool rms, norm_bias, norm_residual;
    MultiScaleMask multiscale_mask;  // the multi-scale ops' mask (decay for the others)
    auto operator<=>(const ShapeClass&) const = default;
  };
  static ShapeClass shape_class(const TuningProblem& problem);

  /// The config chosen for a shape class, memoized so a repeated shape skips the search:
  /// nullopt when the class is not memoized, a nullopt inside when its choice is the default
  /// (which attention-decode computes per shape: its split count depends on the exact sizes).
  std::optional<std::optional<TunedConfig>> memoized(const ShapeClass& shape);
  void memoize(const ShapeClass& shape, const std::optional<TunedConfig>& config);

 private:
  detail::RuntimeBackend& backend_;
  TuningPolicy policy_;
  TuningMeta meta_;  // before database_, which is named after it
  std::filesystem::path database_;
  std::mutex mutex_;         // guards the maps and the loaded file
  std::mutex tuning_mutex_;  // see tuning_mutex()
  std::optional<TuningDatabase> loaded_;
  std::map<std::string, std::string> learned_;  // key string -> winner
  std::map<ShapeClass, std::optional<TunedConfig>> chosen_;
};

/// The config forward(), backward() or layer_norm() (and its backward) runs `problem` with on
/// `state`'s backend: the heuristic default under policy off; the database's winner under cached
/// (the default when the shape is not in it, or its winner no longer fits the space or the device);
/// under automatic, a shape not in the database is tuned first (tune(), persisted) and its winner
/// used.
TunedConfig choose_config(TuningState& state, const TuningProblem& problem);

}  // namespace flashjit::autotune
