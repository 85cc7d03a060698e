// `flashjit cache list | verify | prune --max-size SIZE | clear`.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>

#include "commands.hpp"
#include "flashjit/error.hpp"
#include "format.hpp"
#include "runtime/kernel_cache.hpp"

namespace flashjit::tools {
namespace {

detail::DiskCache& disk_cache() {
  detail::DiskCache* disk = detail::KernelCache::process_cache().disk();
  if (disk == nullptr) {
    throw Error(ErrorKind::cache, "FLASHJIT_ALWAYS_COMPILE is set: there is no disk cache");
  }
  if (!disk->readable()) {
    throw Error(ErrorKind::cache, "kernel cache " + disk->root().string() +
                                      " is unusable: " + disk->degraded_reason());
  }
  return *disk;
}

std::string last_use(std::filesystem::file_time_type time) {
  auto system =
      std::chrono::time_point_cast<std::chrono::seconds>(std::chrono::file_clock::to_sys(time));
  std::time_t seconds = std::chrono::system_clock::to_time_t(system);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M", std::localtime(&seconds));
  return text;
}

void print_entry(const detail::DiskEntryInfo& info) {
  if (!info.entry) {
    std::printf("INVALID %s (%s)\n", info.path.filename().c_str(), info.problem.c_str());
    return;
  }
  const detail::ResourceUsage& r = info.entry->kernel.resources;
  std::printf("%-44s %-7s regs %3d  spill %4d B  %9s  %s\n", info.entry->display_name.c_str(),
              info.entry->arch.c_str(), r.registers, r.spill_bytes(),
              format_bytes(info.size).c_str(), last_use(info.last_use).c_str());
}

int run_list() {
  detail::DiskCache& disk = disk_cache();
  std::uintmax_t total = 0;
  const auto entries = disk.list();
  for (const auto& info : entries) {
    print_entry(info);
    total += info.size;
  }
  std::printf("%zu entries, %s in %s\n", entries.size(), format_bytes(total).c_str(),
              disk.root().c_str());
  return 0;
}

int run_verify() {
  detail::DiskCache& disk = disk_cache();
  const std::size_t total = disk.list().size();
  const auto invalid = disk.verify_and_repair();
  for (const auto& info : invalid) print_entry(info);
  std::printf("%zu entries checked, %zu invalid%s\n", total, invalid.size(),
              invalid.empty() ? "" : (disk.writable() ? " (removed)" : " (read-only: kept)"));
  return invalid.empty() || disk.writable() ? 0 : 1;
}

int run_prune(const std::string& max_size) {
  const std::uintmax_t limit = parse_size(max_size, "--max-size");
  detail::DiskCache& disk = disk_cache();
  const auto removed = disk.prune(limit);
  std::uintmax_t freed = 0;
  for (const auto& info : removed) freed += info.size;
  std::printf("removed %zu least recently used entries (%s); limit %s\n", removed.size(),
              format_bytes(freed).c_str(), format_bytes(limit).c_str());
  return 0;
}

int run_clear() {
  detail::DiskCache& disk = disk_cache();
  if (!disk.writable()) {
    throw Error(ErrorKind::cache, "kernel cache " + disk.root().string() +
                                      " is not writable: " + disk.degraded_reason());
  }
  std::printf("removed %zu entries from %s\n", disk.clear(), disk.root().c_str());
  return 0;
}

}  // namespace

Subcommand add_cache_command(CLI::App& app) {
  CLI::App* cache = app.add_subcommand("cache", "Inspect and maintain the kernel cache");
  cache->require_subcommand(0, 1);
  auto max_size = std::make_shared<std::string>();
  CLI::App* list = cache->add_subcommand("list",
                                         "List entries: name, arch, registers, spills, "
                                         "size, last use");
  CLI::App* verify = cache->add_subcommand("verify", "Check every entry; remove invalid ones");
  CLI::App* prune = cache->add_subcommand("prune", "Remove least recently used entries");
  prune->add_option("--max-size", *max_size, "Keep at most this much (e.g. 500M, 2G)")->required();
  CLI::App* clear = cache->add_subcommand("clear", "Remove every entry");
  return {cache, [=] {
            if (list->parsed()) return run_list();
            if (verify->parsed()) return run_verify();
            if (prune->parsed()) return run_prune(*max_size);
            if (clear->parsed()) return run_clear();
            throw InvalidArgument("cache", "needs a command: list, verify, prune or clear");
          }};
}

}  // namespace flashjit::tools
