#include "client/lib/daemon_rpc.h"

#include <grpc/grpc.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/lib/clock.h"
#include "client/lib/wire.h"
#include "core/artifact.h"
#include "core/protocol.h"

namespace kcache::client {
namespace {

// gRPC is initialized once and never shut down by libkcache: with gRPC 1.51 the full shutdown
// that runs when the last gRPC object goes away can block for ~10 s, and a worker must not
// stall because it dropped its Client.
void KeepGrpcInitialized() {
  static const bool initialized = [] {
    grpc_init();
    return true;
  }();
  (void)initialized;
}

std::shared_ptr<grpc::Channel> NewChannel(const std::string& address) {
  KeepGrpcInitialized();
  grpc::ChannelArguments args;
  // A restarted daemon is found within a second, not after gRPC's default back-off (up to
  // two minutes). The circuit breaker decides how often the daemon is tried at all.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // This one is also how long one connection attempt may wait for the daemon's SETTINGS
  // frame. A busy daemon (a herd of clients starting at once on a few cores) may take longer
  // than a back-off step to answer: the attempt must not give up before the call's deadline
  // does ("connection attempt timed out before receiving SETTINGS frame"). A daemon that is
  // away refuses the connection at once, whatever this says.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 20000);
  return grpc::CreateCustomChannel(GrpcTarget(address), grpc::InsecureChannelCredentials(), args);
}

void SetDeadline(grpc::ClientContext* context, absl::Time deadline) {
  if (deadline != absl::InfiniteFuture()) context->set_deadline(absl::ToChronoTime(deadline));
}

// A call the daemon refused at one of its bounds (RESOURCE_EXHAUSTED with
// kRetryAfterMetadataKey) waits that long, with jitter, and is tried again while its deadline
// allows: true when the caller should try again.
bool WaitIfBusy(const absl::Status& status, const grpc::ClientContext& context,
                absl::Time deadline) {
  if (status.code() != absl::StatusCode::kResourceExhausted) return false;
  const auto& trailers = context.GetServerTrailingMetadata();
  auto it = trailers.find(kRetryAfterMetadataKey);
  int millis = 0;
  if (it == trailers.end() ||
      !absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &millis) ||
      millis <= 0) {
    return false;
  }
  thread_local std::minstd_rand random(static_cast<unsigned>(getpid()) ^
                                       static_cast<unsigned>(absl::GetCurrentTimeNanos()));
  absl::Duration wait = absl::Milliseconds(std::min(millis, 5000)) *
                        (1 + std::uniform_real_distribution<double>(0, 1)(random));
  if (Now() + wait >= deadline) return false;
  absl::SleepFor(wait);
  return true;
}

// Whether the daemon sent kAcceptedMetadataKey: it took the call and was working on it.
// Only after Finish (which receives the initial metadata if nothing else did).
bool Accepted(const grpc::ClientContext& context) {
  return context.GetServerInitialMetadata().count(kAcceptedMetadataKey) > 0;
}

// When a watched call is given up at the latest: its whole limit, when one is set.
absl::Time UntilOf(const WaitLimits& limits, absl::Time start) {
  return limits.whole > absl::ZeroDuration() ? start + limits.whole : absl::InfiniteFuture();
}

// The call heard from the daemon: `progress` (optional) may state the daemon's compile limit,
// which bounds the whole call when the caller set no limit of its own.
void Heard(CallWatchdog::Watch& watch, const WaitLimits& limits, absl::Time start,
           const v1::ResolveProgress* progress) {
  absl::Time now = Now();
  absl::Time until = absl::InfiniteFuture();
  if (progress != nullptr && limits.whole <= absl::ZeroDuration() &&
      progress->compile_limit_seconds() > 0) {
    until = start + absl::Seconds(progress->compile_limit_seconds()) + limits.silence;
  }
  watch.Set(now + limits.silence, until);
}

// The status of a call the watchdog gave up on (OK when it did not), with *end set to why.
// `context`: the call's, after Finish.
absl::Status GivenUp(WatchFired fired, const WaitLimits& limits, const grpc::ClientContext& context,
                     CallEnd* end) {
  switch (fired) {
    case WatchFired::kNo:
      return absl::OkStatus();
    case WatchFired::kSilent:
      *end = CallEnd::kSilent;
      return absl::DeadlineExceededError(absl::StrCat(
          "nothing came for ", absl::FormatDuration(limits.silence),
          Accepted(context) ? " after it had accepted the call (no answer and no progress: is "
                              "it stopped or overloaded?)"
                            : ""));
    case WatchFired::kOverLimit:
      *end = CallEnd::kOverLimit;
      return absl::DeadlineExceededError(
          "it was still working on the call (compiling) when the whole wait's limit passed");
  }
  return absl::OkStatus();
}

absl::Status BrokenStream(absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat("kcached sent a broken Resolve stream: ", what, "; the artifact was discarded"));
}

