#pragma once
// Whole-file reads shared by the template loader and the disk cache.
#include <filesystem>
#include <optional>
#include <string>

namespace flashjit::detail {

/// The bytes of the file at `path`, or nullopt when it cannot be opened or read.
std::optional<std::string> read_whole_file(const std::filesystem::path& path);

}  // namespace flashjit::detail
