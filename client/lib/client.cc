// Client: the daemon first, through a circuit breaker; a local NVRTC compile when the daemon
// cannot answer (docs/client.md, "Failing open").
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/lib/api_convert.h"
#include "client/lib/circuit_breaker.h"
#include "client/lib/clock.h"
#include "client/lib/daemon_rpc.h"
#include "client/lib/fast_path.h"
#include "client/lib/known_kernel_ids.h"
#include "client/lib/many_calls.h"
#include "client/lib/startup_grace.h"
#include "client/lib/wire.h"
#include "core/environment.h"
#include "core/kernel_spec.h"
#include "kcache/kcache.h"

namespace kcache::client {
namespace {

int64_t MicrosSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               start)
      .count();
}

// The request for `source` on `device` as the fast path sends it: by the kernel id computed
// here (ComputeKernelId, the daemon's own function, or the one this process already knows for
// the very same spec: KnownKernelId), not by the source. The daemon keys its
// memory and stores by that id, so it serves the id exactly what it would serve the source,
// and a hit costs neither side the 10-100 KB of a source to copy, parse and hash. What the
// fast path does not serve goes over gRPC with the source in place of the id (ToWire), to be
// registered and compiled. InvalidArgument, without a round trip, for a spec the daemon would
// refuse (the same core limits): not compiled locally either.
absl::Status AskById(const KernelSource& source, const Device& device,
                     v1::ResolveRequest* request) {
  KernelSpec spec = ToCoreSpec(source);
  if (absl::Status s = ValidateSpecLimits(spec, "spec"); !s.ok()) return s;
  request->set_kernel_id(std::string(KnownKernelId(spec).Bytes()));
  ToWire(device, request->mutable_device());
  return absl::OkStatus();
}

// Whether the fast path's answer is the one to give: a kernel, or a request it refused as the
// daemon would over gRPC (InvalidArgument). Nothing, or another failure, goes over gRPC.
bool ServedFast(const FastPath::Answer& answer) {
  return answer && (answer->ok() || absl::IsInvalidArgument(answer->status()));
}

}  // namespace

std::string DefaultAddress() {
  std::string env = EnvValue("KCACHE_ADDRESS");
  return !env.empty() ? env : kDefaultAddress;
}

absl::Duration DefaultStartupGrace() {
  std::string env = EnvValue("KCACHE_STARTUP_GRACE");
  if (env.empty()) return absl::Seconds(5);
  absl::Duration grace;
  double seconds = 0;
  if (absl::ParseDuration(env, &grace) && grace >= absl::ZeroDuration()) return grace;
  if (absl::SimpleAtod(env, &seconds) && seconds >= 0) return absl::Seconds(seconds);
  return absl::Seconds(-1);
}

namespace {

absl::Status CheckOptions(const ClientOptions& o) {
  if (o.address.empty()) {
    return absl::InvalidArgumentError(
        "no daemon address; give one such as unix:///run/kcache/kcache.sock");
  }
  if (o.deadline <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the call deadline must be positive (default 2 s)");
  }
  if (o.wait_limit < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "the wait limit must not be negative (0 = the daemon's compile limit)");
  }
  if (o.startup_grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "the start-up grace must not be negative; $KCACHE_STARTUP_GRACE takes \"5s\", "
        "\"500ms\" or seconds (\"0\" = do not wait for kcached)");
  }
  if (o.breaker_failures < 0 || o.breaker_cooldown < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "breaker_failures and breaker_cooldown must not be negative (0 failures = never open)");
  }
  return absl::OkStatus();
}

// The fast-path socket these options ask for: "" for none.
std::string FastSocketOf(const ClientOptions& o) {
  if (!o.fast_path) return "";
  return o.fast_path_socket.empty() ? FastSocketFor(o.address) : o.fast_path_socket;
}

}  // namespace

// How a call to the daemon ended, besides its status.
enum class DaemonOutcome {
  kAsked,    // the daemon was asked: it answered, refused, failed or could not be reached
  kSkipped,  // the circuit kept the call from the daemon (the status is Unavailable, saying so)
  kBusy,     // the whole wait's limit passed while the daemon was still working on the call
};

