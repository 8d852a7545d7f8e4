/* The C library's calls that reach a file, the environment, the clock or a socket, as
 * libkcache-observe.so wraps them (observe_preload.c has the rest of it: docs/torch-extensions.md,
 * "What a compile reads"): each goes to the C library's own function, and its outcome becomes
 * records by the rules of observe_record.h; errno is kept. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "engine/observe/observe_log.h"
#include "engine/observe/observe_preload.h"
#include "engine/observe/observe_record.h"

/* ---------------------------------------------------------------- files opened */

#define OPEN_MODE(flags, mode)             \
  mode_t mode = 0;                         \
  if ((flags) & (O_CREAT | __O_TMPFILE)) { \
    va_list ap;                            \
    va_start(ap, flags);                   \
    mode = (mode_t)va_arg(ap, int);        \
    va_end(ap);                            \
  }

#define DEFINE_OPEN(name)                             \
  REAL(name);                                         \
  EXPORT int name(const char* path, int flags, ...) { \
    OPEN_MODE(flags, mode);                           \
    int fd = RESOLVE(name)(path, flags, mode);        \
    int err = errno;                                  \
    RecordOpen(AT_FDCWD, path, flags, fd, err);       \
    errno = err;                                      \
    return fd;                                        \
  }
DEFINE_OPEN(open)
DEFINE_OPEN(open64)

#define DEFINE_OPENAT(name)                                    \
  REAL(name);                                                  \
  EXPORT int name(int dir, const char* path, int flags, ...) { \
    OPEN_MODE(flags, mode);                                    \
    int fd = RESOLVE(name)(dir, path, flags, mode);            \
    int err = errno;                                           \
    RecordOpen(dir, path, flags, fd, err);                     \
    errno = err;                                               \
    return fd;                                                 \
  }
DEFINE_OPENAT(openat)
DEFINE_OPENAT(openat64)

/* The fortified forms (_FORTIFY_SOURCE): no mode. */
int __open_2(const char* path, int flags);
int __open64_2(const char* path, int flags);
int __openat_2(int dir, const char* path, int flags);
int __openat64_2(int dir, const char* path, int flags);
#define DEFINE_OPEN2(name)                       \
  REAL(name);                                    \
  EXPORT int name(const char* path, int flags) { \
    int fd = RESOLVE(name)(path, flags);         \
    int err = errno;                             \
    RecordOpen(AT_FDCWD, path, flags, fd, err);  \
    errno = err;                                 \
    return fd;                                   \
  }
DEFINE_OPEN2(__open_2)
DEFINE_OPEN2(__open64_2)
#define DEFINE_OPENAT2(name)                              \
  REAL(name);                                             \
  EXPORT int name(int dir, const char* path, int flags) { \
    int fd = RESOLVE(name)(dir, path, flags);             \
    int err = errno;                                      \
    RecordOpen(dir, path, flags, fd, err);                \
    errno = err;                                          \
    return fd;                                            \
  }
DEFINE_OPENAT2(__openat_2)
DEFINE_OPENAT2(__openat64_2)

#define DEFINE_CREAT(name)                            \
  REAL(name);                                         \
  EXPORT int name(const char* path, mode_t mode) {    \
    int fd = RESOLVE(name)(path, mode);               \
    int err = errno;                                  \
    RecordPath(KCACHE_OBSERVE_WRITE, AT_FDCWD, path); \
    errno = err;                                      \
    return fd;                                        \
  }
DEFINE_CREAT(creat)
DEFINE_CREAT(creat64)

#define DEFINE_FOPEN(name)                                                          \
  REAL(name);                                                                       \
  EXPORT FILE* name(const char* path, const char* mode) {                           \
    FILE* file = RESOLVE(name)(path, mode);                                         \
    int err = errno;                                                                \
    RecordOpen(AT_FDCWD, path, KcacheObserveModeWrites(mode) ? O_WRONLY : O_RDONLY, \
               file != NULL ? 0 : -1, err);                                         \
    errno = err;                                                                    \
    return file;                                                                    \
  }
DEFINE_FOPEN(fopen)
DEFINE_FOPEN(fopen64)

