#include "disk_cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "env.hpp"
#include "file_io.hpp"
#include "log.hpp"

namespace flashjit::detail {
namespace fs = std::filesystem;
namespace {

constexpr const char* kEntrySuffix = ".cubin";

// Cubins are code: a cache directory that someone else can write is a way to run their code.
std::string ownership_problem(const fs::path& dir) {
  struct stat info {};
  if (::stat(dir.c_str(), &info) != 0) return "cannot stat it: " + errno_text(errno);
  if (!S_ISDIR(info.st_mode)) return "it is not a directory";
  if (info.st_uid != ::geteuid()) return "it is owned by another user";
  if (info.st_mode & (S_IWGRP | S_IWOTH)) return "it is writable by other users";
  return "";
}

// An entry must be a plain file: a directory, link or device with an entry's name is invalid.
bool is_plain_file(const fs::path& path) {
  std::error_code ec;
  return fs::symlink_status(path, ec).type() == fs::file_type::regular;
}

bool is_temp_file(const fs::path& path) {
  return path.filename().string().find(kTempFileMarker) != std::string::npos;
}

}  // namespace

DiskCache::DiskCache(fs::path root, std::chrono::milliseconds lock_timeout)
    : root_(std::move(root)), lock_timeout_(lock_timeout) {
  if (int error = make_private_directories(root_)) {
    degraded_reason_ = "cannot create " + root_.string() + ": " + errno_text(error);
    warn_once("cache-unusable:" + root_.string(), "kernel cache " + root_.string() +
                                                      " is not used (" + degraded_reason_ +
                                                      "); caching in memory only");
    return;
  }
  if (std::string problem = ownership_problem(root_); !problem.empty()) {
    degraded_reason_ = "refused: " + problem;
    warn_once("cache-unusable:" + root_.string(),
              "kernel cache " + root_.string() + " is refused (" + problem +
                  "); caching in memory only. Use a directory only you can write (chmod 700).");
    return;
  }
  int error = make_private_directories(kernels_dir());
  if (error == 0) error = make_private_directories(locks_dir());
  // Every directory between the root and the entries must be as private as the root.
  for (const fs::path& dir : {root_ / "v1", kernels_dir(), locks_dir()}) {
    std::string problem = error == 0 ? ownership_problem(dir) : "";
    if (!problem.empty()) {
      degraded_reason_ = "refused: " + dir.string() + ": " + problem;
      warn_once("cache-unusable:" + root_.string(),
                "kernel cache " + root_.string() + " is refused (" + dir.string() + ": " + problem +
                    "); caching in memory only. Make it writable only by you (chmod 700).");
      return;
    }
  }
  readable_ = true;
  if (error == 0 && ::access(kernels_dir().c_str(), W_OK) != 0) error = errno;
  if (error != 0) {
    degrade_to_read_only("cannot write there: " + errno_text(error));
  } else {
    writable_ = true;
  }
}

fs::path DiskCache::default_root() {
  if (auto dir = env_value("FLASHJIT_CACHE_DIR"); dir && !dir->empty()) return *dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return fs::path(xdg) / "flashjit";
  }
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : "/tmp") / ".cache" / "flashjit";
}

fs::path DiskCache::kernels_dir() const { return root_ / "v1" / "kernels"; }
fs::path DiskCache::locks_dir() const { return root_ / "v1" / "locks"; }

fs::path DiskCache::entry_path(const std::string& arch, const std::string& display_name,
                               const std::string& key) const {
  return kernels_dir() / arch / (display_name + "-" + key + kEntrySuffix);
}

void DiskCache::degrade_to_read_only(const std::string& why) {
  writable_ = false;
  degraded_reason_ = why;
  warn_once("cache-read-only:" + root_.string(), "kernel cache " + root_.string() +
                                                     " is not writable (" + why +
                                                     "); new kernels are cached in memory only");
}

std::string DiskCache::directory_problem(const fs::path& entry) const {
  const std::string problem = ownership_problem(entry.parent_path());
  if (problem.empty()) return "";
  return "its directory " + entry.parent_path().string() + " is refused: " + problem;
}

bool DiskCache::trusted_directory(const fs::path& entry) const {
  std::error_code ec;
  if (!fs::exists(entry.parent_path(), ec)) return true;  // store() creates it 0700
  const std::string problem = directory_problem(entry);
  if (problem.empty()) return true;
  warn_once("cache-directory:" + entry.parent_path().string(),
            "kernel cache directory " + entry.parent_path().string() + " is not used (" +
                ownership_problem(entry.parent_path()) +
                "); its kernels are compiled again and kept in memory. `flashjit cache verify` "
                "removes it.");
  return false;
}

void DiskCache::remove_corrupt(const fs::path& path, const std::string& problem) {
  std::error_code ec;
  if (writable_) fs::remove_all(path, ec);
  warn_once("cache-corrupt:" + path.string(), "ignored invalid kernel cache file " + path.string() +
                                                  " (" + problem + "); it will be recompiled");
}

std::optional<CacheEntry> DiskCache::load(const fs::path& path, const std::string& key) {
  if (!readable_ || !trusted_directory(path)) return std::nullopt;
  std::error_code ec;
  if (fs::exists(fs::symlink_status(path, ec)) && !is_plain_file(path)) {
    remove_corrupt(path, "not a regular file");
    return std::nullopt;
  }
  std::optional<std::string> bytes = read_whole_file(path);
  if (!bytes) return std::nullopt;
  std::string problem;
  std::optional<CacheEntry> entry = decode_cache_file(std::move(*bytes), key, &problem);
  if (!entry) {
    remove_corrupt(path, problem);
    return std::nullopt;
  }
  if (writable_) ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // last use, for prune
  return entry;
}