struct Client::Impl {
  explicit Impl(ClientOptions o)
      : options(std::move(o)),
        daemon(options.address, /*connect_now=*/FastSocketOf(options).empty()),
        breaker(options.breaker_failures, options.breaker_cooldown),
        fast(FastSocketOf(options)),
        local(options.toolkit_root),
        grace(options.startup_grace),
        client_name(options.client_name.empty() ? absl::StrCat("pid-", getpid())
                                                : options.client_name) {
    fast.Begin();  // the daemon's hello arrives while the caller gets its kernels ready
  }

  absl::Duration SilenceFor(const CallOptions& call) const {
    return call.deadline > absl::ZeroDuration() ? call.deadline : options.deadline;
  }
  absl::Time DeadlineFor(const CallOptions& call) const { return Now() + SilenceFor(call); }
  WaitLimits LimitsFor(const CallOptions& call) const {
    return WaitLimits{SilenceFor(call), options.wait_limit};
  }
  // CallOptions::on_progress for a call whose entry k is the caller's kernel `sent[k]`
  // (none: a single kernel, index 0).
  static ProgressCallback ProgressFor(const CallOptions& call,
                                      const std::vector<size_t>* sent = nullptr) {
    if (!call.on_progress) return {};
    return [&call, sent](size_t k, const v1::ResolveProgress& progress) {
      call.on_progress(FromWire(progress, sent != nullptr ? (*sent)[k] : k));
    };
  }

  // The request as this client sends it.
  void Stamp(const CallOptions& call, v1::ResolveRequest& request) const {
    request.set_client(client_name);
    request.set_no_compile(!call.allow_daemon_compile);
    request.set_ptx_now(call.ptx_now);
    request.set_want_progress(true);
  }

  // Calls the daemon with `call` while it is not there yet and the start-up grace lasts;
  // then records the outcome in the breaker (a busy daemon is not a failing one) and says how
  // the call ended: kBusy or kAsked. `call` returns the status of one try.
  template <typename Call>
  absl::Status WithGrace(Call call, CallEnd* end, DaemonOutcome* outcome) {
    absl::Status status;
    do {
      daemon.RenewIfFailed();
      status = call();
    } while (*end == CallEnd::kUnreachable && grace.WaitAgain());
    if (*end != CallEnd::kUnreachable) grace.Contacted();
    bool busy = *end == CallEnd::kOverLimit;
    *outcome = busy ? DaemonOutcome::kBusy : DaemonOutcome::kAsked;
    if (busy || status.ok() || !IsDaemonFailure(status)) {
      breaker.RecordSuccess();
    } else {
      breaker.RecordFailure();
    }
    if (busy) {
      // The daemon was still working on it (a compile) when the whole wait's limit passed:
      // busy, not away. Not a reason to compile here: a herd of local compiles behind one
      // slow daemon compile is the worst outcome.
      return absl::DeadlineExceededError(absl::StrCat(
          status.message(),
          " (not compiled locally: the daemon is busy, not away; give the client a longer "
          "wait_limit, or ask with ptx_now for stored PTX at once)"));
    }
    return status;
  }

  // The answer of a call the circuit keeps from the daemon (DaemonOutcome::kSkipped).
  absl::Status CircuitOpen() const {
    return absl::UnavailableError(
        absl::StrCat("not calling kcached at ", options.address, ": the circuit is open after ",
                     options.breaker_failures, " consecutive failures; the next try is in ",
                     absl::FormatDuration(absl::Ceil(breaker.RetryIn(), absl::Milliseconds(1)))));
  }

