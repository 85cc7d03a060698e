#pragma once
// The host C++ compiler the emulator backend builds kernels with, and the emulator's archive
// it links into them (docs/emulator.md): where they are, what identifies them in a cache
// key, and one compile of a translation unit into a shared object.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace flashjit::detail {

/// A host C++ compiler.
struct HostCompiler {
  std::filesystem::path path;      ///< as found, e.g. "/usr/bin/c++" (for messages)
  std::filesystem::path resolved;  ///< symlinks resolved, e.g. "/usr/bin/x86_64-linux-gnu-g++-12"
  std::string version;             ///< what `--version` printed
  /// "-fuse-ld=gold" for GCC and Clang where ld.gold is on PATH, else "": gold links a kernel
  /// against the emulator's archive in under half of ld.bfd's time (0.08 s against 0.19 s).
  std::string linker_flag;
};

/// What a host compile needs: the compiler and the emulator's archive to link in.
struct HostToolchain {
  HostCompiler compiler;
  std::filesystem::path archive;  ///< libflashjit_emulator.a, built position-independent
  std::string archive_digest;     ///< 32 hex digits over its bytes
};

/// The toolchain, or why there is none and what to do about it.
struct HostToolchainLookup {
  std::optional<HostToolchain> toolchain;
  std::string problem;  ///< why there is none ("" when found)
  /// A sentence saying how to provide what is missing, the compiler or the archive (the
  /// compiler's variable is no help when it is the archive that is missing).
  std::string remedy;
};

/// Finds the compiler ($FLASHJIT_HOST_CXX, else c++, g++ or clang++ on PATH; it must answer
/// `--version`) and the archive ($FLASHJIT_EMULATOR_LIBRARY, else beside the file the runtime
/// was loaded from, in its prefix's library folder, or in the build tree). Runs the compiler
/// once and reads the archive whole.
HostToolchainLookup find_host_toolchain();

/// The flags of every host compile, before the include directories and the spec's options.
const std::vector<std::string>& host_compile_flags();

/// Compiles `source` into the shared object `output` with host_compile_flags(), the compiler's
/// linker_flag, `-I` each of `include_dirs`, `extra_flags`, and the archive linked in. Throws
/// Error{compile} naming `what` and holding the compiler's log, trimmed, with `source`'s directory
/// left out of paths.
void compile_shared_object(const HostToolchain& toolchain, const std::filesystem::path& source,
                           const std::vector<std::filesystem::path>& include_dirs,
                           const std::vector<std::string>& extra_flags,
                           const std::filesystem::path& output, const std::string& what);

/// Precompiles `header` into `output` (GCC's .gch) with host_compile_flags() less the link's,
/// `-I` each of `include_dirs`. Throws Error{compile} as compile_shared_object does.
void compile_precompiled_header(const HostToolchain& toolchain,
                                const std::filesystem::path& header,
                                const std::vector<std::filesystem::path>& include_dirs,
                                const std::filesystem::path& output);

}  // namespace flashjit::detail
