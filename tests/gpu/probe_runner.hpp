#pragma once
// Runs a probe kernel of tests/templates/testing/primitives.cuh on the GPU (compiled by NVRTC through
// the runtime's executor) and on the CPU emulator (the same template compiled by the host
// compiler), on the same input words, and compares what every lane wrote.
#include <cstddef>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "testing/primitives.cuh"

namespace flashjit::testing {

using Words = std::vector<unsigned>;

/// One probe kernel: its name under flashjit::testing (the GPU compiles it by name), the same
/// template instantiated for the host, and its per-thread word counts (primitives.cuh).
struct Probe {
  std::string name;           ///< e.g. "mma_probe<flashjit::half_t>"
  std::string readable_name;  ///< e.g. "testing.mma.fp16"
  void (*host)(const unsigned*, unsigned*);
  int in_words;
  int out_words;
  int shared_bytes = 0;
};

/// What `probe` wrote on the GPU for input `in` (kProbeThreads x probe.in_words words). A
/// machine without a GPU fails here with the Error saying what is missing.
Words run_on_gpu(const Probe& probe, const Words& in);

/// What `probe` wrote on the emulator for input `in`; fails the test on any emulator finding.
Words run_on_emulator(const Probe& probe, const Words& in);

/// Fails the test unless `agree(i)` holds for every output word i, listing the first words
/// that disagree (thread, word, both sides' bits).
void check_words(const Probe& probe, const Words& gpu_out, const Words& emulator_out,
                 const std::function<bool(std::size_t)>& agree);

/// Runs `probe` on both sides and requires every output word to be identical.
void check_bit_exact(const Probe& probe, const Words& in);

/// `count` uniformly random 32-bit words.
Words random_words(std::mt19937& rng, std::size_t count);

}  // namespace flashjit::testing
