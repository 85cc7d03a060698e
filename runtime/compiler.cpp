#include "compiler.hpp"

#include <nvrtc.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <regex>
#include <sstream>

#include "env.hpp"
#include "flashjit/error.hpp"

namespace flashjit::detail {
namespace {

struct ProgramDeleter {
  void operator()(nvrtcProgram program) const { nvrtcDestroyProgram(&program); }
};
using Program = std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, ProgramDeleter>;

void check_nvrtc(nvrtcResult result, const char* call) {
  if (result != NVRTC_SUCCESS) {
    throw Error(ErrorKind::compile,
                std::string(call) + " failed: " + nvrtcGetErrorString(result));
  }
}

std::string program_log(nvrtcProgram program) {
  std::size_t size = 0;
  nvrtcGetProgramLogSize(program, &size);
  std::string log(size, '\0');
  if (size > 0) nvrtcGetProgramLog(program, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

int first_number(const std::string& text, const std::regex& pattern) {
  std::smatch match;
  return std::regex_search(text, match, pattern) ? std::stoi(match[1].str()) : 0;
}

// `spec`'s program compiled with `options`, and NVRTC's log; throws Error{compile} with the log
// when it does not compile.
struct CompiledProgram {
  Program program;
  std::string log;
};
CompiledProgram compile_program(const KernelSpec& spec, const TemplateSet& templates,
                                const std::vector<std::string>& options) {
  std::vector<const char*> header_texts, header_names;
  std::vector<std::string> texts;  // NVRTC wants NUL-terminated strings
  texts.reserve(templates.files().size());
  for (const TemplateFile& file : templates.files()) {
    texts.emplace_back(file.text);
    header_texts.push_back(texts.back().c_str());
    header_names.push_back(file.name.c_str());
  }
  const std::string source = spec.main_source();
  const std::string unit_name = "flashjit_" + spec.op + ".cu";
  nvrtcProgram raw = nullptr;
  check_nvrtc(nvrtcCreateProgram(&raw, source.c_str(), unit_name.c_str(),
                                 static_cast<int>(header_texts.size()), header_texts.data(),
                                 header_names.data()),
              "nvrtcCreateProgram");
  CompiledProgram compiled{Program(raw), ""};
  check_nvrtc(nvrtcAddNameExpression(raw, spec.name_expression.c_str()), "nvrtcAddNameExpression");
  std::vector<const char*> option_ptrs;
  for (const std::string& option : options) option_ptrs.push_back(option.c_str());
  const nvrtcResult result =
      nvrtcCompileProgram(raw, static_cast<int>(option_ptrs.size()), option_ptrs.data());
  compiled.log = program_log(raw);
  if (result != NVRTC_SUCCESS) {
    throw Error(ErrorKind::compile, "NVRTC could not compile " + spec.display_name() +
                                        " (templates: " + templates.origin() + "):\n" +
                                        compiled.log);
  }
  return compiled;
}

}  // namespace

std::string nvrtc_version() {
  int major = 0, minor = 0;
  check_nvrtc(nvrtcVersion(&major, &minor), "nvrtcVersion");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> nvrtc_options(const KernelSpec& spec) {
  std::vector<std::string> options = spec.options;
  options.push_back("--gpu-architecture=" + spec.arch);
  options.push_back("--std=c++17");
  // Unannotated functions are device functions: the templates' constexpr helpers (config
  // predicates) are shared verbatim with the host, which includes the same files.
  options.push_back("-default-device");
  options.push_back("-Xptxas=-v");  // the resource report: registers, spills, shared memory
  if (env_flag("FLASHJIT_LINEINFO")) options.push_back("-lineinfo");
  std::sort(options.begin(), options.end());
  options.erase(std::unique(options.begin(), options.end()), options.end());
  return options;
}

ResourceUsage parse_resource_report(const std::string& log) {
  ResourceUsage usage;
  usage.registers = first_number(log, std::regex(R"(Used (\d+) registers)"));
  usage.spill_store_bytes = first_number(log, std::regex(R"((\d+) bytes spill stores)"));
  usage.spill_load_bytes = first_number(log, std::regex(R"((\d+) bytes spill loads)"));
  usage.stack_bytes = first_number(log, std::regex(R"((\d+) bytes stack frame)"));
  usage.static_shared_bytes = first_number(log, std::regex(R"((\d+) bytes smem)"));
  usage.advisories = parse_advisories(log);
  return usage;
}

std::vector<std::string> parse_advisories(const std::string& log) {
  static const std::regex code(R"(\((C75\d\d)\))");
  static const std::regex loss(R"(Potential Performance Loss:?\s*)");
  static const std::regex function(R"(\s*,?\s*(in|for) (the )?function '[^']*'\.?\s*$)");
  std::vector<std::string> advisories;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    const bool has_code = std::regex_search(line, match, code);
    if (!has_code && line.find("Potential Performance Loss") == std::string::npos) continue;
    const std::string id = has_code ? match[1].str() : "ptxas";
    std::string text = has_code ? match.suffix().str() : line.substr(line.find("Potential"));
    text = std::regex_replace(std::regex_replace(text, loss, ""), function, "");
    text = std::regex_replace(text, std::regex(R"(\s+)"), " ");  // ptxas doubles some spaces
    text.erase(0, text.find_first_not_of(" :"));
    std::string advisory = id + ": " + text;
    if (std::find(advisories.begin(), advisories.end(), advisory) == advisories.end()) {
      advisories.push_back(std::move(advisory));
    }
  }
  return advisories;
}

CompiledKernel compile_kernel(const KernelSpec& spec, const TemplateSet& templates) {
  validate_arch(spec.arch);
  auto start = std::chrono::steady_clock::now();
  const CompiledProgram compiled = compile_program(spec, templates, nvrtc_options(spec));
  nvrtcProgram raw = compiled.program.get();
  CompiledKernel kernel;
  const char* lowered = nullptr;
  check_nvrtc(nvrtcGetLoweredName(raw, spec.name_expression.c_str(), &lowered),
              "nvrtcGetLoweredName");
  kernel.lowered_name = lowered;
  std::size_t cubin_size = 0;
  check_nvrtc(nvrtcGetCUBINSize(raw, &cubin_size), "nvrtcGetCUBINSize");
  kernel.cubin.resize(cubin_size);
  check_nvrtc(nvrtcGetCUBIN(raw, kernel.cubin.data()), "nvrtcGetCUBIN");
  kernel.resources = parse_resource_report(compiled.log);
  kernel.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return kernel;
}

std::string compile_ptx(const KernelSpec& spec, const TemplateSet& templates) {
  validate_arch(spec.arch);
  // A virtual architecture makes NVRTC stop at PTX: the same options, compute_XY[a] for sm_XY[a].
  std::vector<std::string> options = nvrtc_options(spec);
  for (std::string& option : options) {
    if (option == "--gpu-architecture=" + spec.arch) {
      option = "--gpu-architecture=compute_" + spec.arch.substr(3);
    }
  }
  std::erase(options, "-Xptxas=-v");
  const CompiledProgram compiled = compile_program(spec, templates, options);
  std::size_t size = 0;
  check_nvrtc(nvrtcGetPTXSize(compiled.program.get(), &size), "nvrtcGetPTXSize");
  std::string ptx(size, '\0');
  check_nvrtc(nvrtcGetPTX(compiled.program.get(), ptx.data()), "nvrtcGetPTX");
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}

}  // namespace flashjit::detail
