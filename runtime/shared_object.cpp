#include "shared_object.hpp"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "file_io.hpp"
#include "flashjit/error.hpp"

namespace flashjit::detail {
namespace {

[[noreturn]] void fail(const std::string& name, const std::string& why) {
  throw Error(ErrorKind::compile, "cannot load the host-compiled kernel " + name + ": " + why);
}

/// An anonymous memory file holding `bytes`.
int memory_file(const std::string& bytes, const std::string& name) {
  const int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) fail(name, "memfd_create: " + errno_text(errno));
  for (std::size_t written = 0; written < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : ENOSPC;
      ::close(fd);
      fail(name, "writing the memory file: " + errno_text(error));
    }
    written += static_cast<std::size_t>(n);
  }
  return fd;
}

}  // namespace

void* load_shared_object(const std::string& bytes, const std::string& name, const char* symbol) {
  const int fd = memory_file(bytes, name);
  // The file stays open, like the object itself, for the process's life: the loader knows a
  // loaded object by its path, so if this descriptor's number were reused for the next
  // object's file, dlopen would hand back this object instead of loading that one.
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = ::dlerror();
    ::close(fd);
    fail(name, error != nullptr ? error : "dlopen failed");
  }
  void* address = ::dlsym(handle, symbol);
  if (address == nullptr) fail(name, std::string("it has no ") + symbol);
  return address;
}

}  // namespace flashjit::detail