absl::Status CheckComplete(bool have_header, const v1::ArtifactHeader& header,
                           const FetchedKernel& kernel);

// Starts reassembling the artifact `header` announces.
absl::Status TakeHeader(const v1::ArtifactHeader& header, bool* have_header, FetchedKernel* kernel,
                        v1::ArtifactHeader* kept) {
  if (*have_header) return BrokenStream("a second header");
  if (header.size() > kMaxArtifactBytes) {
    return BrokenStream(absl::StrCat("the header announces ", header.size(),
                                     " bytes, more than the ", kMaxArtifactBytes, "-byte limit"));
  }
  *have_header = true;
  *kept = header;
  *kernel = FromWireHeader(header);
  kernel->bytes.reserve(header.size());
  return absl::OkStatus();
}

// Appends one streamed chunk to the artifact being reassembled.
absl::Status TakeChunk(absl::string_view chunk, bool have_header, FetchedKernel* kernel,
                       const v1::ArtifactHeader& header) {
  if (!have_header) return BrokenStream("a chunk before the header");
  if (kernel->bytes.size() + chunk.size() > header.size()) {
    return BrokenStream(absl::StrCat("more bytes than the ", header.size(), " announced"));
  }
  kernel->bytes.append(chunk.data(), chunk.size());
  return absl::OkStatus();
}

absl::Status TakePart(const v1::ResolveResponse& part, bool* have_header, FetchedKernel* kernel,
                      v1::ArtifactHeader* header) {
  if (part.has_header()) return TakeHeader(part.header(), have_header, kernel, header);
  return TakeChunk(part.chunk(), *have_header, kernel, *header);
}

// Reads a stream's parts into `take` until it ends or `take` refuses one; then cancels the call,
// drains what is left (so that Finish returns) and returns the refusal.
template <typename Part, typename Take>
absl::Status ReadAll(grpc::ClientReader<Part>& reader, grpc::ClientContext& context, Take take) {
  Part part;
  while (reader.Read(&part)) {
    if (absl::Status refused = take(part); !refused.ok()) {
      context.TryCancel();
      while (reader.Read(&part)) {
      }
      return refused;
    }
  }
  return absl::OkStatus();
}

// Reassembles the interleaved answers of a ResolveMany: each entry's error, or its header and
// then its chunks, one entry at a time.
class ManyAnswers {
 public:
  ManyAnswers(size_t entries, const ResolveManyCallback& on_answer,
              const ProgressCallback& on_progress, absl::Time start)
      : answered_(entries, false),
        heard_(entries, start),
        on_answer_(on_answer),
        on_progress_(on_progress) {}

  absl::Status Take(const v1::ResolveManyResponse& part) {
    uint32_t index = part.index();
    if (index >= answered_.size() || answered_[index]) {
      return BrokenStream(absl::StrCat("an answer for entry ", index, ", which is not awaited"));
    }
    heard_[index] = Now();
    if (part.has_progress()) {
      if (open_) return BrokenStream("progress inside an answer");
      if (on_progress_) on_progress_(index, part.progress());
      return absl::OkStatus();
    }
    if (open_ && index != open_index_) {
      return BrokenStream(
          absl::StrCat("entry ", index, "'s answer inside entry ", open_index_, "'s"));
    }
    switch (part.part_case()) {
      case v1::ResolveManyResponse::kError: {
        if (open_) return BrokenStream("an error after a header");
        Answered(index, FromGrpc(grpc::Status(static_cast<grpc::StatusCode>(part.error().code()),
                                              part.error().message())));
        return absl::OkStatus();
      }
      case v1::ResolveManyResponse::kHeader:
        if (absl::Status s = TakeHeader(part.header(), &open_, &kernel_, &header_); !s.ok()) {
          return s;
        }
        open_index_ = index;
        break;
      case v1::ResolveManyResponse::kChunk:
        if (absl::Status s = TakeChunk(part.chunk(), open_, &kernel_, header_); !s.ok()) return s;
        break;
      default:
        return BrokenStream(absl::StrCat("an empty answer for entry ", index));
    }
    if (kernel_.bytes.size() < header_.size()) return absl::OkStatus();
    if (absl::Status s = CheckComplete(true, header_, kernel_); !s.ok()) return s;
    open_ = false;
    Answered(index, std::move(kernel_));
    kernel_ = FetchedKernel();
    return absl::OkStatus();
  }

