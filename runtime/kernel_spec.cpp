#include "kernel_spec.hpp"

#include <algorithm>
#include <functional>

#include "flashjit/error.hpp"

namespace flashjit::detail {

std::string KernelSpec::display_name() const {
  std::string compact_arch = arch;
  compact_arch.erase(std::remove(compact_arch.begin(), compact_arch.end(), '_'),
                     compact_arch.end());
  return readable_name + "." + compact_arch;
}

std::string name_of(const std::string& stem, int head_dim, const std::vector<std::string>& traits) {
  std::string name = stem;
  if (head_dim > 0) name += ".hdim" + std::to_string(head_dim);
  for (const std::string& trait : traits) name += "." + trait;
  return name;
}

std::string trait(const char* prefix, int value) {
  // Appended, not prefix + std::to_string(value): GCC 12 warns -Wrestrict on that at -O3 (a
  // false positive, GCC bug 105329).
  std::string text = prefix;
  text += std::to_string(value);
  return text;
}

std::string KernelSpec::main_source() const { return "#include \"" + header + "\"\n" + prelude; }

std::size_t KernelSpecHash::operator()(const KernelSpec& spec) const noexcept {
  std::hash<std::string> hash;
  std::size_t seed = hash(spec.name_expression);
  auto combine = [&](const std::string& field) {
    seed ^= hash(field) + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2);  // boost's mix
  };
  combine(spec.arch);
  combine(spec.header);
  combine(spec.prelude);
  for (const std::string& option : spec.options) combine(option);
  return seed;
}

void validate_arch(const std::string& arch) {
  // "sm_", two or three digits, an optional "a" (checked by hand: this runs on every launch).
  const std::size_t digits_end = arch.size() - (arch.ends_with('a') ? 1 : 0);
  const std::size_t digits = digits_end > 3 ? digits_end - 3 : 0;
  bool valid = arch.starts_with("sm_") && (digits == 2 || digits == 3);
  int number = 0;
  for (std::size_t i = 3; valid && i < digits_end; ++i) {
    valid = arch[i] >= '0' && arch[i] <= '9';
    number = number * 10 + (arch[i] - '0');
  }
  if (!valid || number < 80) {
    throw InvalidArgument("arch", "'" + arch +
                                      "' is not a supported target; expected sm_XY or sm_XYa "
                                      "with XY >= 80 (e.g. sm_80, sm_90a)");
  }
}

int arch_shared_memory_limit(const std::string& arch) {
  detail::validate_arch(arch);
  constexpr int kKiB = 1024;
  const int number = std::stoi(arch.substr(3));  // "sm_90a" -> 90
  switch (number) {
    case 80:  // A100
    case 87:  // Orin
      return 163 * kKiB;
    case 90:   // H100, H200
    case 100:  // B200
    case 103:
    case 110:
      return 227 * kKiB;
    default:  // sm_86, sm_89, sm_120 and archs this table does not know yet
      return 99 * kKiB;
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

void order_longest_compiles_first(std::vector<KernelSpec>& specs) {
  std::stable_sort(specs.begin(), specs.end(), [](const KernelSpec& a, const KernelSpec& b) {
    return a.dynamic_shared_bytes > b.dynamic_shared_bytes;
  });
}

}  // namespace flashjit::detail
