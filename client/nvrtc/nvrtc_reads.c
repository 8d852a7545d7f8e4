/* The recorder of what the real NVRTC reads while it compiles (nvrtc_reads.h). */
#define _GNU_SOURCE
#include "client/nvrtc/nvrtc_reads.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "client/nvrtc/nvrtc_imports.h"
#include "engine/observe/observe_log.h"
#include "engine/observe/observe_record.h"

/* ---------------------------------------------------------------- compiles under way */

struct KcacheNvrtcReads {
  char* text;
  size_t length, capacity;
  int lost;       /* a fact that did not fit */
  int slot;       /* its index in g_active */
  char** pending; /* libraries NVRTC asked dlopen for: ResolveDlopens */
  int pending_count, pending_room;
};

#define MAX_ACTIVE 256
static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static KcacheNvrtcReads* g_active[MAX_ACTIVE]; /* under g_mutex */
static int g_active_count;                     /* read without the mutex on the fast path */
/* The compile this thread runs. Initial-exec: the stand-in is preloaded, so its TLS is static,
 * and it then needs no __tls_get_addr from the dynamic loader (only the C library). */
static __thread KcacheNvrtcReads* t_current __attribute__((tls_model("initial-exec")));

KcacheNvrtcReads* KcacheNvrtcReadsBegin(void) {
  KcacheNvrtcReads* reads = calloc(1, sizeof *reads);
  if (reads == NULL) return NULL;
  pthread_mutex_lock(&g_mutex);
  int slot = -1;
  for (int i = 0; i < MAX_ACTIVE && slot < 0; ++i) {
    if (g_active[i] == NULL) slot = i;
  }
  if (slot >= 0) {
    g_active[slot] = reads;
    reads->slot = slot;
    __atomic_add_fetch(&g_active_count, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&g_mutex);
  if (slot < 0) {
    free(reads);
    return NULL;
  }
  t_current = reads;
  return reads;
}

static void AppendTo(KcacheNvrtcReads* reads, const char* line, size_t size);

/* What became of each library the compile asked dlopen for: loaded under that name now (its
 * file, KCACHE_OBSERVE_LOADED), or not (KCACHE_OBSERVE_UNLOADABLE: it failed, or NVRTC closed
 * it again). RTLD_NOLOAD finds a loaded library by the name it was asked for, whoever asks. */
static void ResolveDlopens(KcacheNvrtcReads* reads) {
  for (int i = 0; i < reads->pending_count; ++i) {
    const char* name = reads->pending[i];
    void* handle = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
    struct link_map* map = NULL;
    int loaded = handle != NULL && dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != NULL &&
                 map->l_name != NULL && map->l_name[0] == '/';
    char line[KCACHE_OBSERVE_LINE_MAX];
    size_t size = KcacheObserveFormat(line, sizeof line, (long)getpid(),
                                      loaded ? KCACHE_OBSERVE_LOADED : KCACHE_OBSERVE_UNLOADABLE,
                                      loaded ? map->l_name : name, NULL);
    if (size == 0) {
      reads->lost = 1;
    } else {
      AppendTo(reads, line, size);
    }
    if (handle != NULL) dlclose(handle);
    free(reads->pending[i]);
  }
  free(reads->pending);
  reads->pending = NULL;
  reads->pending_count = reads->pending_room = 0;
}

char* KcacheNvrtcReadsEnd(KcacheNvrtcReads* reads, size_t* length, int* complete) {
  pthread_mutex_lock(&g_mutex);
  g_active[reads->slot] = NULL;
  __atomic_sub_fetch(&g_active_count, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&g_mutex);
  ResolveDlopens(reads);
  if (t_current == reads) t_current = NULL;
  char* text = reads->text;
  *length = reads->length;
  *complete = !reads->lost;
  free(reads);
  if (text == NULL) {
    text = malloc(1);
    if (text != NULL) text[0] = '\0';
  }
  return text;
}

/* Appends `line` to one compile's record (g_mutex held). */
static void AppendTo(KcacheNvrtcReads* reads, const char* line, size_t size) {
  if (reads->lost) return;
  if (reads->length + size + 1 > KCACHE_NVRTC_READS_MAX_BYTES) {
    reads->lost = 1;
    return;
  }
  if (reads->length + size + 1 > reads->capacity) {
    size_t capacity = reads->capacity ? reads->capacity * 2 : 4096;
    while (capacity < reads->length + size + 1) capacity *= 2;
    char* grown = realloc(reads->text, capacity);
    if (grown == NULL) {
      reads->lost = 1;
      return;
    }
    reads->text = grown;
    reads->capacity = capacity;
  }
  memcpy(reads->text + reads->length, line, size);
  reads->length += size;
  reads->text[reads->length] = '\0';
}

/* Whether a fact now would be recorded: some compile is under way. */
static int Recording(void) { return __atomic_load_n(&g_active_count, __ATOMIC_ACQUIRE) > 0; }

/* Records "<kind> <pid> <a>[\t<b>]": into this thread's compile, or, on a thread that is not
 * compiling (one of NVRTC's own), into every compile under way. */
static void Record(char kind, const char* a, const char* b) {
  char line[KCACHE_OBSERVE_LINE_MAX];
  size_t at = KcacheObserveFormat(line, sizeof line, (long)getpid(), kind, a, b);
  int lost = at == 0;
  pthread_mutex_lock(&g_mutex);
  KcacheNvrtcReads* own = t_current;
  for (int i = 0; i < MAX_ACTIVE; ++i) {
    KcacheNvrtcReads* reads = g_active[i];
    if (reads == NULL || (own != NULL && reads != own)) continue;
    if (lost) {
      reads->lost = 1;
    } else {
      AppendTo(reads, line, at);
    }
  }
  pthread_mutex_unlock(&g_mutex);
}

/* The rules of observe_record.h, for NVRTC's calls (paths relative to the working directory). */
static void RecordPath(char kind, const char* path, const char* value) {
  KcacheObservePath(Record, kind, AT_FDCWD, path, value);
}
static void RecordLook(char found, const char* path, int rc, int err) {
  KcacheObserveLook(Record, found, AT_FDCWD, path, rc, err);
}
static void RecordWriteResult(const char* path, int rc, int err) {
  KcacheObserveWriteResult(Record, AT_FDCWD, path, rc, err);
}
static void RecordOpen(const char* path, int flags, int rc, int err) {
  KcacheObserveOpen(Record, AT_FDCWD, path, flags, rc, err);
}

/* ---------------------------------------------------------------- the routed functions */

/* The C library's own function behind each routed import, as the import slot held it. */
#define ORIGINAL(name) static __typeof__(name)* g_original_##name

int __xstat(int ver, const char* path, struct stat* st);
int __lxstat(int ver, const char* path, struct stat* st);
int __xstat64(int ver, const char* path, struct stat64* st);
int __lxstat64(int ver, const char* path, struct stat64* st);

ORIGINAL(open);
static int RoutedOpen(const char* path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | __O_TMPFILE)) {
    va_list args;
    va_start(args, flags);
    mode = (mode_t)va_arg(args, int);
    va_end(args);
  }
  int fd = g_original_open(path, flags, mode);
  int err = errno;
  if (Recording()) {
    RecordOpen(path, flags, fd, err);
  }
  errno = err;
  return fd;
}