  // A header whose chunks did not all come.
  bool open() const { return open_; }

  // When the first entry not yet answered heard from the daemon last (InfiniteFuture: none
  // is left).
  absl::Time OldestHeard() const {
    absl::Time oldest = absl::InfiniteFuture();
    for (size_t i = 0; i < answered_.size(); ++i) {
      if (!answered_[i]) oldest = std::min(oldest, heard_[i]);
    }
    return oldest;
  }

 private:
  void Answered(uint32_t index, absl::StatusOr<FetchedKernel> answer) {
    answered_[index] = true;
    on_answer_(index, std::move(answer));
  }

  std::vector<bool> answered_;
  std::vector<absl::Time> heard_;  // per entry: when the daemon last sent something for it
  const ResolveManyCallback& on_answer_;
  const ProgressCallback& on_progress_;
  bool open_ = false;
  uint32_t open_index_ = 0;
  v1::ArtifactHeader header_;
  FetchedKernel kernel_;
};

absl::Status CheckComplete(bool have_header, const v1::ArtifactHeader& header,
                           const FetchedKernel& kernel) {
  if (!have_header) return BrokenStream("no header");
  if (kernel.bytes.size() != header.size()) {
    return BrokenStream(absl::StrCat("got ", kernel.bytes.size(), " of ", header.size(), " bytes"));
  }
  uint64_t checksum = PayloadChecksum(kernel.bytes);
  if (checksum != header.checksum()) {
    return BrokenStream(absl::StrCat("XXH3-64 checksum ", absl::Hex(checksum, absl::kZeroPad16),
                                     " of ", kernel.bytes.size(), " bytes does not match ",
                                     absl::Hex(header.checksum(), absl::kZeroPad16),
                                     " in the header"));
  }
  return absl::OkStatus();
}

}  // namespace

DaemonConnection::DaemonConnection(std::string address, bool connect_now)
    : address_(std::move(address)) {
  if (!connect_now) return;  // made by the first call: gRPC's start-up is milliseconds
  absl::MutexLock lock(&mu_);
  MakeChannel();
  channel_->GetState(/*try_to_connect=*/true);  // without waiting
}

void DaemonConnection::MakeChannel() {
  channel_ = NewChannel(address_);
  stub_ = std::make_shared<v1::KernelCache::Stub>(channel_);
}

std::shared_ptr<v1::KernelCache::Stub> DaemonConnection::stub() {
  absl::MutexLock lock(&mu_);
  if (channel_ == nullptr) MakeChannel();
  return stub_;
}

void DaemonConnection::RenewIfFailed() {
  absl::MutexLock lock(&mu_);
  if (channel_ == nullptr || channel_->GetState(false) != GRPC_CHANNEL_TRANSIENT_FAILURE) return;
  MakeChannel();
}

CallEnd DaemonConnection::Ended(const grpc::ClientContext& context, const absl::Status& finished) {
  if (!absl::IsUnavailable(finished) || Accepted(context)) return CallEnd::kFinished;
  absl::MutexLock lock(&mu_);
  return channel_->GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_READY ? CallEnd::kUnreachable
                                                                            : CallEnd::kFinished;
}

absl::Status DaemonConnection::Described(const absl::Status& status) const {
  if (status.ok() || !IsDaemonFailure(status)) return status;
  std::string hint;
  if (status.code() == absl::StatusCode::kUnavailable) {
    hint = "; is kcached running there? (start it, or pass another address)";
  } else if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    hint = "; the daemon did not answer in time";
  }
  return absl::Status(status.code(),
                      absl::StrCat("kcached at ", address_, ": ", status.message(), hint));
}

