// A launcher's turn at a miss's compile through kcached's AwaitCompile.
#include "client/cli/compile_turn_remote.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/lib/call_watchdog.h"
#include "core/process_identity.h"
#include "kcache/v1/objects.grpc.pb.h"

namespace kcache::cli {
namespace {

using Update = v1::AwaitCompileUpdate;
using Stream = grpc::ClientReaderWriter<v1::AwaitCompileRequest, Update>;

// The shortest silence taken for a hung kcached while it says it waits (it says so every
// 250 ms): KCACHE_TIMEOUT_MS when longer.
constexpr absl::Duration kLeastSilence = absl::Seconds(1);

// Cancels this process's calls that go silent; never destroyed (a launcher exits with it).
client::CallWatchdog& Watchdog() {
  static auto* watchdog = new client::CallWatchdog();
  return *watchdog;
}

// "pid 123 on host-a": who this launcher is, for the others' messages.
std::string ThisLauncher() { return absl::StrCat("kcache pid ", getpid(), " on ", HostName()); }

std::string Took(absl::Duration duration) {
  int64_t tenths = absl::ToInt64Milliseconds(duration) / 100;
  return absl::StrCat(tenths / 10, ".", tenths % 10, " s");
}

class RemoteTurn final : public objects::CompileTurn {
 public:
  RemoteTurn(std::string address, std::shared_ptr<launch::CacheBudget> budget, std::string subject)
      : address_(std::move(address)),
        budget_(std::move(budget)),
        subject_(std::move(subject)),
        silence_(std::max(budget_->total(), kLeastSilence)),
        stub_(v1::ObjectCache::NewStub(
            grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()))) {}

  ~RemoteTurn() override {
    if (stream_ != nullptr) Close();
  }

  // Runs the call until this launcher holds the turn, the holder's entry arrived, or it
  // compiles on its own (false: the turn is of no further use).
  bool Await(const CommandKey& key1, const std::vector<std::string>& listed) {
    if (budget_->spent()) return false;
    launch::CacheBudget::Call first = budget_->Begin();
    watch_ = Watchdog().Start(&context_, first.deadline, absl::InfiniteFuture());
    stream_ = stub_->AwaitCompile(&context_);
    v1::AwaitCompileRequest request;
    request.set_key1(std::string(key1.Bytes()));
    for (const std::string& id : listed) request.add_seen_entry_ids(id);
    request.set_client(ThisLauncher());
    Update update;
    if (!stream_->Write(request) || !stream_->Read(&update)) {
      grpc::Status status = Close();
      bool silent = watch_fired_ == client::WatchFired::kSilent;
      budget_->End(first, !silent && status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED &&
                              status.error_code() != grpc::StatusCode::UNAVAILABLE);
      return false;  // UNIMPLEMENTED (an older kcached), away, silent: compile
    }
    budget_->End(first, true);
    const absl::Time started = absl::Now();
    while (update.kind() == Update::KIND_WAIT) {
      if (update.holder() != holder_) {
        holder_ = update.holder();
        std::fprintf(
            stderr, "kcache: %s: waiting for the compile of %s (kcached %s; at most %u s)\n",
            subject_.c_str(), holder_.c_str(), address_.c_str(), update.wait_limit_seconds());
      }
      waited_ = true;
      absl::Time now = absl::Now();
      watch_->Set(now + silence_, started + absl::Seconds(update.wait_limit_seconds()) + silence_);
      if (!stream_->Read(&update)) {
        Close();
        if (watch_fired_ == client::WatchFired::kSilent) {
          budget_->Silent(silence_);
          Said(absl::StrCat("compiling here after waiting ", Took(absl::Now() - started),
                            ": kcached went silent for ", Took(silence_)));
        } else {
          Said(absl::StrCat("compiling here after waiting ", Took(absl::Now() - started),
                            ": the wait ended without an answer from kcached"));
        }
        return false;
      }
    }
    waited_for_ = absl::Now() - started;
    watch_.reset();
    switch (update.kind()) {
      case Update::KIND_ARRIVED:
        holder_ = update.holder();
        arrived_ = true;
        return true;
      case Update::KIND_COMPILE:
        if (waited_) {
          Said(
              absl::StrCat("compiling here after waiting ", Took(waited_for_), ": ", update.why()));
        }
        if (update.holds_turn()) return true;  // the call stays open while it compiles
        Close();
        return false;
      default:
        Close();
        return false;
    }
  }

