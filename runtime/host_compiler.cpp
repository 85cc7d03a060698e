#include "host_compiler.hpp"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "env.hpp"
#include "file_io.hpp"
#include "flashjit/error.hpp"
#include "hashing.hpp"
#include "subprocess.hpp"

namespace flashjit::detail {
namespace fs = std::filesystem;
namespace {

bool is_executable_file(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

/// The first executable `name` in a directory of $PATH.
std::optional<fs::path> find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && is_executable_file(fs::path(dir) / name)) return fs::path(dir) / name;
  }
  return std::nullopt;
}

/// The compiler's path, or nullopt after setting `problem`.
std::optional<fs::path> compiler_path(std::string& problem) {
  if (std::optional<std::string> chosen = env_value("FLASHJIT_HOST_CXX"); chosen) {
    std::optional<fs::path> path = chosen->find('/') == std::string::npos
                                       ? find_on_path(*chosen)
                                       : std::optional<fs::path>(*chosen);
    if (path && is_executable_file(*path)) return path;
    problem = "FLASHJIT_HOST_CXX is '" + *chosen + "', which is not an executable file";
    return std::nullopt;
  }
  for (const char* name : {"c++", "g++", "clang++"}) {
    if (std::optional<fs::path> path = find_on_path(name)) return path;
  }
  problem = "no C++ compiler on PATH (looked for c++, g++ and clang++)";
  return std::nullopt;
}

std::optional<HostCompiler> find_compiler(std::string& problem) {
  std::optional<fs::path> path = compiler_path(problem);
  if (!path) return std::nullopt;
  const ProcessResult version = run_process({path->string(), "--version"});
  if (version.exit_code != 0) {
    problem = path->string() +
              " does not answer --version: " + version.output.substr(0, version.output.find('\n'));
    return std::nullopt;
  }
  std::error_code ec;
  fs::path resolved = fs::canonical(*path, ec);
  const bool gcc_or_clang = version.output.find("Free Software Foundation") != std::string::npos ||
                            version.output.find("clang") != std::string::npos;
  std::string linker_flag = gcc_or_clang && find_on_path("ld.gold") ? "-fuse-ld=gold" : "";
  return HostCompiler{*path, ec ? *path : resolved, version.output, std::move(linker_flag)};
}

/// The file this code was loaded from: the program that links flashjit statically, or
/// libflashjit.so. The program's own path comes from /proc/self/exe, since dladdr names it by
/// argv[0], which may be a bare name found on PATH.
std::optional<fs::path> loaded_from() {
  static const char anchor = 0;  // an address inside this file's module
  Dl_info info{};
  link_map* map = nullptr;
  if (::dladdr1(&anchor, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 ||
      map == nullptr) {
    return std::nullopt;
  }
  std::error_code ec;
  const fs::path path = map->l_name[0] == '\0' ? fs::read_symlink("/proc/self/exe", ec)
                                               : fs::canonical(map->l_name, ec);
  if (ec) return std::nullopt;
  return path;
}

/// Where the archive may be, relative to the file the runtime was loaded from (nothing
/// absolute is built in, so an installed prefix works after it is moved): beside it (an
/// installed libflashjit.so), in the prefix's library folder (an installed program in bin/),
/// or in this build tree (runtime/CMakeLists.txt).
std::vector<fs::path> archive_candidates() {
  const std::optional<fs::path> file = loaded_from();
  if (!file) return {};
  const fs::path dir = file->parent_path();
  return {dir / FLASHJIT_EMULATOR_ARCHIVE_NAME,
          (dir / FLASHJIT_LIBDIR_FROM_BINDIR / FLASHJIT_EMULATOR_ARCHIVE_NAME).lexically_normal(),
          (dir / FLASHJIT_EMULATOR_ARCHIVE_FROM_BUILD_DIR).lexically_normal()};
}

/// The archive's path, or nullopt after setting `problem`.
std::optional<fs::path> archive_path(std::string& problem) {
  std::error_code ec;
  if (std::optional<std::string> chosen = env_value("FLASHJIT_EMULATOR_LIBRARY"); chosen) {
    if (fs::is_regular_file(*chosen, ec)) return fs::path(*chosen);
    problem = "FLASHJIT_EMULATOR_LIBRARY is '" + *chosen + "', which is not a file";
    return std::nullopt;
  }
  const std::vector<fs::path> candidates = archive_candidates();
  std::string looked;
  for (const fs::path& path : candidates) {
    if (fs::is_regular_file(path, ec)) return path;
    looked += looked.empty() ? "" : ", ";
    looked += path.string();
  }
  problem = candidates.empty() ? "cannot tell which file the runtime was loaded from, to find "
                                 "the emulator's archive beside it"
                               : "the emulator's archive is not at any of " + looked;
  return std::nullopt;
}

/// At most the first 40 lines and 6000 characters of `log`: the first errors are the ones that
/// matter, and one bad instantiation can print thousands of lines of context.
std::string trimmed_log(const std::string& log) {
  constexpr std::size_t kLines = 40, kCharacters = 6000;
  std::size_t end = 0;
  for (std::size_t line = 0; line < kLines && end < log.size(); ++line) {
    const std::size_t newline = log.find('\n', end);
    end = newline == std::string::npos ? log.size() : newline + 1;
  }
  end = std::min(end, kCharacters);
  if (end >= log.size()) return log;
  return log.substr(0, end) + "\n(" + std::to_string(log.size() - end) +
         " more characters of the log left out)";
}

std::string without(std::string text, const std::string& part) {
  for (std::size_t at; !part.empty() && (at = text.find(part)) != std::string::npos;) {
    text.erase(at, part.size());
  }
  return text;
}

}  // namespace