  // One Resolve through the breaker; `*outcome` says how it ended besides its status. With
  // `source`, `request` asks by its id (AskById), and gRPC is sent the source itself.
  absl::StatusOr<FetchedKernel> CallDaemon(v1::ResolveRequest& request, const CallOptions& call,
                                           DaemonOutcome* outcome,
                                           const KernelSource* source = nullptr) {
    *outcome = DaemonOutcome::kAsked;
    if (!breaker.Allow()) {
      *outcome = DaemonOutcome::kSkipped;
      return CircuitOpen();
    }
    Stamp(call, request);
    // The in-pod fast path first; what it does not serve (or serves broken) goes over gRPC.
    if (FastPath::Answer answer = fast.Resolve(request, DeadlineFor(call)); ServedFast(answer)) {
      breaker.RecordSuccess();
      grace.Contacted();
      return *std::move(answer);
    }
    if (source != nullptr) ToWire(*source, request.mutable_spec());  // replaces the id
    CallEnd end = CallEnd::kFinished;
    absl::StatusOr<FetchedKernel> result;
    absl::Status status = WithGrace(
        [&] {
          result = daemon.Resolve(request, LimitsFor(call), &end, ProgressFor(call));
          return result.status();
        },
        &end, outcome);
    if (*outcome == DaemonOutcome::kBusy) return status;
    return result;
  }

  // When the daemon did not give a kernel, whether compiling here is the right answer.
  bool ShouldCompileLocally(const absl::Status& daemon_status, DaemonOutcome outcome,
                            const KernelSource& source, const Device& device,
                            const CallOptions& call) const {
    if (!options.local_compile_fallback) return false;
    if (outcome == DaemonOutcome::kSkipped) return true;
    if (outcome == DaemonOutcome::kBusy) return false;  // busy is not away (WithGrace)
    if (IsDaemonFailure(daemon_status)) return true;
    // A live daemon that has no artifact and cannot compile it (no toolkit there): the
    // kernel is within its declared range, so a local compile can still serve it.
    return daemon_status.code() == absl::StatusCode::kNotFound && call.allow_daemon_compile &&
           CheckArchRange(source, device).ok();
  }

  // What a kernel by source gets when the daemon did not give it: `daemon_status`, or a
  // compile here when ShouldCompileLocally says so.
  absl::StatusOr<FetchedKernel> FallBack(const absl::Status& daemon_status, DaemonOutcome outcome,
                                         const KernelSource& source, const Device& device,
                                         const CallOptions& call,
                                         std::chrono::steady_clock::time_point start) {
    if (!ShouldCompileLocally(daemon_status, outcome, source, device, call)) {
      return daemon_status;
    }
    absl::StatusOr<FetchedKernel> compiled = local.Compile(source, device);
    if (!compiled.ok()) {
      if (compiled.status().code() != absl::StatusCode::kFailedPrecondition) {
        return compiled.status();
      }
      return absl::Status(daemon_status.code(), absl::StrCat(daemon_status.message(),
                                                             "; the local compile fallback "
                                                             "failed too: ",
                                                             compiled.status().message()));
    }
    absl::StrAppend(&compiled->reason, " (",
                    outcome == DaemonOutcome::kSkipped ? "circuit open" : "kcached", ": ",
                    daemon_status.message(), ")");
    compiled->micros = MicrosSince(start);
    return compiled;
  }

  class Batch;  // one ResolveMany (below)

  ClientOptions options;
  DaemonConnection daemon;
  CircuitBreaker breaker;
  FastPath fast;
  LocalCompiler local;
  StartupGrace grace;
  std::string client_name;
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  return std::unique_ptr<Client>(new Client(std::make_unique<Impl>(std::move(options))));
}

const ClientOptions& Client::options() const { return impl_->options; }
BreakerState Client::breaker_state() const { return impl_->breaker.state(); }

absl::StatusOr<FetchedKernel> Client::Resolve(const KernelSource& source, const Device& device,
                                              const CallOptions& call) {
  auto start = std::chrono::steady_clock::now();
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  v1::ResolveRequest request;
  if (absl::Status s = AskById(source, device, &request); !s.ok()) return s;
  DaemonOutcome outcome;
  absl::StatusOr<FetchedKernel> served = impl_->CallDaemon(request, call, &outcome, &source);
  if (served.ok()) {
    served->micros = MicrosSince(start);
    return served;
  }
  return impl_->FallBack(served.status(), outcome, source, device, call, start);
}