#define DEFINE_FREOPEN(name)                                                          \
  REAL(name);                                                                         \
  EXPORT FILE* name(const char* path, const char* mode, FILE* stream) {               \
    FILE* file = RESOLVE(name)(path, mode, stream);                                   \
    int err = errno;                                                                  \
    if (path != NULL) {                                                               \
      RecordOpen(AT_FDCWD, path, KcacheObserveModeWrites(mode) ? O_WRONLY : O_RDONLY, \
                 file != NULL ? 0 : -1, err);                                         \
    }                                                                                 \
    errno = err;                                                                      \
    return file;                                                                      \
  }
DEFINE_FREOPEN(freopen)
DEFINE_FREOPEN(freopen64)

/* Temporary files made from a template: outputs. */
#define DEFINE_MKSTEMP(name, params, args)                                  \
  REAL(name);                                                               \
  EXPORT int name params {                                                  \
    int fd = RESOLVE(name) args;                                            \
    int err = errno;                                                        \
    if (fd >= 0) RecordPath(KCACHE_OBSERVE_WRITE, AT_FDCWD, template_path); \
    errno = err;                                                            \
    return fd;                                                              \
  }
DEFINE_MKSTEMP(mkstemp, (char* template_path), (template_path))
DEFINE_MKSTEMP(mkstemp64, (char* template_path), (template_path))
DEFINE_MKSTEMP(mkostemp, (char* template_path, int flags), (template_path, flags))
DEFINE_MKSTEMP(mkostemp64, (char* template_path, int flags), (template_path, flags))
DEFINE_MKSTEMP(mkstemps, (char* template_path, int suffix), (template_path, suffix))
DEFINE_MKSTEMP(mkstemps64, (char* template_path, int suffix), (template_path, suffix))
DEFINE_MKSTEMP(mkostemps, (char* template_path, int suffix, int flags),
               (template_path, suffix, flags))
DEFINE_MKSTEMP(mkostemps64, (char* template_path, int suffix, int flags),
               (template_path, suffix, flags))

/* Paths changed: outputs. */
static void Wrote2(int dir1, const char* a, int dir2, const char* b) {
  RecordPath(KCACHE_OBSERVE_WRITE, dir1, a);
  RecordPath(KCACHE_OBSERVE_WRITE, dir2, b);
}
REAL(rename);
EXPORT int rename(const char* from, const char* to) {
  int rc = RESOLVE(rename)(from, to);
  int err = errno;
  Wrote2(AT_FDCWD, from, AT_FDCWD, to);
  errno = err;
  return rc;
}
REAL(renameat);
EXPORT int renameat(int from_dir, const char* from, int to_dir, const char* to) {
  int rc = RESOLVE(renameat)(from_dir, from, to_dir, to);
  int err = errno;
  Wrote2(from_dir, from, to_dir, to);
  errno = err;
  return rc;
}
REAL(renameat2);
EXPORT int renameat2(int from_dir, const char* from, int to_dir, const char* to, unsigned flags) {
  int rc = RESOLVE(renameat2)(from_dir, from, to_dir, to, flags);
  int err = errno;
  Wrote2(from_dir, from, to_dir, to);
  errno = err;
  return rc;
}
#define DEFINE_WRITE1(name, params, args, path) \
  REAL(name);                                   \
  EXPORT int name params {                      \
    int rc = RESOLVE(name) args;                \
    int err = errno;                            \
    RecordWriteResult(AT_FDCWD, path, rc, err); \
    errno = err;                                \
    return rc;                                  \
  }
DEFINE_WRITE1(unlink, (const char* path), (path), path)
DEFINE_WRITE1(remove, (const char* path), (path), path)
DEFINE_WRITE1(mkdir, (const char* path, mode_t mode), (path, mode), path)
DEFINE_WRITE1(rmdir, (const char* path), (path), path)
DEFINE_WRITE1(link, (const char* from, const char* to), (from, to), to)
DEFINE_WRITE1(symlink, (const char* target, const char* path), (target, path), path)
DEFINE_WRITE1(truncate, (const char* path, off_t length), (path, length), path)
REAL(unlinkat);
EXPORT int unlinkat(int dir, const char* path, int flags) {
  int rc = RESOLVE(unlinkat)(dir, path, flags);
  int err = errno;
  RecordWriteResult(dir, path, rc, err);
  errno = err;
  return rc;
}
REAL(mkdirat);
EXPORT int mkdirat(int dir, const char* path, mode_t mode) {
  int rc = RESOLVE(mkdirat)(dir, path, mode);
  int err = errno;
  RecordWriteResult(dir, path, rc, err);
  errno = err;
  return rc;
}

