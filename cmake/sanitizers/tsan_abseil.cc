// ThreadSanitizer builds only: cmake/Settings.cmake compiles this file into every executable
// when KCACHE_SANITIZE is thread.
//
// Debian's Abseil is not built with ThreadSanitizer, so absl::Mutex, absl::CondVar and
// absl::Notification synchronize through futexes that TSan cannot see, and every member they
// guard would be reported as a data race; likewise the last copy of an absl::Status freeing
// the representation the copies share (its reference count drops inside libabsl_status). This file
// interposes their out-of-line functions: each calls Abseil's own (found with dlsym(RTLD_NEXT)) and
// tells TSan about the happens-before edge it makes: __tsan_acquire(object) after taking,
// __tsan_release(object) before giving back. A Condition is evaluated with the mutex held, by the
// waiter or by whichever thread unlocks, so each evaluation is wrapped as a critical section of its
// own. Shared (reader) locks are treated as exclusive ones, which can hide a race between two
// readers that write; nothing here can report a race that is not one.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/config.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#if !ABSL_OPTION_USE_INLINE_NAMESPACE
#error "tsan_abseil.cc expects Abseil's symbols in an inline namespace (Debian's: debian3)"
#endif

namespace {

// "_ZN4absl7debian3" + `rest`, the mangled name of an absl member function.
std::string Mangled(bool is_const, const char* rest) {
  std::string inline_ns = ABSL_INTERNAL_TOKEN_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  return std::string(is_const ? "_ZNK4absl" : "_ZN4absl") + std::to_string(inline_ns.size()) +
         inline_ns + rest;
}

template <typename Function>
Function Real(bool is_const, const char* rest) {
  std::string name = Mangled(is_const, rest);
  void* real = dlsym(RTLD_NEXT, name.c_str());
  if (real == nullptr) {
    std::fprintf(stderr, "tsan_abseil: %s not found in Abseil's libraries\n", name.c_str());
    std::abort();
  }
  return reinterpret_cast<Function>(real);
}

#define KCACHE_REAL(type, is_const, rest) static const auto real = Real<type>(is_const, rest)

void* Tag(const void* object) { return const_cast<void*>(object); }

// A Condition evaluated as a critical section of `mu`, wherever absl evaluates it. The waiter
// builds it on its stack and whichever thread unlocks may evaluate it, after a handoff inside
// libabsl that TSan cannot see: the waiter releases what it did before waiting on the object,
// and an evaluation acquires it first. The wrapping Condition is built and read by libabsl
// itself (its void* form), so TSan records no access to it.
struct Guarded {
  const absl::Condition* condition;
  absl::Mutex* mu;
};

bool EvalGuarded(void* arg) {
  auto* guarded = static_cast<Guarded*>(arg);
  __tsan_acquire(guarded);
  __tsan_acquire(guarded->mu);
  bool holds = guarded->condition->Eval();
  __tsan_release(guarded->mu);
  return holds;
}

class GuardedCondition {
 public:
  GuardedCondition(const absl::Condition& condition, absl::Mutex* mu)
      : guarded_{&condition, mu}, wrapped_(&EvalGuarded, static_cast<void*>(&guarded_)) {
    __tsan_release(&guarded_);
  }
  const absl::Condition& get() const { return wrapped_; }

