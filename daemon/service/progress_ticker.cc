// ProgressTicker: the tasks are taken out under the lock and run outside it.
#include "daemon/service/progress_ticker.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/time/clock.h"

namespace kcache {

ProgressTicker::ProgressTicker(absl::Duration interval)
    : interval_(interval), thread_([this] { Run(); }) {}

ProgressTicker::~ProgressTicker() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
  std::vector<Task> left;
  {
    absl::MutexLock lock(&mu_);
    left.swap(tasks_);
  }
  for (Task& task : left) task(/*stopping=*/true);
}

void ProgressTicker::Add(Task task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
}

void ProgressTicker::Every(std::function<bool()> send, std::function<void()> release) {
  if (!send()) {
    release();
    return;
  }
  Add([send = std::move(send), release = std::move(release)](bool stopping) {
    if (!stopping && send()) return true;
    release();
    return false;
  });
}

void ProgressTicker::Run() {
  while (true) {
    std::vector<Task> due;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_), interval_);
      if (stop_) return;
      due.swap(tasks_);
    }
    std::vector<Task> again;
    for (Task& task : due) {
      if (task(/*stopping=*/false)) again.push_back(std::move(task));
    }
    absl::MutexLock lock(&mu_);
    for (Task& task : again) tasks_.push_back(std::move(task));
  }
}

namespace {

uint32_t Millis(absl::Duration d) {
  return static_cast<uint32_t>(std::clamp<int64_t>(absl::ToInt64Milliseconds(d), 0, UINT32_MAX));
}

}  // namespace

v1::ResolveProgress ProgressSource::Make(absl::Time accepted, const CompileWatch* watch) const {
  constexpr int64_t kMax = UINT32_MAX;
  v1::ResolveProgress progress;
  progress.set_elapsed_ms(Millis(absl::Now() - accepted));
  if (watch != nullptr) {
    CompileStatus::View where = watch->Read();
    progress.set_stage(static_cast<v1::CompileStage>(where.stage));
    progress.set_queued_behind(where.stage == CompileStage::kQueued ? where.queued_behind : 0);
    progress.set_compile_elapsed_ms(Millis(where.compiling_for));
    progress.set_expected_ms(Millis(where.expected));
  }
  if (compile_limit > absl::ZeroDuration() && compile_limit != absl::InfiniteDuration()) {
    progress.set_compile_limit_seconds(static_cast<uint32_t>(std::clamp<int64_t>(
        absl::ToInt64Seconds(absl::Ceil(compile_limit, absl::Seconds(1))), 1, kMax)));
  }
  return progress;
}

}  // namespace kcache
