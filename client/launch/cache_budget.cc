#include "client/launch/cache_budget.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/environment.h"

namespace kcache::launch {
namespace {

constexpr char kTimeoutEnv[] = "KCACHE_TIMEOUT_MS";
// How long the asking of a command that probes a daemon marked before may take besides its
// budget (its process's start, the hand-off): other commands compile meanwhile.
constexpr absl::Duration kProbeSlack = absl::Seconds(1);

absl::Duration PositiveMillis(const char* text, absl::Duration otherwise) {
  int64_t ms = 0;
  if (text == nullptr || !absl::SimpleAtoi(text, &ms) || ms <= 0) return otherwise;
  return absl::Milliseconds(ms);
}

}  // namespace

absl::Duration TransferTime(uint64_t bytes) {
  return absl::Milliseconds(50) * static_cast<int64_t>(bytes >> 20);
}

void ListedSizes::Note(const std::vector<ObjectEntry>& entries) {
  for (const ObjectEntry& entry : entries) sizes_[entry.key.entry_id] = entry.size;
}

void ListedSizes::Note(const std::vector<objects::HandedEntry>& entries) {
  for (const objects::HandedEntry& entry : entries) sizes_[entry.id] = entry.size;
}

absl::Duration ListedSizes::TransferTimeOf(const ObjectEntryKey& key) const {
  auto listed = sizes_.find(key.entry_id);
  return listed == sizes_.end() ? absl::ZeroDuration() : TransferTime(listed->second);
}

CacheBudget::CacheBudget(absl::Duration left, UnresponsiveMark mark, bool log, std::string variable)
    : total_(left),
      variable_(std::move(variable)),
      left_(left),
      mark_(std::move(mark)),
      log_(log) {}

std::shared_ptr<CacheBudget> CacheBudget::FromEnvironment(const std::string& server, bool log) {
  absl::Duration total = PositiveMillis(EnvValue(kTimeoutEnv).c_str(), kDefaultCacheTimeout);
  auto budget =
      std::make_shared<CacheBudget>(total, UnresponsiveMark::FromEnvironment(server), log);
  std::optional<std::string> handed = EnvIfSet(kTimeoutLeftEnv);
  if (!handed.has_value()) return budget;
  std::vector<std::string> fields = absl::StrSplit(*handed, ':');
  int64_t left_ms = 0, pid = 0;
  if (fields.size() == 3 && absl::SimpleAtoi(fields[0], &left_ms) &&
      absl::SimpleAtoi(fields[1], &pid) && pid == getpid()) {
    budget->left_ = std::min(total, absl::Milliseconds(std::max<int64_t>(left_ms, 0)));
    budget->handed_on_ = true;
    budget->mark_.set_probing(fields[2] == "p");
  }
  unsetenv(kTimeoutLeftEnv);
  return budget;
}

bool CacheBudget::CompileWithoutAsking() {
  if (handed_on_) return false;
  marked_until_ = mark_.Check(left_ + kProbeSlack);
  if (marked_until_.has_value()) {
    LogCompilingUncached();
    return true;
  }
  if (mark_.probing()) Log("kcached was marked unresponsive: asking it again");
  return false;
}

CacheBudget::Call CacheBudget::Begin(absl::Duration transfer, absl::Duration cap) const {
  Call call;
  call.started = absl::Now();
  call.budget_end = call.started + std::max(left_, absl::ZeroDuration()) + transfer;
  call.deadline = std::min(call.budget_end, call.started + cap);
  return call;
}

void CacheBudget::Spend(const Call& call) {
  left_ -= std::max(absl::Now() - call.started, absl::ZeroDuration());
}

void CacheBudget::End(const Call& call, bool answered) {
  Spend(call);
  absl::Time now = absl::Now();
  if (answered) {
    if (mark_.probing()) {
      mark_.Clear();
      mark_.set_probing(false);
      Log("kcached answers again: the unresponsive mark is gone");
    }
    return;
  }
  if (now < call.budget_end || timed_out_) return;
  timed_out_ = true;
  mark_.set_probing(false);
  marked_until_ = mark_.Set();
  Log(absl::StrCat("kcached did not answer within ", variable_, "=",
                   absl::ToInt64Milliseconds(total_), ": ", Unresponsive()));
}

void CacheBudget::Silent(absl::Duration silence) {
  if (timed_out_) return;
  timed_out_ = true;
  mark_.set_probing(false);
  marked_until_ = mark_.Set();
  Log(absl::StrCat("kcached went silent for ", absl::ToInt64Milliseconds(silence),
                   " ms while this command waited for another's compile: ", Unresponsive()));
}

std::string CacheBudget::Unresponsive() const {
  if (!marked_until_.has_value() || mark_.path().empty()) return "kcached unresponsive";
  return absl::StrCat("kcached unresponsive (mark until ", ClockTime(*marked_until_), ")");
}

std::string CacheBudget::WhySpent() const {
  if (timed_out_) return Unresponsive();
  return absl::StrCat("the command's ", variable_, "=", absl::ToInt64Milliseconds(total_),
                      " is spent");
}

void CacheBudget::HandOn() const {
  int64_t left_ms = std::max<int64_t>(absl::ToInt64Milliseconds(left_), 0);
  std::string value = absl::StrCat(left_ms, ":", getpid(), ":", mark_.probing() ? "p" : "");
  setenv(kTimeoutLeftEnv, value.c_str(), 1);
}

void CacheBudget::LogCompilingUncached() const {
  Log(absl::StrCat(Unresponsive(), ", compiling uncached"));
}

void CacheBudget::Log(const std::string& line) const {
  if (log_) std::fprintf(stderr, "kcache: %s\n", line.c_str());
}

}  // namespace kcache::launch