absl::StatusOr<FetchedKernel> Client::ResolveById(absl::string_view hex_id, const Device& device,
                                                  const CallOptions& call) {
  auto start = std::chrono::steady_clock::now();
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  absl::StatusOr<KernelId> id = KernelId::FromHex(hex_id);
  if (!id.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", hex_id, "' is not a kernel id: give its 64 hex digits (see kcache ls)"));
  }
  v1::ResolveRequest request;
  request.set_kernel_id(std::string(id->Bytes()));
  ToWire(device, request.mutable_device());
  DaemonOutcome outcome;
  absl::StatusOr<FetchedKernel> served = impl_->CallDaemon(request, call, &outcome);
  if (served.ok()) served->micros = MicrosSince(start);
  return served;
}

absl::StatusOr<FetchedKernel> Client::ResolveByName(absl::string_view name, const Device& device,
                                                    const CallOptions& call) {
  auto start = std::chrono::steady_clock::now();
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  if (name.empty()) return absl::InvalidArgumentError("no kernel name given");
  v1::ResolveRequest request;
  request.set_kernel_name(std::string(name));
  ToWire(device, request.mutable_device());
  DaemonOutcome outcome;
  absl::StatusOr<FetchedKernel> served = impl_->CallDaemon(request, call, &outcome);
  if (served.ok()) served->micros = MicrosSince(start);
  return served;
}

namespace {

// The request for one kernel of a batch, or why there is none (checked as the single calls
// check it, without a round trip). A kernel by source is asked for by its id (AskById).
absl::Status RequestFor(const KernelRef& kernel, const Device& device,
                        v1::ResolveRequest* request) {
  switch (kernel.by) {
    case KernelRef::By::kSource:
      return AskById(kernel.source, device, request);
    case KernelRef::By::kId: {
      absl::StatusOr<KernelId> id = KernelId::FromHex(kernel.key);
      if (!id.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "'", kernel.key, "' is not a kernel id: give its 64 hex digits (see kcache ls)"));
      }
      request->set_kernel_id(std::string(id->Bytes()));
      break;
    }
    case KernelRef::By::kName:
      if (kernel.key.empty()) return absl::InvalidArgumentError("no kernel name given");
      request->set_kernel_name(kernel.key);
      break;
  }
  ToWire(device, request->mutable_device());
  return absl::OkStatus();
}

}  // namespace

// One Client::ResolveMany, step by step. Each kernel's answer goes to `on_result` once: the
// kernels that have no request, then those the fast path served, then the daemon's answers as
// they come, then the kernels by source that the daemon did not serve (FallBack).
class Client::Impl::Batch {
 public:
  // How one gRPC call of the batch ended.
  struct Ended {
    absl::Status status;
    DaemonOutcome outcome = DaemonOutcome::kAsked;
  };

  Batch(Impl& impl, const std::vector<KernelRef>& kernels, const Device& device,
        const CallOptions& call, const ResultCallback& on_result,
        std::chrono::steady_clock::time_point start)
      : impl_(impl),
        kernels_(kernels),
        device_(device),
        call_(call),
        on_result_(on_result),
        start_(start) {}

  // The requests, stamped, for the kernels that have one: requests[k] asks for kernel
  // (*asked)[k]. A kernel that has none gets its error now (RequestFor).
  std::vector<v1::ResolveRequest> Requests(std::vector<size_t>* asked) {
    std::vector<v1::ResolveRequest> requests;
    for (size_t i = 0; i < kernels_.size(); ++i) {
      v1::ResolveRequest request;
      if (absl::Status s = RequestFor(kernels_[i], device_, &request); !s.ok()) {
        on_result_(i, s);
        continue;
      }
      impl_.Stamp(call_, request);
      requests.push_back(std::move(request));
      asked->push_back(i);
    }
    return requests;
  }

  // Sends all `requests` (for the kernels `*asked`) to the in-pod fast path at once, pipelined
  // on its connection, and gives what it served. Returns the rest for gRPC, a kernel by source
  // asked for by its spec instead of its id (AskById), and leaves their kernels in `*asked`.
  std::vector<v1::ResolveRequest> NotServedFast(std::vector<v1::ResolveRequest> requests,
                                                std::vector<size_t>* asked) {
    std::vector<FastPath::Answer> fast = impl_.fast.ResolveMany(requests, impl_.DeadlineFor(call_));
    std::vector<v1::ResolveRequest> rest;
    std::vector<size_t> rest_asked;
    for (size_t k = 0; k < requests.size(); ++k) {
      size_t i = (*asked)[k];
      if (ServedFast(fast[k])) {
        if (fast[k]->ok()) (*fast[k])->micros = MicrosSince(start_);
        on_result_(i, *std::move(fast[k]));
        continue;
      }
      if (kernels_[i].by == KernelRef::By::kSource) {
        ToWire(kernels_[i].source, requests[k].mutable_spec());  // replaces the id
      }
      rest.push_back(std::move(requests[k]));
      rest_asked.push_back(i);
    }
    *asked = std::move(rest_asked);
    return rest;
  }

