#pragma once
// Diagnostics flashjit gives on its own: notices of long work (a kernel compiled for the
// emulator) and warnings (cache problems, fallbacks). By default they go to stderr with a
// "flashjit: " prefix; a binding that has logging of its own (Python's warnings and logging)
// asks for them to be kept instead and takes them in order. Each distinct warning topic is
// given once per process.
#include <string>

namespace flashjit::detail {

enum class MessageKind { notice, warning };

/// Gives `text` as a message of `kind`: printed to stderr, or kept when keep_messages(true).
void emit_message(MessageKind kind, const std::string& text);

/// Gives `message` as a warning the first time `topic` is warned about in this process.
/// Returns true when it gave it.
bool warn_once(const std::string& topic, const std::string& message);

/// Whether messages are kept for take_message rather than printed (process-wide; at most
/// kKeptMessages are kept, the oldest dropped past that).
void keep_messages(bool keep);

/// The oldest kept message, removed; false when none is kept.
bool take_message(MessageKind& kind, std::string& text);

}  // namespace flashjit::detail
