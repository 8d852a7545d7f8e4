// kcache get / ls / stat --server and export-manifest: a running kcached answers.
#include "client/cli/server_commands.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/get_progress.h"
#include "client/cli/mixed_fatbin.h"
#include "client/cli/node_devices.h"
#include "client/cli/object_remote.h"
#include "client/cli/output.h"
#include "client/cli/server_connect.h"
#include "kcache/kcache.h"
#include "kcache/node.h"

namespace kcache::cli {
namespace {

using client::FetchedKernel;
using nlohmann::json;

bool LooksLikeKernelId(const std::string& text) {
  return text.size() == 64 && text.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
}

json KernelJson(const FetchedKernel& k, const std::string& output) {
  json lowered = json::object();
  for (const auto& [expr, name] : k.lowered_names) lowered[expr] = name;
  return {{"kernel", k.kernel_name},
          {"id", k.kernel_id},
          {"kind", std::string(client::ArtifactKindName(k.kind))},
          {"target", k.target},
          {"toolkit", k.toolkit},
          {"size", k.data().size()},
          {"min_driver", k.min_driver},
          {"rule", std::string(client::ServeRuleName(k.rule))},
          {"reason", k.reason},
          {"needs_jit", k.needs_jit},
          {"tier", std::string(client::ServedFromName(k.served_from))},
          {"micros", k.micros},
          {"lowered_names", lowered},
          {"output", output}};
}

int RunExportManifest(const std::string& server, const std::string& output, double timeout_s) {
  absl::StatusOr<std::unique_ptr<client::Client>> c = ConnectForCli(server, timeout_s);
  if (!c.ok()) return FailStatus(c.status());
  absl::StatusOr<client::ExportedManifest> exported = (*c)->ExportManifest();
  if (!exported.ok()) return FailStatus(exported.status());
  if (output.empty()) {
    std::fwrite(exported->yaml.data(), 1, exported->yaml.size(), stdout);
  } else {
    std::ofstream out(output, std::ios::binary | std::ios::trunc);
    out << exported->yaml;
    out.close();
    if (!out) return Fail(absl::StrCat("cannot write -o ", output));
  }
  std::fprintf(stderr, "kcache: exported %u kernels workers asked for%s\n", exported->kernels,
               output.empty() ? "" : absl::StrCat(" to ", output).c_str());
  return kExitOk;
}

}  // namespace

absl::Status CheckStoreOrServer(const std::string& store, const std::string& server) {
  if (store.empty() && server.empty()) {
    return absl::InvalidArgumentError(
        "pass --store DIR (a store directory) or --server ADDR (a running kcached, e.g. "
        "unix:///run/kcache/kcache.sock)");
  }
  if (!store.empty() && !server.empty()) {
    return absl::InvalidArgumentError(
        "--store and --server cannot be used together: pass --store DIR to use a store "
        "directory, or --server ADDR to ask a running kcached");
  }
  return absl::OkStatus();
}

absl::Status PrepareOutputDir(const std::string& dir) {
  if (dir.empty()) return absl::OkStatus();
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error || !std::filesystem::is_directory(dir)) {
    return absl::InvalidArgumentError(
        absl::StrCat("-o ", dir, ": with several --kernel, -o names a directory, and this one ",
                     error ? "cannot be made: " + error.message() : "is not a directory"));
  }
  return absl::OkStatus();
}

std::string OutputPathFor(const std::string& dir, const std::string& kernel_name,
                          const std::string& target, const std::string& kind) {
  std::string file = absl::StrCat(kernel_name, ".", target, ".", kind);
  for (char& c : file) {
    if (c == '/' || c == '\\') c = '_';  // a name is not a path
  }
  return (std::filesystem::path(dir) / file).string();
}

