#pragma once
// The tuning database (docs/autotuning.md): what the autotuner measured, kept across runs.
// One JSON file per GPU model (and software stack: see database_path) under the cache directory:
//   { "_meta": { format, flashjit, nvrtc, driver, gpu, compute_capability, sm_count },
//     "<key>": { "default": "<config>", "winner": "<config>",
//                "candidates": { "<config>": { "ms": 0.123 | null, "status": "ok" | why } } },
//     ... }
// A key holds the op, its templates' hash and the op's key of the shape: for attention the
// dtype, head dim, mask kind, softcap and power-of-two buckets of the sequence lengths and
// batch·heads (a layer norm's: buckets of its columns and rows, its norm and fused adds). Every
// candidate's median is kept, so a new candidate later needs one new measurement. Writers lock,
// re-read, merge and rename; a file that is corrupt or whose `_meta` differs is ignored and never
// overwritten.
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "flashjit/device.hpp"

namespace flashjit::autotune {

/// The device and software a database file belongs to (its `_meta` block). A file is used only
/// when every field matches the running process.
struct TuningMeta {
  /// 2: the layer norm ops are keyed "layer-norm" and "layer-norm-backward" (1 wrote
  /// "layernorm"); a format-1 file is another file (database_path) and is not read.
  int format = 2;
  std::string flashjit_version;
  std::string nvrtc_version;
  int driver_version = 0;
  std::string gpu_name;
  std::string compute_capability;  ///< "9.0"
  int sm_count = 0;
  bool operator==(const TuningMeta&) const = default;

  /// The meta of `device` under this process's flashjit, NVRTC and `driver_version`.
  static TuningMeta for_device(const DeviceInfo& device, int driver_version);
};

/// The power-of-two bucket a size falls in: the smallest power of two >= n (1 for n <= 1).
std::int64_t shape_bucket(std::int64_t n);

/// What one entry is keyed by: the op, its templates' digest and the op's own key of the
/// shape (TuningProblem::key, sizes already bucketed). The database reads no field of the shape:
/// each op writes its key.
struct TuningKey {
  std::string op;             ///< "attention-forward", "layer-norm", ...
  std::string template_hash;  ///< the templates' digest (a template change invalidates entries)
  std::string shape;          ///< the op's key: "bf16/hdim128/window/q1024/k1024/bh32"

  /// The entry's name in the file: "<op>/<template_hash>/<shape>", e.g.
  /// "attention-forward/3f2a…/bf16/hdim128/window/q1024/k1024/bh32".
  std::string to_string() const;
};

/// One candidate's measurement.
struct CandidateTiming {
  std::string config;  ///< the config's readable name, e.g. "br128.bc64.w4.s2"
  /// Median milliseconds; infinity when it failed (compile, launch or a wrong result).
  double median_ms = std::numeric_limits<double>::infinity();
  std::string status = "ok";  ///< "ok", or why it failed ("wrong result: max error 0.5")
  bool operator==(const CandidateTiming&) const = default;
};

/// What the database knows about one key.
struct TuningEntry {
  std::string default_config;               ///< the heuristic default's name
  std::vector<CandidateTiming> candidates;  ///< sorted by config name
  std::string winner;                       ///< pick_winner(default_config, candidates)
  bool operator==(const TuningEntry&) const = default;
};

/// How much faster than the default a candidate must be to replace it (3%: docs/autotuning.md).
inline constexpr double kWinMargin = 0.03;

/// The deterministic choice: the fastest finite median (equal medians: the smaller config
/// name); the default stays when it has a finite median and the fastest is not at least
/// kWinMargin faster than it. Empty when no candidate has a finite median.
std::string pick_winner(const std::string& default_config,
                        const std::vector<CandidateTiming>& candidates);

/// Merges `update` into `base`: a candidate measured in both takes `update`'s measurement,
/// the others are kept; candidates end sorted by name; the default is `update`'s; the winner
/// is recomputed.
TuningEntry merge_entries(const TuningEntry& base, const TuningEntry& update);

/// The folder of every database under the cache root: <root>/v1/tuning.
std::filesystem::path tuning_folder(const std::filesystem::path& cache_root);

/// Every database file (*.json) in tuning_folder(cache_root), sorted; none when it is missing.
std::vector<std::filesystem::path> database_files(const std::filesystem::path& cache_root);

/// The database file for `meta` under the cache root: <root>/v1/tuning/<gpu>.<digest>.json,
/// where <gpu> is the GPU name in lower case with every run of other characters than letters
/// and digits replaced by '-', none at either end ("nvidia-h100-80gb-hbm3"; "gpu" for no name),
/// and <digest> 8 hex digits over every `_meta` field. A new flashjit, NVRTC or driver thus
/// starts a file of its own beside the old one (which it could not use, and must not
/// overwrite), rather than finding every write refused.
std::filesystem::path database_path(const std::filesystem::path& cache_root,
                                    const TuningMeta& meta);

/// A database file read into memory.
class TuningDatabase {
 public:
  /// Reads `path`. A missing file gives an empty database. A file that cannot be parsed, is not
  /// a database, or whose `_meta` differs from `meta` gives an empty database whose problem()
  /// says why; the file is not touched.
  static TuningDatabase load(const std::filesystem::path& path, const TuningMeta& meta);

  /// Reads `path` whatever its `_meta` says (`flashjit autotune show`); an unreadable file
  /// gives an empty database with problem() set.
  static TuningDatabase load_any(const std::filesystem::path& path);

  /// Why the file's contents were ignored; empty when they were used (or it did not exist).
  const std::string& problem() const { return problem_; }
  /// The entry for `key` (bucketed), if any.
  std::optional<TuningEntry> find(const TuningKey& key) const;
  /// Every entry by its key string.
  const std::map<std::string, TuningEntry>& entries() const { return entries_; }

 private:
  std::map<std::string, TuningEntry> entries_;
  std::string problem_;
};

/// Merges `entry` into the file at `path` for `key`: takes an exclusive lock on "<path>.lock"
/// (flock, waiting), re-reads the file, merges (merge_entries), writes a temporary file and
/// renames it over `path`, so concurrent writers in several processes lose nothing and a
/// reader never sees half a file. Creates the directory (0700) if missing. Returns the merged
/// entry. Throws Error{io} naming the file, without writing, when the existing file is corrupt
/// or has another `_meta` (it is kept as it is), or when it cannot be written.
TuningEntry merge_into_file(const std::filesystem::path& path, const TuningMeta& meta,
                            const TuningKey& key, const TuningEntry& entry);

}  // namespace flashjit::autotune
