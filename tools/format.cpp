#include "format.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <regex>

#include "attention/attention_forward.hpp"
#include "flashjit/error.hpp"

namespace flashjit::tools {

std::string format_bytes(std::uintmax_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (unit == 0) {
    std::snprintf(text, sizeof(text), "%ju B", bytes);
  } else {
    std::snprintf(text, sizeof(text), "%.1f %s", value, kUnits[unit]);
  }
  return text;
}

std::uintmax_t parse_size(const std::string& text, const std::string& argument) {
  static const std::regex pattern(R"(\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*)");
  std::smatch match;
  if (!std::regex_match(text, match, pattern)) {
    throw InvalidArgument(argument, "'" + text + "' is not a size; use e.g. 500M, 2G, 64K");
  }
  const std::string units = "KMGT";
  // strtod saturates to infinity where stod would throw; either way the limit below says no.
  double value = std::strtod(match[1].str().c_str(), nullptr);
  if (match[2].length() > 0) {
    auto power = units.find(static_cast<char>(std::toupper(match[2].str()[0]))) + 1;
    value *= std::pow(1024.0, static_cast<double>(power));
  }
  // Converting a double at or past 2^64 is undefined (it wrapped to 0, which pruned everything).
  constexpr double kLimit = 0x1p64;
  if (!(value < kLimit)) {
    throw InvalidArgument(argument, "'" + text +
                                        "' is too large; a size must be below 16E (2^64 "
                                        "bytes)");
  }
  return static_cast<std::uintmax_t>(value);
}

std::string format_duration_ms(double milliseconds) {
  char text[32];
  if (milliseconds < 10) {  // cache hits: whole milliseconds would hide what changed
    std::snprintf(text, sizeof(text), "%.1f ms", milliseconds);
  } else if (milliseconds < 1000) {
    std::snprintf(text, sizeof(text), "%.0f ms", milliseconds);
  } else {
    std::snprintf(text, sizeof(text), "%.1f s", milliseconds / 1000);
  }
  return text;
}

void validate_attention_flags(const Attention& attention,
                              const std::map<std::string, std::string>& flags,
                              bool wide_head_dims) {
  try {
    kernels::validate_attention(attention, wide_head_dims);
  } catch (const InvalidArgument& error) {
    const auto flag = flags.find(error.argument());
    const std::string message = error.what();  // "invalid argument 'field': problem"
    throw InvalidArgument(flag == flags.end() ? error.argument() : flag->second,
                          message.substr(message.find("': ") + 3));
  }
}

}  // namespace flashjit::tools
