// Times NVRTC's phases (front end, NVVM optimizer, ptxas) on one kernel of flashjit's templates,
// with the options flashjit compiles with; bench/nvrtc_phases.sh builds and runs it.
// Usage: nvrtc_phases TEMPLATE_DIR HEADER NAME_EXPRESSION ARCH CSV_OUT
// Prints ptxas's resource report (registers, spills, advisories); CSV_OUT gets NVRTC's --time.
#include <nvrtc.h>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: nvrtc_phases TEMPLATE_DIR HEADER NAME_EXPRESSION ARCH CSV_OUT\n");
    return 2;
  }
  const std::string source = std::string("#include \"") + argv[2] + "\"\n";
  const std::string include = std::string("--include-path=") + argv[1];
  const std::string arch = std::string("--gpu-architecture=") + argv[4];
  const std::string time = std::string("--time=") + argv[5];
  nvrtcProgram program;
  nvrtcCreateProgram(&program, source.c_str(), "phases.cu", 0, nullptr, nullptr);
  nvrtcAddNameExpression(program, argv[3]);
  const std::vector<const char*> options = {arch.c_str(),    "--std=c++17",   "-default-device",
                                            "-Xptxas=-v",    include.c_str(), time.c_str()};
  const nvrtcResult result =
      nvrtcCompileProgram(program, static_cast<int>(options.size()), options.data());
  std::size_t size = 0;
  nvrtcGetProgramLogSize(program, &size);
  std::string log(size, '\0');
  nvrtcGetProgramLog(program, log.data());
  std::printf("%s\n", log.c_str());
  nvrtcDestroyProgram(&program);
  return result == NVRTC_SUCCESS ? 0 : 1;
}
