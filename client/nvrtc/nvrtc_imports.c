/* Routing a loaded library's imports of the C library (nvrtc_imports.h). */
#define _GNU_SOURCE
#include "client/nvrtc/nvrtc_imports.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Functions that reach a file, the environment, the clock or another process and are not
 * routed: a library importing one cannot be recorded. (Those NVRTC 12 and 13 import are all
 * routed; this list is what a later NVRTC could start to import.) */
static const char* const kUnrouted[] = {
    "open64",
    "openat",
    "openat64",
    "__open_2",
    "__open64_2",
    "__openat_2",
    "__openat64_2",
    "creat",
    "creat64",
    "freopen",
    "freopen64",
    "fstatat",
    "fstatat64",
    "newfstatat",
    "statx",
    "__fxstatat",
    "__fxstatat64",
    "faccessat",
    "euidaccess",
    "eaccess",
    "statfs64",
    "statvfs",
    "statvfs64",
    "opendir64",
    "fdopendir",
    "scandir",
    "scandir64",
    "scandirat",
    "nftw",
    "nftw64",
    "ftw",
    "ftw64",
    "glob",
    "glob64",
    "readlinkat",
    "canonicalize_file_name",
    "rename",
    "renameat",
    "renameat2",
    "link",
    "linkat",
    "symlink",
    "symlinkat",
    "unlinkat",
    "mkdirat",
    "truncate",
    "truncate64",
    "mkstemp",
    "mkstemp64",
    "mkostemp",
    "mkostemps",
    "mkdtemp",
    "tmpfile",
    "tmpfile64",
    "tempnam",
    "tmpnam",
    "tmpnam_r",
    "fchdir",
    "chroot",
    "dlmopen",
    "execl",
    "execle",
    "execlp",
    "execvpe",
    "fexecve",
    "posix_spawn",
    "posix_spawnp",
    "popen",
    "vfork",
    "clone",
    "clone3",
    "secure_getenv",
    "__secure_getenv",
    "clock_gettime",
    "localtime",
    "gmtime",
    "gmtime_r",
    "ctime_r",
    "asctime",
    "mktime",
    "ftime",
    "nl_langinfo",
    "getauxval",
    "name_to_handle_at",
    "open_by_handle_at",
    "utime",
    "utimes",
    "chmod",
    "chown",
};

static int IsUnrouted(const char* name) {
  for (size_t i = 0; i < sizeof kUnrouted / sizeof kUnrouted[0]; ++i) {
    if (strcmp(name, kUnrouted[i]) == 0) return 1;
  }
  return 0;
}

static const KcacheImportRoute* RouteFor(const KcacheImportRoute* routes, size_t count,
                                         const char* name) {
  for (size_t i = 0; i < count; ++i) {
    if (strcmp(name, routes[i].name) == 0) return &routes[i];
  }
  return NULL;
}

/* A dynamic entry's address: the loader relocates most of them in place, not all. */
static uintptr_t Address(const struct link_map* map, ElfW(Addr) value) {
  return value < map->l_addr ? map->l_addr + value : value;
}

/* The PT_GNU_RELRO range of the object loaded at `base` (0, 0 when it has none). */
typedef struct {
  uintptr_t base, start, end;
} Relro;
static int FindRelro(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  Relro* relro = data;
  if (info->dlpi_addr != relro->base) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type == PT_GNU_RELRO) {
      relro->start = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
      relro->end = relro->start + info->dlpi_phdr[i].p_memsz;
    }
  }
  return 1;
}

/* Points the import slot at `slot` to `routed`, keeping what it held in *original. */
static int Rewrite(void** slot, const KcacheImportRoute* route, const Relro* relro, char* why,
                   size_t room) {
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t start = (uintptr_t)slot & ~(uintptr_t)(page - 1);
  if (mprotect((void*)start, (size_t)page, PROT_READ | PROT_WRITE) != 0) {
    snprintf(why, room, "cannot make the import slot of %s writable: %s", route->name,
             strerror(errno));
    return -1;
  }
  void* was = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (was != route->routed) {
    if (*route->original == NULL) __atomic_store_n(route->original, was, __ATOMIC_RELEASE);
    __atomic_store_n(slot, route->routed, __ATOMIC_RELEASE);
  }
  int in_relro = (uintptr_t)slot >= relro->start && (uintptr_t)slot < relro->end;
  if (in_relro) mprotect((void*)start, (size_t)page, PROT_READ);
  return 0;
}

