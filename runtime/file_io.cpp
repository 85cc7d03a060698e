#include "file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

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

std::optional<std::string> read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return bytes.str();
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

}  // namespace flashjit::detail
