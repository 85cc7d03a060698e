#pragma once
// One kernel compiled for the emulator at run time (docs/emulator.md): the translation unit
// that exports its launcher, its cache key, and the compile, from the embedded templates and
// emulator headers written out to a private directory, so no source tree is needed.
#include <string>
#include <vector>

#include "host_compiler.hpp"
#include "kernel_spec.hpp"
#include "template_sources.hpp"

namespace flashjit::detail {

/// The emulator's headers and the public headers they include, by their paths in the source
/// tree ("emulator/launch.hpp", "include/flashjit/error.hpp"). Generated at build time by
/// cmake/EmbedTemplates.cmake (flashjit_embed_host_headers).
const std::vector<TemplateFile>& embedded_host_headers();

/// The function every host kernel object exports, returning its emulator::HostLaunchFunction.
inline constexpr const char* kHostKernelEntry = "flashjit_host_kernel_launcher";

/// The header each host kernel's translation unit includes first, the one GCC precompiles.
inline constexpr const char* kHostPreludeHeader = "emulator/host_prelude.hpp";

/// The translation unit of `spec`: includes kHostPreludeHeader and the spec's header and
/// exports kHostKernelEntry, which returns &HostLauncher<&NAME_EXPRESSION>::launch.
std::string host_translation_unit(const KernelSpec& spec);

/// The cache key of `spec` built by `toolchain` from `templates`: XXH3-128 over the cache
/// format, the flashjit version, the compiler's resolved path and `--version`, every flag (the
/// spec's options included), every template and host header byte, the translation unit, the
/// name expression and the archive's digest. The spec's arch is not in it: the code is the
/// same for every GPU the emulator may model.
std::string host_kernel_key(const KernelSpec& spec, const HostToolchain& toolchain,
                            const TemplateSet& templates);

/// Compiles `spec` with `toolchain` and returns the shared object's bytes. The sources are
/// written into a fresh directory (0700, under the system's temp folder), removed afterwards.
/// `prelude`, when not empty, is a file build_host_prelude made for `toolchain`: linked beside
/// kHostPreludeHeader, GCC reads it instead of parsing that header. Throws Error{compile} with
/// the compiler's log, Error{io} when the sources cannot be written.
std::string build_host_kernel(const KernelSpec& spec, const HostToolchain& toolchain,
                              const TemplateSet& templates,
                              const std::filesystem::path& prelude = {});

/// Whether `compiler` is GCC, whose precompiled headers are used when the flags match and
/// silently parsed from the header otherwise. (Clang checks the headers' paths and times, which
/// differ between two compiles' private directories, and fails; it gets none.)
bool takes_gch_prelude(const HostCompiler& compiler);

/// The cache key of the precompiled kHostPreludeHeader: XXH3-128 over the cache format, the
/// flashjit version, the compiler's resolved path and `--version`, every flag and every host
/// header byte (not the templates: the prelude includes none).
std::string host_prelude_key(const HostToolchain& toolchain);

/// Precompiles kHostPreludeHeader with `toolchain` and the host flags and returns the .gch's
/// bytes. Throws as build_host_kernel does.
std::string build_host_prelude(const HostToolchain& toolchain);

}  // namespace flashjit::detail