void DiskCache::store(const fs::path& path, const CacheEntry& entry) {
  if (!writable_ || !trusted_directory(path)) return;
  if (int error = make_private_directories(path.parent_path())) {
    degrade_to_read_only("cannot create " + path.parent_path().string() + ": " + errno_text(error));
    return;
  }
  // Not fsync'ed: a cubin lost in a crash is compiled again, and a torn one fails its checksum.
  if (int error = replace_file_atomically(path, encode_cache_file(entry), false)) {
    degrade_to_read_only("writing " + path.filename().string() + " failed: " + errno_text(error));
  }
}

DiskCache::KeyLock::~KeyLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

DiskCache::KeyLock DiskCache::lock(const std::string& key) {
  if (!writable_) return KeyLock();
  const fs::path path = locks_dir() / (key + ".lock");
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return KeyLock();
  const auto deadline = std::chrono::steady_clock::now() + lock_timeout_;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::close(fd);
      warn_once("cache-lock-timeout:" + key, "waited " + std::to_string(lock_timeout_.count()) +
                                                 " ms for another process " + "compiling kernel " +
                                                 key + "; compiling it here as well");
      return KeyLock();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return KeyLock(fd);
}

std::vector<DiskEntryInfo> DiskCache::list() const {
  std::vector<DiskEntryInfo> entries;
  std::error_code ec;
  if (!readable_ || !fs::is_directory(kernels_dir(), ec)) return entries;
  for (auto it = fs::recursive_directory_iterator(kernels_dir(), ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path& path = it->path();
    if (is_temp_file(path) || path.extension() != kEntrySuffix) continue;
    DiskEntryInfo info;
    info.path = path;
    if (!is_plain_file(path)) {  // a directory or link with an entry's name
      it.disable_recursion_pending();
      info.problem = "not a regular file";
      info.last_use = fs::symlink_status(path, ec).type() == fs::file_type::directory
                          ? it->last_write_time(ec)
                          : fs::file_time_type{};
      entries.push_back(std::move(info));
      continue;
    }
    info.size = it->file_size(ec);
    info.last_use = it->last_write_time(ec);
    if (std::string problem = directory_problem(path); !problem.empty()) {
      info.problem = problem;
      entries.push_back(std::move(info));
      continue;
    }
    std::optional<std::string> bytes = read_whole_file(path);
    if (bytes) info.entry = decode_cache_file(std::move(*bytes), "", &info.problem);
    if (!bytes) info.problem = "unreadable";
    // The key is also in the file name: a file renamed onto another key is foreign.
    if (info.entry && path.stem().string().find(info.entry->key) == std::string::npos) {
      info.problem = "file name does not match the key it holds";
      info.entry.reset();
    }
    entries.push_back(std::move(info));
  }
  std::sort(entries.begin(), entries.end(),
            [](const DiskEntryInfo& a, const DiskEntryInfo& b) { return a.path < b.path; });
  return entries;
}

std::vector<DiskEntryInfo> DiskCache::verify_and_repair() {
  std::vector<DiskEntryInfo> invalid;
  std::error_code ec;
  std::vector<fs::path> refused_dirs;
  for (DiskEntryInfo& info : list()) {
    if (info.entry) continue;
    if (writable_) fs::remove_all(info.path, ec);
    if (!directory_problem(info.path).empty()) refused_dirs.push_back(info.path.parent_path());
    invalid.push_back(std::move(info));
  }
  // A directory others can write may hold files planted there: it goes whole, and store()
  // creates it again, private.
  if (writable_) {
    for (const fs::path& dir : refused_dirs) fs::remove_all(dir, ec);
  }
  // Temp files of writers that died; live writers rename theirs within seconds.
  const auto stale = fs::file_time_type::clock::now() - std::chrono::hours(1);
  if (writable_ && fs::is_directory(kernels_dir(), ec)) {
    for (const auto& file : fs::recursive_directory_iterator(kernels_dir(), ec)) {
      if (is_temp_file(file.path()) && file.last_write_time(ec) < stale) {
        fs::remove(file.path(), ec);
      }
    }
  }
  return invalid;
}

std::vector<DiskEntryInfo> DiskCache::prune(std::uintmax_t max_bytes) {
  std::vector<DiskEntryInfo> entries = list();
  std::uintmax_t total = 0;
  for (const DiskEntryInfo& info : entries) total += info.size;
  std::sort(entries.begin(), entries.end(), [](const DiskEntryInfo& a, const DiskEntryInfo& b) {
    return a.last_use < b.last_use;  // least recently used first
  });
  std::vector<DiskEntryInfo> removed;
  std::error_code ec;
  for (DiskEntryInfo& info : entries) {
    if (total <= max_bytes) break;
    if (writable_ && fs::remove(info.path, ec)) {
      total -= info.size;
      removed.push_back(std::move(info));
    }
  }
  return removed;
}

std::size_t DiskCache::clear() {
  std::size_t count = list().size();
  std::error_code ec;
  if (!writable_) return 0;
  fs::remove_all(kernels_dir(), ec);
  fs::remove_all(locks_dir(), ec);
  make_private_directories(kernels_dir());
  make_private_directories(locks_dir());
  return count;
}

}  // namespace flashjit::detail
