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
#include "client/lib/circuit_breaker.h"
#include "client/lib/clock.h"
#include "client/lib/convert.h"
#include "client/lib/daemon_rpc.h"
#include "client/lib/fast_path.h"
#include "client/lib/known_kernel_ids.h"
#include "client/lib/startup_grace.h"
#include "client/lib/wire.h"
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

}  // namespace

std::string DefaultAddress() {
  const char* env = std::getenv("KCACHE_ADDRESS");
  return env != nullptr && *env != '\0' ? env : kDefaultAddress;
}

absl::Duration DefaultStartupGrace() {
  const char* env = std::getenv("KCACHE_STARTUP_GRACE");
  if (env == nullptr || *env == '\0') return absl::Seconds(5);
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
    } while (end->unreachable && grace.WaitAgain());
    if (!end->unreachable) grace.Contacted();
    *outcome = end->over_limit ? DaemonOutcome::kBusy : DaemonOutcome::kAsked;
    if (end->over_limit || status.ok() || !IsDaemonFailure(status)) {
      breaker.RecordSuccess();
    } else {
      breaker.RecordFailure();
    }
    if (end->over_limit) {
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
    if (FastPath::Answer answer = fast.Resolve(request, DeadlineFor(call));
        answer && (answer->ok() || answer->status().code() == absl::StatusCode::kInvalidArgument)) {
      breaker.RecordSuccess();
      grace.Contacted();
      return *std::move(answer);
    }
    if (source != nullptr) ToWire(*source, request.mutable_spec());  // replaces the id
    CallEnd end;
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

void Client::ResolveMany(const std::vector<KernelRef>& kernels, const Device& device,
                         const ResultCallback& on_result, const CallOptions& call) {
  auto start = std::chrono::steady_clock::now();
  Impl& impl = *impl_;
  if (absl::Status s = CheckDevice(device); !s.ok()) {
    for (size_t i = 0; i < kernels.size(); ++i) on_result(i, s);
    return;
  }
  std::vector<v1::ResolveRequest> requests;
  std::vector<size_t> asked;  // requests[k] is for kernels[asked[k]]
  for (size_t i = 0; i < kernels.size(); ++i) {
    v1::ResolveRequest request;
    if (absl::Status s = RequestFor(kernels[i], device, &request); !s.ok()) {
      on_result(i, s);
      continue;
    }
    impl.Stamp(call, request);
    requests.push_back(std::move(request));
    asked.push_back(i);
  }
  // The in-pod fast path first, all of them pipelined on its connection; what it does not
  // serve goes to the daemon over gRPC.
  std::vector<FastPath::Answer> fast = impl.fast.ResolveMany(requests, impl.DeadlineFor(call));
  // The entries to ask the daemon for, in calls of at most kMaxResolveManyEntries entries and
  // kMaxUnaryMessageBytes bytes; sent[k] is the index in `kernels` of a call's entry k.
  std::vector<v1::ResolveManyRequest> calls;
  std::vector<std::vector<size_t>> sent;
  size_t call_bytes = 0;
  for (size_t k = 0; k < requests.size(); ++k) {
    size_t i = asked[k];
    if (fast[k] && (fast[k]->ok() || absl::IsInvalidArgument(fast[k]->status()))) {
      if (fast[k]->ok()) (*fast[k])->micros = MicrosSince(start);
      on_result(i, *std::move(fast[k]));
      continue;
    }
    v1::ResolveRequest& request = requests[k];
    if (kernels[i].by == KernelRef::By::kSource) {
      ToWire(kernels[i].source, request.mutable_spec());  // replaces the id (AskById)
    }
    size_t size = request.ByteSizeLong() + 8;  // + the field's tag and length
    if (calls.empty() || calls.back().kernels_size() >= static_cast<int>(kMaxResolveManyEntries) ||
        call_bytes + size > kMaxUnaryMessageBytes) {
      calls.emplace_back();
      sent.emplace_back();
      call_bytes = 0;
    }
    *calls.back().add_kernels() = std::move(request);
    sent.back().push_back(i);
    call_bytes += size;
  }
  // Kernels by source that the daemon did not serve, for a local compile once its stream is
  // read (compiling while it streams would stall the stream).
  struct Left {
    size_t index;
    absl::Status status;
    DaemonOutcome outcome;
  };
  std::vector<Left> left;
  DaemonOutcome outcome = DaemonOutcome::kAsked;
  absl::Status stop;  // why the calls stopped: the circuit, a busy daemon, a daemon failure
  for (size_t c = 0; c < calls.size(); ++c) {
    std::vector<bool> answered(sent[c].size(), false);
    absl::Status status = stop;
    if (!stop.ok()) {
      // an earlier call of this batch failed: the rest get its answer
    } else if (impl.breaker.Allow()) {
      CallEnd end;
      auto on_answer = [&](size_t k, absl::StatusOr<FetchedKernel> answer) {
        answered[k] = true;
        size_t i = sent[c][k];
        if (answer.ok()) {
          answer->micros = MicrosSince(start);
          on_result(i, std::move(answer));
        } else if (kernels[i].by == KernelRef::By::kSource &&
                   impl.ShouldCompileLocally(answer.status(), DaemonOutcome::kAsked,
                                             kernels[i].source, device, call)) {
          left.push_back(Left{i, answer.status(), DaemonOutcome::kAsked});
        } else {
          on_result(i, answer.status());
        }
      };
      status = impl.WithGrace(
          [&] {
            return impl.daemon.ResolveMany(calls[c], impl.LimitsFor(call), on_answer, &end,
                                           Impl::ProgressFor(call, &sent[c]));
          },
          &end, &outcome);
    } else {
      outcome = DaemonOutcome::kSkipped;
      status = impl.CircuitOpen();
    }
    if (IsDaemonFailure(status) || outcome == DaemonOutcome::kBusy) stop = status;
    for (size_t k = 0; k < sent[c].size(); ++k) {
      if (answered[k]) continue;
      size_t i = sent[c][k];
      if (kernels[i].by == KernelRef::By::kSource) {
        left.push_back(Left{i, status, outcome});
      } else {
        on_result(i, status);
      }
    }
  }
  for (const Left& l : left) {
    on_result(l.index,
              impl.FallBack(l.status, l.outcome, kernels[l.index].source, device, call, start));
  }
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