namespace {

// Prints (or, with --json, collects) one kernel that `kcache get --server` got.
int ReportKernel(const ServerGetFlags& flags, const client::Device& device, const FetchedKernel& k,
                 bool several, json* collected) {
  std::string output = flags.output;
  if (several && !output.empty()) {
    output = OutputPathFor(output, k.kernel_name, k.target,
                           std::string(client::ArtifactKindName(k.kind)));
  }
  if (!output.empty()) {
    std::ofstream out(output, std::ios::binary | std::ios::trunc);
    out.write(k.data().data(), static_cast<std::streamsize>(k.data().size()));
    out.close();
    if (!out) return Fail(absl::StrCat("cannot write ", output));
  }
  if (flags.json) {
    collected->push_back(KernelJson(k, output));
    return kExitOk;
  }
  std::printf("%s %s %s for device %s: %s (%s)\n", k.kernel_name.c_str(), k.target.c_str(),
              std::string(client::ArtifactKindName(k.kind)).c_str(), device.ToString().c_str(),
              std::string(client::ServeRuleName(k.rule)).c_str(), k.reason.c_str());
  std::printf("served from %s in %s%s\n",
              std::string(client::ServedFromName(k.served_from)).c_str(),
              HumanMicros(k.micros).c_str(), k.needs_jit ? " (PTX: the driver JITs it)" : "");
  for (const auto& [expr, name] : k.lowered_names) {
    std::printf("  %s -> %s\n", expr.c_str(), name.c_str());
  }
  std::printf("%s%s\n", HumanBytes(k.data().size()).c_str(),
              output.empty() ? " (not written; pass -o FILE)"
                             : absl::StrCat(" written to ", output).c_str());
  std::fflush(stdout);
  return kExitOk;
}

}  // namespace

namespace {

// What `kcache get --server` collects: the worst exit code, how many were served, the JSON.
struct GetReport {
  int worst = kExitOk;
  size_t served = 0;
  json collected = json::array();
};

// Reports one kernel's result for `device` (named in an error when `node`: several devices).
void ReportResult(const ServerGetFlags& flags, const client::Device& device, size_t i,
                  const absl::StatusOr<FetchedKernel>& k, bool several, bool node,
                  GetReport* report) {
  int code = kExitOk;
  if (!k.ok()) {
    std::string what =
        node ? absl::StrCat(flags.kernels[i], " for ", device.ToString()) : flags.kernels[i];
    code = several ? Fail(absl::StrCat(what, ": ", k.status().message())) : FailStatus(k.status());
    if (flags.json && several) {
      report->collected.push_back({{"kernel", flags.kernels[i]},
                                   {"device", device.ToString()},
                                   {"error", std::string(k.status().message())}});
    }
  } else {
    code = ReportKernel(flags, device, *k, several, &report->collected);
    if (code == kExitOk) ++report->served;
  }
  report->worst = std::max(report->worst, code);
}

// `get --fatbin`: DIR/NAME.fatbin for each kernel, of the cubins its distinct SMs got.
int WriteFatbins(const ServerGetFlags& flags, const client::NodeKernels& node) {
  int worst = kExitOk;
  for (size_t i = 0; i < flags.kernels.size(); ++i) {
    std::vector<SmCubin> cubins;
    std::string name = flags.kernels[i];
    for (size_t d = 0; d < node.devices.size(); ++d) {
      const absl::StatusOr<FetchedKernel>& k = node.kernels[d][i];
      if (!k.ok() || k->kind != client::ArtifactKind::kCubin) continue;
      name = k->kernel_name;
      cubins.push_back(SmCubin{node.devices[d].arch(), std::string(k->data())});
    }
    absl::StatusOr<std::string> fatbin = BuildFatbin(flags.toolkit_root, cubins);
    if (!fatbin.ok()) {
      worst = std::max(worst, Fail(absl::StrCat(name, ": fatbin: ", fatbin.status().message())));
      continue;
    }
    std::string path = (std::filesystem::path(flags.output.empty() ? "." : flags.output) /
                        absl::StrCat(name, ".fatbin"))
                           .string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(fatbin->data(), static_cast<std::streamsize>(fatbin->size()));
    out.close();
    if (!out) {
      worst = std::max(worst, Fail(absl::StrCat("cannot write ", path)));
      continue;
    }
    if (!flags.json) {
      std::printf("%s: fatbin of %zu cubins, %s written to %s\n", name.c_str(), cubins.size(),
                  HumanBytes(fatbin->size()).c_str(), path.c_str());
    }
  }
  return worst;
}

}  // namespace

