/* The stand-ins' shared parts (stand_in.h). */
#define _GNU_SOURCE
#include "client/stand_in/stand_in.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HIDDEN __attribute__((visibility("hidden")))

HIDDEN const char* KcacheEnv(const char* name) {
  const char* value = getenv(name);
  return value != NULL && value[0] != '\0' ? value : NULL;
}

/* Opens one candidate; 0 with *handle set, else why not in `why`. */
static int TryOpen(const KcacheRealLibrary* how, const char* candidate, const struct stat* self,
                   char* path, size_t path_room, void** handle, char* why, size_t room) {
  struct stat st;
  if (stat(candidate, &st) != 0) {
    snprintf(why, room, "%s: %s", candidate, strerror(errno));
    return -1;
  }
  if (self->st_ino != 0 && st.st_dev == self->st_dev && st.st_ino == self->st_ino) {
    snprintf(why, room, "%s is this stand-in, not the real %s", candidate, how->what);
    return -1;
  }
  snprintf(path, path_room, "%s", candidate);
  if (how->opening != NULL) *how->opening = 1;
  void* opened = dlopen(candidate, how->dlopen_flags | RTLD_LOCAL);
  if (how->opening != NULL) *how->opening = 0;
  if (opened == NULL) {
    const char* error = dlerror();
    snprintf(why, room, "cannot load %s: %s", candidate, error != NULL ? error : "dlopen failed");
    path[0] = '\0';
    return -1;
  }
  if (how->accept != NULL && how->accept(opened, candidate, why, room) != 0) {
    dlclose(opened);
    path[0] = '\0';
    return -1;
  }
  *handle = opened;
  return 0;
}

HIDDEN void* KcacheOpenReal(const KcacheRealLibrary* how, char* path, size_t path_room, char* why,
                            size_t why_room) {
  struct stat self;
  memset(&self, 0, sizeof self);
  Dl_info info;
  if (dladdr(how->self, &info) != 0 && info.dli_fname != NULL) stat(info.dli_fname, &self);
  why[0] = '\0';
  void* handle = NULL;
  const char* chosen = KcacheEnv(how->variable);
  if (chosen != NULL) {
    char reason[1536];
    if (TryOpen(how, chosen, &self, path, path_room, &handle, reason, sizeof reason) != 0) {
      snprintf(why, why_room, "$%s: %s", how->variable, reason);
    }
    return handle;
  }
  size_t used = 0;
  for (size_t i = 0; i < how->num_candidates && handle == NULL; ++i) {
    if (how->candidates[i] == NULL) continue;
    char reason[1536];
    if (TryOpen(how, how->candidates[i], &self, path, path_room, &handle, reason, sizeof reason) !=
            0 &&
        used < why_room) {
      used += (size_t)snprintf(why + used, why_room - used, "%s%s", used ? "; " : "", reason);
    }
  }
  return handle;
}

HIDDEN void* KcacheOpenBeside(const void* self, const char* name, const char* abi_function, int abi,
                              const char* who, const char* without) {
  Dl_info info;
  if (dladdr(self, &info) == 0 || info.dli_fname == NULL) return NULL;
  char path[4096];
  const char* slash = strrchr(info.dli_fname, '/');
  int dir = slash != NULL ? (int)(slash - info.dli_fname) : 1;
  snprintf(path, sizeof path, "%.*s/%s", dir, slash != NULL ? info.dli_fname : ".", name);
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    const char* error = dlerror();
    dprintf(STDERR_FILENO, "kcache: %s: cannot load %s (%s): %s\n", who, path,
            error != NULL ? error : "dlopen failed", without);
    return NULL;
  }
  int (*answer)(void) = (int (*)(void))dlsym(handle, abi_function);
  if (answer == NULL || answer() != abi) {
    dprintf(STDERR_FILENO, "kcache: %s: %s is of another kcache (interface %d, not %d): %s\n", who,
            path, answer != NULL ? answer() : -1, abi, without);
    dlclose(handle);
    return NULL;
  }
  return handle;
}
