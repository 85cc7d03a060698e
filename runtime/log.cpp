#include "log.hpp"

#include <cstdio>
#include <deque>
#include <mutex>
#include <set>
#include <utility>

namespace flashjit::detail {
namespace {

// A binding that keeps messages and never takes them must not grow without bound.
constexpr std::size_t kKeptMessages = 1024;

struct Messages {
  std::mutex mutex;
  bool keep = false;
  std::deque<std::pair<MessageKind, std::string>> kept;
  std::set<std::string> warned;  // warn_once's topics
};

Messages& messages() {
  static Messages instance;
  return instance;
}

}  // namespace

void emit_message(MessageKind kind, const std::string& text) {
  Messages& m = messages();
  std::lock_guard lock(m.mutex);
  if (m.keep) {
    if (m.kept.size() == kKeptMessages) m.kept.pop_front();
    m.kept.emplace_back(kind, text);
    return;
  }
  std::fprintf(stderr, "flashjit: %s%s\n", kind == MessageKind::warning ? "warning: " : "",
               text.c_str());
  std::fflush(stderr);
}

bool warn_once(const std::string& topic, const std::string& message) {
  {
    Messages& m = messages();
    std::lock_guard lock(m.mutex);
    if (!m.warned.insert(topic).second) return false;
  }
  emit_message(MessageKind::warning, message);
  return true;
}

void keep_messages(bool keep) {
  Messages& m = messages();
  std::lock_guard lock(m.mutex);
  m.keep = keep;
}

bool take_message(MessageKind& kind, std::string& text) {
  Messages& m = messages();
  std::lock_guard lock(m.mutex);
  if (m.kept.empty()) return false;
  kind = m.kept.front().first;
  text = std::move(m.kept.front().second);
  m.kept.pop_front();
  return true;
}

}  // namespace flashjit::detail