 private:
  Guarded guarded_;
  absl::Condition wrapped_;
};

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  KCACHE_REAL(void (*)(Mutex*), false, "5Mutex4LockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderLock() {
  KCACHE_REAL(void (*)(Mutex*), false, "5Mutex10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}

bool Mutex::TryLock() {
  KCACHE_REAL(bool (*)(Mutex*), false, "5Mutex7TryLockEv");
  bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

bool Mutex::ReaderTryLock() {
  KCACHE_REAL(bool (*)(Mutex*), false, "5Mutex13ReaderTryLockEv");
  bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::Unlock() {
  KCACHE_REAL(void (*)(Mutex*), false, "5Mutex6UnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::ReaderUnlock() {
  KCACHE_REAL(void (*)(Mutex*), false, "5Mutex12ReaderUnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::LockWhen(const Condition& cond) {
  KCACHE_REAL(void (*)(Mutex*, const Condition&), false, "5Mutex8LockWhenERKNS0_9ConditionE");
  GuardedCondition guarded(cond, this);
  real(this, guarded.get());
  __tsan_acquire(this);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  KCACHE_REAL(void (*)(Mutex*, const Condition&), false,
              "5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  GuardedCondition guarded(cond, this);
  real(this, guarded.get());
  __tsan_acquire(this);
}

// The *WithTimeout/*WithDeadline forms hold the mutex on return, whatever they return.
bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  KCACHE_REAL(bool (*)(Mutex*, const Condition&, Duration), false,
              "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  GuardedCondition guarded(cond, this);
  bool met = real(this, guarded.get(), timeout);
  __tsan_acquire(this);
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  KCACHE_REAL(bool (*)(Mutex*, const Condition&, Time), false,
              "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  GuardedCondition guarded(cond, this);
  bool met = real(this, guarded.get(), deadline);
  __tsan_acquire(this);
  return met;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  KCACHE_REAL(bool (*)(Mutex*, const Condition&, Duration), false,
              "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  GuardedCondition guarded(cond, this);
  bool met = real(this, guarded.get(), timeout);
  __tsan_acquire(this);
  return met;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  KCACHE_REAL(bool (*)(Mutex*, const Condition&, Time), false,
              "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  GuardedCondition guarded(cond, this);
  bool met = real(this, guarded.get(), deadline);
  __tsan_acquire(this);
  return met;
}

// Await gives the mutex up while it waits and takes it back before returning.
void Mutex::Await(const Condition& cond) {
  KCACHE_REAL(void (*)(Mutex*, const Condition&), false, "5Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  GuardedCondition guarded(cond, this);
  real(this, guarded.get());
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  KCACHE_REAL(bool (*)(Mutex*, const Condition&, Duration), false,
              "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(this);
  GuardedCondition guarded(cond, this);
  bool met = real(this, guarded.get(), timeout);
  __tsan_acquire(this);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  KCACHE_REAL(bool (*)(Mutex*, const Condition&, Time), false,
              "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_release(this);
  GuardedCondition guarded(cond, this);
  bool met = real(this, guarded.get(), deadline);
  __tsan_acquire(this);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  KCACHE_REAL(void (*)(CondVar*, Mutex*), false, "7CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  KCACHE_REAL(bool (*)(CondVar*, Mutex*, Duration), false,
              "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  bool timed_out = real(this, mu, timeout);
  __tsan_acquire(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  KCACHE_REAL(bool (*)(CondVar*, Mutex*, Time), false,
              "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  bool timed_out = real(this, mu, deadline);
  __tsan_acquire(mu);
  return timed_out;
}

void Notification::Notify() {
  KCACHE_REAL(void (*)(Notification*), false, "12Notification6NotifyEv");
  __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  KCACHE_REAL(void (*)(const Notification*), true, "12Notification19WaitForNotificationEv");
  real(this);
  __tsan_acquire(Tag(this));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  KCACHE_REAL(bool (*)(const Notification*, Duration), true,
              "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  bool notified = real(this, timeout);
  if (notified) __tsan_acquire(Tag(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  KCACHE_REAL(bool (*)(const Notification*, Time), true,
              "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  bool notified = real(this, deadline);
  if (notified) __tsan_acquire(Tag(this));
  return notified;
}

// Each drop of the shared count releases what this copy did and acquires what the others did
// before theirs, so that whichever drop frees the representation comes after every use.
void Status::UnrefNonInlined(uintptr_t rep) {
  KCACHE_REAL(void (*)(uintptr_t), false, "6Status15UnrefNonInlinedEm");
  __tsan_release(reinterpret_cast<void*>(rep));
  __tsan_acquire(reinterpret_cast<void*>(rep));
  real(rep);
}

ABSL_NAMESPACE_END
}  // namespace absl