#define DEFINE_ROUTED_FOPEN(name)                                                                  \
  ORIGINAL(name);                                                                                  \
  static FILE* Routed_##name(const char* path, const char* mode) {                                 \
    FILE* file = g_original_##name(path, mode);                                                    \
    int err = errno;                                                                               \
    if (Recording()) {                                                                             \
      RecordOpen(path, KcacheObserveModeWrites(mode) ? O_WRONLY : O_RDONLY, file != NULL ? 0 : -1, \
                 err);                                                                             \
    }                                                                                              \
    errno = err;                                                                                   \
    return file;                                                                                   \
  }
DEFINE_ROUTED_FOPEN(fopen)
DEFINE_ROUTED_FOPEN(fopen64)

#define DEFINE_ROUTED_XSTAT(name, type, kind)                            \
  ORIGINAL(name);                                                        \
  static int Routed_##name(int ver, const char* path, struct type* st) { \
    int rc = g_original_##name(ver, path, st);                           \
    int err = errno;                                                     \
    if (Recording()) RecordLook(kind, path, rc, err);                    \
    errno = err;                                                         \
    return rc;                                                           \
  }
DEFINE_ROUTED_XSTAT(__xstat, stat, KCACHE_OBSERVE_EXISTS)
DEFINE_ROUTED_XSTAT(__xstat64, stat64, KCACHE_OBSERVE_EXISTS)
DEFINE_ROUTED_XSTAT(__lxstat, stat, KCACHE_OBSERVE_LEXISTS)
DEFINE_ROUTED_XSTAT(__lxstat64, stat64, KCACHE_OBSERVE_LEXISTS)

