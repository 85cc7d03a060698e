#include "hashing.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdio>

namespace flashjit::detail {

KeyBuilder& KeyBuilder::add(std::string_view field) {
  std::uint64_t length = field.size();
  record_.append(reinterpret_cast<const char*>(&length), sizeof(length));
  record_.append(field);
  return *this;
}

std::string KeyBuilder::hex_digest() const {
  XXH128_hash_t hash = XXH3_128bits(record_.data(), record_.size());
  char text[33];
  std::snprintf(text, sizeof(text), "%016llx%016llx", static_cast<unsigned long long>(hash.high64),
                static_cast<unsigned long long>(hash.low64));
  return text;
}

std::uint64_t checksum64(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

}  // namespace flashjit::detail
