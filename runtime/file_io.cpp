#include "file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

#include "flashjit/error.hpp"

namespace flashjit::detail {
namespace {

// A name no other writer uses: pid, a counter, and a random number for a pid reused after a
// writer died with its temporary file still there.
std::filesystem::path temp_name(const std::filesystem::path& path) {
  static std::atomic<unsigned> counter{0};
  std::random_device random;
  return path.string() + kTempFileMarker + std::to_string(::getpid()) + "." +
         std::to_string(counter++) + "." + std::to_string(random());
}

// Writes all of `bytes` to the new file `fd`, syncs it when asked, closes it; returns 0 or the
// errno of the first failure.
int write_all(int fd, const std::string& bytes, bool durable) {
  std::size_t written = 0;
  int error = 0;
  while (written < bytes.size() && error == 0) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) error = n < 0 ? errno : ENOSPC;
    if (n > 0) written += static_cast<std::size_t>(n);
  }
  if (error == 0 && durable && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  return error;
}

}  // namespace

// Sized once from fstat and read straight into the string: a process's first kernels come
// from here, and a stream copy would touch every byte three times.
std::optional<std::string> read_whole_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat info {};
  std::string bytes;
  // One byte more than the size, so the read that finds the end needs no second allocation.
  if (::fstat(fd, &info) == 0 && info.st_size > 0) {
    bytes.resize(static_cast<std::size_t>(info.st_size) + 1);
  }
  std::size_t filled = 0;
  bool failed = false;
  while (!failed) {
    if (filled == bytes.size()) bytes.resize(filled + 4096 + filled / 2);  // grew, or no size
    const ssize_t n = ::read(fd, bytes.data() + filled, bytes.size() - filled);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failed = n < 0;
      break;
    }
    filled += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (failed) return std::nullopt;
  bytes.resize(filled);
  return bytes;
}

int make_private_directories(const std::filesystem::path& dir) {
  std::filesystem::path partial;
  for (const std::filesystem::path& part : dir) {
    partial /= part;
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) return errno;
  }
  return 0;
}

int replace_file_atomically(const std::filesystem::path& path, const std::string& bytes,
                            bool durable, std::filesystem::path* temp) {
  const std::filesystem::path name = temp_name(path);
  if (temp != nullptr) *temp = name;
  const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  int error = write_all(fd, bytes, durable);
  if (error == 0 && ::rename(name.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0) ::unlink(name.c_str());
  return error;
}

std::string errno_text(int error) { return std::strerror(error); }

ScratchDirectory::ScratchDirectory() {
  const std::filesystem::path temp = std::filesystem::temp_directory_path();
  std::string name = (temp / "flashjit-host-XXXXXX").string();
  if (::mkdtemp(name.data()) == nullptr) {  // mode 0700
    throw Error(ErrorKind::io, "cannot create a directory for the emulator's host compile in " +
                                   temp.string() + ": " + errno_text(errno));
  }
  path_ = name;
}

ScratchDirectory::~ScratchDirectory() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace flashjit::detail
