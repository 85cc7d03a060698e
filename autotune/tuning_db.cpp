#include "autotune/tuning_db.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "flashjit/error.hpp"
#include "flashjit/version.hpp"
#include "runtime/compiler.hpp"
#include "runtime/file_io.hpp"
#include "runtime/hashing.hpp"

namespace flashjit::autotune {
namespace fs = std::filesystem;
using nlohmann::json;
namespace {

constexpr const char* kMetaKey = "_meta";

// A file whose contents are not a tuning database; the message says what is wrong with it.
struct Malformed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const json& member(const json& object, const std::string& name, const std::string& where) {
  auto it = object.find(name);
  if (it == object.end()) throw Malformed(where + " has no \"" + name + "\"");
  return *it;
}

std::string string_member(const json& object, const std::string& name, const std::string& where) {
  const json& value = member(object, name, where);
  if (!value.is_string()) throw Malformed(where + ": \"" + name + "\" is not a string");
  return value.get<std::string>();
}

int int_member(const json& object, const std::string& name, const std::string& where) {
  const json& value = member(object, name, where);
  if (!value.is_number_integer()) throw Malformed(where + ": \"" + name + "\" is not an integer");
  return value.get<int>();
}

json meta_to_json(const TuningMeta& meta) {
  return {{"format", meta.format},       {"flashjit", meta.flashjit_version},
          {"nvrtc", meta.nvrtc_version}, {"driver", meta.driver_version},
          {"gpu", meta.gpu_name},        {"compute_capability", meta.compute_capability},
          {"sm_count", meta.sm_count}};
}

TuningMeta meta_from_json(const json& object) {
  if (!object.is_object()) throw Malformed("_meta is not an object");
  TuningMeta meta;
  meta.format = int_member(object, "format", kMetaKey);
  meta.flashjit_version = string_member(object, "flashjit", kMetaKey);
  meta.nvrtc_version = string_member(object, "nvrtc", kMetaKey);
  meta.driver_version = int_member(object, "driver", kMetaKey);
  meta.gpu_name = string_member(object, "gpu", kMetaKey);
  meta.compute_capability = string_member(object, "compute_capability", kMetaKey);
  meta.sm_count = int_member(object, "sm_count", kMetaKey);
  return meta;
}

// "flashjit 0.0.9 vs 0.1.0, driver 12080 vs 13000": the file's value first, then ours.
std::string meta_differences(const TuningMeta& file, const TuningMeta& ours) {
  const json a = meta_to_json(file), b = meta_to_json(ours);
  std::string text;
  for (const auto& [name, value] : a.items()) {
    if (value == b.at(name)) continue;
    if (!text.empty()) text += ", ";
    const auto show = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
    text += name + " " + show(value) + " vs " + show(b.at(name));
  }
  return text;
}

// A failed candidate's infinite median is null: JSON has no infinity.
json entry_to_json(const TuningEntry& entry) {
  json candidates = json::object();
  for (const CandidateTiming& c : entry.candidates) {
    json ms = std::isfinite(c.median_ms) ? json(c.median_ms) : json(nullptr);
    candidates[c.config] = {{"ms", ms}, {"status", c.status}};
  }
  return {{"default", entry.default_config},
          {"winner", entry.winner},
          {"candidates", std::move(candidates)}};
}

CandidateTiming candidate_from_json(const std::string& config, const json& object,
                                    const std::string& where) {
  if (!object.is_object()) throw Malformed(where + " is not an object");
  CandidateTiming timing;
  timing.config = config;
  const json& ms = member(object, "ms", where);
  if (!ms.is_null() && !(ms.is_number() && ms.get<double>() >= 0)) {
    throw Malformed(where + ": \"ms\" is neither a non-negative number nor null");
  }
  if (ms.is_number()) timing.median_ms = ms.get<double>();
  timing.status = string_member(object, "status", where);
  return timing;
}

// The stored winner is for people reading the file (who may edit it): it is recomputed.
TuningEntry entry_from_json(const std::string& key, const json& object) {
  const std::string where = "entry \"" + key + "\"";
  if (!object.is_object()) throw Malformed(where + " is not an object");
  TuningEntry entry;
  entry.default_config = string_member(object, "default", where);
  const json& candidates = member(object, "candidates", where);
  if (!candidates.is_object()) throw Malformed(where + ": \"candidates\" is not an object");
  for (const auto& [config, timing] : candidates.items()) {  // sorted: json objects are maps
    entry.candidates.push_back(candidate_from_json(config, timing, where + " candidate " + config));
  }
  entry.winner = pick_winner(entry.default_config, entry.candidates);
  return entry;
}

// What a file on disk holds. `problem` is set when its contents cannot be used, and then
// `entries` is empty.
struct FileContents {
  std::map<std::string, TuningEntry> entries;
  std::string problem;
};

// `meta` null: any _meta is accepted (for showing a file).
std::map<std::string, TuningEntry> parse_database(const std::string& bytes,
                                                  const TuningMeta* meta) {
  json document;
  try {
    document = json::parse(bytes);
  } catch (const json::parse_error& error) {
    throw Malformed("not valid JSON at byte " + std::to_string(error.byte));
  } catch (const json::exception& error) {  // e.g. a number out of range ("1e400")
    throw Malformed(std::string("not valid JSON: ") + error.what());
  }
  if (!document.is_object()) throw Malformed("not a tuning database (not a JSON object)");
  if (!document.contains(kMetaKey)) throw Malformed("not a tuning database (no _meta)");
  const TuningMeta file_meta = meta_from_json(document[kMetaKey]);
  if (meta != nullptr && file_meta != *meta) {
    throw Malformed("_meta differs (" + meta_differences(file_meta, *meta) + ")");
  }
  std::map<std::string, TuningEntry> entries;
  for (const auto& [key, value] : document.items()) {
    if (key != kMetaKey) entries.emplace(key, entry_from_json(key, value));
  }
  return entries;
}

FileContents read_database(const fs::path& path, const TuningMeta* meta) {
  FileContents contents;
  std::error_code ec;
  if (!fs::exists(path, ec)) return contents;
  std::optional<std::string> bytes = detail::read_whole_file(path);
  if (!bytes) {
    contents.problem = "cannot read it";
    return contents;
  }
  try {
    contents.entries = parse_database(*bytes, meta);
  } catch (const Malformed& error) {
    contents.problem = error.what();
  }
  return contents;
}

std::string encode_database(const TuningMeta& meta,
                            const std::map<std::string, TuningEntry>& entries) {
  json document = json::object();
  document[kMetaKey] = meta_to_json(meta);
  for (const auto& [key, entry] : entries) document[key] = entry_to_json(entry);
  // Keys come out sorted (json objects are maps), so diffs stay readable. A status from a
  // compiler log may hold bytes that are not UTF-8: replaced rather than failing the write.
  return document.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

Error io_error(const fs::path& path, const std::string& why) {
  return Error(ErrorKind::io, "cannot update tuning database " + path.string() + ": " + why);
}

// Each missing directory is created 0700: the database decides which kernels run.
void make_database_directories(const fs::path& path) {
  if (const int error = detail::make_private_directories(path.parent_path())) {
    throw io_error(
        path, "cannot create " + path.parent_path().string() + ": " + detail::errno_text(error));
  }
}

// An exclusive flock on "<path>.lock", held until destruction (closing the fd releases it).
class FileLock {
 public:
  explicit FileLock(const fs::path& path) {
    const fs::path lock_path = path.string() + ".lock";
    fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0)
      throw io_error(path, "cannot open " + lock_path.string() + ": " + detail::errno_text(errno));
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd_);
      throw io_error(path, "cannot lock " + lock_path.string() + ": " + detail::errno_text(error));
    }
  }
  ~FileLock() { ::close(fd_); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

// Readers see the old file or the new one, never a part: the new one is renamed over it.
void replace_file(const fs::path& path, const std::string& bytes) {
  fs::path temp;
  if (const int error = detail::replace_file_atomically(path, bytes, true, &temp)) {
    throw io_error(path, "writing " + temp.string() + " failed: " + detail::errno_text(error));
  }
}

}  // namespace

TuningMeta TuningMeta::for_device(const DeviceInfo& device, int driver_version) {
  TuningMeta meta;
  meta.flashjit_version = kVersion;
  meta.nvrtc_version = detail::nvrtc_version();
  meta.driver_version = driver_version;
  meta.gpu_name = device.name;
  meta.compute_capability = std::to_string(device.cc_major) + "." + std::to_string(device.cc_minor);
  meta.sm_count = device.sm_count;
  return meta;
}

// Sizes beyond 2^62 do not occur (they would not fit in memory), so the result fits.
std::int64_t shape_bucket(std::int64_t n) {
  if (n <= 1) return 1;
  return static_cast<std::int64_t>(std::bit_ceil(static_cast<std::uint64_t>(n)));
}

std::string TuningKey::to_string() const { return op + "/" + template_hash + "/" + shape; }

std::string pick_winner(const std::string& default_config,
                        const std::vector<CandidateTiming>& candidates) {
  // (median, name) orders the candidates totally, so their order in the vector cannot matter.
  const CandidateTiming* fastest = nullptr;
  const CandidateTiming* fallback = nullptr;  // the default's fastest finite measurement
  const auto faster = [](const CandidateTiming& a, const CandidateTiming* b) {
    return b == nullptr || a.median_ms < b->median_ms ||
           (a.median_ms == b->median_ms && a.config < b->config);
  };
  for (const CandidateTiming& c : candidates) {
    if (!std::isfinite(c.median_ms)) continue;
    if (faster(c, fastest)) fastest = &c;
    if (c.config == default_config && faster(c, fallback)) fallback = &c;
  }
  if (fastest == nullptr) return "";
  if (fallback == nullptr) return fastest->config;
  const bool wins = fastest->median_ms <= fallback->median_ms * (1 - kWinMargin);
  return wins ? fastest->config : fallback->config;
}

TuningEntry merge_entries(const TuningEntry& base, const TuningEntry& update) {
  std::map<std::string, CandidateTiming> by_config;
  for (const CandidateTiming& c : base.candidates) by_config[c.config] = c;
  for (const CandidateTiming& c : update.candidates) by_config[c.config] = c;
  TuningEntry merged;
  merged.default_config = update.default_config;
  for (auto& [config, timing] : by_config) merged.candidates.push_back(std::move(timing));
  merged.winner = pick_winner(merged.default_config, merged.candidates);
  return merged;
}

fs::path database_path(const fs::path& cache_root, const TuningMeta& meta) {
  std::string slug;
  for (char ch : meta.gpu_name) {
    const auto byte = static_cast<unsigned char>(ch);
    if (std::isalnum(byte)) {
      slug += static_cast<char>(std::tolower(byte));
    } else if (!slug.empty() && slug.back() != '-') {
      slug += '-';
    }
  }
  if (!slug.empty() && slug.back() == '-') slug.pop_back();
  if (slug.empty()) slug = "gpu";
  detail::KeyBuilder digest;
  digest.add(std::to_string(meta.format)).add(meta.flashjit_version).add(meta.nvrtc_version);
  digest.add(std::to_string(meta.driver_version)).add(meta.gpu_name);
  digest.add(meta.compute_capability).add(std::to_string(meta.sm_count));
  return tuning_folder(cache_root) / (slug + "." + digest.hex_digest().substr(0, 8) + ".json");
}

fs::path tuning_folder(const fs::path& cache_root) { return cache_root / "v1" / "tuning"; }

std::vector<fs::path> database_files(const fs::path& cache_root) {
  std::vector<fs::path> files;
  std::error_code error;
  for (const auto& item : fs::directory_iterator(tuning_folder(cache_root), error)) {
    if (item.path().extension() == ".json") files.push_back(item.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TuningDatabase TuningDatabase::load(const fs::path& path, const TuningMeta& meta) {
  TuningDatabase database;
  FileContents contents = read_database(path, &meta);
  if (!contents.problem.empty()) {
    database.problem_ = "ignored " + path.string() + ": " + contents.problem;
  }
  database.entries_ = std::move(contents.entries);
  return database;
}

TuningDatabase TuningDatabase::load_any(const fs::path& path) {
  TuningDatabase database;
  FileContents contents = read_database(path, nullptr);
  if (!contents.problem.empty()) {
    database.problem_ = "ignored " + path.string() + ": " + contents.problem;
  }
  database.entries_ = std::move(contents.entries);
  return database;
}

std::optional<TuningEntry> TuningDatabase::find(const TuningKey& key) const {
  auto it = entries_.find(key.to_string());
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

TuningEntry merge_into_file(const fs::path& path, const TuningMeta& meta, const TuningKey& key,
                            const TuningEntry& entry) {
  make_database_directories(path);
  FileLock lock(path);
  FileContents contents = read_database(path, &meta);
  if (!contents.problem.empty()) {
    throw io_error(path, contents.problem + "; the file was left unchanged");
  }
  const std::string name = key.to_string();
  TuningEntry& stored = contents.entries[name];
  stored = merge_entries(stored, entry);
  replace_file(path, encode_database(meta, contents.entries));
  return stored;
}

}  // namespace flashjit::autotune
