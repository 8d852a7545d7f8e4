/* The rules by which both recorders turn a call's outcome into records (observe_record.h). */
#define _GNU_SOURCE
#include "engine/observe/observe_record.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "engine/observe/observe_log.h"

/* Appends `text` escaped at `at`; `cap` when it does not fit (with room for one more byte). */
static size_t Escaped(char* out, size_t at, size_t cap, const char* text) {
  for (const char* p = text; p != NULL && *p; ++p) {
    if (at + 3 >= cap) return cap;
    if (*p == '\\' || *p == '\n' || *p == '\t') {
      out[at++] = '\\';
      out[at++] = *p == '\n' ? 'n' : (*p == '\t' ? 't' : '\\');
    } else {
      out[at++] = *p;
    }
  }
  return at;
}

/* The record that stands for one of kind `kind` that did not fit a line. */
static size_t FormatLost(char* line, size_t cap, long pid, char kind) {
  int n = snprintf(line, cap, "%c %ld (a record of kind %c)\ttoo long for the recorder to write\n",
                   KCACHE_OBSERVE_UNOBSERVABLE, pid, kind);
  return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

size_t KcacheObserveFormat(char* line, size_t cap, long pid, char kind, const char* a,
                           const char* b) {
  int n = snprintf(line, cap, "%c %ld ", kind, pid);
  if (n < 0 || (size_t)n >= cap) return FormatLost(line, cap, pid, kind);
  size_t at = Escaped(line, (size_t)n, cap, a);
  if (b != NULL && at < cap) {
    line[at++] = '\t';
    at = Escaped(line, at, cap, b);
  }
  if (at + 1 >= cap) return FormatLost(line, cap, pid, kind);
  line[at++] = '\n';
  return at;
}

const char* KcacheObserveAbsolute(int dir, const char* path, char* out, size_t cap) {
  if (path == NULL) return NULL;
  if (path[0] == '/') return path;
  char base[4096];
  long length;
  if (dir == AT_FDCWD) {
    if (syscall(SYS_getcwd, base, sizeof base) <= 0 || base[0] != '/') return NULL;
    length = (long)strlen(base);
  } else {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", dir);
    length = syscall(SYS_readlinkat, AT_FDCWD, link, base, sizeof base - 1);
    if (length <= 0) return NULL;
    base[length] = '\0';
    if (base[0] != '/') return NULL; /* not a directory of the file system (a pipe, a socket) */
  }
  int n = path[0] == '\0' ? snprintf(out, cap, "%s", base)
                          : snprintf(out, cap, "%s%s%s", base, length > 1 ? "/" : "", path);
  return n > 0 && (size_t)n < cap ? out : NULL;
}

void KcacheObservePath(KcacheObserveSink sink, char kind, int dir, const char* path,
                       const char* value) {
  if (path == NULL) return;
  char buffer[8192];
  const char* absolute = KcacheObserveAbsolute(dir, path, buffer, sizeof buffer);
  if (absolute == NULL) {
    sink(KCACHE_OBSERVE_UNOBSERVABLE, path, "a path that cannot be made absolute");
    return;
  }
  sink(kind, absolute, value);
}

void KcacheObserveFailure(KcacheObserveSink sink, int dir, const char* path, int err) {
  if (path == NULL) return;
  if (KcacheObserveFoundAbsent(err)) {
    KcacheObservePath(sink, KCACHE_OBSERVE_ABSENT, dir, path, NULL);
    return;
  }
  char number[16], buffer[8192];
  snprintf(number, sizeof number, "%d", err);
  const char* absolute = KcacheObserveAbsolute(dir, path, buffer, sizeof buffer);
  if (absolute == NULL) {
    sink(KCACHE_OBSERVE_UNOBSERVABLE, path, "a path that cannot be made absolute");
    return;
  }
  sink(KCACHE_OBSERVE_FAILED, number, absolute);
}

void KcacheObserveLook(KcacheObserveSink sink, char found, int dir, const char* path, int rc,
                       int err) {
  if (rc == 0) {
    KcacheObservePath(sink, found, dir, path, NULL);
  } else {
    KcacheObserveFailure(sink, dir, path, err);
  }
}

void KcacheObserveWriteResult(KcacheObserveSink sink, int dir, const char* path, int rc, int err) {
  if (rc >= 0) {
    KcacheObservePath(sink, KCACHE_OBSERVE_WRITE, dir, path, NULL);
  } else if (err == EEXIST) {
    KcacheObservePath(sink, KCACHE_OBSERVE_LEXISTS, dir, path, NULL);
  } else {
    KcacheObserveFailure(sink, dir, path, err);
  }
}

void KcacheObserveOpen(KcacheObserveSink sink, int dir, const char* path, int flags, int rc,
                       int err) {
  if (KcacheObserveFlagsWrite(flags)) {
    KcacheObserveWriteResult(sink, dir, path, rc, err);
  } else if (rc < 0) {
    KcacheObserveFailure(sink, dir, path, err);
  } else {
    KcacheObservePath(sink, (flags & O_PATH) ? KCACHE_OBSERVE_EXISTS : KCACHE_OBSERVE_READ, dir,
                      path, NULL);
  }
}

void KcacheObserveLink(KcacheObserveSink sink, int dir, const char* path, const char* out, long n,
                       int err) {
  if (path == NULL || strncmp(path, "/proc/self/", 11) == 0) return;
  if (n < 0) {
    KcacheObserveFailure(sink, dir, path, err);
    return;
  }
  char target[4096];
  if ((size_t)n >= sizeof target) {
    KcacheObservePath(sink, KCACHE_OBSERVE_UNOBSERVABLE, dir, path, "a link target too long");
    return;
  }
  memcpy(target, out, (size_t)n);
  target[n] = '\0';
  KcacheObservePath(sink, KCACHE_OBSERVE_LINK, dir, path, target);
}

void KcacheObserveRealpath(KcacheObserveSink sink, const char* path, const char* result, int err) {
  if (path == NULL) return;
  if (result == NULL) {
    KcacheObserveFailure(sink, AT_FDCWD, path, err);
  } else {
    KcacheObservePath(sink, KCACHE_OBSERVE_REALPATH, AT_FDCWD, path, result);
  }
}

void KcacheObserveGetenv(KcacheObserveSink sink, const char* name, const char* value) {
  if (name == NULL) return;
  if (value == NULL) {
    sink(KCACHE_OBSERVE_ENV_UNSET, name, NULL);
    return;
  }
  char line[8192];
  int n = snprintf(line, sizeof line, "%s=%s", name, value);
  if (n < 0 || (size_t)n >= sizeof line) {
    sink(KCACHE_OBSERVE_UNOBSERVABLE, name, "a variable too long to record");
    return;
  }
  sink(KCACHE_OBSERVE_ENV, line, NULL);
  if (KcacheObserveNamesNative(value)) { /* NVCC_APPEND_FLAGS=-arch=native: nvcc reads it itself */
    snprintf(line, sizeof line, "$%s", name);
    sink(KCACHE_OBSERVE_NATIVE, line, value);
  }
}

int KcacheObserveNamesNative(const char* text) {
  static const char* const kNative[] = {"arch=native", "architecture=native",
                                        "cpu=native",  "tune=native",
                                        "arch native", "architecture native"};
  if (text == NULL) return 0;
  for (size_t i = 0; i < sizeof kNative / sizeof kNative[0]; ++i) {
    if (strstr(text, kNative[i]) != NULL) return 1;
  }
  return 0;
}
