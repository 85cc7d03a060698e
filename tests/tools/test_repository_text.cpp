// The repository's text names only what the repository holds: no comment, doc, script or
// header cites the notes the project was planned from (they are not part of it; what a reader
// needs from them is in docs/, design.md first).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Folders that are not the project's text: version control and build trees.
bool skipped(const fs::path& path) {
  const std::string name = path.filename().string();
  return name == ".git" || name.rfind("build", 0) == 0 || name == "__pycache__";
}

TEST_CASE("no file of the repository cites a document outside it") {
  const std::vector<std::string> outside = {"DESIGN.md", "HOPPER-NOTES", "STYLE.md", "GPU.md",
                                            "../shared/"};
  const fs::path root = FLASHJIT_SOURCE_DIR;
  std::vector<std::string> citations;
  std::size_t files = 0;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    if (it->is_directory() && skipped(it->path())) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file() || it->file_size() > (4u << 20)) continue;
    std::ifstream in(it->path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const std::string contents = text.str();
    ++files;
    for (const std::string& name : outside) {
      if (contents.find(name) != std::string::npos) {
        citations.push_back(fs::relative(it->path(), root).string() + " names " + name);
      }
    }
  }
  CHECK(files > 500);  // the walk saw the tree
  for (const std::string& citation : citations) {
    if (citation.rfind("tests/tools/test_repository_text.cpp", 0) != 0) FAIL_CHECK(citation);
  }
}

}  // namespace
