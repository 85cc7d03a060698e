#pragma once
// One shape of one op to tune, as the op describes it to the tuner (docs/autotuning.md). The
// autotuner works on this description only: it names no op, and an op that is tuned brings a
// class derived from TuningProblem (its key, its config space and default, its pruning by size,
// the tensors a candidate runs on) beside its kernels.
#include <array>
#include <compare>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autotune/tuned_config.hpp"
#include "autotune/tuning_db.hpp"
#include "flashjit/dtype.hpp"
#include "runtime/compiler.hpp"
#include "runtime/kernel_spec.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::autotune {

class TuningWorkspace;  // workspace.hpp

/// One candidate and what the tuner learned about it.
struct Candidate {
  TunedConfig config;
  std::string name;                              ///< config.name()
  bool is_default = false;                       ///< the heuristic default for this shape and arch
  std::vector<detail::KernelSpec> specs;         ///< every kernel a call of this config launches
  int shared_bytes = 0;                          ///< dynamic shared memory per block
  int threads = 0;                               ///< threads per block of the main kernel
  std::vector<detail::ResourceUsage> resources;  ///< per spec, once compiled
  /// Why it was dropped ("shared memory 180 KB > 163 KB", "spills 48 B in dq"); empty while
  /// it is still in the running.
  std::string pruned;
};

/// An op's key fields as plain values, sizes bucketed (unused fields 0).
using ShapeFields = std::array<std::int64_t, 12>;

/// What a call's choice depends on, as plain values: the op, the dtype and the op's key fields
/// (without the template digest, fixed in a process). Building one takes no string or
/// allocation, so the launch path can look a repeated shape up cheaply.
struct ShapeClass {
  std::string_view op;  ///< the op's name (a string literal of the op's)
  DType dtype = DType::bf16;
  ShapeFields fields{};
  auto operator<=>(const ShapeClass&) const = default;
};

/// One shape of one op: everything the tuner asks of an op. Derived by each tuned op, which
/// keeps the call's fields (an attention shape, a layer norm's rows and columns, ...).
class TuningProblem {
 public:
  virtual ~TuningProblem() = default;

  /// The element type of the call's tensors (the tuner checks outputs to its rounding).
  DType dtype = DType::bf16;

  /// The op's name as the command line and the database write it ("attention-forward").
  virtual std::string_view op() const = 0;
  /// The key's fields after the op and the template digest, sizes bucketed with shape_bucket
  /// ("bf16/hdim128/none/q4096/k4096/bh32"): shapes with the same key share an entry.
  virtual std::string key() const = 0;
  /// The key's fields other than the dtype as plain values, sizes bucketed: two shapes of the
  /// same dtype with equal fields have equal key()s (the fields may separate a little more).
  virtual ShapeFields shape_fields() const = 0;
  /// One line for people: "attention-forward bf16 hdim128 seqlen 4096 batch 2 x heads 16".
  virtual std::string describe() const = 0;
  /// Whether there is no work to time (no batch, query, key or row).
  virtual bool empty() const = 0;
  /// FLOPs of one call (FlashAttention's count for attention), 0 for a memory-bound op.
  virtual double flops() const { return 0; }
  /// The bytes one call of a memory-bound op moves, what bounds it; 0 for the others.
  virtual double bytes() const { return 0; }

  /// The heuristic default on `arch` (what policy off runs).
  virtual TunedConfig default_config(const std::string& arch) const = 0;
  /// Every config of the shape's space, in the space's fixed order.
  virtual std::vector<TunedConfig> space() const = 0;
  /// Whether the tuner times `config` on `arch` as a candidate (beside the default `fallback`):
  /// a config that only another arch runs is not, nor one the op times in pairs later.
  virtual bool timed(const TunedConfig& /*config*/, const TunedConfig& /*fallback*/,
                     const std::string& /*arch*/) const {
    return true;
  }
  /// Every kernel a call of this shape with `config` launches on `arch`: the config's own
  /// (TunedConfig::specs) unless the call compiles something of its own into them (attention's
  /// score and mask modifiers).
  virtual std::vector<detail::KernelSpec> specs(const TunedConfig& config,
                                                const std::string& arch) const {
    return config.specs(arch);
  }
  /// Why `config` cannot run this shape at all ("" when it can); such a config is pruned and
  /// never taken from the database.
  virtual std::string cannot_run(const TunedConfig& /*config*/) const { return ""; }
  /// Prunes the candidates still in the running that are larger than the shape needs (never
  /// the default), saying why in Candidate::pruned.
  virtual void prune_for_size(std::vector<Candidate>& /*candidates*/) const {}
  /// A config made of the fastest parts of the candidates timed (an op whose kernels' times
  /// add up, timed part by part beside the default's other parts); nullopt when there is none
  /// or it was timed already. `timings` by config name.
  virtual std::optional<TunedConfig> fastest_pair(
      const std::vector<Candidate>& /*candidates*/,
      const std::vector<CandidateTiming>& /*timings*/) const {
    return std::nullopt;
  }
  /// Whether fastest_pair may add a candidate (so `--plan` can say it will).
  virtual bool pairs_parts() const { return false; }
  /// The tensors of one call of this shape on `backend` (which must outlive them).
  virtual std::unique_ptr<TuningWorkspace> workspace(detail::RuntimeBackend& backend) const = 0;

 protected:
  TuningProblem() = default;
  TuningProblem(const TuningProblem&) = default;
  TuningProblem& operator=(const TuningProblem&) = default;
};

/// How an op asks for the config of a call: the op describes the call as a TuningProblem and
/// gets a config of its own type back. The autotuner answers (TuningState, by the runtime's
/// tuning policy); the public Runtime hands one to the ops.
class ConfigChoice {
 public:
  virtual ~ConfigChoice() = default;
  /// The config for a validated call `problem` that fits the device: a config of the
  /// problem's space, or its default.
  virtual TunedConfig choose(const TuningProblem& problem) = 0;
  /// choose() as the op's config type.
  template <class Config>
  Config choose_as(const TuningProblem& problem) {
    return choose(problem).get<Config>();
  }
};

}  // namespace flashjit::autotune
