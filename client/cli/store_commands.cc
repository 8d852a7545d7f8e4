// kcache ls / stat / get: inspect a store and fetch what a device would be served.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/commands.h"
#include "client/cli/node_devices.h"
#include "client/cli/output.h"
#include "client/cli/server_commands.h"
#include "engine/compile/compiler.h"
#include "engine/fatbin/ptx_sass.h"
#include "engine/objects/object_schema.h"
#include "engine/resolve/in_process.h"
#include "engine/store/store.h"

namespace kcache::cli {
namespace {

using nlohmann::json;

struct StoreFlags {
  std::string store;
  std::string server;
  bool json = false;
  double timeout_s = 10;
};

struct GetFlags {
  std::string store;
  std::string server;
  double timeout_s = 60;
  std::string device;
  uint32_t driver = 0;
  std::vector<std::string> kernels;   // --kernel, repeatable: names or ids
  std::string output;                 // a file; a directory with several kernels
  std::vector<std::string> toolkits;  // --toolkit, repeatable; none: the default toolkit
  bool no_compile = false;
  bool ptx_now = false;
  bool json = false;
  bool fatbin = false;  // with --server and a --device list: one fatbin per kernel
  bool progress = false;
};

json MetaJson(const ArtifactMeta& m) {
  json lowered = json::object();
  for (const auto& [expr, name] : m.lowered_names) lowered[expr] = name;
  return {{"kind", std::string(ArtifactKindName(m.key.kind))},
          {"target", m.key.target.ToString()},
          {"toolkit", m.key.toolkit},
          {"driver", m.key.driver},
          {"size", m.size},
          {"checksum", absl::StrCat(absl::Hex(m.checksum, absl::kZeroPad16))},
          {"compile_ms", m.compile_micros / 1000.0},
          {"created_unix_ms", m.created_unix_ms},
          {"min_driver", m.min_driver},
          {"lowered_names", lowered}};
}

// SASS built from libraries' PTX (`kcache warm --library`), by library, PTX target and PTX
// module id (ptx_sass.h): what `ls` shows as one row, or one JSON element.
using PtxSassGroups =
    std::map<std::tuple<std::string, std::string, KernelId>, std::vector<const ArtifactMeta*>>;

PtxSassGroups GroupPtxSass(const std::vector<ArtifactMeta>& artifacts) {
  PtxSassGroups groups;
  for (const ArtifactMeta& m : artifacts) {
    if (!fatbin::IsPtxSassArtifact(m)) continue;
    fatbin::PtxSassOrigin origin = fatbin::PtxSassOriginOf(m);
    groups[{origin.library, origin.ptx.ToString(), m.key.kernel_id}].push_back(&m);
  }
  return groups;
}

void PrintPtxSass(const PtxSassGroups& groups) {
  if (groups.empty()) return;
  Table table({"library", "from ptx", "ptx id", "cubin", "toolkits", "bytes"}, {5});
  size_t count = 0;
  for (const auto& [key, metas] : groups) {
    const auto& [library, ptx, id] = key;
    std::vector<std::string> targets, toolkits;
    uint64_t bytes = 0;
    for (const ArtifactMeta* m : metas) {
      std::string target = m->key.target.ToString();  // "sm_89" -> "89"
      targets.push_back(target.substr(target.find('_') + 1));
      toolkits.push_back(m->key.toolkit);
      bytes += m->size;
      ++count;
    }
    table.AddRow({library, ptx, id.ShortHex(), absl::StrJoin(targets, ","),
                  ToolkitVersionsText(toolkits), HumanBytes(bytes)});
  }
  std::printf("\n%s%zu cubins built from libraries' PTX\n", table.Render().c_str(), count);
}

int RunLs(const StoreFlags& flags) {
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStoreForCli(flags.store, StoreUse::kRead);
  if (!store.ok()) return Fail(store.status().message(), kExitBadInput);
  absl::StatusOr<std::vector<KernelRecord>> kernels = (*store)->ListKernels();
  if (!kernels.ok()) return Fail(kernels.status().message());
  absl::StatusOr<std::vector<ArtifactMeta>> artifacts = (*store)->ListAllArtifacts();
  if (!artifacts.ok()) return Fail(artifacts.status().message());

  std::map<KernelId, std::vector<const ArtifactMeta*>> by_kernel;
  for (const ArtifactMeta& m : *artifacts) by_kernel[m.key.kernel_id].push_back(&m);

  if (flags.json) {
    json out = json::array();
    for (const KernelRecord& k : *kernels) {
      json arts = json::array();
      for (const ArtifactMeta* m : by_kernel[k.id]) arts.push_back(MetaJson(*m));
      out.push_back({{"name", k.spec.name},
                     {"id", k.id.Hex()},
                     {"min_arch", ArchText(k.arch.min_arch)},
                     {"max_arch", ArchText(k.arch.max_arch)},
                     {"name_expressions", k.spec.name_expressions},
                     {"options", k.spec.options},
                     {"artifacts", arts}});
    }
    // SASS built from libraries' PTX: no kernel record; an element per library and PTX module.
    for (const auto& [key, metas] : GroupPtxSass(*artifacts)) {
      const auto& [library, ptx, id] = key;
      json arts = json::array();
      for (const ArtifactMeta* m : metas) arts.push_back(MetaJson(*m));
      out.push_back({{"name", library},
                     {"id", id.Hex()},
                     {"library", library},
                     {"from_ptx", ptx},
                     {"artifacts", arts}});
    }
    for (const ObjectEntry& entry : objects::ObjectEntriesOf(*artifacts)) {
      out.push_back(ObjectJson(entry));
    }
    std::printf("%s\n", out.dump(2, ' ', false, json::error_handler_t::replace).c_str());
    return kExitOk;
  }
  Table table({"kernel", "id", "arch", "cubin", "ptx", "ltoir", "toolkits", "bytes"}, {7});
  for (const KernelRecord& k : *kernels) {
    std::map<ArtifactKind, std::vector<std::string>> targets;
    std::vector<std::string> toolkits;
    uint64_t bytes = 0;
    for (const ArtifactMeta* m : by_kernel[k.id]) {
      toolkits.push_back(m->key.toolkit);
      std::string target = m->key.target.ToString();  // "sm_90a" -> "90a"
      targets[m->key.kind].push_back(target.substr(target.find('_') + 1));
      bytes += m->size;
    }
    auto list = [&](ArtifactKind kind) {
      return targets[kind].empty() ? std::string("-") : absl::StrJoin(targets[kind], ",");
    };
    table.AddRow({k.spec.name, k.id.ShortHex(), ArchRangeText(k.arch.min_arch, k.arch.max_arch),
                  list(ArtifactKind::kCubin), list(ArtifactKind::kPtx), list(ArtifactKind::kLtoir),
                  ToolkitVersionsText(toolkits), HumanBytes(bytes)});
  }
  std::printf("%s%zu kernels, %zu artifacts\n", table.Render().c_str(), kernels->size(),
              artifacts->size());
  PrintObjects(objects::ObjectEntriesOf(*artifacts));
  PrintPtxSass(GroupPtxSass(*artifacts));
  return kExitOk;
}

int RunStat(const StoreFlags& flags) {
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStoreForCli(flags.store, StoreUse::kRead);
  if (!store.ok()) return Fail(store.status().message(), kExitBadInput);
  absl::StatusOr<StoreStats> stats = (*store)->Stats();
  if (!stats.ok()) return Fail(stats.status().message());
  absl::StatusOr<std::vector<ArtifactMeta>> artifacts = (*store)->ListAllArtifacts();
  if (!artifacts.ok()) return Fail(artifacts.status().message());
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_kind;  // kind -> (count, bytes)
  std::map<std::string, uint64_t> by_toolkit;
  // A cubin and its PTX come from one compile and both record its time: count it once per
  // (kernel, arch, toolkit, compile pass). LTO-IR is a pass of its own.
  std::map<std::tuple<KernelId, int, std::string, bool>, uint64_t> compiles;
  for (const ArtifactMeta& m : *artifacts) {
    auto& [count, bytes] = by_kind[std::string(ArtifactKindName(m.key.kind))];
    ++count;
    bytes += m.size;
    if (objects::IsObjectArtifact(m)) continue;  // compiler outputs: no toolkit, no compile
    ++by_toolkit[m.key.toolkit];
    uint64_t& micros = compiles[{m.key.kernel_id, m.key.target.sm.arch(), m.key.toolkit,
                                 m.key.kind == ArtifactKind::kLtoir}];
    micros = std::max(micros, m.compile_micros);
  }
  uint64_t compile_micros = 0;
  for (const auto& [unused, micros] : compiles) compile_micros += micros;
  if (flags.json) {
    json kinds = json::object();
    for (const auto& [kind, cb] : by_kind)
      kinds[kind] = {{"count", cb.first}, {"bytes", cb.second}};
    json out = {{"path", flags.store},
                {"format_version", stats->format_version},
                {"kernels", stats->kernels},
                {"artifacts", stats->artifacts},
                {"artifact_bytes", stats->artifact_bytes},
                {"disk_bytes", stats->disk_bytes},
                {"checksum_failures", stats->checksum_failures},
                {"compile_seconds_stored", compile_micros / 1e6},
                {"by_kind", kinds},
                {"by_toolkit", by_toolkit}};
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::printf("store              %s (format %llu)\n", flags.store.c_str(),
              static_cast<unsigned long long>(stats->format_version));
  std::printf("kernels            %llu\n", static_cast<unsigned long long>(stats->kernels));
  std::printf("artifacts          %llu (%s)\n", static_cast<unsigned long long>(stats->artifacts),
              HumanBytes(stats->artifact_bytes).c_str());
  for (const auto& [kind, cb] : by_kind) {
    std::printf("  %-16s %llu (%s)\n", kind.c_str(), static_cast<unsigned long long>(cb.first),
                HumanBytes(cb.second).c_str());
  }
  std::printf("on disk            %s\n", HumanBytes(stats->disk_bytes).c_str());
  std::printf("compile time held  %s (what a cold start would spend compiling all of it)\n",
              HumanMicros(static_cast<int64_t>(compile_micros)).c_str());
  for (const auto& [toolkit, count] : by_toolkit) {
    std::printf("toolkit            %s: %llu artifacts\n", toolkit.c_str(),
                static_cast<unsigned long long>(count));
  }
  std::printf("checksum failures  %llu (since open)\n",
              static_cast<unsigned long long>(stats->checksum_failures));
  return kExitOk;
}

// The compilers of `toolkits` (none named: the default one), for a compile on a miss. A toolkit
// named that does not load is an error; the default one that does not is left out, why in
// *no_compiler_reason.
absl::Status LoadCompilers(const std::vector<std::string>& toolkits,
                           std::vector<std::unique_ptr<Compiler>>* compilers,
                           std::string* no_compiler_reason) {
  for (const std::string& root : toolkits.empty() ? std::vector<std::string>{""} : toolkits) {
    absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit = LoadToolkitForCli(root);
    if (toolkit.ok()) {
      compilers->push_back(NewNvrtcCompiler(*toolkit));
    } else if (!toolkits.empty()) {  // a toolkit asked for by name must load
      return absl::InvalidArgumentError(
          absl::StrCat("--toolkit ", root, ": ", toolkit.status().message()));
    } else {
      *no_compiler_reason = std::string(toolkit.status().message());
    }
  }
  return absl::OkStatus();
}

// One kernel of `kcache get --store`, written to `output` when it is not empty.
// With `into_dir`, `output` is a directory and the file in it is named by OutputPathFor.
int RunGetOne(const GetFlags& flags, const std::string& kernel, std::string output, bool into_dir) {
  absl::StatusOr<Sm> sm = ParseSm(flags.device);
  if (!sm.ok()) return Fail(absl::StrCat("--device: ", sm.status().message()), kExitBadInput);
  absl::StatusOr<std::unique_ptr<Store>> store =
      OpenStoreForCli(flags.store, flags.no_compile ? StoreUse::kRead : StoreUse::kReadAndFill);
  if (!store.ok()) return Fail(store.status().message(), kExitBadInput);
  absl::StatusOr<KernelRecord> record = FindKernel(**store, kernel);
  KernelId id;
  if (record.ok()) {
    id = record->id;
  } else if (absl::StatusOr<KernelId> parsed = KernelId::FromHex(kernel); parsed.ok()) {
    id = *parsed;  // artifacts without a record can still be served
  } else {
    return Fail(record.status().message());
  }

  std::vector<std::unique_ptr<Compiler>> compilers;
  std::string no_compiler_reason;
  if (!flags.no_compile) {
    absl::Status loaded = LoadCompilers(flags.toolkits, &compilers, &no_compiler_reason);
    if (!loaded.ok()) return Fail(loaded.message(), kExitBadInput);
  }
  std::vector<Compiler*> compiler_ptrs;
  for (const std::unique_ptr<Compiler>& c : compilers) compiler_ptrs.push_back(c.get());
  Device device{*sm, flags.driver};
  ResolvePolicy policy{.allow_compile = !flags.no_compile, .ptx_now = flags.ptx_now};
  absl::StatusOr<InProcessAnswer> resolved =
      ResolveFromStore(**store, id, device, policy, compiler_ptrs);
  if (!resolved.ok()) {
    std::string message(resolved.status().message());
    if (!no_compiler_reason.empty()) absl::StrAppend(&message, "\n(", no_compiler_reason, ")");
    return Fail(message);
  }
  if (!resolved->write_status.ok()) {
    std::fprintf(stderr, "kcache: warning: the compiled artifacts were not stored: %s\n",
                 std::string(resolved->write_status.message()).c_str());
  }
  const ArtifactMeta& meta = resolved->artifact->meta;
  if (into_dir && !output.empty()) {
    output = OutputPathFor(output, meta.kernel_name, meta.key.target.ToString(),
                           std::string(ArtifactKindName(meta.key.kind)));
  }
  if (!output.empty()) {
    std::ofstream out(output, std::ios::binary | std::ios::trunc);
    out.write(resolved->artifact->bytes.data(),
              static_cast<std::streamsize>(resolved->artifact->bytes.size()));
    out.close();
    if (!out) return Fail(absl::StrCat("cannot write -o ", output));
  }
  if (flags.json) {
    json out = MetaJson(meta);
    out["kernel"] = meta.kernel_name;
    out["id"] = meta.key.kernel_id.Hex();
    out["rule"] = std::string(ServeRuleName(resolved->rule));
    out["reason"] = resolved->reason;
    out["needs_jit"] = resolved->needs_jit();
    out["output"] = output;
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::printf("%s %s %s for device %s: %s (%s)\n", meta.kernel_name.c_str(),
              meta.key.target.ToString().c_str(),
              std::string(ArtifactKindName(meta.key.kind)).c_str(), sm->ToString().c_str(),
              std::string(ServeRuleName(resolved->rule)).c_str(), resolved->reason.c_str());
  for (const auto& [expr, name] : meta.lowered_names) {
    std::printf("  %s -> %s\n", expr.c_str(), name.c_str());
  }
  std::printf("%s%s\n", HumanBytes(meta.size).c_str(),
              output.empty() ? " (not written; pass -o FILE)"
                             : absl::StrCat(" written to ", output).c_str());
  return kExitOk;
}

// Every kernel for every device of --device ("7.5,8.6": a node, one artifact per distinct SM).
int RunGet(const GetFlags& flags) {
  if (flags.fatbin) return Fail("--fatbin needs --server", kExitBadInput);
  absl::StatusOr<std::vector<client::Device>> devices = ParseDeviceList(flags.device, flags.driver);
  if (!devices.ok()) {
    return Fail(absl::StrCat("--device: ", devices.status().message()), kExitBadInput);
  }
  if (flags.kernels.size() == 1 && !IsDeviceList(flags.device)) {
    return RunGetOne(flags, flags.kernels[0], flags.output, false);
  }
  if (absl::Status s = PrepareOutputDir(flags.output); !s.ok()) {
    return Fail(s.message(), kExitBadInput);
  }
  int worst = kExitOk;
  for (const client::Device& device : *devices) {
    GetFlags one = flags;
    one.device = device.ToString();
    for (const std::string& kernel : flags.kernels) {
      int code = RunGetOne(one, kernel, flags.output, /*into_dir=*/true);
      worst = std::max(worst, code);
    }
  }
  return worst;
}

// --store DIR or --server ADDR, never both: a usage error (exit 2) otherwise.
void AddStoreOrServer(CLI::App* cmd, std::string* store, std::string* server, double* timeout_s,
                      const char* timeout_help) {
  CLI::Option* store_opt = cmd->add_option("--store", *store, "Store directory");
  CLI::Option* server_opt = cmd->add_option(
      "--server", *server, "Ask a running kcached instead, e.g. unix:///run/kcache/kcache.sock");
  store_opt->excludes(server_opt);
  cmd->add_option("--timeout", *timeout_s, timeout_help)->check(CLI::PositiveNumber);
}

// Runs `on_store` or `on_server` by which of the two was given.
template <typename StoreFn, typename ServerFn>
int Dispatch(const std::string& store, const std::string& server, StoreFn on_store,
             ServerFn on_server) {
  if (absl::Status s = CheckStoreOrServer(store, server); !s.ok()) {
    return Fail(s.message(), kExitBadInput);
  }
  return server.empty() ? on_store() : on_server();
}

// kcache ls: a store's (or kcached's) kernels and their artifacts.
void RegisterLsCommand(CLI::App& app, int* exit_code) {
  auto ls = std::make_shared<StoreFlags>();
  CLI::App* ls_cmd = app.add_subcommand(
      "ls", "List the kernels in a store (or a running kcached) and their artifacts");
  AddStoreOrServer(ls_cmd, &ls->store, &ls->server, &ls->timeout_s,
                   "With --server: seconds to wait for the daemon (default 10)");
  ls_cmd->add_flag("--json", ls->json, "Print JSON");
  ls_cmd->callback([ls, exit_code] {
    *exit_code = Dispatch(
        ls->store, ls->server, [&] { return RunLs(*ls); },
        [&] { return RunLsOnServer(ls->server, ls->json, ls->timeout_s); });
  });
}

// kcache stat: a store's size and health, or kcached's counters.
void RegisterStatCommand(CLI::App& app, int* exit_code) {
  auto stat = std::make_shared<StoreFlags>();
  CLI::App* stat_cmd = app.add_subcommand(
      "stat",
      "Show a store's size, contents and health; with --server, the daemon's hits and misses\n"
      "by tier and reason, compiles and bytes served");
  AddStoreOrServer(stat_cmd, &stat->store, &stat->server, &stat->timeout_s,
                   "With --server: seconds to wait for the daemon (default 10)");
  stat_cmd->add_flag("--json", stat->json, "Print JSON");
  stat_cmd->callback([stat, exit_code] {
    *exit_code = Dispatch(
        stat->store, stat->server, [&] { return RunStat(*stat); },
        [&] { return RunStatOnServer(stat->server, stat->json, stat->timeout_s); });
  });
}

// kcache get: the artifact a device would be served.
void RegisterGetCommand(CLI::App& app, int* exit_code) {
  auto get = std::make_shared<GetFlags>();
  CLI::App* get_cmd = app.add_subcommand(
      "get",
      "Fetch the artifact a device would be served, by the daemon's serving rules:\n"
      "exact cubin, then a compatible cubin, then PTX, then a compile (if a toolkit loads)");
  AddStoreOrServer(
      get_cmd, &get->store, &get->server, &get->timeout_s,
      "With --server: seconds without word from the daemon before giving up; a compile\n"
      "it reports progress on is waited for up to its compile limit (default 60)");
  get_cmd
      ->add_option("--device", get->device,
                   "Device SM, e.g. 8.9; a node's, comma-separated (7.5,8.6): one artifact per "
                   "distinct SM")
      ->required();
  get_cmd->add_option("--driver", get->driver,
                      "Device's CUDA driver version, e.g. 13000 (default: unknown)");
  get_cmd
      ->add_option("--kernel", get->kernels,
                   "Kernel name or id (see kcache ls); repeat it to fetch several in one call")
      ->required();
  get_cmd->add_option("-o,--output", get->output,
                      "Write the artifact to this file (with several --kernel: into this "
                      "directory, as NAME.TARGET.KIND)");
  get_cmd->add_option("--toolkit", get->toolkits,
                      "CUDA toolkit root for compile-on-miss; repeat to load several (the newest "
                      "one the --driver loads is used; default: $CUDA_HOME, else /usr/local/cuda)");
  get_cmd->add_flag("--no-compile", get->no_compile,
                    "Serve only what is stored (opens the store read-only)");
  get_cmd->add_flag("--ptx-now", get->ptx_now,
                    "When only PTX is stored and SASS could be compiled, take the PTX now (the "
                    "SASS is still compiled and stored for the next call)");
  get_cmd->add_flag("--json", get->json, "Print the artifact's metadata as JSON");
  get_cmd->add_flag("--fatbin", get->fatbin,
                    "With --server and a --device list: also write DIR/NAME.fatbin, one fatbin "
                    "holding each distinct SM's cubin (built with the toolkit's fatbinary)");
  get_cmd->add_flag("--progress", get->progress,
                    "With --server and one device: print where kcached is with each compile it "
                    "runs for the call (queued, compiling) to stderr, at most once a second; "
                    "the default when stderr is a terminal");
  get_cmd->callback([get, exit_code] {
    *exit_code = Dispatch(
        get->store, get->server, [&] { return RunGet(*get); },
        [&] {
          ServerGetFlags f{get->server,
                           get->device,
                           get->driver,
                           get->kernels,
                           get->output,
                           get->no_compile,
                           get->ptx_now,
                           get->json,
                           get->timeout_s,
                           get->fatbin,
                           get->toolkits.empty() ? "" : get->toolkits.front(),
                           get->progress};
          return RunGetOnServer(f);
        });
  });
}

}  // namespace

void RegisterStoreCommands(CLI::App& app, int* exit_code) {
  RegisterLsCommand(app, exit_code);
  RegisterStatCommand(app, exit_code);
  RegisterGetCommand(app, exit_code);
}

}  // namespace kcache::cli
