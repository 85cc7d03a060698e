#include "template_sources.hpp"

#include <algorithm>

#include "env.hpp"
#include "file_io.hpp"
#include "flashjit/error.hpp"
#include "hashing.hpp"

namespace flashjit::detail {

TemplateSet::TemplateSet(std::vector<TemplateFile> files, std::vector<std::string> storage,
                         std::string origin)
    : storage_(std::move(storage)), files_(std::move(files)), origin_(std::move(origin)) {
  std::sort(files_.begin(), files_.end(),
            [](const TemplateFile& a, const TemplateFile& b) { return a.name < b.name; });
  KeyBuilder key;
  for (const TemplateFile& file : files_) key.add(file.name).add(file.text);
  digest_ = key.hex_digest();
}

TemplateSet TemplateSet::embedded() { return TemplateSet(embedded_templates(), {}, "embedded"); }

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
  return TemplateSet(std::move(files), std::move(storage), dir.string());
}

const TemplateSet& TemplateSet::active() {
  static const TemplateSet set = [] {
    std::optional<std::string> dir = env_value("FLASHJIT_TEMPLATE_DIR");
    return dir && !dir->empty() ? from_directory(*dir) : embedded();
  }();
  return set;
}

}  // namespace flashjit::detail
