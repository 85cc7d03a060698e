#include "template_sources.hpp"

#include <algorithm>

#include "env.hpp"
#include "file_io.hpp"
#include "flashjit/error.hpp"

namespace flashjit::detail {

TemplateSet::TemplateSet(std::vector<TemplateFile> files, std::vector<std::string> storage,
                         std::string origin, std::string digest)
    : storage_(std::move(storage)),
      files_(std::move(files)),
      origin_(std::move(origin)),
      digest_(std::move(digest)) {
  std::sort(files_.begin(), files_.end(),
            [](const TemplateFile& a, const TemplateFile& b) { return a.name < b.name; });
}

// The build's digest: hashing the embedded text here would fault in half a megabyte of pages,
// most of a cache hit's time in a fresh process (0.4-0.7 ms on the development machine).
TemplateSet TemplateSet::embedded() {
  return TemplateSet(embedded_templates(), {}, "embedded",
                     std::string(embedded_templates_digest()));
}

TemplateSet TemplateSet::from_directory(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw Error(ErrorKind::io, "template directory " + dir.string() + " does not exist");
  }
  std::vector<std::string> names;
  // Linked folders are followed (a directory may assemble templates from several trees), and
  // names stay as seen from `dir`: lexically, without resolving the links.
  for (const auto& entry :
       fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink)) {
    std::string ext = entry.path().extension().string();
    if (entry.is_regular_file() && (ext == ".cuh" || ext == ".cu")) {
      names.push_back(entry.path().lexically_relative(dir).generic_string());
    }
  }
  if (names.empty()) {
    throw Error(ErrorKind::io, "template directory " + dir.string() + " holds no .cuh files");
  }
  // Reserve first: TemplateFile views point into `storage`, which must not reallocate.
  std::vector<std::string> storage;
  storage.reserve(names.size());
  std::vector<TemplateFile> files;
  for (const std::string& name : names) {
    std::optional<std::string> text = read_whole_file(dir / name);
    if (!text) throw Error(ErrorKind::io, "cannot read template " + (dir / name).string());
    storage.push_back(std::move(*text));
    files.push_back({name, storage.back()});
  }
  std::string digest = template_digest(files);
  return TemplateSet(std::move(files), std::move(storage), dir.string(), std::move(digest));
}

const TemplateSet& TemplateSet::active() {
  static const TemplateSet set = [] {
    std::optional<std::string> dir = env_value("FLASHJIT_TEMPLATE_DIR");
    return dir && !dir->empty() ? from_directory(*dir) : embedded();
  }();
  return set;
}

}  // namespace flashjit::detail