absl::StatusOr<FetchedKernel> DaemonConnection::Resolve(const v1::ResolveRequest& request,
                                                        const WaitLimits& limits, CallEnd* end,
                                                        const ProgressCallback& on_progress) {
  absl::Time start = Now();
  while (true) {
    grpc::ClientContext context;
    std::unique_ptr<CallWatchdog::Watch> watch =
        watchdog_.Start(&context, Now() + limits.silence, UntilOf(limits, start));
    std::shared_ptr<v1::KernelCache::Stub> s = stub();
    std::unique_ptr<grpc::ClientReader<v1::ResolveResponse>> reader = s->Resolve(&context, request);
    v1::ArtifactHeader header;
    FetchedKernel kernel;
    bool have_header = false;
    absl::Status broken = ReadAll(*reader, context, [&](const v1::ResolveResponse& part) {
      Heard(*watch, limits, start, part.has_progress() ? &part.progress() : nullptr);
      if (part.has_progress()) {
        if (have_header) return BrokenStream("progress inside the answer");
        if (on_progress) on_progress(0, part.progress());
        return absl::OkStatus();
      }
      return TakePart(part, &have_header, &kernel, &header);
    });
    absl::Status finished = FromGrpc(reader->Finish());
    *end = Ended(context, finished);
    if (absl::Status s = GivenUp(watch->fired(), limits, context, end); !s.ok()) {
      return Described(s);
    }
    if (!broken.ok()) return Described(broken);
    if (WaitIfBusy(finished, context, start + limits.silence)) continue;
    if (!finished.ok()) return Described(finished);
    if (absl::Status s = CheckComplete(have_header, header, kernel); !s.ok()) return Described(s);
    return kernel;
  }
}

absl::Status DaemonConnection::ResolveMany(const v1::ResolveManyRequest& request,
                                           const WaitLimits& limits,
                                           const ResolveManyCallback& on_answer, CallEnd* end,
                                           const ProgressCallback& on_progress) {
  absl::Time start = Now();
  while (true) {
    grpc::ClientContext context;
    std::unique_ptr<CallWatchdog::Watch> watch =
        watchdog_.Start(&context, Now() + limits.silence, UntilOf(limits, start));
    std::shared_ptr<v1::KernelCache::Stub> s = stub();
    std::unique_ptr<grpc::ClientReader<v1::ResolveManyResponse>> reader =
        s->ResolveMany(&context, request);
    ManyAnswers answers(static_cast<size_t>(request.kernels_size()), on_answer, on_progress, Now());
    bool any = false;
    absl::Status broken = ReadAll(*reader, context, [&](const v1::ResolveManyResponse& part) {
      any = true;
      absl::Status taken = answers.Take(part);
      Heard(*watch, limits, start, part.has_progress() ? &part.progress() : nullptr);
      watch->Set(answers.OldestHeard() + limits.silence, absl::InfiniteFuture());
      return taken;
    });
    absl::Status finished = FromGrpc(reader->Finish());
    *end = Ended(context, finished);
    if (absl::Status s = GivenUp(watch->fired(), limits, context, end); !s.ok()) {
      return Described(s);
    }
    if (!broken.ok()) return Described(broken);
    if (!any && WaitIfBusy(finished, context, start + limits.silence)) continue;
    if (!finished.ok()) return Described(finished);
    if (answers.open()) return Described(BrokenStream("the stream ended inside an artifact"));
    return absl::OkStatus();
  }
}

absl::StatusOr<DaemonStats> DaemonConnection::Stat(absl::Time deadline) {
  grpc::ClientContext context;
  SetDeadline(&context, deadline);
  v1::StatResponse response;
  absl::Status s = FromGrpc(stub()->Stat(&context, v1::StatRequest(), &response));
  if (!s.ok()) return Described(s);
  DaemonStats stats;
  for (const v1::Counter& c : response.counters()) {
    stats.counters.push_back({c.name(), c.help(), c.value()});
  }
  stats.store_artifacts = response.store_artifacts();
  stats.store_bytes = response.store_bytes();
  stats.memory_bytes = response.memory_bytes();
  stats.memory_entries = response.memory_entries();
  stats.toolkits.assign(response.toolkits().begin(), response.toolkits().end());
  stats.uptime_seconds = response.uptime_seconds();
  stats.redis_door = response.redis_door();
  for (const v1::UncachedOption& option : response.uncached_options()) {
    stats.uncached_options.push_back({option.reason(), option.option(), option.count()});
  }
  return stats;
}

