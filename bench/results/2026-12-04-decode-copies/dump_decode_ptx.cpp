#include <fstream>
#include <iostream>
#include <optional>
#include "attention/attention_forward.hpp"
#include "attention/inference/attention_inference_config.hpp"
#include "runtime/compiler.hpp"
#include "runtime/template_sources.hpp"
using namespace flashjit;
int main(int argc, char** argv) {
  std::string arch = argc > 1 ? argv[1] : "sm_90a";
  int warps = argc > 2 ? std::atoi(argv[2]) : 0;
  int stages = argc > 3 ? std::atoi(argv[3]) : 0;
  int keys = argc > 4 ? std::atoi(argv[4]) : 0;
  int rows = argc > 5 ? std::atoi(argv[5]) : 16;
  int hd = argc > 6 ? std::atoi(argv[6]) : 128;
  auto c = kernels::decode_forward_config(DType::bf16, hd, MaskKind::none, false, arch, rows);
  c->varlen = c->paged = c->pack_gqa = true;
  c->split = getenv("NOSPLIT") == nullptr;
  if (getenv("DENSE")) c->paged = false;
  if (warps) c->warps = warps;
  if (stages) c->stages = stages;
  if (keys) c->block_n = keys;
  std::cerr << "warps " << c->warps << " stages " << c->stages << " keys " << c->block_n << "\n";
  std::cout << detail::compile_ptx(kernels::forward_spec(*c, arch), detail::TemplateSet::embedded());
}
