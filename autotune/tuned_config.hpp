#pragma once
// A config of any op, as one value the tuner can name, compile, compare and hand back. The
// autotuner never sees an op's config type: each op says what its configs are through
// TunedConfigTraits (beside the op, in its tuning description), and TunedConfig keeps the
// value behind that description, so adding an op changes nothing here.
#include <concepts>
#include <memory>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <vector>

#include "runtime/kernel_spec.hpp"

namespace flashjit::autotune {

/// What an op tells the tuner about one of its config types `Config` (which also has
/// `int shared_bytes() const` and operator==). Specialized beside the op:
///   static std::string name(const Config&);        // "br128.bc64.w4.s2"
///   static std::vector<detail::KernelSpec> specs(const Config&, const std::string& arch);
///   static int threads(const Config&, const std::vector<detail::KernelSpec>& specs);
/// specs: every kernel a call launches on `arch`, in launch order; threads: the main kernel's
/// block, given the specs.
template <class Config>
struct TunedConfigTraits;

/// One config of some op; empty when default-constructed.
class TunedConfig {
 public:
  TunedConfig() = default;
  template <class Config>
  requires(!std::same_as<Config, TunedConfig>)
      TunedConfig(Config config)  // NOLINT(google-explicit-constructor): a config is a tuned config
      : model_(std::make_shared<const Holder<Config>>(std::move(config))) {}

  /// The config as its op's type, or nullptr when it is another op's (or empty).
  template <class Config>
  const Config* get_if() const {
    const auto* holder = dynamic_cast<const Holder<Config>*>(model_.get());
    return holder != nullptr ? &holder->value : nullptr;
  }
  /// The config as its op's type; throws std::logic_error (a bug: an op was handed another
  /// op's config) when it is not one.
  template <class Config>
  const Config& get() const {
    if (const Config* config = get_if<Config>()) return *config;
    throw std::logic_error("tuned config '" + name() + "' is not a " + typeid(Config).name());
  }

  bool empty() const { return model_ == nullptr; }
  /// The config's name in the database and tables; "" when empty.
  std::string name() const { return model_ ? model_->name() : ""; }
  /// Every kernel a call of this config launches on `arch`, in launch order.
  std::vector<detail::KernelSpec> specs(const std::string& arch) const {
    return model_ ? model_->specs(arch) : std::vector<detail::KernelSpec>{};
  }
  /// Dynamic shared memory per block of the main kernel.
  int shared_bytes() const { return model_ ? model_->shared_bytes() : 0; }
  /// The main kernel's threads per block, given this config's `specs`.
  int threads(const std::vector<detail::KernelSpec>& specs) const {
    return model_ ? model_->threads(specs) : 0;
  }
  /// Equal configs of the same op (two empty ones are equal).
  bool operator==(const TunedConfig& other) const {
    if (model_ == other.model_) return true;
    return model_ != nullptr && other.model_ != nullptr && model_->equals(*other.model_);
  }

 private:
  struct Model {
    virtual ~Model() = default;
    virtual std::string name() const = 0;
    virtual std::vector<detail::KernelSpec> specs(const std::string& arch) const = 0;
    virtual int shared_bytes() const = 0;
    virtual int threads(const std::vector<detail::KernelSpec>& specs) const = 0;
    virtual bool equals(const Model& other) const = 0;
  };

  template <class Config>
  struct Holder final : Model {
    explicit Holder(Config c) : value(std::move(c)) {}
    using Traits = TunedConfigTraits<Config>;
    std::string name() const override { return Traits::name(value); }
    std::vector<detail::KernelSpec> specs(const std::string& arch) const override {
      return Traits::specs(value, arch);
    }
    int shared_bytes() const override { return value.shared_bytes(); }
    int threads(const std::vector<detail::KernelSpec>& specs) const override {
      return Traits::threads(value, specs);
    }
    bool equals(const Model& other) const override {
      const auto* same = dynamic_cast<const Holder*>(&other);
      return same != nullptr && same->value == value;
    }
    Config value;
  };

  std::shared_ptr<const Model> model_;
};

}  // namespace flashjit::autotune
