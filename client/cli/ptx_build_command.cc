#include "client/cli/ptx_build_command.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/cli/output.h"
#include "core/environment.h"
#include "core/file_io.h"
#include "core/kernel_spec.h"
#include "core/protocol.h"
#include "core/target.h"
#include "kcache/v1/kcache.grpc.pb.h"

namespace kcache::cli {
namespace {

// kcached answers at once (the build runs after the answer): a caller never waits longer.
constexpr auto kDeadline = std::chrono::seconds(5);

struct PtxBuildFlags {
  std::string server;
  std::string device;
  uint32_t driver = 0;
  std::string client;
  bool quiet = false;
};

const char* StateText(v1::PtxBuildState state) {
  switch (state) {
    case v1::PTX_BUILD_STATE_QUEUED:
      return "queued to build";
    case v1::PTX_BUILD_STATE_ALREADY_QUEUED:
      return "already queued to build";
    case v1::PTX_BUILD_STATE_HELD:
      return "held already";
    default:
      return "in an unknown state";
  }
}

int BuildFromPtx(const PtxBuildFlags& flags) {
  bool say = !flags.quiet || EnvValue("KCACHE_LOG") == "1";
  auto fail = [&](absl::string_view message, int code) {
    return say ? Fail(absl::StrCat("kcache cuda-build-ptx: ", message), code) : code;
  };
  std::string server = flags.server.empty() ? EnvValue("KCACHE_SERVER") : flags.server;
  if (server.empty()) return fail("no kcached: pass --server or set KCACHE_SERVER", kExitBadInput);
  absl::StatusOr<Sm> sm = ParseSm(flags.device);
  if (!sm.ok()) return fail(absl::StrCat("--device: ", sm.status().message()), kExitBadInput);
  absl::StatusOr<std::string> ptx = ReadToEnd(STDIN_FILENO, kMaxBuildPtxBytes);
  if (absl::IsResourceExhausted(ptx.status())) {
    return fail(absl::StrCat("the PTX module is over ", kMaxBuildPtxBytes,
                             " bytes, more than kcached takes: bake its SASS with `kcache warm "
                             "--library`"),
                kExitBadInput);
  }
  if (!ptx.ok()) return fail(absl::StrCat("standard input: ", ptx.status().message()), kExitFailed);
  if (ptx->empty()) return fail("no PTX on standard input", kExitBadInput);
  v1::BuildFromPtxRequest request;
  request.set_ptx(*std::move(ptx));
  request.mutable_device()->set_sm_major(static_cast<uint32_t>(sm->major));
  request.mutable_device()->set_sm_minor(static_cast<uint32_t>(sm->minor));
  request.mutable_device()->set_driver_version(flags.driver);
  request.set_client(flags.client);
  std::unique_ptr<v1::KernelCache::Stub> stub =
      v1::KernelCache::NewStub(grpc::CreateChannel(server, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kDeadline);
  v1::BuildFromPtxResponse response;
  grpc::Status status = stub->BuildFromPtx(&context, request, &response);
  if (!status.ok()) {
    return fail(
        absl::StrCat("kcached at ", server, ": ", status.error_message()),
        status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? kExitBadInput : kExitFailed);
  }
  absl::StatusOr<KernelId> module = KernelId::FromBytes(response.module_id());
  if (say) {
    std::fprintf(stderr, "kcache: cuda: SASS for %s from PTX module %s: %s by kcached at %s\n",
                 response.target().c_str(),
                 module.ok() ? module->ShortHex().c_str() : "(unreadable id)",
                 StateText(response.state()), server.c_str());
  }
  return kExitOk;
}

}  // namespace

void RegisterPtxBuildCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<PtxBuildFlags>();
  CLI::App* cmd = app.add_subcommand(
      "cuda-build-ptx",
      "ask kcached to build, for the next load, the SASS for a GPU from the PTX module on "
      "standard input (docs/ptx-libraries.md); run by libkcache-cuda.so, not by hand");
  cmd->group("");
  cmd->add_option("--server", flags->server, "kcached address (default $KCACHE_SERVER)");
  cmd->add_option("--device", flags->device, "the GPU's compute capability, e.g. 8.6")->required();
  cmd->add_option("--driver", flags->driver, "the CUDA driver's version, e.g. 13000 (0: unknown)");
  cmd->add_option(
      "--client", flags->client,
      "who asks, in words, for kcached's logs (its queue share is this process's user)");
  cmd->add_flag("--quiet", flags->quiet,
                "print nothing (errors included) unless KCACHE_LOG=1; the exit code still tells");
  cmd->callback([flags, exit_code] { *exit_code = BuildFromPtx(*flags); });
}

}  // namespace kcache::cli