#define DEFINE_ROUTED_STAT(name, type, kind)                    \
  ORIGINAL(name);                                               \
  static int Routed_##name(const char* path, struct type* st) { \
    int rc = g_original_##name(path, st);                       \
    int err = errno;                                            \
    if (Recording()) RecordLook(kind, path, rc, err);           \
    errno = err;                                                \
    return rc;                                                  \
  }
DEFINE_ROUTED_STAT(stat, stat, KCACHE_OBSERVE_EXISTS)
DEFINE_ROUTED_STAT(stat64, stat64, KCACHE_OBSERVE_EXISTS)
DEFINE_ROUTED_STAT(lstat, stat, KCACHE_OBSERVE_LEXISTS)
DEFINE_ROUTED_STAT(lstat64, stat64, KCACHE_OBSERVE_LEXISTS)
DEFINE_ROUTED_STAT(statfs, statfs, KCACHE_OBSERVE_EXISTS)

ORIGINAL(access);
static int Routed_access(const char* path, int mode) {
  int rc = g_original_access(path, mode);
  int err = errno;
  if (Recording()) RecordLook(KCACHE_OBSERVE_EXISTS, path, rc, err);
  errno = err;
  return rc;
}

ORIGINAL(opendir);
static DIR* Routed_opendir(const char* path) {
  DIR* dir = g_original_opendir(path);
  int err = errno;
  if (Recording()) RecordLook(KCACHE_OBSERVE_LISTED, path, dir != NULL ? 0 : -1, err);
  errno = err;
  return dir;
}

ORIGINAL(readlink);
static ssize_t Routed_readlink(const char* path, char* out, size_t size) {
  ssize_t n = g_original_readlink(path, out, size);
  int err = errno;
  if (Recording()) KcacheObserveLink(Record, AT_FDCWD, path, out, (long)n, err);
  errno = err;
  return n;
}

ORIGINAL(realpath);
static char* Routed_realpath(const char* path, char* resolved) {
  char* result = g_original_realpath(path, resolved);
  int err = errno;
  if (Recording()) KcacheObserveRealpath(Record, path, result, err);
  errno = err;
  return result;
}

#define DEFINE_ROUTED_WRITE1(name)                     \
  ORIGINAL(name);                                      \
  static int Routed_##name(const char* path) {         \
    int rc = g_original_##name(path);                  \
    int err = errno;                                   \
    if (Recording()) RecordWriteResult(path, rc, err); \
    errno = err;                                       \
    return rc;                                         \
  }
DEFINE_ROUTED_WRITE1(remove)
DEFINE_ROUTED_WRITE1(unlink)
DEFINE_ROUTED_WRITE1(rmdir)

/* A temporary file made from a template: written. */
ORIGINAL(mkstemp);
static int Routed_mkstemp(char* template_path) {
  int fd = g_original_mkstemp(template_path);
  int err = errno;
  if (Recording() && fd >= 0) RecordPath(KCACHE_OBSERVE_WRITE, template_path, NULL);
  errno = err;
  return fd;
}

ORIGINAL(mkdir);
static int Routed_mkdir(const char* path, mode_t mode) {
  int rc = g_original_mkdir(path, mode);
  int err = errno;
  if (Recording()) RecordWriteResult(path, rc, err);
  errno = err;
  return rc;
}

/* Changing the working directory changes what every relative path names: such a compile is not
 * recorded faithfully. */
ORIGINAL(chdir);
static int Routed_chdir(const char* path) {
  if (Recording()) Record(KCACHE_OBSERVE_UNOBSERVABLE, path, "NVRTC changed the working directory");
  return g_original_chdir(path);
}

ORIGINAL(getenv);
static char* Routed_getenv(const char* name) {
  char* value = g_original_getenv(name);
  if (Recording()) KcacheObserveGetenv(Record, name, value);
  return value;
}

