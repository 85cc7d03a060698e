// The cache file format: round trip, and every kind of damage detected; the keys that name
// the files.
#include <doctest/doctest.h>

#include "runtime/cache_file.hpp"
#include "runtime/hashing.hpp"

using namespace flashjit::detail;

namespace {

CacheEntry sample_entry() {
  CacheEntry entry;
  entry.key = std::string(32, 'a');
  entry.display_name = "softmax.bf16.cols512.t128.sm90a";
  entry.op = "softmax";
  entry.arch = "sm_90a";
  entry.kernel.lowered_name = "_Z14softmax_kernel";
  entry.kernel.cubin = std::string(3000, '\x7f') + "payload";
  entry.kernel.resources = {40, 16, 8, 4, 12, {"C7514: wgmma.mma_async instructions are serialized"}};
  entry.kernel.compile_ms = 123.5;
  return entry;
}

}  // namespace

TEST_CASE("a cache file round-trips every field") {
  const CacheEntry entry = sample_entry();
  auto decoded = decode_cache_file(encode_cache_file(entry), entry.key);
  REQUIRE(decoded.has_value());
  CHECK(decoded->display_name == entry.display_name);
  CHECK(decoded->op == entry.op);
  CHECK(decoded->arch == entry.arch);
  CHECK(decoded->kernel.lowered_name == entry.kernel.lowered_name);
  CHECK(decoded->kernel.cubin == entry.kernel.cubin);
  CHECK(decoded->kernel.resources.registers == 40);
  CHECK(decoded->kernel.resources.static_shared_bytes == 16);
  CHECK(decoded->kernel.resources.spill_bytes() == 12);
  CHECK(decoded->kernel.resources.stack_bytes == 12);
  CHECK(decoded->kernel.resources.advisories == entry.kernel.resources.advisories);
  CHECK(decoded->kernel.compile_ms == 123.5);
}

TEST_CASE("a damaged cache file is rejected with a reason") {
  const CacheEntry entry = sample_entry();
  const std::string bytes = encode_cache_file(entry);
  std::string problem;

  SUBCASE("truncated at any length") {
    for (std::size_t length = 0; length < bytes.size(); length += 97) {
      CHECK_FALSE(decode_cache_file(bytes.substr(0, length), entry.key, &problem));
    }
    CHECK_FALSE(decode_cache_file(bytes.substr(0, bytes.size() - 1), entry.key, &problem));
  }
  SUBCASE("one byte garbled anywhere") {
    for (std::size_t position = 0; position < bytes.size(); position += 53) {
      std::string garbled = bytes;
      garbled[position] = static_cast<char>(garbled[position] ^ 0x20);
      CHECK_FALSE(decode_cache_file(garbled, entry.key, &problem));
    }
  }
  SUBCASE("another format version") {
    std::string other = bytes;
    other[8] = static_cast<char>(other[8] + 1);  // the u32 after the 8-byte magic
    CHECK_FALSE(decode_cache_file(other, entry.key, &problem));
    CHECK(problem.find("format version") != std::string::npos);
  }
  SUBCASE("another key") {
    CHECK_FALSE(decode_cache_file(bytes, std::string(32, 'b'), &problem));
    CHECK(problem.find("key") != std::string::npos);
  }
  SUBCASE("a foreign file") {
    CHECK_FALSE(decode_cache_file("\x7f" "ELF not a flashjit file at all, but long enough to "
                                  "hold a header", entry.key, &problem));
    CHECK(problem == "bad magic");
  }
  SUBCASE("lengths that overflow when added") {
    std::string huge = bytes;
    for (int i = 16; i < 32; ++i) huge[static_cast<std::size_t>(i)] = '\xff';
    CHECK_FALSE(decode_cache_file(huge, entry.key, &problem));
  }
}

// Keys name the files already in users' caches: how the fields are fed to the hash must not
// change the digest (the value below is XXH3-128 of the length-prefixed record in one piece).
TEST_CASE("a cache key is the XXH3-128 of its length-prefixed fields") {
  KeyBuilder key;
  key.add("flashjit-kernel").add("").add(std::string(100000, 'x'));
  CHECK(key.hex_digest() == "9d65476623725c422ead79677ba482d2");
  CHECK(key.hex_digest() == key.hex_digest());  // the digest does not consume the fields
  KeyBuilder shifted;  // the length prefixes keep field boundaries apart
  shifted.add("flashjit-kerne").add("l").add(std::string(100000, 'x'));
  CHECK(shifted.hex_digest() != key.hex_digest());
}

TEST_CASE("a checksum of two pieces equals the checksum of the pieces joined") {
  const std::string head(40, 'h'), body(70000, 'b');
  CHECK(checksum64(head, body) == checksum64(head + body));
  CHECK(checksum64(head, body) != checksum64(body, head));
}
