// The attention kernels' names are built from their traits' arguments by name
// (ops/attention/forward_families.hpp, backward_families.hpp): each family's list must name the
// parameters of its traits type's declaration, in order, and every default it leaves out must
// be the declaration's own, or the kernel the runtime compiles is not the one the spec
// describes.
#include <doctest/doctest.h>

#include <regex>
#include <string>
#include <vector>

#include "attention/backward_families.hpp"
#include "attention/forward_families.hpp"
#include "common/template_arguments.hpp"
#include "runtime/template_sources.hpp"

using namespace flashjit;
using namespace flashjit::kernels;

namespace {

struct Parameter {
  std::string name, fallback;  // fallback: "" when the parameter has no default
};

/// The template parameters of `type` as declared in the embedded template `file`.
std::vector<Parameter> declared_parameters(const std::string& file, const std::string& type) {
  std::string text;
  for (const detail::TemplateFile& t : detail::embedded_templates()) {
    if (t.name == file) text = std::string(t.text);
  }
  REQUIRE_MESSAGE(!text.empty(), file << " is not an embedded template");
  std::smatch match;
  REQUIRE_MESSAGE(
      std::regex_search(text, match, std::regex("template <([^>]*)>\\s*struct " + type + " \\{")),
      type << " is not declared in " << file);
  std::vector<Parameter> parameters;
  const std::string list = match[1];
  const std::regex one("\\s*(?:typename|class|bool|int|MaskKind)\\s+(\\w+)(?:\\s*=\\s*([\\w:]+))?");
  for (std::sregex_iterator it(list.begin(), list.end(), one), end; it != end; ++it) {
    parameters.push_back({(*it)[1], (*it)[2]});
  }
  return parameters;
}

/// `arguments` against the declaration: the same names in the same order, and each default the
/// host gives equal to the declared one (`flashjit::` aside, as the declaration sits inside it).
void check_against_declaration(const TemplateArguments& arguments, const std::string& file,
                               const std::string& type) {
  const std::vector<Parameter> declared = declared_parameters(file, type);
  const std::vector<std::string> names = arguments.names();
  const std::vector<std::string> defaults = arguments.defaults();
  REQUIRE(names.size() == declared.size());
  for (std::size_t i = 0; i < declared.size(); ++i) {
    CAPTURE(type);
    CAPTURE(i);
    CHECK(names[i] == declared[i].name);
    if (defaults[i].empty()) continue;
    std::string fallback = defaults[i];
    if (fallback.rfind("flashjit::", 0) == 0) fallback = fallback.substr(10);
    CHECK(fallback == declared[i].fallback);
  }
}

}  // namespace

TEST_CASE("each forward family names its traits' parameters as their declaration does") {
  ForwardConfig fa2{DType::bf16, 128, 128, 64, 4, 2, MaskKind::window, true};
  fa2.varlen = true;
  fa2.paged = true;
  check_against_declaration(forward_kernel(fa2, {}).traits, "attention/fa2/forward_traits.cuh",
                            "ForwardTraits");
  check_against_declaration(sequence_layout_arguments(fa2), "attention/parts/sequence_layout.cuh",
                            "SequenceLayout");

  ForwardConfig tma{DType::f16, 96, 128, 64, 12, 2, MaskKind::none, false};
  tma.options = TmaOptions{};
  check_against_declaration(forward_kernel(tma, {}).traits,
                            "attention/hopper/tma_forward_traits.cuh", "TmaForwardTraits");

  ForwardConfig wgmma{DType::bf16, 128, 128, 128, 8, 1, MaskKind::none, false};
  wgmma.options = WgmmaOptions{};
  check_against_declaration(forward_kernel(wgmma, {}).traits,
                            "attention/hopper/wgmma_forward_traits.cuh", "WgmmaForwardTraits");

  ForwardConfig wide{DType::bf16, 576, 64, 32, 8, 1, MaskKind::none, false};
  wide.options = WideOptions{.head_dim_v = 512};
  check_against_declaration(forward_kernel(wide, {}).traits,
                            "attention/wide/wide_forward_traits.cuh", "WideForwardTraits");
}

TEST_CASE("each backward family names its traits' parameters as their declaration does") {
  BackwardConfig fa2;
  fa2.dtype = DType::bf16;
  fa2.head_dim = 64;
  fa2.deterministic = true;
  fa2.varlen = true;
  check_against_declaration(fa2_dkdv_kernel(fa2, {}).traits, "attention/fa2/backward_traits.cuh",
                            "BackwardKeyTraits");
  check_against_declaration(fa2_dq_kernel(fa2, {}).traits, "attention/fa2/backward_traits.cuh",
                            "BackwardQueryTraits");
  BackwardConfig tma = fa2;
  tma.tma = true;
  check_against_declaration(tma_dkdv_kernel(tma, {}).traits,
                            "attention/hopper/tma_backward_traits.cuh", "TmaBackwardTraits");
  // The per-row kernels are function templates of their own arguments.
  CHECK(fa2_row_kernel("dq_convert_kernel", DType::f16, false, true).name_expression() ==
        "flashjit::attention_backward_dq_convert_kernel<flashjit::half_t, false, true>");
  CHECK(fa2_row_kernel("delta_kernel", DType::bf16, false, false).name_expression() ==
        "flashjit::attention_backward_delta_kernel<flashjit::bfloat16_t>");
}

TEST_CASE("template arguments leave out the trailing defaults, as the built-in instances do") {
  TemplateArguments arguments("T");
  arguments.add("A", 1).add("B", true).add("C", 2, 2).add("D", "x", "x");
  CHECK(arguments.expression() == "T<1, true>");
  TemplateArguments later("T");
  later.add("A", 1).add("B", 2, 2).add("C", false, true);
  CHECK(later.expression() == "T<1, 2, false>");  // B is written: C after it differs
  TemplateArguments misordered("T");
  misordered.add("A", 1, 1);
  CHECK_THROWS(misordered.add("B", 2));  // no default after a defaulted parameter
}