HostToolchainLookup find_host_toolchain() {
  HostToolchainLookup lookup;
  std::optional<HostCompiler> compiler = find_compiler(lookup.problem);
  if (!compiler) {
    lookup.remedy =
        "Set FLASHJIT_HOST_CXX to a C++20 compiler (g++ or clang++), or put one on PATH as c++, "
        "g++ or clang++";
    return lookup;
  }
  lookup.remedy =
      "Set FLASHJIT_EMULATOR_LIBRARY to the emulator's archive, libflashjit_emulator.a (installed "
      "in the library folder, beside libflashjit)";
  std::optional<fs::path> archive = archive_path(lookup.problem);
  if (!archive) return lookup;
  std::optional<std::string> bytes = read_whole_file(*archive);
  if (!bytes) {
    lookup.problem = "cannot read the emulator's archive " + archive->string();
    return lookup;
  }
  lookup.remedy.clear();
  lookup.toolchain = HostToolchain{*compiler, *archive, KeyBuilder().add(*bytes).hex_digest()};
  return lookup;
}

namespace {

// `flags` and the sanitizers this build was compiled with (FLASHJIT_HOST_SANITIZE_FLAGS, from
// CMAKE_CXX_FLAGS): a sanitized emulator archive links only into sanitized objects.
std::vector<std::string> with_sanitizers(std::vector<std::string> flags) {
  std::istringstream sanitizers(FLASHJIT_HOST_SANITIZE_FLAGS);
  for (std::string flag; sanitizers >> flag;) flags.push_back(flag);
  return flags;
}

}  // namespace

const std::vector<std::string>& host_compile_flags() {
  // flashjit_emulator's own usage requirements (emulator/CMakeLists.txt), position-independent
  // code for a shared object, hidden symbols but the entry point, the archive's symbols kept
  // local (the object uses its own copy of the emulator), no undefined symbol left for dlopen
  // to find missing, and no debug sections: the emulator archive of a build with debug info
  // would otherwise make every kernel object about 7.5 MB instead of 0.3 MB, each written to
  // the cache and loaded into memory. -O1, not -O2: a Hopper kernel compiled in up to 15 % less
  // time (bench/host_compile.sh; noisy) and ran as fast on the emulator, whose own code (the
  // archive) does the heavy work.
  static const std::vector<std::string> flags = with_sanitizers(
      {"-std=c++20", "-O1", "-fPIC", "-shared", "-DFLASHJIT_EMULATOR=1", "-Wno-unknown-pragmas",
       "-fvisibility=hidden", "-Wl,--exclude-libs,ALL", "-Wl,-z,defs", "-Wl,--strip-debug"});
  return flags;
}

namespace {

/// Runs `argv`; throws Error{compile} naming `what` with the compiler's log (paths under
/// `scratch` shortened) unless it succeeds.
void run_compiler(const std::vector<std::string>& argv, const fs::path& scratch,
                  const std::string& what) {
  const ProcessResult result = run_process(argv);
  if (result.exit_code == 0) return;
  throw Error(ErrorKind::compile, argv.front() + " failed to compile " + what +
                                      " for the emulator (exit status " +
                                      std::to_string(result.exit_code) + "):\n" +
                                      trimmed_log(without(result.output, scratch.string() + "/")));
}

}  // namespace

void compile_shared_object(const HostToolchain& toolchain, const fs::path& source,
                           const std::vector<fs::path>& include_dirs,
                           const std::vector<std::string>& extra_flags, const fs::path& output,
                           const std::string& what) {
  std::vector<std::string> argv = {toolchain.compiler.path.string()};
  argv.insert(argv.end(), host_compile_flags().begin(), host_compile_flags().end());
  if (!toolchain.compiler.linker_flag.empty()) argv.push_back(toolchain.compiler.linker_flag);
  for (const fs::path& dir : include_dirs) argv.push_back("-I" + dir.string());
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  // The archive after the source, so the linker takes the members the kernel needs.
  argv.insert(argv.end(), {source.string(), toolchain.archive.string(), "-o", output.string()});
  run_compiler(argv, source.parent_path(), what);
}

void compile_precompiled_header(const HostToolchain& toolchain, const fs::path& header,
                                const std::vector<fs::path>& include_dirs,
                                const fs::path& output) {
  std::vector<std::string> argv = {toolchain.compiler.path.string()};
  for (const std::string& flag : host_compile_flags()) {
    if (flag != "-shared" && !flag.starts_with("-Wl,")) argv.push_back(flag);  // link flags
  }
  for (const fs::path& dir : include_dirs) argv.push_back("-I" + dir.string());
  argv.insert(argv.end(), {"-x", "c++-header", header.string(), "-o", output.string()});
  run_compiler(argv, output.parent_path(), "the precompiled " + header.filename().string());
}

}  // namespace flashjit::detail
