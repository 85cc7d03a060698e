#pragma once
// A KernelSpec names one specialization of one template for one GPU architecture. It is a
// value: ops/ fills it from a config, the compiler renders it for NVRTC, the cache hashes
// it. Configs reach the template only through the C++ name expression that NVRTC
// instantiates; the one piece of user text in source is `prelude`, the caller's score and mask
// modifiers, checked as expressions before they get here
// (ops/attention/modifiers/score_modifiers.hpp).
#include <cstddef>
#include <string>
#include <vector>

namespace flashjit::detail {

struct KernelSpec {
  std::string op;               ///< the op it belongs to: "softmax", "attention-forward"
  std::string header;           ///< template that defines the entry point
  std::string name_expression;  ///< e.g. "flashjit::softmax_kernel<flashjit::SoftmaxConfig<...>>"
  /// Definitions the name expression uses that no template has, after `header` in the
  /// translation unit (the user modifiers' struct); empty for every kernel without them.
  std::string prelude{};
  std::string readable_name;    ///< e.g. "softmax.bf16.cols1024.t128" (no arch)
  std::vector<std::string> options;  ///< extra NVRTC options the op asks for
  std::string arch;                  ///< NVRTC target, e.g. "sm_90a"
  /// Which kernel of its op it is ("forward", "delta", "dq", "dkdv", "dk", "dv", "softmax"), and
  /// the head dim it is specialized for (0 when none): for messages and suggestions, so that no
  /// one parses them back out of readable_name.
  std::string role;
  int head_dim = 0;
  /// What else the specialization fixes, in name order ("bf16", "window", "br64", "bc32",
  /// "w4", "s1"): readable_name is made from these (name_of), and the emulator's suggestions
  /// compare them, so no one parses a name.
  std::vector<std::string> traits = {};
  /// How the op launches it (derived from the same config, so not part of any key): threads
  /// per block and dynamic shared memory per block, for occupancy reports.
  int threads = 0;
  int dynamic_shared_bytes = 0;

  /// readable_name plus the arch without underscore: "softmax.bf16.cols1024.t128.sm90a".
  std::string display_name() const;
  /// The translation unit handed to NVRTC: includes `header`, then `prelude`.
  std::string main_source() const;

  bool operator==(const KernelSpec&) const = default;
};

/// A readable name: `stem` ("attention_forward", "attention_backward.dq", "softmax"), then
/// "hdim<head_dim>" when head_dim > 0, then the traits, joined by dots.
std::string name_of(const std::string& stem, int head_dim, const std::vector<std::string>& traits);

/// A trait made of a prefix and a number: trait("br", 64) is "br64".
std::string trait(const char* prefix, int value);

/// Hashes a spec's fields, for in-memory maps keyed by spec (much cheaper than the cache key,
/// which also hashes every template byte and the environment).
struct KernelSpecHash {
  std::size_t operator()(const KernelSpec& spec) const noexcept;
};

/// Throws InvalidArgument("arch") unless `arch` looks like "sm_XY" or "sm_XYa" (X, Y digits,
/// at least sm_80: the tile library needs cp.async and bf16 mma).
void validate_arch(const std::string& arch);

/// The dynamic shared memory a block may opt into on `arch` ("sm_80": 163 KB, "sm_86"/"sm_89":
/// 99 KB, "sm_90a": 227 KB, ...); the smallest of those for an arch it does not know. Throws as
/// validate_arch.
int arch_shared_memory_limit(const std::string& arch);

/// Resident blocks per SM for a kernel of `threads` threads using `registers` per thread and
/// `shared_bytes` of shared memory, on an arch with 64K registers and 2048 threads per SM
/// (1536 on sm_86/sm_89) and `shared_limit` bytes of shared memory; 0 when it cannot run.
int blocks_per_sm(int registers, int threads, int shared_bytes, int shared_limit,
                  const std::string& arch);

/// Sorts `specs` into the order to compile them in on a pool: the most dynamic shared memory
/// first, ties kept in order. A kernel's shared memory grows with its tiles, whose unrolled
/// code is most of NVRTC's time (the Hopper forward and dK/dV kernels at head dim 128, 210 KB:
/// about 0.9 s each; the backward's delta and dQ-convert kernels, none: 0.05-0.1 s), so the long
/// compiles start first and the short ones fill in behind them instead of delaying one.
void order_longest_compiles_first(std::vector<KernelSpec>& specs);

}  // namespace flashjit::detail