  // Runs `many` through the breaker and the start-up grace: each answer the daemon gives goes
  // to Answer as it comes; the entries it did not answer get how the call ended.
  Ended Run(const ManyCall& many) {
    std::vector<bool> answered(many.sent.size(), false);
    Ended ended = Send(many, &answered);
    for (size_t k = 0; k < many.sent.size(); ++k) {
      if (!answered[k]) NotAnswered(many.sent[k], ended);
    }
    return ended;
  }

  // Every entry of `many`, a call not sent, gets how an earlier call of the batch ended.
  void Skip(const ManyCall& many, const Ended& earlier) {
    for (size_t i : many.sent) NotAnswered(i, earlier);
  }

  // The kernels by source that the daemon did not serve, each given FallBack's answer (a
  // local compile, or why not). Called once the daemon's streams are read: compiling while
  // one streams would stall it.
  void FallBackLeft() {
    for (const Left& l : left_) {
      on_result_(l.index, impl_.FallBack(l.status, l.outcome, kernels_[l.index].source, device_,
                                         call_, start_));
    }
  }

 private:
  // A kernel by source kept for FallBackLeft.
  struct Left {
    size_t index;
    absl::Status status;
    DaemonOutcome outcome;
  };

  // Sends `many` unless the circuit is open; (*answered)[k] marks entry k's answer.
  Ended Send(const ManyCall& many, std::vector<bool>* answered) {
    if (!impl_.breaker.Allow()) return Ended{impl_.CircuitOpen(), DaemonOutcome::kSkipped};
    auto on_answer = [&](size_t k, absl::StatusOr<FetchedKernel> answer) {
      (*answered)[k] = true;
      Answer(many.sent[k], std::move(answer));
    };
    Ended ended;
    CallEnd end = CallEnd::kFinished;
    ended.status = impl_.WithGrace(
        [&] {
          return impl_.daemon.ResolveMany(many.request, impl_.LimitsFor(call_), on_answer, &end,
                                          Impl::ProgressFor(call_, &many.sent));
        },
        &end, &ended.outcome);
    return ended;
  }

  // The daemon's answer for kernel i: given now, or kept for a local compile.
  void Answer(size_t i, absl::StatusOr<FetchedKernel> answer) {
    if (answer.ok()) {
      answer->micros = MicrosSince(start_);
      on_result_(i, std::move(answer));
    } else if (kernels_[i].by == KernelRef::By::kSource &&
               impl_.ShouldCompileLocally(answer.status(), DaemonOutcome::kAsked,
                                          kernels_[i].source, device_, call_)) {
      left_.push_back(Left{i, answer.status(), DaemonOutcome::kAsked});
    } else {
      on_result_(i, answer.status());
    }
  }

  // Kernel i got no answer from a call that ended as `ended`: a kernel by source is kept for
  // FallBackLeft, another gets the call's status now.
  void NotAnswered(size_t i, const Ended& ended) {
    if (kernels_[i].by == KernelRef::By::kSource) {
      left_.push_back(Left{i, ended.status, ended.outcome});
    } else {
      on_result_(i, ended.status);
    }
  }

  Impl& impl_;
  const std::vector<KernelRef>& kernels_;
  const Device& device_;
  const CallOptions& call_;
  const ResultCallback& on_result_;
  const std::chrono::steady_clock::time_point start_;
  std::vector<Left> left_;
};

