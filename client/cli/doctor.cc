// kcache doctor: runs the checks of doctor_checks.cc and prints one section per check.
#include "client/cli/doctor.h"

#include <algorithm>
#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "client/cli/commands.h"
#include "client/cli/output.h"
#include "kcache/device.h"

namespace kcache::cli {
namespace {

using nlohmann::json;

struct DoctorFlags {
  std::vector<std::string> toolkits;  // empty: the default root
  std::vector<std::string> stores;
  std::vector<std::string> servers;
  std::string shared;  // --shared URL
  std::string shared_key_file;
  std::string shared_key_file_second;
  double timeout_s = 3;
  bool require_gpu = false;
  bool json = false;
  bool repair = false;
  std::vector<std::string> libraries;  // --library
  std::vector<int> processes;          // --process
  std::string arch;                    // --arch: the SMs the libraries are checked for
};

std::string Heading(const CheckReport& report) {
  if (report.check == "gpus") return "driver and GPUs";
  if (report.check == "sandbox") return "compile sandbox";
  if (report.check == "libraries") return "libraries' PTX (what the driver would JIT)";
  return absl::StrCat(report.check, " ", report.subject);
}

// "  problem  text\n           fix: ...", continuation lines indented under the text.
void PrintText(const std::vector<CheckReport>& reports, int problems) {
  constexpr char kIndent[] = "\n           ";
  for (const CheckReport& report : reports) {
    std::printf("%s\n", Heading(report).c_str());
    for (const Finding& f : report.findings) {
      std::string text = absl::StrReplaceAll(f.text, {{"\n", kIndent}});
      std::printf("  %-7s  %s\n", LevelName(f.level).data(), text.c_str());
      if (!f.fix.empty()) std::printf("           fix: %s\n", f.fix.c_str());
    }
  }
  if (problems == 0) {
    std::printf("no problems\n");
  } else {
    std::printf("%d problem%s\n", problems, problems == 1 ? "" : "s");
  }
}

void PrintJson(const std::vector<CheckReport>& reports, int problems) {
  json checks = json::array();
  for (const CheckReport& report : reports) {
    json findings = json::array();
    for (const Finding& f : report.findings) {
      json finding = {{"level", std::string(LevelName(f.level))}, {"text", f.text}};
      if (!f.fix.empty()) finding["fix"] = f.fix;
      findings.push_back(finding);
    }
    checks.push_back({{"check", report.check},
                      {"subject", report.subject},
                      {"ok", report.problems() == 0},
                      {"findings", findings},
                      {"details", report.details}});
  }
  json out = {{"ok", problems == 0}, {"problems", problems}, {"checks", checks}};
  std::printf("%s\n", out.dump(2).c_str());
}

int RunDoctor(const DoctorFlags& flags) {
  std::vector<CheckReport> reports;
  std::vector<std::shared_ptr<const Toolkit>> loaded;
  bool from_default = flags.toolkits.empty();
  std::vector<std::string> roots = flags.toolkits;
  if (from_default) roots.push_back(Toolkit::DefaultRoot());
  for (const std::string& root : roots) {
    std::shared_ptr<const Toolkit> toolkit;
    reports.push_back(CheckToolkit(root, from_default, &toolkit));
    if (toolkit != nullptr) loaded.push_back(std::move(toolkit));
  }
  if (from_default) {
    std::vector<std::string> others = OtherToolkitRoots("/usr/local", roots.front());
    if (!others.empty()) {
      reports.back().Info(absl::StrCat(
          "also installed: ", absl::StrJoin(others, ", "),
          " (kcache and kcached use the one above; check another with --toolkit DIR)"));
      reports.back().details["also_installed"] = others;
    }
  }
  reports.push_back(CheckGpus(flags.require_gpu, loaded));
  reports.push_back(CheckSandbox());
  for (const std::string& store : flags.stores) {
    reports.push_back(CheckStore(store, flags.repair));
  }
  for (const std::string& server : flags.servers) {
    reports.push_back(CheckDaemon(server, flags.timeout_s));
  }
  if (!flags.libraries.empty() || !flags.processes.empty()) {
    std::vector<Sm> sms;
    uint32_t driver = 0;
    if (!flags.arch.empty()) {
      absl::StatusOr<std::vector<Target>> targets = ParseTargetList(flags.arch);
      if (!targets.ok())
        return Fail(absl::StrCat("--arch: ", targets.status().message()), kExitBadInput);
      for (const Target& t : *targets) sms.push_back(t.sm);
    } else if (absl::StatusOr<std::vector<client::GpuInfo>> gpus = client::DetectDevices();
               gpus.ok()) {
      for (const client::GpuInfo& gpu : *gpus) {
        Sm sm{gpu.device.sm_major, gpu.device.sm_minor};
        if (std::find(sms.begin(), sms.end(), sm) == sms.end()) sms.push_back(sm);
        driver = gpu.device.driver_version;
      }
    }
    reports.push_back(CheckLibraries(flags.libraries, flags.processes, sms, driver,
                                     flags.servers.empty() ? "" : flags.servers.front(),
                                     flags.timeout_s));
  }
  if (!flags.shared.empty()) {
    reports.push_back(CheckShared(flags.shared, flags.shared_key_file, flags.shared_key_file_second,
                                  flags.timeout_s));
  }
  int problems = 0;
  for (const CheckReport& report : reports) problems += report.problems();
  if (flags.json) {
    PrintJson(reports, problems);
  } else {
    PrintText(reports, problems);
  }
  std::fflush(stdout);
  return problems == 0 ? kExitOk : kExitFailed;
}

}  // namespace

void RegisterDoctorCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<DoctorFlags>();
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "Check this machine: CUDA toolkits and their architectures, the driver and GPUs, stores\n"
      "(checksums verified, read-only) and a running kcached. Exit 1 with a fix for each\n"
      "problem found");
  cmd->add_option("--toolkit", flags->toolkits,
                  "CUDA toolkit root to check (repeatable; default: $CUDA_HOME, else "
                  "/usr/local/cuda)");
  cmd->add_option("--store", flags->stores,
                  "Store directory to open read-only and verify (repeatable)");
  cmd->add_option("--server", flags->servers,
                  "kcached address to ask, e.g. unix:///run/kcache/kcache.sock (repeatable)");
  cmd->add_option("--shared", flags->shared,
                  "Shared tier to check: redis://host:port or redis-cluster://h1:p1,h2:p2");
  cmd->add_option("--shared-key-file", flags->shared_key_file,
                  "With --shared: check that an entry signed with this key makes the round trip");
  cmd->add_option("--shared-key-file-second", flags->shared_key_file_second,
                  "With --shared-key-file: the second key kcached accepts (rotation)");
  cmd->add_option("--timeout", flags->timeout_s,
                  "Seconds to wait for each daemon's answer (default 3)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--require-gpu", flags->require_gpu,
                "No driver or no GPU is a problem (default: information, as on a build machine)");
  cmd->add_flag("--json", flags->json, "Print the findings as JSON");
  cmd->add_option("--library", flags->libraries,
                  "A CUDA library a worker loads (.so, fatbin, cubin; repeatable): which of its "
                  "modules the driver would JIT on the GPUs, and whether the first --server "
                  "holds their SASS (docs/ptx-libraries.md)");
  cmd->add_option("--process", flags->processes,
                  "A running worker's pid (repeatable): --library for every library it has "
                  "mapped");
  cmd->add_option("--arch", flags->arch,
                  "With --library or --process: the SMs to check for, e.g. 8.9,9.0 (default: "
                  "this node's GPUs)");
  cmd->add_flag("--repair", flags->repair,
                "Repair each --store first (stop kcached first): drop corrupt entries, rebuild "
                "listings, move an unopenable or unreadable store aside and keep what verifies");
  cmd->callback([flags, exit_code] { *exit_code = RunDoctor(*flags); });
}

}  // namespace kcache::cli