int RunGetOnServer(const ServerGetFlags& flags) {
  absl::StatusOr<std::vector<client::Device>> devices = ParseDeviceList(flags.device, flags.driver);
  if (!devices.ok())
    return Fail(absl::StrCat("--device: ", devices.status().message()), kExitBadInput);
  bool node = IsDeviceList(flags.device);
  if (flags.fatbin && !node) {
    return Fail("--fatbin needs a --device list, e.g. --device 7.5,8.6", kExitBadInput);
  }
  bool several = flags.kernels.size() > 1 || node;
  if (several) {
    if (absl::Status s = PrepareOutputDir(flags.output); !s.ok()) {
      return Fail(s.message(), kExitBadInput);
    }
  }
  absl::StatusOr<std::unique_ptr<client::Client>> c = ConnectForCli(flags.server, flags.timeout_s);
  if (!c.ok()) return FailStatus(c.status());
  client::CallOptions call;
  call.allow_daemon_compile = !flags.no_compile;
  call.ptx_now = flags.ptx_now;
  std::vector<client::KernelRef> refs;
  for (const std::string& kernel : flags.kernels) {
    refs.push_back(LooksLikeKernelId(kernel) ? client::KernelRef::Id(kernel)
                                             : client::KernelRef::Name(kernel));
  }
  auto start = std::chrono::steady_clock::now();
  GetReport report;
  std::optional<GetProgress> progress;  // one device: lines on stderr while kcached compiles
  if (!node && (flags.progress || isatty(STDERR_FILENO) != 0)) {
    progress.emplace(stderr, flags.kernels, devices->front().ToString());
    call.on_progress = [&progress](const client::CompileProgress& p) { progress->Print(p); };
  }
  if (!node) {
    // One call for all of them: each is reported as it arrives, stored ones first.
    (*c)->ResolveMany(
        refs, devices->front(),
        [&](size_t i, absl::StatusOr<FetchedKernel> k) {
          ReportResult(flags, devices->front(), i, k, several, false, &report);
        },
        call);
  } else {
    // A node: one call for every device at once, one artifact per distinct SM.
    client::NodeKernels node =
        client::ResolveForGpus(**c, refs, client::PretendGpus(*devices), call);
    for (size_t d = 0; d < node.devices.size(); ++d) {
      for (size_t i = 0; i < node.kernels[d].size(); ++i) {
        ReportResult(flags, node.devices[d], i, node.kernels[d][i], several, true, &report);
      }
    }
    if (flags.fatbin) report.worst = std::max(report.worst, WriteFatbins(flags, node));
  }
  if (flags.json) {
    if (!report.collected.empty()) {
      std::printf("%s\n", (several ? report.collected : report.collected[0]).dump(2).c_str());
    }
    return report.worst;
  }
  if (several) {
    int64_t micros = std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    std::printf("%zu of %zu kernels%s in %s (one call)\n", report.served,
                flags.kernels.size() * devices->size(),
                node ? absl::StrCat(" for ", devices->size(), " SMs").c_str() : "",
                HumanMicros(micros).c_str());
  }
  return report.worst;
}

int RunLsOnServer(const std::string& server, bool json_out, double timeout_s) {
  absl::StatusOr<std::unique_ptr<client::Client>> c = ConnectForCli(server, timeout_s);
  if (!c.ok()) return FailStatus(c.status());
  absl::StatusOr<std::vector<client::ListedKernel>> kernels = (*c)->List();
  if (!kernels.ok()) return FailStatus(kernels.status());
  // Compiler outputs and NVRTC outcomes: the object service's, not kernels.
  absl::StatusOr<std::unique_ptr<objects::ObjectCache>> objects = OpenRemoteObjectCache(server);
  absl::StatusOr<std::vector<ObjectEntry>> entries =
      objects.ok() ? (*objects)->ListAll() : objects.status();
  if (!entries.ok()) return FailStatus(entries.status());
  if (json_out) {
    json out = json::array();
    for (const client::ListedKernel& k : *kernels) {
      json arts = json::array();
      for (const client::ListedArtifact& a : k.artifacts) {
        arts.push_back({{"kind", std::string(client::ArtifactKindName(a.kind))},
                        {"target", a.target},
                        {"toolkit", a.toolkit},
                        {"size", a.size},
                        {"tier", std::string(client::ServedFromName(a.tier))}});
      }
      out.push_back({{"name", k.name},
                     {"id", k.kernel_id},
                     {"min_arch", ArchText(k.min_arch)},
                     {"max_arch", ArchText(k.max_arch)},
                     {"artifacts", arts}});
    }
    for (const ObjectEntry& entry : *entries) out.push_back(ObjectJson(entry));
    std::printf("%s\n", out.dump(2, ' ', false, json::error_handler_t::replace).c_str());
    return kExitOk;
  }
  Table table({"kernel", "id", "arch", "cubin", "ptx", "ltoir", "toolkits", "tiers", "bytes"}, {8});
  size_t artifacts = 0;
  for (const client::ListedKernel& k : *kernels) {
    std::map<client::ArtifactKind, std::vector<std::string>> targets;
    std::map<std::string, bool> tiers;
    std::vector<std::string> toolkits;
    uint64_t bytes = 0;
    for (const client::ListedArtifact& a : k.artifacts) {
      toolkits.push_back(a.toolkit);
      targets[a.kind].push_back(a.target.substr(a.target.find('_') + 1));
      std::string tier(client::ServedFromName(a.tier));
      tiers[tier.substr(tier.find(':') + 1)] = true;
      bytes += a.size;
      ++artifacts;
    }
    auto list = [&](client::ArtifactKind kind) {
      return targets[kind].empty() ? std::string("-") : absl::StrJoin(targets[kind], ",");
    };
    std::vector<std::string> tier_names;
    for (const auto& [tier, unused] : tiers) tier_names.push_back(tier);
    table.AddRow({k.name, k.kernel_id.substr(0, 12), ArchRangeText(k.min_arch, k.max_arch),
                  list(client::ArtifactKind::kCubin), list(client::ArtifactKind::kPtx),
                  list(client::ArtifactKind::kLtoir), ToolkitVersionsText(toolkits),
                  tier_names.empty() ? "-" : absl::StrJoin(tier_names, ","), HumanBytes(bytes)});
  }
  std::printf("%s%zu kernels, %zu artifacts (kcached at %s)\n", table.Render().c_str(),
              kernels->size(), artifacts, server.c_str());
  PrintObjects(*entries);
  return kExitOk;
}

