#pragma once
// Files flashjit keeps (the kernel cache, the tuning database): whole-file reads, private
// directories, and atomic replacement, so that a reader sees an old file or a new one, never a
// part of one.
#include <filesystem>
#include <optional>
#include <string>

namespace flashjit::detail {

/// The bytes of the file at `path`, or nullopt when it cannot be opened or read.
std::optional<std::string> read_whole_file(const std::filesystem::path& path);

/// Creates every missing directory of `dir` with mode 0700 (those that exist keep their
/// permissions): what flashjit stores decides which code runs. Returns 0 or the errno.
int make_private_directories(const std::filesystem::path& dir);

/// The marker in the names of temporary files (a writer that died may leave one behind).
inline constexpr const char* kTempFileMarker = ".tmp.";

/// Replaces the file at `path` with `bytes`: a new temporary file beside it,
/// "<path>.tmp.<pid>.<n>.<random>" (mode 0600), written (and fsync'ed when `durable`), then
/// renamed over `path`. Returns 0, or the errno of the first failure, in which case no
/// temporary file is left. `temp` receives the temporary file's name, for messages.
int replace_file_atomically(const std::filesystem::path& path, const std::string& bytes,
                            bool durable, std::filesystem::path* temp = nullptr);

/// A fresh private directory (mode 0700) under the system's temp folder, named
/// "flashjit-host-XXXXXX", removed with everything in it when destroyed: where the emulator's
/// host compiles write their sources and outputs.
class ScratchDirectory {
 public:
  /// Throws Error{io} when the directory cannot be made.
  ScratchDirectory();
  ~ScratchDirectory();
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// strerror's text for `error`.
std::string errno_text(int error);

}  // namespace flashjit::detail
