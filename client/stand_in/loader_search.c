/* Where the process would have found a library (loader_search.h). */
#define _GNU_SOURCE
#include "client/stand_in/loader_search.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HIDDEN __attribute__((visibility("hidden")))

extern char* program_invocation_name;

HIDDEN void KcacheSearchAdd(KcacheSearch* search, const char* dir, const char* soname) {
  if (search->count >= KCACHE_SEARCH_MAX || dir == NULL || dir[0] == '\0') return;
  size_t length = strlen(dir);
  while (length > 1 && dir[length - 1] == '/') --length;
  int written = snprintf(search->paths[search->count], KCACHE_SEARCH_PATH_ROOM, "%.*s/%s",
                         (int)length, dir, soname);
  if (written > 0 && written < KCACHE_SEARCH_PATH_ROOM) ++search->count;
}

/* LD_LIBRARY_PATH as the loader read it, at the process's start (/proc/self/environ): a
 * process that sets it later changes what getenv says, not where dlopen looks. getenv's when
 * that cannot be read. */
static const char* LoaderLibraryPath(void) {
  static char value[KCACHE_SEARCH_PATH_ROOM * 4];
  static int read_once;
  static const char* answer;
  if (__atomic_load_n(&read_once, __ATOMIC_ACQUIRE)) return answer;
  answer = getenv("LD_LIBRARY_PATH");
  int fd = open("/proc/self/environ", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    static char environ_text[1 << 16];
    ssize_t n = read(fd, environ_text, sizeof environ_text - 1);
    close(fd);
    if (n > 0 && (size_t)n < sizeof environ_text - 1) { /* whole: else getenv's */
      environ_text[n] = '\0';
      answer = NULL;
      for (const char* entry = environ_text; entry < environ_text + n; entry += strlen(entry) + 1) {
        if (strncmp(entry, "LD_LIBRARY_PATH=", 16) == 0) {
          snprintf(value, sizeof value, "%s", entry + 16);
          answer = value;
          break;
        }
      }
    }
  }
  __atomic_store_n(&read_once, 1, __ATOMIC_RELEASE);
  return answer;
}

/* Appends each directory of the colon-separated `list` ($ORIGIN and ${ORIGIN} as `origin`). */
static void AddList(KcacheSearch* search, const char* list, const char* origin,
                    const char* soname) {
  if (list == NULL) return;
  const char* start = list;
  for (;;) {
    const char* end = strchr(start, ':');
    size_t length = end != NULL ? (size_t)(end - start) : strlen(start);
    char dir[KCACHE_SEARCH_PATH_ROOM];
    size_t used = 0;
    for (size_t i = 0; i < length && used + 1 < sizeof dir;) {
      size_t skip = 0;
      if (strncmp(start + i, "${ORIGIN}", 9) == 0 && 9 <= length - i) skip = 9;
      if (skip == 0 && strncmp(start + i, "$ORIGIN", 7) == 0 && 7 <= length - i) skip = 7;
      if (skip != 0 && origin != NULL) {
        used += (size_t)snprintf(dir + used, sizeof dir - used, "%s", origin);
        if (used >= sizeof dir) used = sizeof dir - 1;
        i += skip;
      } else {
        dir[used++] = start[i++];
      }
    }
    dir[used] = '\0';
    if (used > 0) KcacheSearchAdd(search, dir, soname);
    if (end == NULL) break;
    start = end + 1;
  }
}

/* What one loaded object's dynamic section says. */
typedef struct {
  int needs;                            /* names the soname DT_NEEDED */
  const char* rpath;                    /* DT_RPATH, or NULL */
  const char* runpath;                  /* DT_RUNPATH, or NULL */
  char origin[KCACHE_SEARCH_PATH_ROOM]; /* its directory */
} ObjectPaths;

