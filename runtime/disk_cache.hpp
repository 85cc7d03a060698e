#pragma once
// The kernel cache's directory: layout, permissions, atomic writes, per-key locks, and the
// maintenance verbs behind `flashjit cache` (docs/cache.md).
//   <root>/v1/kernels/<arch>/<display-name>-<key>.cubin   one self-describing entry
//   <root>/v1/locks/<key>.lock                            per-key compile lock (flock)
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cache_file.hpp"

namespace flashjit::detail {

/// One entry as `flashjit cache list` shows it.
struct DiskEntryInfo {
  std::filesystem::path path;
  std::optional<CacheEntry> entry;  ///< nullopt when the file is invalid
  std::string problem;              ///< why it is invalid
  std::uintmax_t size = 0;
  std::filesystem::file_time_type last_use;  ///< modification time, refreshed on every hit
};

class DiskCache {
 public:
  /// Uses `root` (created 0700 if missing). If the directory is writable by other users, not
  /// owned by this user, or cannot be created, the disk is not used at all and one warning is
  /// printed; if it exists but cannot be written, it is read but not written (one warning).
  explicit DiskCache(std::filesystem::path root,
                     std::chrono::milliseconds lock_timeout = std::chrono::seconds(120));

  /// The default root: $FLASHJIT_CACHE_DIR, else $XDG_CACHE_HOME/flashjit, else
  /// $HOME/.cache/flashjit.
  static std::filesystem::path default_root();

  const std::filesystem::path& root() const { return root_; }
  bool readable() const { return readable_; }
  bool writable() const { return writable_; }
  /// Why the disk is not (fully) used; empty when it is.
  const std::string& degraded_reason() const { return degraded_reason_; }

  /// The file that holds `key`.
  std::filesystem::path entry_path(const std::string& arch, const std::string& display_name,
                                   const std::string& key) const;

  /// Loads the entry at `path` if it is intact and holds `key`; a corrupt or foreign file is
  /// removed (when writable) with a warning, and nullopt returned. A hit refreshes last use.
  std::optional<CacheEntry> load(const std::filesystem::path& path, const std::string& key);

  /// Writes `entry` atomically (unique temp file, then rename). A read-only or full disk
  /// switches this cache to memory-only with one warning; nothing half-written is left.
  void store(const std::filesystem::path& path, const CacheEntry& entry);

  /// An exclusive per-key lock held while a process compiles that key.
  class KeyLock {
   public:
    KeyLock() = default;
    explicit KeyLock(int fd) : fd_(fd) {}
    KeyLock(KeyLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
    KeyLock& operator=(KeyLock&&) = delete;
    ~KeyLock();
    bool held() const { return fd_ >= 0; }

   private:
    int fd_ = -1;
  };

  /// Takes the lock for `key`, waiting up to the timeout; after it (or when locks cannot be
  /// created) returns an unheld lock so the caller compiles anyway rather than hang.
  KeyLock lock(const std::string& key);

  /// Every entry file, valid or not (a directory or link with an entry's name, or a file in a
  /// directory that fails the root's ownership check, is listed as invalid), sorted by path.
  std::vector<DiskEntryInfo> list() const;
  /// Removes invalid entries (corrupt or foreign files, anything not a plain file with an
  /// entry's name, entries in a directory others can write, which is removed whole) and stray
  /// temporary files; returns the entries found invalid.
  std::vector<DiskEntryInfo> verify_and_repair();
  /// Removes least recently used entries until the total is at most `max_bytes`; returns the
  /// removed entries.
  std::vector<DiskEntryInfo> prune(std::uintmax_t max_bytes);
  /// Removes every entry and lock. Returns how many entries were removed.
  std::size_t clear();

 private:
  std::filesystem::path kernels_dir() const;
  std::filesystem::path locks_dir() const;
  void degrade_to_read_only(const std::string& why);
  void remove_corrupt(const std::filesystem::path& path, const std::string& problem);
  /// Why the directory holding `entry` must not be used ("" when it may): every directory on
  /// the way to an entry passes the root's check (owned by this user, writable by no one else).
  std::string directory_problem(const std::filesystem::path& entry) const;
  /// Whether `entry`'s directory may be used (or does not exist yet); warns once when not.
  bool trusted_directory(const std::filesystem::path& entry) const;

  std::filesystem::path root_;
  std::chrono::milliseconds lock_timeout_;
  bool readable_ = false;
  bool writable_ = false;
  std::string degraded_reason_;
};

}  // namespace flashjit::detail
