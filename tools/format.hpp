#pragma once
// Human-readable sizes and durations for the command's output, and errors worded by flag.
#include <cstdint>
#include <map>
#include <string>

#include "flashjit/attention.hpp"

namespace flashjit::tools {

/// "812 B", "14.2 KiB", "3.0 MiB", "1.5 GiB".
std::string format_bytes(std::uintmax_t bytes);

/// Parses "500", "64K", "200M", "2G" (powers of 1024, optional "B"/"iB"). Throws
/// flashjit::InvalidArgument naming `argument` for anything else.
std::uintmax_t parse_size(const std::string& text, const std::string& argument);

/// "850 ms", "12.4 s".
std::string format_duration_ms(double milliseconds);

/// Runs kernels::validate_attention on `attention` and rethrows its InvalidArgument against the
/// command's flag that set the field (`flags`: "attention.seqlen_k" -> "--seqlen-k"; a field
/// not listed keeps its name). `wide_head_dims`: head dims up to 576 (the inference forward's).
void validate_attention_flags(const Attention& attention,
                              const std::map<std::string, std::string>& flags,
                              bool wide_head_dims = false);

}  // namespace flashjit::tools