static void ReadDynamic(const struct dl_phdr_info* info, const char* soname, ObjectPaths* out) {
  const ElfW(Dyn)* dynamic = NULL;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
      dynamic = (const ElfW(Dyn)*)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    }
  }
  if (dynamic == NULL) return;
  uintptr_t strtab = 0;
  for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_STRTAB) strtab = (uintptr_t)d->d_un.d_ptr;
  }
  if (strtab == 0) return;
  /* The loader relocates DT_STRTAB in place where the section is writable (x86-64); not
   * everywhere. */
  if (strtab < (uintptr_t)info->dlpi_addr) strtab += (uintptr_t)info->dlpi_addr;
  const char* strings = (const char*)strtab;
  for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_NEEDED && strcmp(strings + d->d_un.d_val, soname) == 0) out->needs = 1;
    if (d->d_tag == DT_RPATH) out->rpath = strings + d->d_un.d_val;
    if (d->d_tag == DT_RUNPATH) out->runpath = strings + d->d_un.d_val;
  }
}

typedef struct {
  KcacheSearch* search;
  const char* soname;
  const char* self_file;
  int index;
  ObjectPaths program;
} NeededWalk;

static int VisitObject(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  NeededWalk* walk = data;
  int is_program = walk->index++ == 0;
  if (!is_program && (info->dlpi_name == NULL || info->dlpi_name[0] != '/')) return 0;
  if (walk->self_file != NULL && !is_program && strcmp(info->dlpi_name, walk->self_file) == 0) {
    return 0;
  }
  ObjectPaths object;
  memset(&object, 0, sizeof object);
  if (is_program) {
    ssize_t n = readlink("/proc/self/exe", object.origin, sizeof object.origin - 1);
    object.origin[n > 0 ? n : 0] = '\0';
  } else {
    snprintf(object.origin, sizeof object.origin, "%s", info->dlpi_name);
  }
  char* slash = strrchr(object.origin, '/');
  if (slash != NULL) *(slash == object.origin ? slash + 1 : slash) = '\0';
  ReadDynamic(info, walk->soname, &object);
  if (is_program) walk->program = object;
  if (!object.needs) return 0;
  if (object.runpath == NULL) {
    AddList(walk->search, object.rpath, object.origin, walk->soname);
    /* The program's DT_RPATH is searched for every object whose own has no DT_RUNPATH. */
    if (!is_program && walk->program.runpath == NULL) {
      AddList(walk->search, walk->program.rpath, walk->program.origin, walk->soname);
    }
  }
  AddList(walk->search, LoaderLibraryPath(), NULL, walk->soname);
  AddList(walk->search, object.runpath, object.origin, walk->soname);
  return 0;
}

HIDDEN void KcacheSearchNeeded(KcacheSearch* search, const char* soname, const void* self) {
  NeededWalk walk;
  memset(&walk, 0, sizeof walk);
  walk.search = search;
  walk.soname = soname;
  Dl_info info;
  if (self != NULL && dladdr(self, &info) != 0) walk.self_file = info.dli_fname;
  dl_iterate_phdr(VisitObject, &walk);
}

/* Whether `name` is python, python3 or python3.N. */
static int IsPythonName(const char* name) {
  if (strncmp(name, "python", 6) != 0) return 0;
  for (const char* c = name + 6; *c != '\0'; ++c) {
    if ((*c < '0' || *c > '9') && *c != '.') return 0;
  }
  return 1;
}

static int CompareNames(const void* a, const void* b) {
  return strcmp((const char*)a, (const char*)b);
}

