/* libkcache-observe.so: preloaded (LD_PRELOAD) into every process of a compile a launcher
 * records, it writes down what the process read: the files it opened, the paths it looked at
 * and did not find, the environment variables it asked for, whether it read the clock, the
 * programs it started (engine/observe/observe_log.h has the records). It changes nothing the
 * process does: each call goes to the C library's own function, and errno is kept.
 *
 * Why interposing the C library is sound here, and where it stops (docs/torch-extensions.md,
 * "What a compile reads"): compilers, assemblers and linkers reach files through the C
 * library's calls wrapped below, and a program they start inherits LD_PRELOAD (put back by
 * the exec and spawn wrappers when a process dropped it). What this library cannot see makes
 * itself known: a program that could not load it (statically linked, set-user-ID, another
 * machine's code) is recorded as unobservable before it runs, and a started program that never
 * records its start is noticed by the reader; either leaves the compile uncached.
 *
 * Written in C, with no allocation on the paths that may run in a vfork child (exec), and
 * without the C++ runtime: it loads into every compiler process. */
#define _GNU_SOURCE
#include "engine/observe/observe_preload.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <link.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "engine/observe/observe_log.h"
#include "engine/observe/observe_record.h"

extern char** environ;

/* ---------------------------------------------------------------- state */

static int g_log_fd = -1; /* the log, at a high descriptor (LogFd) */
int g_recording;          /* this process records */
static int g_quiet;       /* ... only its start and the programs it starts (a skipped one) */
static int g_observing;   /* KCACHE_OBSERVE_LOG was set: keep it in started programs */
static char g_log_path[4096];
char g_self[4096];                 /* this library's path, for LD_PRELOAD */
static char g_preload_entry[4200]; /* "LD_PRELOAD=<g_self>" */
static char g_log_entry[4200];     /* "KCACHE_OBSERVE_LOG=<g_log_path>" */

/* Records already written by this process (a hash each), so a header looked up a hundred
 * times is one record. Open addressing; when full, records are simply written again. */
#define SEEN_SLOTS (1u << 16)
static uint64_t g_seen[SEEN_SLOTS];

/* The C library's own functions, found on first use. Every function wrapped here is one glibc
 * 2.33 and later exports (stat and its kin became symbols of their own in 2.33): the library
 * is built on the machine whose compilers it observes. */
void* Next(const char* name) {
  void* found = dlsym(RTLD_NEXT, name);
  return found;
}

static long RawPid(void) { return syscall(SYS_getpid); }

/* The real getenv, without recording: environ scanned as glibc does. */
char* PlainGetenv(const char* name) {
  if (name == NULL || environ == NULL) return NULL;
  size_t length = strlen(name);
  for (char** entry = environ; *entry != NULL; ++entry) {
    if (strncmp(*entry, name, length) == 0 && (*entry)[length] == '=') return *entry + length + 1;
  }
  return NULL;
}

/* ---------------------------------------------------------------- writing records */

static uint64_t Hash(char kind, const char* a, const char* b) {
  uint64_t h = 1469598103934665603ull ^ (unsigned char)kind;
  for (const char* p = a; p != NULL && *p; ++p) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  h = (h ^ 0xff) * 1099511628211ull;
  for (const char* p = b; p != NULL && *p; ++p) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  return h == 0 ? 1 : h;
}

