#include "hashing.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdio>

namespace flashjit::detail {

struct KeyBuilder::State {
  XXH3_state_t hash;
};

KeyBuilder::KeyBuilder() : state_(std::make_unique<State>()) { XXH3_128bits_reset(&state_->hash); }

KeyBuilder::~KeyBuilder() = default;

KeyBuilder& KeyBuilder::add(std::string_view field) {
  const std::uint64_t length = field.size();
  XXH3_128bits_update(&state_->hash, &length, sizeof(length));
  XXH3_128bits_update(&state_->hash, field.data(), field.size());
  return *this;
}

std::string KeyBuilder::hex_digest() const {
  const XXH128_hash_t hash = XXH3_128bits_digest(&state_->hash);
  char text[33];
  std::snprintf(text, sizeof(text), "%016llx%016llx", static_cast<unsigned long long>(hash.high64),
                static_cast<unsigned long long>(hash.low64));
  return text;
}

std::uint64_t checksum64(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

std::uint64_t checksum64(std::string_view head, std::string_view body) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, head.data(), head.size());
  XXH3_64bits_update(&state, body.data(), body.size());
  return XXH3_64bits_digest(&state);
}

}  // namespace flashjit::detail
