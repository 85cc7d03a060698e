#pragma once
// Loading a shared object from bytes in memory (a host kernel from the cache) without leaving
// a file behind: the bytes go into an anonymous memory file that dlopen maps.
#include <string>

namespace flashjit::detail {

/// Loads the shared object `bytes` (named `name` in /proc/self/maps and messages) for the rest
/// of the process's life and returns the address of its `symbol`. Throws Error{compile} with
/// dlerror's text when it cannot be loaded or lacks the symbol.
void* load_shared_object(const std::string& bytes, const std::string& name, const char* symbol);

}  // namespace flashjit::detail
