#pragma once
// A runtime's side of the tuning database: its policy, its file, and what it has read or
// learned (DESIGN.md section 6). forward() and backward() reach it through choose_config().
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <variant>

#include "autotune/candidates.hpp"
#include "autotune/tuning_db.hpp"
#include "flashjit/runtime.hpp"

namespace flashjit::autotune {

/// The policy a runtime runs with: FLASHJIT_TUNING ("off", "cached" or "auto") when set, else
/// `requested`. Throws InvalidArgument("FLASHJIT_TUNING") for any other value.
TuningPolicy effective_policy(TuningPolicy requested);

/// The policy's name: "off", "cached", "auto".
const char* tuning_policy_name(TuningPolicy policy);

class TuningState {
 public:
  /// The database of `device` (database_path under the kernel cache's root) with the meta of
  /// this process (and the driver's version on the cuda backend); nothing is read until the first
  /// lookup.
  TuningState(TuningPolicy policy, const DeviceInfo& device, Backend backend);

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

  /// The config chosen for a key string, memoized so a repeated shape skips the search.
  std::optional<TunedConfig> memoized(const std::string& key);
  void memoize(const std::string& key, const TunedConfig& config);

 private:
  TuningPolicy policy_;
  TuningMeta meta_;  // before database_, which is named after it
  std::filesystem::path database_;
  std::mutex mutex_;         // guards the maps and the loaded file
  std::mutex tuning_mutex_;  // see tuning_mutex()
  std::optional<TuningDatabase> loaded_;
  std::map<std::string, std::string> learned_;  // key string -> winner
  std::map<std::string, TunedConfig> chosen_;
};

/// The config forward() or backward() runs `problem` with on `runtime`: the heuristic default
/// under policy off; the database's winner under cached (the default when the shape is not in
/// it, or its winner no longer fits the space or the device); under automatic, a shape not in
/// the database is tuned first (tune(), persisted) and its winner used.
TunedConfig choose_config(Runtime& runtime, const TuningProblem& problem);

}  // namespace flashjit::autotune
