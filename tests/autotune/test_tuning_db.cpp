// The tuning database: keys and buckets, the winner rule, the file format, and several writers.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "autotune/tuning_db.hpp"
#include "flashjit/error.hpp"
#include "flashjit/version.hpp"
#include "runtime/file_io.hpp"
#include "support/child_process.hpp"
#include "support/temp_dir.hpp"

using namespace flashjit::autotune;
using flashjit::testing::ChildResult;
using flashjit::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// "c3" from ("c", 3): appended, not "c" + std::to_string(3), on which GCC 12 warns -Wrestrict at
// -O3 (a false positive, GCC bug 105329).
std::string numbered(const char* prefix, int n) {
  std::string text = prefix;
  text += std::to_string(n);
  return text;
}

constexpr double kFailed = std::numeric_limits<double>::infinity();

TuningMeta test_meta() {
  TuningMeta meta;
  meta.flashjit_version = "0.1.0";
  meta.nvrtc_version = "13.0";
  meta.driver_version = 13000;
  meta.gpu_name = "NVIDIA H100 80GB HBM3";
  meta.compute_capability = "9.0";
  meta.sm_count = 132;
  return meta;
}

// A key as the attention forward writes it: its sizes bucketed (the op's key does that).
TuningKey forward_key(std::int64_t seqlen = 1000, const std::string& dtype = "bf16") {
  const std::string bucket = std::to_string(shape_bucket(seqlen));
  return {"attention-forward", "3f2a9c",
          dtype + "/hdim128/window/q" + bucket + "/k" + bucket + "/bh32"};
}

CandidateTiming timing(const std::string& config, double ms, const std::string& status = "ok") {
  return CandidateTiming{config, ms, status};
}