/* What routing needs of a library's dynamic section. */
typedef struct {
  const ElfW(Sym) * symbols;
  const char* strings;
  const ElfW(Rela) * tables[2]; /* its PLT's relocations, then the others */
  size_t sizes[2];
} Imports;

/* Reads the symbol table, the strings and the relocation tables of the library at `map`. */
static int ReadImports(const struct link_map* map, Imports* out, char* why, size_t room) {
  memset(out, 0, sizeof *out);
  for (const ElfW(Dyn)* d = map->l_ld; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB:
        out->symbols = (const ElfW(Sym)*)Address(map, d->d_un.d_ptr);
        break;
      case DT_STRTAB:
        out->strings = (const char*)Address(map, d->d_un.d_ptr);
        break;
      case DT_JMPREL:
        out->tables[0] = (const ElfW(Rela)*)Address(map, d->d_un.d_ptr);
        break;
      case DT_PLTRELSZ:
        out->sizes[0] = d->d_un.d_val;
        break;
      case DT_RELA:
        out->tables[1] = (const ElfW(Rela)*)Address(map, d->d_un.d_ptr);
        break;
      case DT_RELASZ:
        out->sizes[1] = d->d_un.d_val;
        break;
      case DT_PLTREL:
        if (d->d_un.d_val != DT_RELA) {
          snprintf(why, room, "the library's imports are not RELA relocations");
          return -1;
        }
        break;
      default:
        break;
    }
  }
  if (out->symbols == NULL || out->strings == NULL) {
    snprintf(why, room, "the library has no dynamic symbol table");
    return -1;
  }
  return 0;
}

/* Routes the imports one relocation table of the library names. */
static int RouteTable(const struct link_map* map, const Imports* imports, const ElfW(Rela) * table,
                      size_t size, const KcacheImportRoute* routes, size_t count,
                      const Relro* relro, char* why, size_t room) {
  for (size_t i = 0; table != NULL && i < size / sizeof(ElfW(Rela)); ++i) {
    const ElfW(Rela)* r = &table[i];
    unsigned long type = ELF64_R_TYPE(r->r_info);
    size_t index = ELF64_R_SYM(r->r_info);
    if (index == 0) continue;
    const ElfW(Sym)* symbol = &imports->symbols[index];
    if (symbol->st_shndx != SHN_UNDEF) continue; /* the library's own */
    const char* name = imports->strings + symbol->st_name;
    const KcacheImportRoute* route = RouteFor(routes, count, name);
    if (route == NULL) {
      if (IsUnrouted(name)) {
        snprintf(why, room, "the library imports %s, which the stand-in does not follow", name);
        return -1;
      }
      continue;
    }
    if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) {
      snprintf(why, room,
               "the library takes the address of %s in a way the stand-in does not "
               "follow (relocation type %lu)",
               name, type);
      return -1;
    }
    void** slot = (void**)(map->l_addr + r->r_offset);
    if (Rewrite(slot, route, relro, why, room) != 0) return -1;
  }
  return 0;
}

int KcacheRouteImports(void* handle, const KcacheImportRoute* routes, size_t count, char* why,
                       size_t room) {
  struct link_map* map = NULL;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == NULL || map->l_ld == NULL) {
    snprintf(why, room, "cannot find the library's dynamic section");
    return -1;
  }
  Imports imports;
  if (ReadImports(map, &imports, why, room) != 0) return -1;
  Relro relro = {map->l_addr, 0, 0};
  dl_iterate_phdr(FindRelro, &relro);
  for (int t = 0; t < 2; ++t) {
    if (RouteTable(map, &imports, imports.tables[t], imports.sizes[t], routes, count, &relro, why,
                   room) != 0) {
      return -1;
    }
  }
  /* A routed function whose slot was never met is not imported: never called. */
  return 0;
}