/* ---------------------------------------------------------------- paths looked at */

#define DEFINE_STAT(name, type, kind)                  \
  REAL(name);                                          \
  EXPORT int name(const char* path, struct type* st) { \
    int rc = RESOLVE(name)(path, st);                  \
    int err = errno;                                   \
    RecordLook(kind, AT_FDCWD, path, rc, err);         \
    errno = err;                                       \
    return rc;                                         \
  }
DEFINE_STAT(stat, stat, KCACHE_OBSERVE_EXISTS)
DEFINE_STAT(stat64, stat64, KCACHE_OBSERVE_EXISTS)
DEFINE_STAT(lstat, stat, KCACHE_OBSERVE_LEXISTS)
DEFINE_STAT(lstat64, stat64, KCACHE_OBSERVE_LEXISTS)

/* The versioned forms older programs call. */
int __xstat(int ver, const char* path, struct stat* st);
int __xstat64(int ver, const char* path, struct stat64* st);
int __lxstat(int ver, const char* path, struct stat* st);
int __lxstat64(int ver, const char* path, struct stat64* st);
int __fxstatat(int ver, int dir, const char* path, struct stat* st, int flags);
int __fxstatat64(int ver, int dir, const char* path, struct stat64* st, int flags);
#define DEFINE_XSTAT(name, type, kind)                          \
  REAL(name);                                                   \
  EXPORT int name(int ver, const char* path, struct type* st) { \
    int rc = RESOLVE(name)(ver, path, st);                      \
    int err = errno;                                            \
    RecordLook(kind, AT_FDCWD, path, rc, err);                  \
    errno = err;                                                \
    return rc;                                                  \
  }
DEFINE_XSTAT(__xstat, stat, KCACHE_OBSERVE_EXISTS)
DEFINE_XSTAT(__xstat64, stat64, KCACHE_OBSERVE_EXISTS)
DEFINE_XSTAT(__lxstat, stat, KCACHE_OBSERVE_LEXISTS)
DEFINE_XSTAT(__lxstat64, stat64, KCACHE_OBSERVE_LEXISTS)

static char KindOfFlags(int flags) {
  return (flags & AT_SYMLINK_NOFOLLOW) ? KCACHE_OBSERVE_LEXISTS : KCACHE_OBSERVE_EXISTS;
}
/* A descriptor's own stat (AT_EMPTY_PATH with "") is not a look at a path. */
static int IsDescriptorStat(const char* path, int flags) {
  return path == NULL || (path[0] == '\0' && (flags & AT_EMPTY_PATH));
}

#define DEFINE_FSTATAT(name, type)                                                          \
  REAL(name);                                                                               \
  EXPORT int name(int dir, const char* path, struct type* st, int flags) {                  \
    int rc = RESOLVE(name)(dir, path, st, flags);                                           \
    int err = errno;                                                                        \
    if (!IsDescriptorStat(path, flags)) RecordLook(KindOfFlags(flags), dir, path, rc, err); \
    errno = err;                                                                            \
    return rc;                                                                              \
  }
DEFINE_FSTATAT(fstatat, stat)
DEFINE_FSTATAT(fstatat64, stat64)

#define DEFINE_FXSTATAT(name, type)                                                         \
  REAL(name);                                                                               \
  EXPORT int name(int ver, int dir, const char* path, struct type* st, int flags) {         \
    int rc = RESOLVE(name)(ver, dir, path, st, flags);                                      \
    int err = errno;                                                                        \
    if (!IsDescriptorStat(path, flags)) RecordLook(KindOfFlags(flags), dir, path, rc, err); \
    errno = err;                                                                            \
    return rc;                                                                              \
  }
DEFINE_FXSTATAT(__fxstatat, stat)
DEFINE_FXSTATAT(__fxstatat64, stat64)

