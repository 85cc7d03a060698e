#pragma once
// Hashing for cache keys and file checksums (xxHash, header-only). Keys are built from a
// canonical record in which every field is length-prefixed, so no two different field lists
// can produce the same bytes.
#include <cstdint>
#include <string>
#include <string_view>

namespace flashjit::detail {

/// Accumulates length-prefixed fields and hashes them with XXH3-128.
class KeyBuilder {
 public:
  /// Appends one field.
  KeyBuilder& add(std::string_view field);
  /// 32 lowercase hex digits of XXH3-128 over all fields so far.
  std::string hex_digest() const;

 private:
  std::string record_;
};

/// XXH3-64 of `bytes`, used as a file checksum.
std::uint64_t checksum64(std::string_view bytes);

}  // namespace flashjit::detail