/* Appends each wheel dir under <prefix>/lib/python3.* /<packages>. */
static void AddWheelsUnder(KcacheSearch* search, const char* prefix, const char* packages,
                           const char* soname, const char* const* wheel_dirs, size_t num) {
  char lib[KCACHE_SEARCH_PATH_ROOM];
  snprintf(lib, sizeof lib, "%s/lib", prefix);
  DIR* dir = opendir(lib);
  if (dir == NULL) return;
  char versions[16][64];
  size_t count = 0;
  struct dirent* entry;
  while ((entry = readdir(dir)) != NULL && count < 16) {
    if (strncmp(entry->d_name, "python3", 7) == 0 && strlen(entry->d_name) < 64) {
      snprintf(versions[count++], 64, "%s", entry->d_name);
    }
  }
  closedir(dir);
  qsort(versions, count, sizeof versions[0], CompareNames);
  for (size_t v = 0; v < count; ++v) {
    for (size_t w = 0; w < num; ++w) {
      char wheel[KCACHE_SEARCH_PATH_ROOM], candidate[KCACHE_SEARCH_PATH_ROOM];
      int n =
          snprintf(wheel, sizeof wheel, "%s/%s/%s/%s", lib, versions[v], packages, wheel_dirs[w]);
      if (n <= 0 || (size_t)n >= sizeof wheel) continue;
      n = snprintf(candidate, sizeof candidate, "%s/%s", wheel, soname);
      if (n <= 0 || (size_t)n >= sizeof candidate) continue;
      if (access(candidate, F_OK) == 0) KcacheSearchAdd(search, wheel, soname);
    }
  }
}

HIDDEN void KcacheSearchPythonWheels(KcacheSearch* search, const char* soname,
                                     const char* const* wheel_dirs, size_t num_wheel_dirs,
                                     const char* program_given) {
  const char* run_as = program_given != NULL ? program_given : program_invocation_name;
  if (run_as == NULL || run_as[0] == '\0') return;
  const char* base = strrchr(run_as, '/');
  if (!IsPythonName(base != NULL ? base + 1 : run_as)) return;
  char program[KCACHE_SEARCH_PATH_ROOM];
  program[0] = '\0';
  if (run_as[0] == '/') {
    snprintf(program, sizeof program, "%s", run_as);
  } else if (base != NULL) { /* relative to the working directory */
    char cwd[KCACHE_SEARCH_PATH_ROOM];
    if (getcwd(cwd, sizeof cwd) == NULL) return;
    int n = snprintf(program, sizeof program, "%s/%s", cwd, run_as);
    if (n <= 0 || (size_t)n >= sizeof program) return;
  } else {
    const char* path = getenv("PATH");
    while (path != NULL && *path != '\0' && program[0] == '\0') {
      const char* end = strchr(path, ':');
      size_t length = end != NULL ? (size_t)(end - path) : strlen(path);
      char candidate[KCACHE_SEARCH_PATH_ROOM];
      snprintf(candidate, sizeof candidate, "%.*s/%s", (int)length, path, run_as);
      if (length > 0 && access(candidate, X_OK) == 0)
        snprintf(program, sizeof program, "%s", candidate);
      path = end != NULL ? end + 1 : NULL;
    }
  }
  char* slash = strrchr(program, '/');
  if (slash == NULL) return;
  *slash = '\0'; /* its bin/ */
  slash = strrchr(program, '/');
  if (slash == NULL) return;
  *(slash == program ? slash + 1 : slash) = '\0'; /* the prefix */
  AddWheelsUnder(search, program, "site-packages", soname, wheel_dirs, num_wheel_dirs);
  AddWheelsUnder(search, program, "dist-packages", soname, wheel_dirs, num_wheel_dirs);
  if (strcmp(program, "/usr") == 0) { /* Debian's python3: pip installs under /usr/local */
    AddWheelsUnder(search, "/usr/local", "dist-packages", soname, wheel_dirs, num_wheel_dirs);
  }
  if (strcmp(program, "/usr") == 0) { /* Debian's python3: pip installs under /usr/local */
    AddWheelsUnder(search, "/usr/local", "dist-packages", soname, wheel_dirs, num_wheel_dirs);
  }
  const char* home = getenv("HOME");
  if (home != NULL && home[0] == '/') {
    char local[KCACHE_SEARCH_PATH_ROOM];
    snprintf(local, sizeof local, "%s/.local", home);
    AddWheelsUnder(search, local, "site-packages", soname, wheel_dirs, num_wheel_dirs);
  }
}

