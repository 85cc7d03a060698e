#include "log.hpp"

#include <cstdio>
#include <mutex>
#include <set>

namespace flashjit::detail {

bool warn_once(const std::string& topic, const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard lock(mutex);
  if (!warned.insert(topic).second) return false;
  std::fprintf(stderr, "flashjit: warning: %s\n", message.c_str());
  return true;
}

}  // namespace flashjit::detail
