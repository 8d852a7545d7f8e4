/* What the two files of libkcache-observe.so share: observe_preload.c (its state, its records, a
 * process's start, the programs it starts) and observe_calls.c (the C library's calls that reach
 * a file, the environment, the clock or a socket). Internal to the library: every name here is
 * hidden (C_VISIBILITY_PRESET), what it exports is marked EXPORT. */
#ifndef KCACHE_ENGINE_OBSERVE_OBSERVE_PRELOAD_H_
#define KCACHE_ENGINE_OBSERVE_OBSERVE_PRELOAD_H_

#include "engine/observe/observe_record.h"

#define EXPORT __attribute__((visibility("default")))

/* This process records (KCACHE_OBSERVE_LOG was set and its start written). */
extern int g_recording;
/* This library's own path (a dlopen of it is not recorded). */
extern char g_self[4096];

/* The C library's own function `name` (RTLD_NEXT), for the wrappers. */
void* Next(const char* name);
#define REAL(name)                                                         \
  static __typeof__(name)* real_##name;                                    \
  static __typeof__(name)* Real_##name(void) {                             \
    if (real_##name == NULL) real_##name = (__typeof__(name)*)Next(#name); \
    return real_##name;                                                    \
  }
#define RESOLVE(name) Real_##name()

/* The real getenv, without recording: environ scanned as glibc does. */
char* PlainGetenv(const char* name);

/* Writes one record of this process (the sink of observe_record.h's rules). */
void Record(char kind, const char* a, const char* b);

/* The rules of observe_record.h, while this process records. */
static inline void RecordPath(char kind, int dir, const char* path) {
  if (g_recording) KcacheObservePath(Record, kind, dir, path, NULL);
}
static inline void RecordFailure(int dir, const char* path, int err) {
  if (g_recording) KcacheObserveFailure(Record, dir, path, err);
}
static inline void RecordWriteResult(int dir, const char* path, int rc, int err) {
  if (g_recording) KcacheObserveWriteResult(Record, dir, path, rc, err);
}
static inline void RecordOpen(int dir, const char* path, int flags, int result, int err) {
  if (g_recording) KcacheObserveOpen(Record, dir, path, flags, result, err);
}
static inline void RecordLook(char found, int dir, const char* path, int rc, int err) {
  if (g_recording) KcacheObserveLook(Record, found, dir, path, rc, err);
}

#endif /* KCACHE_ENGINE_OBSERVE_OBSERVE_PRELOAD_H_ */