int RunStatOnServer(const std::string& server, bool json_out, double timeout_s) {
  absl::StatusOr<std::unique_ptr<client::Client>> c = ConnectForCli(server, timeout_s);
  if (!c.ok()) return FailStatus(c.status());
  absl::StatusOr<client::DaemonStats> stats = (*c)->Stat();
  if (!stats.ok()) return FailStatus(stats.status());
  if (json_out) {
    json counters = json::object();
    for (const client::DaemonCounter& counter : stats->counters) {
      counters[counter.name] = counter.value;
    }
    json out = {{"server", server},
                {"uptime_seconds", stats->uptime_seconds},
                {"toolkits", stats->toolkits},
                {"memory_bytes", stats->memory_bytes},
                {"memory_entries", stats->memory_entries},
                {"store_artifacts", stats->store_artifacts},
                {"store_bytes", stats->store_bytes},
                {"counters", counters}};
    json options = json::array();
    for (const auto& option : stats->uncached_options) {
      options.push_back(
          {{"reason", option.reason}, {"option", option.option}, {"count", option.count}});
    }
    out["uncached_by_option"] = options;
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::printf("daemon             kcached at %s, up %llu s\n", server.c_str(),
              static_cast<unsigned long long>(stats->uptime_seconds));
  std::printf("toolkits           %s\n", stats->toolkits.empty()
                                             ? "none (serve only: misses cannot be compiled)"
                                             : absl::StrJoin(stats->toolkits, ", ").c_str());
  std::printf("memory tier        %llu artifacts (%s)\n",
              static_cast<unsigned long long>(stats->memory_entries),
              HumanBytes(stats->memory_bytes).c_str());
  std::printf("writable store     %llu artifacts (%s)\n",
              static_cast<unsigned long long>(stats->store_artifacts),
              HumanBytes(stats->store_bytes).c_str());
  Table table({"counter", "value", "meaning"}, {1});
  for (const client::DaemonCounter& counter : stats->counters) {
    table.AddRow({counter.name, std::to_string(counter.value), counter.help});
  }
  std::printf("\n%s", table.Render().c_str());
  if (!stats->uncached_options.empty()) {
    Table options({"launcher commands run uncached, by option", "reason", "commands"}, {2});
    for (const auto& option : stats->uncached_options) {
      options.AddRow({option.option, option.reason, std::to_string(option.count)});
    }
    std::printf("\n%s", options.Render().c_str());
  }
  return kExitOk;
}

void RegisterServerCommands(CLI::App& app, int* exit_code) {
  struct Flags {
    std::string server;
    std::string output;
    double timeout_s = 10;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "export-manifest",
      "Print, as a manifest, the kernels workers asked a running kcached for (sources\n"
      "inline), so the next image build warms exactly what production uses");
  cmd->add_option("--server", flags->server, "kcached address, e.g. unix:///run/kcache/kcache.sock")
      ->required();
  cmd->add_option("-o,--output", flags->output, "Write the YAML here instead of stdout");
  cmd->add_option("--timeout", flags->timeout_s, "Seconds to wait for the daemon (default 10)")
      ->check(CLI::PositiveNumber);
  cmd->callback([flags, exit_code] {
    *exit_code = RunExportManifest(flags->server, flags->output, flags->timeout_s);
  });
}

}  // namespace kcache::cli
