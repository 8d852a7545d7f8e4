#include "daemon/cache/ptx_builds.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/target.h"
#include "engine/fatbin/library_plan.h"
#include "engine/fatbin/ptx_sass.h"
#include "engine/resolve/decide.h"
#include "spdlog/spdlog.h"

namespace kcache {

PtxBuilds::PtxBuilds(Options options, HealthCheckedTiers* tiers,
                     std::vector<const Toolkit*> toolkits, std::vector<CompileFlights*> flights,
                     Statistics* stats)
    : options_(options),
      tiers_(tiers),
      toolkits_(std::move(toolkits)),
      flights_(std::move(flights)),
      stats_(*stats) {
  if (!toolkits_.empty()) {
    queue_ = std::make_unique<BackgroundCompiles>(
        options_.queue, [this](const CompileJob& job, size_t toolkit) { BuildOne(job, toolkit); },
        &stats_,
        BackgroundCompiles::Counts{Statistic::kPtxBuildsQueued, Statistic::kPtxBuildsDropped},
        options_.queue_per_client);
  }
}

absl::StatusOr<PtxBuildQueued> PtxBuilds::Build(const PtxBuildRequest& request) {
  absl::StatusOr<PtxBuildQueued> queued = Queue(request);
  if (!queued.ok() && !absl::IsResourceExhausted(queued.status())) {
    stats_.Add(Statistic::kPtxBuildsRefused);
  } else if (queued.ok() && queued->state == PtxBuildQueued::State::kHeld) {
    stats_.Add(Statistic::kPtxBuildsHeld);
  }
  return queued;
}

absl::StatusOr<PtxBuildQueued> PtxBuilds::Queue(const PtxBuildRequest& request) {
  if (queue_ == nullptr || !options_.compile_allowed) {
    return absl::FailedPreconditionError(
        "this kcached compiles nothing (no toolkit is loaded, or it runs with --no-toolkit), so "
        "it builds no SASS from PTX; start it with a toolkit, or bake the library's SASS into "
        "the image with `kcache warm --library`");
  }
  if (!options_.compile_client_sources) {
    return absl::FailedPreconditionError(
        "this kcached builds nothing that clients send: its compile workers cannot be sandboxed "
        "on this machine (no Landlock or seccomp; see its start-up log or `kcache doctor`); bake "
        "the library's SASS with `kcache warm --library`, or start kcached with "
        "--allow-unsandboxed-compiles to accept the risk");
  }
  absl::string_view ptx = request.ptx;
  ptx = ptx.substr(0, ptx.find('\0'));  // as the driver reads it
  absl::StatusOr<Target> ptx_target = fatbin::PtxTextTarget(ptx);
  if (!ptx_target.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the module sent is not PTX: ", ptx_target.status().message()));
  }
  std::optional<Target> target = fatbin::SassTargetFor(
      *ptx_target, Target{TargetKind::kSass, request.device.sm, ArchVariant::kNone});
  if (!target.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PTX for ", ptx_target->ToString(), " does not run on ",
                     request.device.sm.ToString(), ": there is no SASS to build from it there"));
  }
  std::optional<size_t> toolkit = PickToolkit(toolkits_, request.device.driver, target->sm.arch());
  if (!toolkit.has_value()) {
    return absl::NotFoundError(absl::StrCat(
        "no loaded toolkit builds SASS for ", target->ToString(),
        request.device.driver != 0 ? absl::StrCat(" that driver ", request.device.driver, " loads")
                                   : ""));
  }
  const Toolkit& chosen = *toolkits_[*toolkit];
  if (absl::Status s =
          ValidateTarget(*target, chosen.supported_archs(), chosen.identity().DisplayName());
      !s.ok()) {
    return s;
  }
  PtxBuildQueued queued{fatbin::PtxModuleId(ptx, "", fatbin::PtxSassCompileOptions()), *target};
  if (HoldsSass(queued.module, *target, request.device.driver)) {
    queued.state = PtxBuildQueued::State::kHeld;
    return queued;
  }
  CompileJob job;
  job.ptx = std::string(ptx);
  job.id = queued.module;
  job.target = *target;
  const std::string& account = request.peer.empty() ? request.client : request.peer;
  job.spec.name = absl::StrCat("loaded by ", request.client.empty() ? "a client" : request.client,
                               request.peer.empty() ? "" : absl::StrCat(" (", request.peer, ")"));
  job.spec.options = fatbin::PtxSassCompileOptions();
  job.demand.client = account;
  switch (queue_->Add(std::move(job), *toolkit)) {
    case BackgroundCompiles::Added::kQueued:
      return queued;
    case BackgroundCompiles::Added::kAlreadyQueued:
      queued.state = PtxBuildQueued::State::kAlreadyQueued;
      return queued;
    case BackgroundCompiles::Added::kDropped:
      return absl::ResourceExhaustedError(
          "the queue of SASS builds from PTX is full (kcached --ptx-build-queue): this module "
          "is not built; a later load asks again");
    case BackgroundCompiles::Added::kClientBound:
      return absl::ResourceExhaustedError(absl::StrCat(
          "client '", account,
          "' has its share of the queue of SASS builds from PTX waiting already (kcached "
          "--ptx-build-queue-per-client): this module is not built; a later load asks again"));
  }
  return absl::InternalError("unknown queue answer");
}

bool PtxBuilds::HoldsSass(const KernelId& module, const Target& target, uint32_t driver) {
  for (size_t tier = 0; tier < tiers_->size(); ++tier) {
    absl::StatusOr<std::vector<ArtifactMeta>> metas = tiers_->ListArtifacts(tier, module);
    if (!metas.ok()) continue;
    for (const ArtifactMeta& meta : *metas) {
      if (meta.key.kind == ArtifactKind::kCubin && meta.key.target == target &&
          (driver == 0 || meta.min_driver <= driver)) {
        return true;
      }
    }
  }
  return false;
}

void PtxBuilds::BuildOne(const CompileJob& job, size_t toolkit) {
  // Stored, and the module's memory entries dropped, by the flight.
  CompileResult result = flights_[toolkit]->CompileOnce(job);
  if (!result.ok()) {
    stats_.Add(Statistic::kPtxBuildsFailed);
    spdlog::warn("SASS for {} from PTX module {} ({}) not built: {}", job.target.ToString(),
                 job.id.ShortHex(), job.spec.name, std::string(result.status().message()));
    return;
  }
  bool held = (*result)->from_store || (*result)->from_shared;
  stats_.Add(held ? Statistic::kPtxBuildsHeld : Statistic::kPtxBuildsBuilt);
}

}  // namespace kcache
