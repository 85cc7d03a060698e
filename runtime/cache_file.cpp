#include "cache_file.hpp"

#include <cstring>
#include <nlohmann/json.hpp>

#include "hashing.hpp"

namespace flashjit::detail {
namespace {

constexpr char kMagic[8] = {'F', 'J', 'K', 'E', 'R', 'N', 'E', 'L'};

struct Header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t key_length;
  std::uint64_t metadata_length;
  std::uint64_t payload_length;
  std::uint64_t checksum;
};
static_assert(sizeof(Header) == 40, "the header is written as raw bytes");

std::uint64_t checksum_of(Header header, std::string_view body) {
  header.checksum = 0;
  return checksum64(std::string_view(reinterpret_cast<const char*>(&header), sizeof(header)), body);
}

nlohmann::json metadata_of(const CacheEntry& entry) {
  const ResourceUsage& r = entry.kernel.resources;
  return {{"display_name", entry.display_name},
          {"op", entry.op},
          {"arch", entry.arch},
          {"lowered_name", entry.kernel.lowered_name},
          {"registers", r.registers},
          {"static_shared_bytes", r.static_shared_bytes},
          {"spill_store_bytes", r.spill_store_bytes},
          {"spill_load_bytes", r.spill_load_bytes},
          {"stack_bytes", r.stack_bytes},
          {"advisories", r.advisories},
          {"compile_ms", entry.kernel.compile_ms}};
}

std::optional<CacheEntry> fail(std::string* problem, const std::string& why) {
  if (problem) *problem = why;
  return std::nullopt;
}

}  // namespace

std::string encode_cache_file(const CacheEntry& entry) {
  const std::string metadata = metadata_of(entry).dump();
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.version = kCacheFormatVersion;
  header.key_length = static_cast<std::uint32_t>(entry.key.size());
  header.metadata_length = metadata.size();
  header.payload_length = entry.kernel.cubin.size();
  const std::string body = entry.key + metadata + entry.kernel.cubin;
  header.checksum = checksum_of(header, body);
  return std::string(reinterpret_cast<const char*>(&header), sizeof(header)) + body;
}

std::optional<CacheEntry> decode_cache_file(std::string bytes, std::string_view expected_key,
                                            std::string* problem) {
  Header header{};
  if (bytes.size() < sizeof(header)) return fail(problem, "truncated header");
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0) return fail(problem, "bad magic");
  if (header.version != kCacheFormatVersion) {
    return fail(problem, "format version " + std::to_string(header.version) + ", expected " +
                             std::to_string(kCacheFormatVersion));
  }
  std::string_view body = std::string_view(bytes).substr(sizeof(header));
  // Compare lengths one at a time so that huge garbage values cannot overflow the sum.
  if (header.key_length > body.size() || header.metadata_length > body.size() ||
      header.payload_length > body.size() ||
      header.key_length + header.metadata_length + header.payload_length != body.size()) {
    return fail(problem, "lengths do not match the file size (truncated or garbled)");
  }
  if (checksum_of(header, body) != header.checksum) return fail(problem, "checksum mismatch");
  CacheEntry entry;
  entry.key = std::string(body.substr(0, header.key_length));
  if (!expected_key.empty() && entry.key != expected_key) {
    return fail(problem, "holds key " + entry.key + ", expected " + std::string(expected_key));
  }
  try {
    auto meta = nlohmann::json::parse(body.substr(header.key_length, header.metadata_length));
    entry.display_name = meta.at("display_name").get<std::string>();
    entry.op = meta.at("op").get<std::string>();
    entry.arch = meta.at("arch").get<std::string>();
    entry.kernel.lowered_name = meta.at("lowered_name").get<std::string>();
    ResourceUsage& r = entry.kernel.resources;
    r.registers = meta.at("registers").get<int>();
    r.static_shared_bytes = meta.at("static_shared_bytes").get<int>();
    r.spill_store_bytes = meta.at("spill_store_bytes").get<int>();
    r.spill_load_bytes = meta.at("spill_load_bytes").get<int>();
    r.stack_bytes = meta.at("stack_bytes").get<int>();
    r.advisories = meta.at("advisories").get<std::vector<std::string>>();
    entry.kernel.compile_ms = meta.at("compile_ms").get<double>();
  } catch (const nlohmann::json::exception& error) {
    return fail(problem, std::string("bad metadata: ") + error.what());
  }
  bytes.erase(0, sizeof(header) + header.key_length + header.metadata_length);
  entry.kernel.cubin = std::move(bytes);
  return entry;
}

}  // namespace flashjit::detail