void Client::ResolveMany(const std::vector<KernelRef>& kernels, const Device& device,
                         const ResultCallback& on_result, const CallOptions& call) {
  auto start = std::chrono::steady_clock::now();
  if (absl::Status s = CheckDevice(device); !s.ok()) {
    for (size_t i = 0; i < kernels.size(); ++i) on_result(i, s);
    return;
  }
  Impl::Batch batch(*impl_, kernels, device, call, on_result, start);
  std::vector<size_t> asked;  // requests[k] asks for kernels[asked[k]]
  std::vector<v1::ResolveRequest> requests = batch.Requests(&asked);
  requests = batch.NotServedFast(std::move(requests), &asked);
  // The daemon gets the rest in calls within its bounds, one after another. After a call that
  // failed (the circuit, a busy daemon, a daemon failure) the later ones are not sent: their
  // entries get how it ended.
  std::optional<Impl::Batch::Ended> failed;
  for (const ManyCall& many : PackManyCalls(std::move(requests), asked)) {
    if (failed) {
      batch.Skip(many, *failed);
      continue;
    }
    Impl::Batch::Ended ended = batch.Run(many);
    if (IsDaemonFailure(ended.status) || ended.outcome == DaemonOutcome::kBusy) failed = ended;
  }
  batch.FallBackLeft();
}

std::vector<absl::StatusOr<FetchedKernel>> Client::ResolveMany(
    const std::vector<KernelRef>& kernels, const Device& device, const CallOptions& call) {
  std::vector<absl::StatusOr<FetchedKernel>> results(kernels.size(),
                                                     absl::InternalError("no result"));
  ResolveMany(
      kernels, device,
      [&](size_t i, absl::StatusOr<FetchedKernel> result) { results[i] = std::move(result); },
      call);
  return results;
}

absl::StatusOr<DaemonStats> Client::Stat(const CallOptions& call) {
  return impl_->daemon.Stat(impl_->DeadlineFor(call));
}

absl::StatusOr<std::vector<ListedKernel>> Client::List(const CallOptions& call) {
  return impl_->daemon.List(impl_->DeadlineFor(call));
}

absl::StatusOr<ExportedManifest> Client::ExportManifest(const CallOptions& call) {
  return impl_->daemon.ExportManifest(impl_->DeadlineFor(call));
}

absl::StatusOr<WarmTotals> Client::Warm(const std::vector<KernelSource>& kernels,
                                        const std::vector<std::string>& targets, int jobs,
                                        absl::Duration deadline,
                                        const std::function<void(const WarmJobEvent&)>& on_job) {
  absl::Time until = deadline > absl::ZeroDuration() ? Now() + deadline : absl::InfiniteFuture();
  // The kernels go in batches whose request fits the daemon's 4 MiB receive limit (a spec is
  // at most kMaxSpecBytes, so one always fits); the events count jobs across all batches.
  WarmTotals totals;
  uint32_t jobs_before = 0;
  size_t next = 0;
  do {
    v1::WarmRequest request;
    for (const std::string& t : targets) request.add_targets(t);
    request.set_jobs(static_cast<uint32_t>(std::max(jobs, 0)));
    size_t bytes = request.ByteSizeLong();
    for (; next < kernels.size(); ++next) {
      v1::KernelSpec spec;
      ToWire(kernels[next], &spec);
      size_t size = spec.ByteSizeLong() + 8;  // + the field's tag and length
      if (request.kernels_size() > 0 && bytes + size > kMaxUnaryMessageBytes) break;
      bytes += size;
      *request.add_kernels() = std::move(spec);
    }
    uint32_t jobs_after = static_cast<uint32_t>((kernels.size() - next) * targets.size());
    absl::StatusOr<WarmTotals> batch =
        impl_->daemon.Warm(request, until, [&](const WarmJobEvent& event) {
          if (!on_job) return;
          WarmJobEvent counted = event;
          counted.done += jobs_before;
          counted.total += jobs_before + jobs_after;
          on_job(counted);
        });
    if (!batch.ok()) return batch.status();
    totals.built += batch->built;
    totals.cached += batch->cached;
    totals.skipped += batch->skipped;
    totals.failed += batch->failed;
    totals.wall_micros += batch->wall_micros;
    jobs_before += batch->built + batch->cached + batch->skipped + batch->failed;
  } while (next < kernels.size());
  return totals;
}

}  // namespace kcache::client