absl::StatusOr<std::vector<ListedKernel>> DaemonConnection::List(absl::Time deadline) {
  // A page at a time (about 1 MiB each), so that no store is too large to list; a kcached
  // older than paging answers every kernel in one page with no next.
  std::vector<ListedKernel> kernels;
  v1::ListRequest request;
  request.set_paged(true);
  do {
    v1::ListResponse response;
    absl::Status s;
    while (true) {
      grpc::ClientContext context;
      SetDeadline(&context, deadline);
      s = FromGrpc(stub()->List(&context, request, &response));
      if (!WaitIfBusy(s, context, deadline)) break;
    }
    if (!s.ok()) return Described(s);
    if (!response.next_page_after().empty() && response.next_page_after() <= request.page_after()) {
      return absl::DataLossError("kcached's kernel listing went backwards; listing stopped");
    }
    request.set_page_after(response.next_page_after());
    for (const v1::ListedKernel& k : response.kernels()) {
      ListedKernel out;
      out.kernel_id = absl::BytesToHexString(k.kernel_id());
      out.name = k.name();
      out.min_arch = static_cast<int>(k.min_arch());
      out.max_arch = static_cast<int>(k.max_arch());
      for (const v1::ListedArtifact& a : k.artifacts()) {
        out.artifacts.push_back(
            {FromWire(a.kind()), a.target(), a.toolkit(), a.size(), FromWire(a.tier())});
      }
      kernels.push_back(std::move(out));
    }
  } while (!request.page_after().empty());
  std::stable_sort(kernels.begin(), kernels.end(),
                   [](const ListedKernel& a, const ListedKernel& b) { return a.name < b.name; });
  return kernels;
}

absl::StatusOr<ExportedManifest> DaemonConnection::ExportManifest(absl::Time deadline) {
  v1::ExportManifestResponse response;
  absl::Status s;
  while (true) {
    grpc::ClientContext context;
    SetDeadline(&context, deadline);
    s = FromGrpc(stub()->ExportManifest(&context, v1::ExportManifestRequest(), &response));
    if (!WaitIfBusy(s, context, deadline)) break;
  }
  if (!s.ok()) return Described(s);
  return ExportedManifest{response.manifest_yaml(), response.kernels()};
}

absl::StatusOr<WarmTotals> DaemonConnection::Warm(
    const v1::WarmRequest& request, absl::Time deadline,
    const std::function<void(const WarmJobEvent&)>& on_job) {
  WarmTotals totals;
  bool have_summary = false;
  absl::Status s;
  while (true) {  // a refusal at a bound streamed nothing: trying again repeats no job
    grpc::ClientContext context;
    SetDeadline(&context, deadline);
    std::unique_ptr<grpc::ClientReader<v1::WarmProgress>> reader = stub()->Warm(&context, request);
    v1::WarmProgress progress;
    while (reader->Read(&progress)) {
      if (progress.has_job()) {
        const v1::WarmJobDone& j = progress.job();
        WarmJobEvent event{j.kernel_name(), j.target(), j.outcome(),
                           j.micros(),      j.bytes(),  {j.kinds().begin(), j.kinds().end()},
                           j.message(),     j.done(),   j.total()};
        if (on_job) on_job(event);
      } else if (progress.has_summary()) {
        const v1::WarmSummary& summary = progress.summary();
        totals = {summary.built(), summary.cached(), summary.skipped(), summary.failed(),
                  summary.wall_micros()};
        have_summary = true;
      }
    }
    s = FromGrpc(reader->Finish());
    if (!WaitIfBusy(s, context, deadline)) break;
  }
  if (!s.ok()) return Described(s);
  if (!have_summary) {
    return absl::DataLossError(
        absl::StrCat("kcached at ", address_, " ended the Warm stream without a summary"));
  }
  return totals;
}

}  // namespace kcache::client