REAL(statx);
EXPORT int statx(int dir, const char* path, int flags, unsigned int mask, struct statx* st) {
  int rc = RESOLVE(statx)(dir, path, flags, mask, st);
  int err = errno;
  if (!IsDescriptorStat(path, flags)) RecordLook(KindOfFlags(flags), dir, path, rc, err);
  errno = err;
  return rc;
}

#define DEFINE_ACCESS(name)                                     \
  REAL(name);                                                   \
  EXPORT int name(const char* path, int mode) {                 \
    int rc = RESOLVE(name)(path, mode);                         \
    int err = errno;                                            \
    RecordLook(KCACHE_OBSERVE_EXISTS, AT_FDCWD, path, rc, err); \
    errno = err;                                                \
    return rc;                                                  \
  }
DEFINE_ACCESS(access)
DEFINE_ACCESS(euidaccess)
DEFINE_ACCESS(eaccess)

REAL(faccessat);
EXPORT int faccessat(int dir, const char* path, int mode, int flags) {
  int rc = RESOLVE(faccessat)(dir, path, mode, flags);
  int err = errno;
  RecordLook(KindOfFlags(flags), dir, path, rc, err);
  errno = err;
  return rc;
}

REAL(readlink);
EXPORT ssize_t readlink(const char* path, char* out, size_t size) {
  ssize_t n = RESOLVE(readlink)(path, out, size);
  int err = errno;
  if (g_recording) KcacheObserveLink(Record, AT_FDCWD, path, out, (long)n, err);
  errno = err;
  return n;
}

REAL(readlinkat);
EXPORT ssize_t readlinkat(int dir, const char* path, char* out, size_t size) {
  ssize_t n = RESOLVE(readlinkat)(dir, path, out, size);
  int err = errno;
  if (g_recording) KcacheObserveLink(Record, dir, path, out, (long)n, err);
  errno = err;
  return n;
}

static void RecordRealpath(const char* path, const char* result, int err) {
  if (g_recording) KcacheObserveRealpath(Record, path, result, err);
}

REAL(realpath);
EXPORT char* realpath(const char* path, char* resolved) {
  char* result = RESOLVE(realpath)(path, resolved);
  int err = errno;
  RecordRealpath(path, result, err);
  errno = err;
  return result;
}

REAL(canonicalize_file_name);
EXPORT char* canonicalize_file_name(const char* path) {
  char* result = RESOLVE(canonicalize_file_name)(path);
  int err = errno;
  RecordRealpath(path, result, err);
  errno = err;
  return result;
}

/* ---------------------------------------------------------------- directories listed */

REAL(opendir);
EXPORT DIR* opendir(const char* path) {
  DIR* dir = RESOLVE(opendir)(path);
  int err = errno;
  if (dir != NULL) {
    RecordPath(KCACHE_OBSERVE_LISTED, AT_FDCWD, path);
  } else {
    RecordFailure(AT_FDCWD, path, err);
  }
  errno = err;
  return dir;
}

REAL(fdopendir);
EXPORT DIR* fdopendir(int fd) {
  DIR* dir = RESOLVE(fdopendir)(fd);
  int err = errno;
  if (dir != NULL) RecordPath(KCACHE_OBSERVE_LISTED, fd, "");
  errno = err;
  return dir;
}

#define DEFINE_SCANDIR(name, entry)                                                           \
  REAL(name);                                                                                 \
  EXPORT int name(const char* path, struct entry*** list, int (*filter)(const struct entry*), \
                  int (*compare)(const struct entry**, const struct entry**)) {               \
    int n = RESOLVE(name)(path, list, filter, compare);                                       \
    int err = errno;                                                                          \
    if (n >= 0) {                                                                             \
      RecordPath(KCACHE_OBSERVE_LISTED, AT_FDCWD, path);                                      \
    } else {                                                                                  \
      RecordFailure(AT_FDCWD, path, err);                                                     \
    }                                                                                         \
    errno = err;                                                                              \
    return n;                                                                                 \
  }
DEFINE_SCANDIR(scandir, dirent)
DEFINE_SCANDIR(scandir64, dirent64)

