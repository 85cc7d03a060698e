#pragma once
// The float64 rotary embedding (RoPE) that the KV-cache append's rotation is checked against,
// and the tables tests and `flashjit run` feed it: cos and sin of position · base^(−2i/rotary_dim)
// for pair i, as fp32 (what the library takes).
#include <cstdint>
#include <vector>

#include "attention/check/attention_reference.hpp"

namespace flashjit::reference {

/// cos and sin tables, [positions, rotary_dim / 2] row-major, fp32.
struct RotaryTables {
  std::int64_t positions = 0;
  std::int64_t pairs = 0;  ///< rotary_dim / 2
  std::vector<float> cos, sin;
};

/// RoPE's tables for `positions` positions and `rotary_dim` (even) rotated dims.
RotaryTables rope_tables(std::int64_t positions, std::int64_t rotary_dim, double base = 10000.0);

/// Rotates the head row t(b, l, h, :) in place at `position`: each rotated pair (x, y) becomes
/// (x·cos − y·sin, y·cos + x·sin), pairs being dims (i, i + pairs), or (2i, 2i + 1) when
/// `interleaved`; dims from 2 · pairs on are unchanged.
void rotate_row(View4 t, std::int64_t b, std::int64_t l, std::int64_t h, const RotaryTables& tables,
                std::int64_t position, bool interleaved);

}  // namespace flashjit::reference
