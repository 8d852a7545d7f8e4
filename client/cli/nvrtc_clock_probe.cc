#include "client/cli/nvrtc_clock_probe.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "client/cli/nvrtc_recompile.h"

namespace kcache::cli {
namespace {

std::atomic<bool> g_poisoned{false};
std::atomic<int> g_dates{0};      // ctime calls answered with kPoisonedDate
std::atomic<int> g_unchecked{0};  // other date functions called while poisoned

// The C library's `name`, next after this executable's.
template <typename Fn>
Fn Next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// Counts a date function that a probe does not poison.
void NoteUnchecked() {
  if (g_poisoned.load(std::memory_order_acquire)) g_unchecked.fetch_add(1);
}

}  // namespace

absl::Status CheckNvrtcClockFree(const objects::NvrtcProgram& program,
                                 const objects::NvrtcContext& context,
                                 const objects::NvrtcOutcome& outcome) {
  if (chdir(context.cwd.c_str()) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot enter the compile's directory ", context.cwd));
  }
  g_dates = 0;
  g_unchecked = 0;
  g_poisoned.store(true, std::memory_order_release);
  absl::StatusOr<objects::NvrtcOutcome> probed = RecompileNvrtc(program, context.library);
  g_poisoned.store(false, std::memory_order_release);
  if (!probed.ok()) return probed.status();
  if (g_unchecked > 0) {
    return absl::FailedPreconditionError(
        "NVRTC made a date without ctime (localtime, gmtime, strftime or asctime), which kcache "
        "does not change to see whether the output depends on it");
  }
  if (g_dates == 0) {
    return absl::FailedPreconditionError(
        "NVRTC asked for no date while it compiled again, so kcache could not give it another "
        "to see whether the output depends on it");
  }
  if (probed->result != outcome.result || NvrtcLog(*probed) != NvrtcLog(outcome)) {
    return absl::FailedPreconditionError(
        "the output depends on the clock: given another date, NVRTC gave another result or log "
        "(the program expands __DATE__ or __TIME__, however it spells them)");
  }
  return absl::OkStatus();
}

}  // namespace kcache::cli

// The C library's date functions as this executable exports them (clock_probe.dynlist).
using kcache::cli::g_dates;
using kcache::cli::g_poisoned;
using kcache::cli::kPoisonedDate;
using kcache::cli::Next;
using kcache::cli::NoteUnchecked;

extern "C" {

__attribute__((visibility("default"))) char* ctime(const time_t* t) {
  static char poisoned[sizeof kPoisonedDate];
  if (g_poisoned.load(std::memory_order_acquire)) {
    g_dates.fetch_add(1);
    std::memcpy(poisoned, kPoisonedDate, sizeof kPoisonedDate);
    return poisoned;
  }
  static auto* next = Next<char* (*)(const time_t*)>("ctime");
  return next(t);
}

__attribute__((visibility("default"))) char* ctime_r(const time_t* t, char* out) {
  if (g_poisoned.load(std::memory_order_acquire)) {
    g_dates.fetch_add(1);
    std::memcpy(out, kPoisonedDate, sizeof kPoisonedDate);
    return out;
  }
  static auto* next = Next<char* (*)(const time_t*, char*)>("ctime_r");
  return next(t, out);
}

__attribute__((visibility("default"))) struct tm* localtime(const time_t* t) {
  NoteUnchecked();
  static auto* next = Next<struct tm* (*)(const time_t*)>("localtime");
  return next(t);
}

__attribute__((visibility("default"))) struct tm* localtime_r(const time_t* t, struct tm* out) {
  NoteUnchecked();
  static auto* next = Next<struct tm* (*)(const time_t*, struct tm*)>("localtime_r");
  return next(t, out);
}

__attribute__((visibility("default"))) struct tm* gmtime(const time_t* t) {
  NoteUnchecked();
  static auto* next = Next<struct tm* (*)(const time_t*)>("gmtime");
  return next(t);
}

__attribute__((visibility("default"))) struct tm* gmtime_r(const time_t* t, struct tm* out) {
  NoteUnchecked();
  static auto* next = Next<struct tm* (*)(const time_t*, struct tm*)>("gmtime_r");
  return next(t, out);
}

__attribute__((visibility("default"))) char* asctime(const struct tm* tm) {
  NoteUnchecked();
  static auto* next = Next<char* (*)(const struct tm*)>("asctime");
  return next(tm);
}

__attribute__((visibility("default"))) size_t strftime(char* out, size_t max, const char* format,
                                                       const struct tm* tm) {
  NoteUnchecked();
  static auto* next = Next<size_t (*)(char*, size_t, const char*, const struct tm*)>("strftime");
  return next(out, max, format, tm);
}

}  // extern "C"
