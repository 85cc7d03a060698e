#pragma once
// A runtime's side of the tuning database: its policy, its file, and what it has read or
// learned (docs/autotuning.md). It answers the ops' config question (ConfigChoice) for every
// call of every tuned op.
#include <compare>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "autotune/candidates.hpp"
#include "autotune/tuning_db.hpp"
#include "autotune/tuning_problem.hpp"
#include "flashjit/device.hpp"
#include "flashjit/tuning.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::autotune {

/// The policy a runtime runs with: FLASHJIT_TUNING ("off", "cached" or "auto") when set, else
/// `requested`. Throws InvalidArgument("FLASHJIT_TUNING") for any other value.
TuningPolicy effective_policy(TuningPolicy requested);

/// The policy's name: "off", "cached", "auto".
const char* tuning_policy_name(TuningPolicy policy);

class TuningState final : public ConfigChoice {
 public:
  /// The database of `backend`'s device (database_path under the kernel cache's root) with the
  /// meta of this process (and the driver's version on the cuda backend); nothing is read until
  /// the first lookup. `backend` is where shapes are tuned under the automatic policy; it must
  /// outlive this state.
  TuningState(TuningPolicy policy, detail::RuntimeBackend& backend);

  /// choose_config for a call of any tuned op.
  TunedConfig choose(const TuningProblem& problem) override;

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

  /// The shape class of `problem` (its op, dtype and shape_fields()).
  static ShapeClass shape_class(const TuningProblem& problem);

  /// The config chosen for a shape class, memoized so a repeated shape skips the search:
  /// nullopt when the class is not memoized, a nullopt inside when its choice is the default
  /// (which is computed per shape again: an op's default may depend on the exact sizes, as a
  /// split count does).
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

/// The config a call of `problem` runs with on `state`'s backend: the heuristic default under
/// policy off; the database's winner under cached (the default when the shape is not in it, or its
/// winner no longer fits the space or the device); under automatic, a shape not in the database is
/// tuned first (tune(), persisted) and its winner used.
TunedConfig choose_config(TuningState& state, const TuningProblem& problem);

/// The config a call of `problem` would run with as far as is known without timing anything:
/// the database's (or this runtime's) winner for its shape under the cached and automatic
/// policies, else the heuristic default (what choose_config runs until the shape is tuned).
TunedConfig known_config(TuningState& state, const TuningProblem& problem);

}  // namespace flashjit::autotune