/* The clock: how __DATE__, __TIME__ and __TIMESTAMP__ are expanded. */
ORIGINAL(time);
static time_t Routed_time(time_t* out) {
  if (Recording()) Record(KCACHE_OBSERVE_CLOCK, "", NULL);
  return g_original_time(out);
}
ORIGINAL(gettimeofday);
static int Routed_gettimeofday(struct timeval* tv, void* tz) {
  if (Recording()) Record(KCACHE_OBSERVE_CLOCK, "", NULL);
  return g_original_gettimeofday(tv, tz);
}
ORIGINAL(localtime_r);
static struct tm* Routed_localtime_r(const time_t* t, struct tm* out) {
  if (Recording()) Record(KCACHE_OBSERVE_CLOCK, "", NULL);
  return g_original_localtime_r(t, out);
}
ORIGINAL(ctime);
static char* Routed_ctime(const time_t* t) {
  if (Recording()) Record(KCACHE_OBSERVE_CLOCK, "", NULL);
  return g_original_ctime(t);
}

/* A library NVRTC loads while it compiles (its builtins, the driver). dlopen searches the
 * caller's own paths (its RUNPATH, $ORIGIN: the NVRTC wheel finds its builtins beside it), and
 * glibc tells the caller by the return address: so the routed dlopen is a jump to the real one,
 * NVRTC staying the caller. It notes the name first (NoteDlopen); the compile's end says what
 * became of it (ResolveDlopens: the file loaded under that name, or that none is). */
#define HIDDEN __attribute__((visibility("hidden")))
HIDDEN void* kcache_original_dlopen;
HIDDEN void KcacheNoteDlopen(const char* file);
void KcacheRoutedDlopen(const char* file, int flags);
#if defined(__x86_64__)
__asm__(
    ".pushsection .text\n"
    ".p2align 4\n"
    ".type KcacheRoutedDlopen, @function\n"
    "KcacheRoutedDlopen:\n"
    "  endbr64\n"
    "  pushq %rdi\n"
    "  pushq %rsi\n"
    "  subq $8, %rsp\n"
    "  call KcacheNoteDlopen\n"
    "  addq $8, %rsp\n"
    "  popq %rsi\n"
    "  popq %rdi\n"
    "  jmp *kcache_original_dlopen(%rip)\n"
    ".size KcacheRoutedDlopen, .-KcacheRoutedDlopen\n"
    ".popsection\n");
#else
#error "the NVRTC stand-in routes dlopen in x86-64 assembly only"
#endif

/* Adds `name` to the libraries asked for by this thread's compile, or by every compile under way
 * (g_mutex held). */
static void AddPending(KcacheNvrtcReads* reads, const char* name) {
  if (reads->lost) return;
  if (reads->pending_count == reads->pending_room) {
    int room = reads->pending_room ? reads->pending_room * 2 : 8;
    char** grown = realloc(reads->pending, (size_t)room * sizeof(char*));
    if (grown == NULL) {
      reads->lost = 1;
      return;
    }
    reads->pending = grown;
    reads->pending_room = room;
  }
  char* copy = strdup(name);
  if (copy == NULL) {
    reads->lost = 1;
    return;
  }
  reads->pending[reads->pending_count++] = copy;
}

void KcacheNoteDlopen(const char* file) {
  if (!Recording() || file == NULL) return;
  int saved = errno;
  pthread_mutex_lock(&g_mutex);
  KcacheNvrtcReads* own = t_current;
  for (int i = 0; i < MAX_ACTIVE; ++i) {
    KcacheNvrtcReads* reads = g_active[i];
    if (reads != NULL && (own == NULL || reads == own)) AddPending(reads, file);
  }
  pthread_mutex_unlock(&g_mutex);
  errno = saved;
}

/* Programs started: what they read is not seen. */
#define DEFINE_ROUTED_EXEC(name, params, args, path)                                   \
  ORIGINAL(name);                                                                      \
  static int Routed_##name params {                                                    \
    if (Recording()) Record(KCACHE_OBSERVE_UNOBSERVABLE, path, "NVRTC ran a program"); \
    return g_original_##name args;                                                     \
  }
DEFINE_ROUTED_EXEC(execv, (const char* file, char* const argv[]), (file, argv), file)
DEFINE_ROUTED_EXEC(execvp, (const char* file, char* const argv[]), (file, argv), file)
DEFINE_ROUTED_EXEC(execve, (const char* file, char* const argv[], char* const envp[]),
                   (file, argv, envp), file)