/* Whether the record was written before (and marks it written). */
static int Seen(uint64_t h) {
  uint32_t slot = (uint32_t)h & (SEEN_SLOTS - 1);
  for (int probe = 0; probe < 32; ++probe) {
    uint32_t at = (slot + (uint32_t)probe) & (SEEN_SLOTS - 1);
    uint64_t was = 0;
    if (__atomic_compare_exchange_n(&g_seen[at], &was, h, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
      return 0;
    }
    if (was == h) return 1;
  }
  return 0;
}

static int OpenLog(void) {
  int fd = (int)syscall(SYS_openat, AT_FDCWD, g_log_path, O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return -1;
  /* High, so that a program's dup2 onto a low number or its own opens never meet it. */
  int high = (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 900);
  syscall(SYS_close, fd);
  return high;
}

/* Writes the record "<kind> <pid> <a>[\t<b>]\n" (KcacheObserveFormat), or, when it does not fit a
 * line, that a record was lost (the compile is then unobservable). A log that cannot be written
 * loses the record: the reader then misses a start or an exec's outcome and leaves the compile
 * uncached. The sink of the rules in observe_record.h. */
static int g_always; /* the next record is written even if it was before (an exec's outcome) */

void Record(char kind, const char* a, const char* b) {
  if (!g_recording) return;
  if (g_quiet && kind != KCACHE_OBSERVE_START && kind != KCACHE_OBSERVE_EXEC &&
      kind != KCACHE_OBSERVE_UNOBSERVABLE) {
    return;
  }
  if (!g_always && Seen(Hash(kind, a, b))) return;
  char line[KCACHE_OBSERVE_LINE_MAX];
  size_t at = KcacheObserveFormat(line, sizeof line, RawPid(), kind, a, b);
  int saved = errno;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (g_log_fd < 0) g_log_fd = OpenLog();
    if (g_log_fd < 0) break;
    long written = syscall(SYS_write, g_log_fd, line, at);
    if (written == (long)at) break;
    if (written < 0 && errno == EBADF) { /* the program closed it: open it again */
      g_log_fd = -1;
      continue;
    }
    break;
  }
  errno = saved;
}

/* ---------------------------------------------------------------- start */

static int IsSkipped(const char* exe) {
  const char* list = PlainGetenv(KCACHE_OBSERVE_SKIP_VAR);
  size_t length = strlen(exe);
  while (list != NULL && *list) {
    const char* end = strchr(list, ':');
    size_t item = end != NULL ? (size_t)(end - list) : strlen(list);
    if (item == length && strncmp(list, exe, length) == 0) return 1;
    list = end != NULL ? end + 1 : NULL;
  }
  return 0;
}

static int RecordLoaded(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  (void)data;
  const char* name = info->dlpi_name;
  if (name == NULL || name[0] != '/' || strcmp(name, g_self) == 0) return 0;
  Record(KCACHE_OBSERVE_LOADED, name, NULL);
  return 0;
}

/* ---------------------------------------------------------------- shells */

/* A shell reads its variables from the environment it was given, not through getenv: what it
 * expands is recorded as if asked for, from the `$NAME` and `${NAME` in its command (-c) or
 * its script. (A file it sources is recorded as read; its expansions are not.) */
static int IsShell(const char* exe) {
  const char* base = strrchr(exe, '/');
  base = base != NULL ? base + 1 : exe;
  static const char* const kShells[] = {"sh", "dash", "bash", "zsh", "ksh", "mksh", "busybox"};
  for (size_t i = 0; i < sizeof kShells / sizeof kShells[0]; ++i) {
    if (strcmp(base, kShells[i]) == 0) return 1;
  }
  return 0;
}

static void RecordExpansions(const char* text, size_t length) {
  char name[256];
  for (size_t i = 0; i + 1 < length; ++i) {
    if (text[i] != '$') continue;
    size_t at = i + 1;
    if (text[at] == '{') ++at;
    size_t n = 0;
    while (at < length && n + 1 < sizeof name &&
           (text[at] == '_' || (text[at] >= 'A' && text[at] <= 'Z') ||
            (text[at] >= 'a' && text[at] <= 'z') ||
            (n > 0 && text[at] >= '0' && text[at] <= '9'))) {
      name[n++] = text[at++];
    }
    if (n == 0) continue;
    name[n] = '\0';
    getenv(name); /* recorded, with what this shell was given */
  }
}

static char g_text[1 << 20]; /* a shell's command line, then its script */

static void RecordShellExpansions(void) {
  int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  long length = 0, got;
  while (length < (long)sizeof g_text &&
         (got = syscall(SYS_read, fd, g_text + length, sizeof g_text - (size_t)length)) > 0) {
    length += got;
  }
  syscall(SYS_close, fd);
  if (length >= (long)sizeof g_text) {
    Record(KCACHE_OBSERVE_UNOBSERVABLE, "a shell", "a command line over 1 MiB");
    return;
  }
  /* argv[0] \0 argv[1] \0 ...: the text after -c, else the first argument not an option. */
  const char* script = NULL;
  int after_c = 0;
  for (long at = (long)strlen(g_text) + 1; at < length; at += (long)strlen(g_text + at) + 1) {
    const char* arg = g_text + at;
    if (after_c) {
      RecordExpansions(arg, strlen(arg));
      return;
    }
    if (arg[0] == '-' && strchr(arg, 'c') != NULL && arg[1] != '-') {
      after_c = 1;
    } else if (arg[0] != '-' && script == NULL) {
      script = arg;
      break;
    }
  }
  if (script == NULL) return;
  fd = (int)syscall(SYS_openat, AT_FDCWD, script, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  length = 0;
  while (length < (long)sizeof g_text &&
         (got = syscall(SYS_read, fd, g_text + length, sizeof g_text - (size_t)length)) > 0) {
    length += got;
  }
  syscall(SYS_close, fd);
  if (length >= (long)sizeof g_text) {
    Record(KCACHE_OBSERVE_UNOBSERVABLE, script, "a shell script over 1 MiB");
    return;
  }
  RecordExpansions(g_text, (size_t)length);
}

/* Interpreters that read the environment whole (os.environ, %ENV): what they use of it
 * cannot be told, so a compile that runs one is not cached. */
static int ReadsEnvironmentWhole(const char* exe) {
  const char* base = strrchr(exe, '/');
  base = base != NULL ? base + 1 : exe;
  static const char* const kInterpreters[] = {"python", "perl",  "ruby", "node",
                                              "lua",    "tclsh", "php"};
  for (size_t i = 0; i < sizeof kInterpreters / sizeof kInterpreters[0]; ++i) {
    if (strncmp(base, kInterpreters[i], strlen(kInterpreters[i])) == 0) return 1;
  }
  return 0;
}

__attribute__((constructor)) static void Start(void) {
  const char* log = PlainGetenv(KCACHE_OBSERVE_LOG_VAR);
  if (log == NULL || log[0] != '/' || strlen(log) >= sizeof g_log_path) return;
  snprintf(g_log_path, sizeof g_log_path, "%s", log);
  Dl_info self;
  if (dladdr((void*)&Start, &self) == 0 || self.dli_fname == NULL) return;
  snprintf(g_self, sizeof g_self, "%s", self.dli_fname);
  snprintf(g_preload_entry, sizeof g_preload_entry, "LD_PRELOAD=%s", g_self);
  snprintf(g_log_entry, sizeof g_log_entry, "%s=%s", KCACHE_OBSERVE_LOG_VAR, g_log_path);
  g_observing = 1;
  char exe[4096];
  long length = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", exe, sizeof exe - 1);
  if (length <= 0) return;
  exe[length] = '\0';
  g_quiet = IsSkipped(exe);
  g_recording = 1;
  char parent[24];
  snprintf(parent, sizeof parent, "%ld", (long)getppid());
  Record(KCACHE_OBSERVE_START, parent, exe);
  dl_iterate_phdr(RecordLoaded, NULL);
  if (g_quiet) return;
  if (IsShell(exe)) RecordShellExpansions();
  if (ReadsEnvironmentWhole(exe)) {
    Record(KCACHE_OBSERVE_UNOBSERVABLE, exe, "an interpreter that reads the environment whole");
  }
}

/* ---------------------------------------------------------------- programs started */

/* Whether the program at `path` will load this library, and if not, why (a static string). */
static const char* WhyUnobservable(const char* path, int depth) {
  int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL; /* exec fails; the failure is recorded */
  struct stat st;
  unsigned char head[4096];
  long got = -1;
  if (syscall(SYS_fstat, fd, &st) == 0) got = syscall(SYS_pread64, fd, head, sizeof head, 0);
  const char* why = NULL;
  if (got < 0) {
    why = NULL;
  } else if (st.st_mode & (S_ISUID | S_ISGID)) {
    why = "set-user-ID or set-group-ID: the dynamic loader ignores LD_PRELOAD";
  } else if (got >= 2 && head[0] == '#' && head[1] == '!') {
    char interpreter[4096];
    size_t i = 2, o = 0;
    while (i < (size_t)got && (head[i] == ' ' || head[i] == '\t')) ++i;
    while (i < (size_t)got && head[i] != ' ' && head[i] != '\t' && head[i] != '\n' &&
           o + 1 < sizeof interpreter) {
      interpreter[o++] = (char)head[i++];
    }
    interpreter[o] = '\0';
    why = depth > 3 ? "a script whose interpreters nest too deep"
                    : WhyUnobservable(interpreter, depth + 1);
  } else if (got >= (long)sizeof(Elf64_Ehdr) && memcmp(head, ELFMAG, SELFMAG) == 0) {
    const Elf64_Ehdr* header = (const Elf64_Ehdr*)head;
    Elf64_Half machine = 0;
#if defined(__x86_64__)
    machine = EM_X86_64;
#elif defined(__aarch64__)
    machine = EM_AARCH64;
#endif
    if (head[EI_CLASS] != ELFCLASS64 || header->e_machine != machine) {
      why = "built for another machine or word size";
    } else {
      int dynamic = 0;
      for (Elf64_Half i = 0; i < header->e_phnum && !dynamic; ++i) {
        Elf64_Phdr phdr;
        uint64_t at = header->e_phoff + (uint64_t)i * header->e_phentsize;
        if (syscall(SYS_pread64, fd, &phdr, sizeof phdr, at) != (long)sizeof phdr) break;
        if (phdr.p_type == PT_INTERP) dynamic = 1;
      }
      if (!dynamic) why = "statically linked";
    }
  }
  syscall(SYS_close, fd);
  return why;
}

/* An exec of `path` that returned: its failure, written even if that path's absence was
 * recorded before (the reader pairs it with the exec). */
static void RecordExecFailure(const char* path, int err) {
  g_always = 1;
  RecordFailure(AT_FDCWD, path, err);
  g_always = 0;
}

/* Records each argument of `argv` (the program `path` is to run with) that lets the machine
 * pick the code; `-arch` and `native` as two arguments too. */
static void RecordNativeArguments(const char* path, char* const argv[]) {
  if (!g_recording || argv == NULL) return;
  for (size_t i = 0; argv[i] != NULL; ++i) {
    int pair = argv[i + 1] != NULL && strcmp(argv[i + 1], "native") == 0 &&
               (strcmp(argv[i], "-arch") == 0 || strcmp(argv[i], "--gpu-architecture") == 0);
    if (pair || KcacheObserveNamesNative(argv[i])) {
      char option[8192];
      snprintf(option, sizeof option, "%s%s", argv[i], pair ? " native" : "");
      Record(KCACHE_OBSERVE_NATIVE, path != NULL ? path : "?", option);
    }
  }
}

/* Notes that `pid` is about to run `path` (already searched for), or that it cannot be
 * observed. */
static void RecordExec(long pid, const char* path) {
  if (!g_recording || path == NULL) return;
  char absolute[8192], number[24];
  const char* full = KcacheObserveAbsolute(AT_FDCWD, path, absolute, sizeof absolute);
  if (full == NULL) full = path; /* WhyUnobservable then says why, or the reader misses its start */
  const char* why = WhyUnobservable(full, 0);
  if (why != NULL) Record(KCACHE_OBSERVE_UNOBSERVABLE, full, why);
  snprintf(number, sizeof number, "%ld", pid);
  Record(KCACHE_OBSERVE_EXEC, number, full);
}

/* `file` searched in PATH as execvp does, each directory that lacks it recorded absent; the
 * path found (or `file` itself when it has a slash or nothing was found) into out. */
static const char* Search(const char* file, char* out, size_t cap) {
  if (file == NULL || strchr(file, '/') != NULL) return file;
  const char* path = PlainGetenv("PATH");
  if (path == NULL) path = "/bin:/usr/bin";
  while (*path) {
    const char* end = strchr(path, ':');
    size_t length = end != NULL ? (size_t)(end - path) : strlen(path);
    snprintf(out, cap, "%.*s%s%s", (int)length, path, length > 0 ? "/" : "./", file);
    if (syscall(SYS_faccessat, AT_FDCWD, out, X_OK) == 0) {
      struct stat st;
      if (syscall(SYS_newfstatat, AT_FDCWD, out, &st, 0) == 0 && S_ISREG(st.st_mode)) return out;
    }
    RecordFailure(AT_FDCWD, out, errno == 0 ? ENOENT : errno);
    if (end == NULL) break;
    path = end + 1;
  }
  return file;
}

/* `envp` with LD_PRELOAD naming this library and KCACHE_OBSERVE_LOG set, into `out` (room for
 * count + 3 pointers) and `preload` (room for a combined LD_PRELOAD). No allocation: it may run
 * in a vfork child. */
static char* const* KeepObserving(char* const* envp, char** out, char* preload, size_t cap) {
  if (!g_observing || envp == NULL) return envp;
  size_t o = 0;
  int has_log = 0, has_preload = 0;
  for (char* const* e = envp; *e != NULL; ++e) {
    if (strncmp(*e, "LD_PRELOAD=", 11) == 0) {
      if (strstr(*e, g_self) != NULL) {
        out[o++] = *e;
      } else {
        snprintf(preload, cap, "%s:%s", g_preload_entry, *e + 11);
        out[o++] = preload;
      }
      has_preload = 1;
    } else if (strncmp(*e, KCACHE_OBSERVE_LOG_VAR "=", sizeof KCACHE_OBSERVE_LOG_VAR) == 0) {
      out[o++] = g_log_entry;
      has_log = 1;
    } else {
      out[o++] = *e;
    }
  }
  if (!has_preload) out[o++] = g_preload_entry;
  if (!has_log) out[o++] = g_log_entry;
  out[o] = NULL;
  return out;
}

static size_t Count(char* const* list) {
  size_t n = 0;
  while (list != NULL && list[n] != NULL) ++n;
  return n;
}

#define WITH_OBSERVED_ENV(envp, name)                                       \
  char** name##_room = __builtin_alloca((Count(envp) + 3) * sizeof(char*)); \
  char* name##_preload = __builtin_alloca(8400);                            \
  char* const* name = KeepObserving(envp, name##_room, name##_preload, 8400)

REAL(execve);
EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  RecordExec(RawPid(), path);
  RecordNativeArguments(path, argv);
  WITH_OBSERVED_ENV(envp, env);
  int rc = RESOLVE(execve)(path, argv, env);
  int err = errno;
  RecordExecFailure(path, err);
  errno = err;
  return rc;
}

EXPORT int execv(const char* path, char* const argv[]) { return execve(path, argv, environ); }

REAL(execvpe);
EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  char found[8192];
  const char* path = Search(file, found, sizeof found);
  int searched = strchr(path, '/') != NULL; /* else not found: the exec fails */
  if (searched) RecordExec(RawPid(), path);
  RecordNativeArguments(path, argv);
  WITH_OBSERVED_ENV(envp, env);
  int rc = RESOLVE(execvpe)(file, argv, env);
  int err = errno;
  if (searched) RecordExecFailure(path, err);
  errno = err;
  return rc;
}

EXPORT int execvp(const char* file, char* const argv[]) { return execvpe(file, argv, environ); }

REAL(fexecve);
EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  long length = syscall(SYS_readlinkat, AT_FDCWD, link, path, sizeof path - 1);
  path[length > 0 ? length : 0] = '\0';
  RecordExec(RawPid(), path);
  RecordNativeArguments(path, argv);
  WITH_OBSERVED_ENV(envp, env);
  int rc = RESOLVE(fexecve)(fd, argv, env);
  int err = errno;
  RecordExecFailure(path, err);
  errno = err;
  return rc;
}

