#pragma once
// The on-disk form of one kernel cache entry: a single self-describing file, so a reader never
// sees a torn group of files. Layout (little endian):
//   magic "FJKERNEL" | u32 format version | u32 key length | u64 metadata length |
//   u64 payload length | u64 checksum | key | metadata (JSON) | payload (CUBIN)
// The checksum (XXH3-64) covers every byte except itself, so truncation, garbling, a foreign
// file or another version is detected before anything is loaded.
#include <optional>
#include <string>
#include <string_view>

#include "compiler.hpp"

namespace flashjit::detail {

/// Bumped whenever the layout, the metadata or the key's fields change; part of every key.
/// 2: the metadata holds ptxas's performance advisories (ResourceUsage::advisories). Files of
/// version 1 are foreign to this version: never loaded, recompiled under the new keys.
inline constexpr std::uint32_t kCacheFormatVersion = 2;

/// One cache entry: the compiled kernel and what it is.
struct CacheEntry {
  std::string key;           ///< 32 hex digits, see kernel_cache_key
  std::string display_name;  ///< e.g. "softmax.bf16.cols1024.t128.sm90a"
  std::string op;
  std::string arch;
  CompiledKernel kernel;
};

/// Serializes `entry` into the file format above.
std::string encode_cache_file(const CacheEntry& entry);

/// Parses `bytes`. Returns nullopt and sets `problem` (when given) if the bytes are not a
/// complete, intact entry of this format version, or if `expected_key` is non-empty and differs.
/// The entry's cubin keeps the storage of `bytes` (the header cut off in place): a cache hit
/// copies its kernel into no second buffer, whose fresh pages would cost more than the read.
std::optional<CacheEntry> decode_cache_file(std::string bytes, std::string_view expected_key,
                                            std::string* problem = nullptr);

}  // namespace flashjit::detail