DEFINE_ROUTED_EXEC(system, (const char* command), (command), command != NULL ? command : "sh")
ORIGINAL(fork);
static pid_t Routed_fork(void) {
  if (Recording()) Record(KCACHE_OBSERVE_UNOBSERVABLE, "fork", "NVRTC started a process");
  return g_original_fork();
}

/* syscall(2) with a number that reaches a file or starts a process is not seen through. */
ORIGINAL(syscall);
static long Routed_syscall(long number, ...) {
  va_list args;
  va_start(args, number);
  long a = va_arg(args, long), b = va_arg(args, long), c = va_arg(args, long);
  long d = va_arg(args, long), e = va_arg(args, long), f = va_arg(args, long);
  va_end(args);
  if (Recording()) {
    switch (number) {
      case SYS_open:
      case SYS_openat:
      case SYS_openat2:
      case SYS_creat:
      case SYS_stat:
      case SYS_lstat:
      case SYS_newfstatat:
      case SYS_statx:
      case SYS_access:
      case SYS_faccessat:
      case SYS_faccessat2:
      case SYS_readlink:
      case SYS_readlinkat:
      case SYS_execve:
      case SYS_execveat:
      case SYS_chdir:
      case SYS_fchdir:
      case SYS_fork:
      case SYS_vfork:
      case SYS_clone:
      case SYS_clone3:
      case SYS_rename:
      case SYS_renameat:
      case SYS_renameat2:
      case SYS_unlink:
      case SYS_unlinkat:
      case SYS_mkdir:
      case SYS_mkdirat:
      case SYS_getdents64:
      case SYS_statfs:
      case SYS_truncate: {
        char what[48];
        snprintf(what, sizeof what, "syscall %ld", number);
        Record(KCACHE_OBSERVE_UNOBSERVABLE, what,
               "NVRTC made a system call the stand-in does not follow");
        break;
      }
      default:
        break;
    }
  }
  return g_original_syscall(number, a, b, c, d, e, f);
}

/* ---------------------------------------------------------------- the import table */

#define ROUTE(name, routed) \
  { #name, (void*)(routed), (void**)&g_original_##name }
static const KcacheImportRoute kRoutes[] = {
    ROUTE(open, RoutedOpen),
    ROUTE(fopen, Routed_fopen),
    ROUTE(fopen64, Routed_fopen64),
    ROUTE(__xstat, Routed___xstat),
    ROUTE(__xstat64, Routed___xstat64),
    ROUTE(__lxstat, Routed___lxstat),
    ROUTE(__lxstat64, Routed___lxstat64),
    ROUTE(stat, Routed_stat),
    ROUTE(stat64, Routed_stat64),
    ROUTE(lstat, Routed_lstat),
    ROUTE(lstat64, Routed_lstat64),
    ROUTE(statfs, Routed_statfs),
    ROUTE(access, Routed_access),
    ROUTE(opendir, Routed_opendir),
    ROUTE(readlink, Routed_readlink),
    ROUTE(realpath, Routed_realpath),
    ROUTE(remove, Routed_remove),
    ROUTE(unlink, Routed_unlink),
    ROUTE(rmdir, Routed_rmdir),
    ROUTE(mkdir, Routed_mkdir),
    ROUTE(mkstemp, Routed_mkstemp),
    ROUTE(chdir, Routed_chdir),
    ROUTE(getenv, Routed_getenv),
    ROUTE(time, Routed_time),
    ROUTE(gettimeofday, Routed_gettimeofday),
    ROUTE(localtime_r, Routed_localtime_r),
    ROUTE(ctime, Routed_ctime),
    {"dlopen", (void*)KcacheRoutedDlopen, &kcache_original_dlopen},
    ROUTE(execv, Routed_execv),
    ROUTE(execvp, Routed_execvp),
    ROUTE(execve, Routed_execve),
    ROUTE(system, Routed_system),
    ROUTE(fork, Routed_fork),
    ROUTE(syscall, Routed_syscall),
};
#define ROUTE_COUNT (sizeof kRoutes / sizeof kRoutes[0])

int KcacheNvrtcReadsHook(void* handle, char* why, size_t room) {
  return KcacheRouteImports(handle, kRoutes, ROUTE_COUNT, why, room);
}