TuningEntry entry_of(const std::string& default_config, std::vector<CandidateTiming> candidates) {
  TuningEntry entry;
  entry.default_config = default_config;
  entry.candidates = std::move(candidates);
  return entry;
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read_file(const fs::path& path) {
  return flashjit::detail::read_whole_file(path).value_or("<unreadable>");
}

std::vector<std::string> temp_files_in(const fs::path& dir) {
  std::vector<std::string> temps;
  for (const auto& file : fs::directory_iterator(dir)) {
    const std::string name = file.path().filename().string();
    if (name.find(".tmp.") != std::string::npos) temps.push_back(name);
  }
  return temps;
}

const CandidateTiming* find_candidate(const TuningEntry& entry, const std::string& config) {
  for (const CandidateTiming& c : entry.candidates) {
    if (c.config == config) return &c;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("shape_bucket is the smallest power of two not below the size") {
  CHECK(shape_bucket(0) == 1);
  CHECK(shape_bucket(1) == 1);
  CHECK(shape_bucket(2) == 2);
  CHECK(shape_bucket(3) == 4);
  CHECK(shape_bucket(1000) == 1024);
  CHECK(shape_bucket(1024) == 1024);
  CHECK(shape_bucket(1025) == 2048);
  CHECK(shape_bucket(-5) == 1);
}

TEST_CASE("a key's string is the op, the templates' digest and the op's key of the shape") {
  const TuningKey key{"layer-norm", "77aa", "f16/c4096/r512/rms"};
  CHECK(key.to_string() == "layer-norm/77aa/f16/c4096/r512/rms");
  CHECK(forward_key().to_string() ==
        "attention-forward/3f2a9c/bf16/hdim128/window/q1024/k1024/bh32");
}

TEST_CASE("shapes in one bucket share an entry, the next bucket has its own") {
  TempDir dir;
  const fs::path path = dir.path() / "db.json";
  merge_into_file(path, test_meta(), forward_key(600), entry_of("a", {timing("a", 1.0)}));
  const TuningDatabase db = TuningDatabase::load(path, test_meta());
  CHECK(db.find(forward_key(513)).has_value());
  CHECK(db.find(forward_key(1024)).has_value());
  CHECK_FALSE(db.find(forward_key(512)).has_value());
  CHECK_FALSE(db.find(forward_key(1025)).has_value());
  CHECK_FALSE(db.find(forward_key(600, "f16")).has_value());
}

TEST_CASE("pick_winner keeps the default unless a candidate is 3% faster") {
  SUBCASE("within 3%: the default stays") {
    CHECK(pick_winner("d", {timing("d", 1.0), timing("a", 0.971)}) == "d");
  }
  SUBCASE("exactly 3% faster: replaced") {
    CHECK(pick_winner("d", {timing("d", 1.0), timing("a", 0.97)}) == "a");
    CHECK(pick_winner("d", {timing("d", 100.0), timing("a", 97.0)}) == "a");
  }
  SUBCASE("more than 3% faster: replaced") {
    CHECK(pick_winner("d", {timing("d", 1.0), timing("a", 0.5)}) == "a");
  }
  SUBCASE("the default is fastest") {
    CHECK(pick_winner("d", {timing("a", 2.0), timing("d", 1.0)}) == "d");
  }
  SUBCASE("equal medians: the smaller name") {
    CHECK(pick_winner("d", {timing("y", 0.5), timing("d", 1.0), timing("x", 0.5)}) == "x");
    CHECK(pick_winner("", {timing("b", 1.0), timing("a", 1.0)}) == "a");
    CHECK(pick_winner("b", {timing("b", 1.0), timing("a", 1.0)}) == "b");  // a is not faster
  }
  SUBCASE("a failed default: the fastest wins by any margin") {
    CHECK(pick_winner("d", {timing("d", kFailed, "launch failed"), timing("b", 1.0),
                            timing("a", 0.99)}) == "a");
  }
  SUBCASE("an absent default: the fastest wins") {
    CHECK(pick_winner("d", {timing("b", 1.0), timing("a", 0.99)}) == "a");
  }
  SUBCASE("failed candidates never win") {
    CHECK(pick_winner("d", {timing("a", kFailed, "wrong result"), timing("d", 1.0)}) == "d");
  }
  SUBCASE("all failed or none: empty") {
    CHECK(pick_winner("d", {timing("d", kFailed, "x"), timing("a", kFailed, "y")}).empty());
    CHECK(pick_winner("d", {}).empty());
  }
}

TEST_CASE("pick_winner does not depend on the candidates' order") {
  const std::vector<std::pair<std::string, std::vector<CandidateTiming>>> cases = {
      {"d",
       {timing("d", 1.0), timing("c", 0.9), timing("b", 0.9), timing("a", 0.95),
        timing("e", kFailed, "spills")}},
      {"d", {timing("d", 1.0), timing("c", 0.98), timing("b", 0.975), timing("a", 0.99)}},
      {"d", {timing("d", kFailed, "x"), timing("z", 2.0), timing("m", 2.0), timing("q", 3.0)}},
  };
  std::mt19937 random(1234);
  for (const auto& [default_config, candidates] : cases) {
    const std::string expected = pick_winner(default_config, candidates);
    auto shuffled = candidates;
    for (int round = 0; round < 50; ++round) {
      std::shuffle(shuffled.begin(), shuffled.end(), random);
      CHECK(pick_winner(default_config, shuffled) == expected);
    }
  }
  CHECK(pick_winner(cases[0].first, cases[0].second) == "b");
  CHECK(pick_winner(cases[1].first, cases[1].second) == "d");
  CHECK(pick_winner(cases[2].first, cases[2].second) == "m");
}

TEST_CASE("merge_entries: union of candidates, the update's measurement and default") {
  const TuningEntry base =
      entry_of("d", {timing("d", 1.0), timing("b", 0.99), timing("c", kFailed, "spills")});
  const TuningEntry update = entry_of("e", {timing("c", 0.5), timing("a", 2.0)});
  const TuningEntry merged = merge_entries(base, update);
  CHECK(merged.default_config == "e");
  REQUIRE(merged.candidates.size() == 4);
  CHECK(merged.candidates[0] == timing("a", 2.0));
  CHECK(merged.candidates[1] == timing("b", 0.99));
  CHECK(merged.candidates[2] == timing("c", 0.5));  // re-measured: the update's
  CHECK(merged.candidates[3] == timing("d", 1.0));
  CHECK(merged.winner == "c");  // "e" was not measured, so the fastest wins

  SUBCASE("the winner is recomputed, not taken from either side") {
    TuningEntry stale = update;
    stale.winner = "a";
    CHECK(merge_entries(base, stale).winner == "c");
  }
}

TEST_CASE("a database written with merge_into_file reads back the same") {
  TempDir dir;
  const fs::path path = dir.path() / "cache" / "v1" / "tuning" / "gpu.json";
  const TuningEntry entry = entry_of(
      "br128.bc64.w4.s2", {timing("br128.bc64.w4.s2", 0.25), timing("br64.bc64.w4.s2", 0.2),
                           timing("br128.bc128.w8.s2", kFailed, "wrong result: max error 0.5")});
  const TuningEntry written = merge_into_file(path, test_meta(), forward_key(), entry);
  CHECK(written.winner == "br64.bc64.w4.s2");

  const TuningDatabase db = TuningDatabase::load(path, test_meta());
  CHECK(db.problem().empty());
  REQUIRE(db.entries().size() == 1);
  const std::optional<TuningEntry> read = db.find(forward_key());
  REQUIRE(read.has_value());
  CHECK(*read == written);
  const CandidateTiming* failed = find_candidate(*read, "br128.bc128.w8.s2");
  REQUIRE(failed != nullptr);
  CHECK(std::isinf(failed->median_ms));
  CHECK(failed->status == "wrong result: max error 0.5");

  SUBCASE("the file is readable JSON: _meta, null for a failure, sorted, indented") {
    const std::string text = read_file(path);
    const auto document = nlohmann::json::parse(text);
    CHECK(document["_meta"]["flashjit"] == "0.1.0");
    CHECK(document["_meta"]["sm_count"] == 132);
    const auto& stored = document[forward_key().to_string()];
    CHECK(stored["winner"] == "br64.bc64.w4.s2");
    CHECK(stored["candidates"]["br128.bc128.w8.s2"]["ms"].is_null());
    CHECK(text.find("\n  \"_meta\": {\n    \"compute_capability\"") != std::string::npos);
  }
  SUBCASE("the directories are created private") {
    struct stat info {};
    REQUIRE(::stat(path.parent_path().c_str(), &info) == 0);
    CHECK((info.st_mode & 0777) == 0700);
    REQUIRE(::stat((dir.path() / "cache").c_str(), &info) == 0);
    CHECK((info.st_mode & 0777) == 0700);
  }
  SUBCASE("a hand-edited winner is recomputed on load") {
    auto document = nlohmann::json::parse(read_file(path));
    document[forward_key().to_string()]["winner"] = "br128.bc128.w8.s2";
    write_file(path, document.dump());
    const TuningDatabase edited = TuningDatabase::load(path, test_meta());
    CHECK(edited.problem().empty());
    REQUIRE(edited.find(forward_key()).has_value());
    CHECK(edited.find(forward_key())->winner == "br64.bc64.w4.s2");
  }
}

TEST_CASE("a status that is not UTF-8 is written with replacements, not refused") {
  TempDir dir;
  const fs::path path = dir.path() / "db.json";
  const TuningEntry entry = entry_of("a", {timing("a", kFailed, "ptxas: bad byte \xff here")});
  CHECK_NOTHROW(merge_into_file(path, test_meta(), forward_key(), entry));
  const TuningDatabase db = TuningDatabase::load(path, test_meta());
  CHECK_MESSAGE(db.problem().empty(), db.problem());
  REQUIRE(db.find(forward_key()).has_value());
  CHECK(db.find(forward_key())->candidates.at(0).status == "ptxas: bad byte \uFFFD here");
}

TEST_CASE("a missing file is an empty database without a problem") {
  TempDir dir;
  const TuningDatabase db = TuningDatabase::load(dir.path() / "none.json", test_meta());
  CHECK(db.entries().empty());
  CHECK(db.problem().empty());
  CHECK_FALSE(db.find(forward_key()).has_value());
}

TEST_CASE("two writers of one file") {
  TempDir dir;
  const fs::path path = dir.path() / "db.json";
  const TuningMeta meta = test_meta();

  SUBCASE("different keys: both kept") {
    merge_into_file(path, meta, forward_key(1000), entry_of("a", {timing("a", 1.0)}));
    merge_into_file(path, meta, forward_key(4000), entry_of("b", {timing("b", 2.0)}));
    const TuningDatabase db = TuningDatabase::load(path, meta);
    CHECK(db.entries().size() == 2);
    CHECK(db.find(forward_key(1000))->winner == "a");
    CHECK(db.find(forward_key(4000))->winner == "b");
  }
  SUBCASE("one key: the union of candidates, the newer measurement of a shared one") {
    merge_into_file(path, meta, forward_key(),
                    entry_of("d", {timing("d", 1.0), timing("a", 0.99), timing("s", 3.0)}));
    const TuningEntry merged = merge_into_file(path, meta, forward_key(),
                                               entry_of("d", {timing("b", 0.9), timing("s", 0.5)}));
    const TuningEntry read = *TuningDatabase::load(path, meta).find(forward_key());
    CHECK(read == merged);
    REQUIRE(read.candidates.size() == 4);
    CHECK(find_candidate(read, "a")->median_ms == 0.99);
    CHECK(find_candidate(read, "b")->median_ms == 0.9);
    CHECK(find_candidate(read, "d")->median_ms == 1.0);
    CHECK(find_candidate(read, "s")->median_ms == 0.5);
    CHECK(read.winner == "s");
  }
}

TEST_CASE("eight processes merging at once lose nothing") {
  constexpr int kProcesses = 8;
  constexpr int kOwnKeys = 5;
  TempDir dir;
  const fs::path path = dir.path() / "v1" / "tuning" / "gpu.json";
  const TuningKey shared = forward_key(1 << 20);
  const auto own_key_of = [](int process, int k) {
    TuningKey key = forward_key(std::int64_t{1} << k);
    key.template_hash = numbered("p", process);
    return key;
  };

  std::vector<ChildResult> results =
      flashjit::testing::run_in_children(kProcesses, [&](int process) {
        const std::string name = numbered("c", process);
        for (int k = 0; k < kOwnKeys; ++k) {
          merge_into_file(path, test_meta(), own_key_of(process, k),
                          entry_of(name, {timing(name, 1.0 + k)}));
        }
        merge_into_file(path, test_meta(), shared,
                        entry_of("c0", {timing(name, 1.0 + 0.125 * process)}));
        return 0;
      });
  for (const ChildResult& result : results) {
    CHECK_MESSAGE(result.exit_code == 0, result.output);
    CHECK_MESSAGE(result.output.empty(), result.output);
  }

  CHECK(nlohmann::json::parse(read_file(path)).is_object());
  const TuningDatabase db = TuningDatabase::load(path, test_meta());
  REQUIRE_MESSAGE(db.problem().empty(), db.problem());
  CHECK(db.entries().size() == kProcesses * kOwnKeys + 1);
  for (int process = 0; process < kProcesses; ++process) {
    const std::string name = numbered("c", process);
    for (int k = 0; k < kOwnKeys; ++k) {
      const auto entry = db.find(own_key_of(process, k));
      REQUIRE_MESSAGE(entry.has_value(), own_key_of(process, k).to_string());
      CHECK(entry->candidates == std::vector<CandidateTiming>{timing(name, 1.0 + k)});
    }
  }
  const auto shared_entry = db.find(shared);
  REQUIRE(shared_entry.has_value());
  REQUIRE(shared_entry->candidates.size() == kProcesses);
  for (int process = 0; process < kProcesses; ++process) {
    const CandidateTiming* c = find_candidate(*shared_entry, numbered("c", process));
    REQUIRE(c != nullptr);
    CHECK(c->median_ms == 1.0 + 0.125 * process);
  }
  CHECK(shared_entry->winner == "c0");
  CHECK(temp_files_in(path.parent_path()).empty());
}

TEST_CASE("a corrupt or foreign file is ignored by load and left unchanged by writers") {
  TempDir dir;
  const fs::path path = dir.path() / "db.json";
  merge_into_file(path, test_meta(), forward_key(), entry_of("a", {timing("a", 1.0)}));
  const std::string valid = read_file(path);
  std::string bytes;
  std::string reason;

  SUBCASE("garbage bytes") {
    bytes = std::string(
        "\x7f"
        "ELF\x02\x01\x01\0\0garbage",
        16);
    reason = "not valid JSON at byte 1";
  }
  SUBCASE("truncated JSON") {
    bytes = valid.substr(0, valid.size() / 2);
    reason = "not valid JSON at byte";
  }
  SUBCASE("a number JSON cannot hold") {
    auto document = nlohmann::json::parse(valid);
    bytes = document.dump(2);
    bytes.replace(bytes.find("\"ms\": 1.0"), 10, "\"ms\": 1e400");
    reason = "not valid JSON";
  }
  SUBCASE("JSON that is not an object") {
    bytes = "[1, 2, 3]\n";
    reason = "not a JSON object";
  }
  SUBCASE("an object without _meta") {
    bytes = R"({"attention-forward/x": {}})";
    reason = "no _meta";
  }
  SUBCASE("an entry that is not an entry") {
    auto document = nlohmann::json::parse(valid);
    document[forward_key().to_string()]["candidates"]["a"]["ms"] = "fast";
    bytes = document.dump(2);
    reason = "\"ms\" is neither";
  }
  SUBCASE("another flashjit's _meta") {
    auto document = nlohmann::json::parse(valid);
    document["_meta"]["flashjit"] = "0.0.9";
    bytes = document.dump(2);
    reason = "_meta differs (flashjit 0.0.9 vs 0.1.0)";
  }
  SUBCASE("another GPU's _meta") {
    auto document = nlohmann::json::parse(valid);
    document["_meta"]["sm_count"] = 114;
    bytes = document.dump(2);
    reason = "_meta differs (sm_count 114 vs 132)";
  }
  write_file(path, bytes);

  const TuningDatabase db = TuningDatabase::load(path, test_meta());
  CHECK(db.entries().empty());
  CHECK_MESSAGE(db.problem().find("ignored " + path.string() + ": ") == 0, db.problem());
  CHECK_MESSAGE(db.problem().find(reason) != std::string::npos, db.problem());

  try {
    merge_into_file(path, test_meta(), forward_key(4000), entry_of("b", {timing("b", 1.0)}));
    FAIL("merge_into_file wrote over a file it cannot read");
  } catch (const flashjit::Error& error) {
    const std::string message = error.what();
    CHECK(error.kind() == flashjit::ErrorKind::io);
    CHECK_MESSAGE(message.find(path.string()) != std::string::npos, message);
    CHECK_MESSAGE(message.find(reason) != std::string::npos, message);
    CHECK_MESSAGE(message.find("left unchanged") != std::string::npos, message);
  }
  CHECK(read_file(path) == bytes);
  CHECK(temp_files_in(dir.path()).empty());
}

TEST_CASE("a write that fails leaves the old file and no temp file") {
  TempDir dir;
  const fs::path path = dir.path() / "db.json";
  merge_into_file(path, test_meta(), forward_key(), entry_of("a", {timing("a", 1.0)}));
  const std::string before = read_file(path);
  const ChildResult result = flashjit::testing::run_in_child([&] {
    // Writes past 64 bytes fail with EFBIG (instead of a signal) in this process only.
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{64, 64};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      merge_into_file(path, test_meta(), forward_key(4000), entry_of("b", {timing("b", 1.0)}));
    } catch (const flashjit::Error& error) {
      const bool named = std::string(error.what()).find(path.string()) != std::string::npos;
      return error.kind() == flashjit::ErrorKind::io && named ? 0 : 2;
    }
    return 3;
  });
  CHECK_MESSAGE(result.exit_code == 0, result.output);
  CHECK(read_file(path) == before);
  CHECK(temp_files_in(dir.path()).empty());
}

TEST_CASE("the database file is named after the GPU and a digest of its _meta") {
  // "<gpu>.<8 hex digits>.json" in <root>/v1/tuning.
  auto gpu_part = [](const std::string& name) {
    TuningMeta meta = test_meta();
    meta.gpu_name = name;
    const fs::path path = database_path("/c", meta);
    CHECK(path.parent_path() == fs::path("/c/v1/tuning"));
    const std::string file = path.filename().string();
    REQUIRE(file.size() > 14);
    CHECK(file.substr(file.size() - 14, 1) == ".");
    CHECK(file.substr(file.size() - 5) == ".json");
    return file.substr(0, file.size() - 14);
  };
  CHECK(gpu_part("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3");
  CHECK(gpu_part("NVIDIA A100-SXM4-40GB") == "nvidia-a100-sxm4-40gb");
  CHECK(gpu_part("GeForce RTX 4090 (rev. 2)") == "geforce-rtx-4090-rev-2");
  CHECK(gpu_part(" (?) ") == "gpu");
  CHECK(tuning_folder("/c") == fs::path("/c/v1/tuning"));

  // The same meta names the same file; any other field value, another file.
  const TuningMeta meta = test_meta();
  CHECK(database_path("/c", meta) == database_path("/c", test_meta()));
  for (int field = 0; field < 7; ++field) {
    TuningMeta other = meta;
    switch (field) {
      case 0:
        other.format += 1;
        break;
      case 1:
        other.flashjit_version += "x";
        break;
      case 2:
        other.nvrtc_version += "x";
        break;
      case 3:
        other.driver_version += 1;
        break;
      case 4:
        other.gpu_name += "x";
        break;
      case 5:
        other.compute_capability += "x";
        break;
      case 6:
        other.sm_count += 1;
        break;
    }
    CHECK_MESSAGE(database_path("/c", other) != database_path("/c", meta), "field " << field);
  }
}

TEST_CASE("load_any shows a file whatever its _meta, and still refuses a corrupt one") {
  TempDir dir;
  const fs::path path = dir.path() / "db.json";
  TuningMeta other = test_meta();
  other.flashjit_version = "0.0.9";
  merge_into_file(path, other, forward_key(),
                  entry_of("br128.bc64.w4.s2", {timing("br128.bc64.w4.s2", 1.0)}));
  CHECK(TuningDatabase::load(path, test_meta()).entries().empty());
  const TuningDatabase shown = TuningDatabase::load_any(path);
  CHECK(shown.problem().empty());
  CHECK(shown.entries().size() == 1);
  write_file(path, "{\"_meta\": ");
  CHECK(TuningDatabase::load_any(path).entries().empty());
  CHECK(TuningDatabase::load_any(path).problem().find("not valid JSON") != std::string::npos);
}

TEST_CASE("TuningMeta::for_device records this process and the device") {
  flashjit::DeviceInfo device;
  device.name = "NVIDIA H100 80GB HBM3";
  device.cc_major = 9;
  device.cc_minor = 0;
  device.sm_count = 132;
  const TuningMeta meta = TuningMeta::for_device(device, 13000);
  CHECK(meta.format == 2);
  CHECK(meta.flashjit_version == flashjit::kVersion);
  CHECK_FALSE(meta.nvrtc_version.empty());
  CHECK(meta.driver_version == 13000);
  CHECK(meta.gpu_name == device.name);
  CHECK(meta.compute_capability == "9.0");
  CHECK(meta.sm_count == 132);
}

TEST_CASE("database_files lists the *.json files of the tuning folder, sorted") {
  TempDir dir;
  CHECK(database_files(dir.path()).empty());  // no folder yet
  const fs::path folder = tuning_folder(dir.path());
  fs::create_directories(folder);
  write_file(folder / "b.json", "{}");
  write_file(folder / "a.json", "{}");
  write_file(folder / "a.json.lock", "");
  CHECK(database_files(dir.path()) == std::vector<fs::path>{folder / "a.json", folder / "b.json"});
}
