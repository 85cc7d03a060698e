#include "autotune/tuning_state.hpp"

#include <string>

#include "autotune/tuner.hpp"
#include "flashjit/error.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/driver.hpp"
#include "runtime/env.hpp"
#include "runtime/executor.hpp"
#include "runtime/log.hpp"

namespace flashjit::autotune {
namespace {

// The config of the problem's space (or its default on `arch`) called `name` that fits
// `shared_limit`, if any: a database written by another build may name a config this one no
// longer has.
std::optional<TunedConfig> config_named(const TuningProblem& problem, const std::string& name,
                                        const std::string& arch, std::size_t shared_limit) {
  std::vector<TunedConfig> configs = problem.space();
  configs.push_back(problem.default_config(arch));
  for (const TunedConfig& config : configs) {
    const int shared = config.shared_bytes();
    if (config.name() == name && static_cast<std::size_t>(shared) <= shared_limit &&
        problem.cannot_run(config).empty()) {
      return config;
    }
  }
  return std::nullopt;
}

// The winner `winner` of database key `key` as a config this runtime can run, or nullopt after
// one warning saying why not (a database is advice: a stale or foreign entry never fails a call).
std::optional<TunedConfig> usable_winner(detail::RuntimeBackend& backend, const std::string& key,
                                         const TuningProblem& problem, const std::string& winner) {
  const DeviceInfo& device = backend.info();
  const std::string ignored = "the tuning database's winner '" + winner + "' for " + key;
  const std::optional<TunedConfig> config =
      config_named(problem, winner, device.arch(), device.shared_memory_optin);
  if (!config) {
    detail::warn_once("tuning-winner:" + key,
                      ignored +
                          " is not a config of this build's space that runs the call and fits " +
                          device.name + "'s shared memory; using the heuristic default");
    return std::nullopt;
  }
  for (const detail::KernelSpec& spec : problem.specs(*config, device.arch())) {
    if (!backend.executor().has_kernel(spec)) {
      detail::warn_once("tuning-winner:" + key, ignored + " needs kernel " + spec.display_name() +
                                                    ", which " + device.name +
                                                    " cannot run; using the heuristic default");
      return std::nullopt;
    }
  }
  return config;
}

int driver_version_for(Backend backend) {
  if (backend != Backend::cuda) return 0;
  int version = 0;
  FLASHJIT_CU(cuDriverGetVersion, &version);
  return version;
}

}  // namespace

TuningPolicy effective_policy(TuningPolicy requested) {
  const std::optional<std::string> value = detail::env_value("FLASHJIT_TUNING");
  if (!value || value->empty()) return requested;
  if (*value == "off") return TuningPolicy::off;
  if (*value == "cached") return TuningPolicy::cached;
  if (*value == "auto") return TuningPolicy::automatic;
  throw InvalidArgument("FLASHJIT_TUNING",
                        "'" + *value + "' is not a tuning policy; use off, cached or auto");
}

const char* tuning_policy_name(TuningPolicy policy) {
  switch (policy) {
    case TuningPolicy::off:
      return "off";
    case TuningPolicy::cached:
      return "cached";
    case TuningPolicy::automatic:
      return "auto";
  }
  return "?";
}

TuningState::TuningState(TuningPolicy policy, detail::RuntimeBackend& backend)
    : backend_(backend),
      policy_(policy),
      meta_(TuningMeta::for_device(backend.info(), driver_version_for(backend.kind()))),
      database_(database_path(detail::DiskCache::default_root(), meta_)) {}

std::optional<std::string> TuningState::winner(const TuningKey& key) {
  const std::string name = key.to_string();
  std::lock_guard lock(mutex_);
  if (auto it = learned_.find(name); it != learned_.end()) return it->second;
  if (!loaded_) {
    loaded_ = TuningDatabase::load(database_, meta_);
    if (!loaded_->problem().empty()) detail::warn_once("tuning-db", loaded_->problem());
  }
  const std::optional<TuningEntry> entry = loaded_->find(key);
  if (!entry || entry->winner.empty()) return std::nullopt;
  return entry->winner;
}

void TuningState::remember(const TuningKey& key, const TuningEntry& entry) {
  const std::string name = key.to_string();
  std::lock_guard lock(mutex_);
  learned_[name] = entry.winner;
  // A new winner is rare (a tuning just ran): forgetting every memoized choice is simpler than
  // finding the shape classes of this key, and costs one lookup each.
  chosen_.clear();
}

ShapeClass TuningState::shape_class(const TuningProblem& problem) {
  return {problem.op(), problem.dtype, problem.shape_fields()};
}

std::optional<std::optional<TunedConfig>> TuningState::memoized(const ShapeClass& shape) {
  std::lock_guard lock(mutex_);
  auto it = chosen_.find(shape);
  if (it == chosen_.end()) return std::nullopt;
  return it->second;
}

void TuningState::memoize(const ShapeClass& shape, const std::optional<TunedConfig>& config) {
  std::lock_guard lock(mutex_);
  chosen_.insert_or_assign(shape, config);
}

TunedConfig TuningState::choose(const TuningProblem& problem) {
  return choose_config(*this, problem);
}

TunedConfig choose_config(TuningState& state, const TuningProblem& problem) {
  detail::RuntimeBackend& backend = state.backend();
  if (state.policy() == TuningPolicy::off || problem.empty()) {  // empty: nothing to time
    return problem.default_config(backend.info().arch());
  }
  // The launch path: a shape seen before costs one map lookup, no key string.
  const ShapeClass shape = TuningState::shape_class(problem);
  if (std::optional<std::optional<TunedConfig>> chosen = state.memoized(shape)) {
    return *chosen ? **chosen : problem.default_config(backend.info().arch());
  }
  const TuningKey key = tuning_key(problem);
  const std::string name = key.to_string();
  std::optional<std::string> winner = state.winner(key);
  if (!winner && state.policy() == TuningPolicy::automatic) {
    // One tuning at a time per runtime: a second thread with the same new shape waits and then
    // finds the first one's result instead of timing it again.
    std::lock_guard tuning(state.tuning_mutex());
    winner = state.winner(key);
    if (!winner) {
      detail::warn_once("tuning:" + name, "tuning " + name + " (first call of this shape)");
      winner = tune(state, problem).entry.winner;
    }
  }
  std::optional<TunedConfig> config;
  if (winner) config = usable_winner(backend, name, problem, *winner);
  state.memoize(shape, config);
  return config ? *config : problem.default_config(backend.info().arch());
}

TunedConfig known_config(TuningState& state, const TuningProblem& problem) {
  detail::RuntimeBackend& backend = state.backend();
  if (state.policy() == TuningPolicy::off || problem.empty()) {
    return problem.default_config(backend.info().arch());
  }
  const TuningKey key = tuning_key(problem);
  std::optional<TunedConfig> config;
  if (const std::optional<std::string> winner = state.winner(key)) {
    config = usable_winner(backend, key.to_string(), problem, *winner);
  }
  return config ? *config : problem.default_config(backend.info().arch());
}

}  // namespace flashjit::autotune
