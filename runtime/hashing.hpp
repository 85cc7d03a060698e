#pragma once
// Hashing for cache keys and file checksums (xxHash, header-only). Keys are built from a
// canonical record in which every field is length-prefixed, so no two different field lists
// can produce the same bytes.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace flashjit::detail {

/// Accumulates length-prefixed fields and hashes them with XXH3-128. The fields stream into
/// the hash as they come (a kernel's key covers half a megabyte of template text, which a
/// process's first cache lookup would otherwise copy); the digest equals XXH3-128 of the whole
/// record in one piece, so keys do not depend on how they were fed.
class KeyBuilder {
 public:
  KeyBuilder();
  ~KeyBuilder();
  KeyBuilder(const KeyBuilder&) = delete;
  KeyBuilder& operator=(const KeyBuilder&) = delete;

  /// Appends one field.
  KeyBuilder& add(std::string_view field);
  /// 32 lowercase hex digits of XXH3-128 over all fields so far.
  std::string hex_digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// XXH3-64 of `bytes`, used as a file checksum.
std::uint64_t checksum64(std::string_view bytes);
/// XXH3-64 of `head` followed by `body`, without joining them first.
std::uint64_t checksum64(std::string_view head, std::string_view body);

}  // namespace flashjit::detail