  bool arrived() const override { return arrived_; }

  void Served(bool served) override {
    // A launcher that never waited (the entry had come already) says nothing.
    if (waited_ && served) {
      Said(absl::StrCat("served from the compile of ", holder_, " after waiting ",
                        Took(waited_for_)));
    } else if (waited_) {
      Said(absl::StrCat("compiling here after waiting ", Took(waited_for_), ": the entry of ",
                        holder_, "'s compile does not match this machine's files"));
    }
    End(served ? v1::TURN_END_SERVED : v1::TURN_END_NOT_SERVED, "");
  }

  void Compiled(int exit_code, const absl::Status& stored) override {
    if (stored.ok()) {
      End(v1::TURN_END_STORED, "");
    } else if (exit_code != 0) {
      End(v1::TURN_END_NOT_STORED, absl::StrCat("failed (exit code ", exit_code, ")"));
    } else {
      End(v1::TURN_END_NOT_STORED, absl::StrCat("was not stored (", stored.message(), ")"));
    }
  }

 private:
  // One line on stderr about this command's wait.
  void Said(const std::string& line) const {
    std::fprintf(stderr, "kcache: %s: %s\n", subject_.c_str(), line.c_str());
  }

  // Tells kcached how this launcher's turn ended and closes the call, within the silence
  // allowed (a kcached that hung meanwhile costs no more); to a kcached that timed out a call
  // of this command already, nothing (the call is dropped: it gives the turn up).
  void End(v1::TurnEnd end, const std::string& why) {
    if (stream_ == nullptr) return;
    watch_ = Watchdog().Start(&context_, absl::Now() + silence_, absl::InfiniteFuture());
    v1::AwaitCompileRequest request;
    request.set_end(end);
    request.set_why(why);
    stream_->Write(request);
    Close();
  }

  // Half-closes the call and waits for kcached's status, within the silence allowed when no
  // other watch is on; drops it at once when a call of this command to kcached timed out.
  grpc::Status Close() {
    if (budget_->timed_out()) context_.TryCancel();
    if (watch_ == nullptr) {
      watch_ = Watchdog().Start(&context_, absl::Now() + silence_, absl::InfiniteFuture());
    }
    stream_->WritesDone();
    grpc::Status status = stream_->Finish();
    stream_.reset();
    if (watch_ != nullptr) watch_fired_ = watch_->fired();
    watch_.reset();
    return status;
  }

  const std::string address_;
  const std::shared_ptr<launch::CacheBudget> budget_;
  const std::string subject_;
  const absl::Duration silence_;
  std::unique_ptr<v1::ObjectCache::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<client::CallWatchdog::Watch> watch_;
  client::WatchFired watch_fired_ = client::WatchFired::kNo;
  std::string holder_;
  bool waited_ = false;
  bool arrived_ = false;
  absl::Duration waited_for_;
};

}  // namespace

std::unique_ptr<objects::CompileTurn> AwaitRemoteTurn(const std::string& address,
                                                      std::shared_ptr<launch::CacheBudget> budget,
                                                      const CommandKey& key1,
                                                      const std::vector<std::string>& listed,
                                                      const std::string& subject) {
  auto turn = std::make_unique<RemoteTurn>(address, std::move(budget), subject);
  if (!turn->Await(key1, listed)) return nullptr;
  return turn;
}

}  // namespace kcache::cli