/* Tree walks read what they find below a path: not followed here, so unobservable. */
static void RecordWalk(const char* path) {
  if (g_recording) {
    KcacheObservePath(Record, KCACHE_OBSERVE_UNOBSERVABLE, AT_FDCWD, path, "a directory tree walk");
  }
}
REAL(nftw);
EXPORT int nftw(const char* path, __nftw_func_t fn, int fds, int flags) {
  RecordWalk(path);
  return RESOLVE(nftw)(path, fn, fds, flags);
}
REAL(nftw64);
EXPORT int nftw64(const char* path, __nftw64_func_t fn, int fds, int flags) {
  RecordWalk(path);
  return RESOLVE(nftw64)(path, fn, fds, flags);
}
REAL(ftw);
EXPORT int ftw(const char* path, __ftw_func_t fn, int fds) {
  RecordWalk(path);
  return RESOLVE(ftw)(path, fn, fds);
}

/* ---------------------------------------------------------------- libraries loaded */

REAL(dlopen);
EXPORT void* dlopen(const char* file, int flags) {
  void* handle = RESOLVE(dlopen)(file, flags);
  if (handle != NULL && g_recording) {
    struct link_map* map = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != NULL && map->l_name != NULL &&
        map->l_name[0] == '/' && strcmp(map->l_name, g_self) != 0) {
      Record(KCACHE_OBSERVE_LOADED, map->l_name, NULL);
    }
  }
  return handle;
}

/* ---------------------------------------------------------------- connections */

/* What a process receives over a socket (a compile server, a remote cache, a name service)
 * is not a file: a compile that connects anywhere is not keyed by what it read. */
REAL(connect);
EXPORT int connect(int fd, const struct sockaddr* address, socklen_t length) {
  int rc = RESOLVE(connect)(fd, address, length);
  int err = errno;
  if (g_recording && address != NULL) {
    char where[160];
    if (address->sa_family == AF_UNIX) {
      const struct sockaddr_un* local = (const struct sockaddr_un*)address;
      snprintf(where, sizeof where, "unix socket %.100s",
               local->sun_path[0] != '\0' ? local->sun_path : "(abstract)");
    } else {
      snprintf(where, sizeof where, "a socket of family %d", (int)address->sa_family);
    }
    Record(KCACHE_OBSERVE_UNOBSERVABLE, where, "a connection: what it receives is not a file");
  }
  errno = err;
  return rc;
}

/* ---------------------------------------------------------------- environment and clock */

static void RecordGetenv(const char* name, const char* value) {
  if (g_recording) KcacheObserveGetenv(Record, name, value);
}

EXPORT char* getenv(const char* name) {
  char* value = PlainGetenv(name);
  RecordGetenv(name, value);
  return value;
}

REAL(secure_getenv);
EXPORT char* secure_getenv(const char* name) {
  char* value = RESOLVE(secure_getenv)(name);
  RecordGetenv(name, value);
  return value;
}

/* The clock read, or a time made into a local date: how a preprocessor expands __DATE__ and
 * __TIME__ (time, then localtime) and __TIMESTAMP__ (localtime of the file's mtime). */
REAL(time);
EXPORT time_t time(time_t* out) {
  Record(KCACHE_OBSERVE_CLOCK, "", NULL);
  return RESOLVE(time)(out);
}
REAL(localtime);
EXPORT struct tm* localtime(const time_t* when) {
  Record(KCACHE_OBSERVE_CLOCK, "", NULL);
  return RESOLVE(localtime)(when);
}
REAL(localtime_r);
EXPORT struct tm* localtime_r(const time_t* when, struct tm* out) {
  Record(KCACHE_OBSERVE_CLOCK, "", NULL);
  return RESOLVE(localtime_r)(when, out);
}
REAL(ctime);
EXPORT char* ctime(const time_t* when) {
  Record(KCACHE_OBSERVE_CLOCK, "", NULL);
  return RESOLVE(ctime)(when);
}
REAL(ctime_r);
EXPORT char* ctime_r(const time_t* when, char* out) {
  Record(KCACHE_OBSERVE_CLOCK, "", NULL);
  return RESOLVE(ctime_r)(when, out);
}