/* The loader's cache (glibc's format since 2.32: "glibc-ld.so.cache1.1", entries of 24 bytes
 * whose string offsets count from the file's start): the first x86-64 libc6 entry for `soname`. */
static void AddFromCache(KcacheSearch* search, const char* soname) {
  int fd = open("/etc/ld.so.cache", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < 48 || st.st_size > (64 << 20)) {
    close(fd);
    return;
  }
  size_t size = (size_t)st.st_size;
  const char* cache = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (cache == MAP_FAILED) return;
  static const char kMagic[] = "glibc-ld.so.cache1.1";
  if (memcmp(cache, kMagic, sizeof kMagic - 1) == 0) {
    uint32_t count;
    memcpy(&count, cache + 20, sizeof count);
    const size_t header = 48, entry_size = 24;
    for (uint32_t i = 0; i < count && header + (size_t)(i + 1) * entry_size <= size; ++i) {
      const char* entry = cache + header + (size_t)i * entry_size;
      int32_t flags;
      uint32_t key, value;
      memcpy(&flags, entry, 4);
      memcpy(&key, entry + 4, 4);
      memcpy(&value, entry + 8, 4);
      /* FLAG_ELF_LIBC6 (3) with FLAG_X8664_LIB64 (0x0300) */
      if ((flags & 0xff) != 3 || (flags & 0xff00) != 0x0300) continue;
      if (key >= size || value >= size) continue;
      if (strnlen(cache + key, size - key) == size - key) continue;
      if (strnlen(cache + value, size - value) == size - value) continue;
      if (strcmp(cache + key, soname) != 0) continue;
      const char* path = cache + value;
      const char* slash = strrchr(path, '/');
      if (slash == NULL || search->count >= KCACHE_SEARCH_MAX) break;
      snprintf(search->paths[search->count++], KCACHE_SEARCH_PATH_ROOM, "%s", path);
      break;
    }
  }
  munmap((void*)cache, size);
}

HIDDEN void KcacheSearchSystem(KcacheSearch* search, const char* soname) {
  AddList(search, LoaderLibraryPath(), NULL, soname);
  AddFromCache(search, soname);
  static const char* const kDefaults[] = {"/lib/x86_64-linux-gnu",
                                          "/usr/lib/x86_64-linux-gnu",
                                          "/lib64",
                                          "/usr/lib64",
                                          "/lib",
                                          "/usr/lib"};
  for (size_t i = 0; i < sizeof kDefaults / sizeof kDefaults[0]; ++i) {
    KcacheSearchAdd(search, kDefaults[i], soname);
  }
}

HIDDEN void KcacheSearchNvrtc(KcacheSearch* search, int major, const void* self,
                              const char* python_program, const char* const* roots,
                              size_t num_roots) {
  static const char* const kWheels13[] = {"nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"};
  static const char* const kWheels12[] = {"nvidia/cuda_nvrtc/lib"};
  char soname[32];
  snprintf(soname, sizeof soname, "libnvrtc.so.%d", major);
  if (self != NULL) KcacheSearchNeeded(search, soname, self);
  if (major == 13) {
    KcacheSearchPythonWheels(search, soname, kWheels13, 2, python_program);
  } else {
    KcacheSearchPythonWheels(search, soname, kWheels12, 1, python_program);
  }
  KcacheSearchSystem(search, soname);
  for (size_t i = 0; i < num_roots; ++i) {
    if (roots[i] == NULL || roots[i][0] == '\0') continue;
    char lib64[KCACHE_SEARCH_PATH_ROOM];
    int n = snprintf(lib64, sizeof lib64, "%s/lib64", roots[i]);
    if (n > 0 && (size_t)n < sizeof lib64) KcacheSearchAdd(search, lib64, soname);
  }
}
