// The op registry (ops/common/op_registry.hpp): one entry per op, names that do not collide,
// a compile matrix for every op, and tuned-op names that are exactly the names the ops' tuning
// problems key the database by.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "attention/attention_tuning.hpp"
#include "attention/inference/decode_tuning.hpp"
#include "common/op_registry.hpp"
#include "flashjit/error.hpp"
#include "layer_norm/layer_norm_tuning.hpp"
#include "multiscale/multiscale_tuning.hpp"

using namespace flashjit;

TEST_CASE("op registry: unique names, and every op lists its default kernels") {
  std::set<std::string> names;
  for (const kernels::OpInfo& op : kernels::ops()) {
    CAPTURE(op.name);
    CHECK(names.insert(op.name).second);
    CHECK_FALSE(op.description.empty());
    CHECK(kernels::find_op(op.name).name == op.name);
    CHECK_FALSE(op.specs("sm_80", kernels::SpecSet::defaults).empty());
  }

  CHECK_THROWS_AS(kernels::find_op("layernorm"), InvalidArgument);
}

TEST_CASE("op registry: the tuned names are the tuning problems' op names, each once") {
  Attention a;
  a.batch = 1;
  a.heads_q = a.heads_kv = 2;
  a.seqlen_q = a.seqlen_k = 64;
  a.head_dim = 64;
  const MultiScaleAttention m{1, 2, 2, 64, 64, 64, 0.0f, MultiScaleMask::decay};
  const kernels::LayerNormShape shape{8, 256, false, false, false};
  const std::vector<std::string> problems = {
      std::string(kernels::AttentionProblem(false, DType::bf16, a).op()),
      std::string(kernels::AttentionProblem(true, DType::bf16, a).op()),
      std::string(kernels::DecodeProblem(DType::bf16, a, kernels::CacheLayout{true, 16}).op()),
      std::string(kernels::LayerNormProblem(false, DType::bf16, shape).op()),
      std::string(kernels::LayerNormProblem(true, DType::bf16, shape).op()),
      std::string(kernels::MultiScaleProblem(false, DType::bf16, m).op()),
      std::string(kernels::MultiScaleProblem(true, DType::bf16, m).op()),
  };
  std::vector<std::string> tuned = kernels::tuned_op_names();
  CHECK(std::set<std::string>(tuned.begin(), tuned.end()).size() == tuned.size());
  CHECK(std::set<std::string>(tuned.begin(), tuned.end()) ==
        std::set<std::string>(problems.begin(), problems.end()));
}