/* execl, execlp, execle: their arguments gathered, then as execve/execvpe. */
#define GATHER_ARGS(first, last_named, argv_name, envp_out)                            \
  size_t argc_##argv_name = 1;                                                         \
  {                                                                                    \
    va_list count;                                                                     \
    va_start(count, last_named);                                                       \
    while (va_arg(count, char*) != NULL) ++argc_##argv_name;                           \
    va_end(count);                                                                     \
  }                                                                                    \
  char** argv_name = __builtin_alloca((argc_##argv_name + 1) * sizeof(char*));         \
  {                                                                                    \
    va_list take;                                                                      \
    va_start(take, last_named);                                                        \
    argv_name[0] = (char*)(first);                                                     \
    for (size_t i = 1; i <= argc_##argv_name; ++i) argv_name[i] = va_arg(take, char*); \
    if (envp_out) *envp_out = va_arg(take, char* const*);                              \
    va_end(take);                                                                      \
  }

EXPORT int execl(const char* path, const char* arg, ...) {
  char* const** no_envp = NULL;
  GATHER_ARGS(arg, arg, argv, no_envp);
  return execve(path, argv, environ);
}

EXPORT int execlp(const char* file, const char* arg, ...) {
  char* const** no_envp = NULL;
  GATHER_ARGS(arg, arg, argv, no_envp);
  return execvpe(file, argv, environ);
}

EXPORT int execle(const char* path, const char* arg, ...) {
  char* const* envp = NULL;
  char* const** envp_out = &envp;
  GATHER_ARGS(arg, arg, argv, envp_out);
  return execve(path, argv, envp);
}

REAL(posix_spawn);
EXPORT int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* actions,
                       const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  pid_t child = 0;
  RecordNativeArguments(path, argv);
  WITH_OBSERVED_ENV(envp, env);
  int rc = RESOLVE(posix_spawn)(&child, path, actions, attr, argv, env);
  if (pid != NULL) *pid = child;
  if (rc == 0) {
    RecordExec(child, path);
  } else {
    RecordFailure(AT_FDCWD, path, rc);
  }
  return rc;
}

REAL(posix_spawnp);
EXPORT int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* actions,
                        const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  char found[8192];
  const char* path = Search(file, found, sizeof found);
  pid_t child = 0;
  RecordNativeArguments(path, argv);
  WITH_OBSERVED_ENV(envp, env);
  int rc = RESOLVE(posix_spawnp)(&child, file, actions, attr, argv, env);
  if (pid != NULL) *pid = child;
  if (rc == 0) {
    RecordExec(child, path); /* found, or the spawn had failed */
  } else if (strchr(path, '/') != NULL) {
    RecordFailure(AT_FDCWD, path, rc);
  }
  return rc;
}

/* system and popen run /bin/sh with this process's environment. */
static void ShellWillRun(void) {
  if (!g_recording) return;
  const char* why = WhyUnobservable("/bin/sh", 0);
  if (why != NULL) Record(KCACHE_OBSERVE_UNOBSERVABLE, "/bin/sh", why);
  const char* preload = PlainGetenv("LD_PRELOAD");
  if (preload == NULL || strstr(preload, g_self) == NULL) {
    Record(KCACHE_OBSERVE_UNOBSERVABLE, "/bin/sh", "started without LD_PRELOAD");
  }
}

REAL(system);
EXPORT int system(const char* command) {
  ShellWillRun();
  return RESOLVE(system)(command);
}

REAL(popen);
EXPORT FILE* popen(const char* command, const char* mode) {
  ShellWillRun();
  return RESOLVE(popen)(command, mode);
}
