/* What kcache's stand-ins for CUDA libraries (client/nvrtc: libnvrtc.so.13; client/cuda:
 * libcuda.so.1) share: finding and opening the real library each forwards to, and opening the
 * cache half each loads beside itself. Plain C needing only the C library, as the stand-ins are
 * (they load into every process `kcache run` starts). */
#ifndef KCACHE_CLIENT_STAND_IN_STAND_IN_H_
#define KCACHE_CLIENT_STAND_IN_STAND_IN_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether an opened candidate is the real library: 0 to take it, else why not in `why` (the
 * handle is then closed). */
typedef int (*KcacheAcceptReal)(void* handle, const char* path, char* why, size_t room);

/* Where a stand-in looks for the real library, and how it opens it. */
typedef struct {
  const char* what;              /* "NVRTC", "driver": for messages */
  const char* variable;          /* "KCACHE_REAL_NVRTC": when set, the only candidate */
  const char* const* candidates; /* else these paths, in order (NULL entries skipped) */
  size_t num_candidates;
  int dlopen_flags;        /* RTLD_NOW or RTLD_LAZY (RTLD_LOCAL is added) */
  KcacheAcceptReal accept; /* NULL: any library that opens */
  const void* self;        /* an address inside the stand-in: never opened itself */
  volatile int* opening;   /* set to 1 while a candidate is dlopen'd (may be NULL) */
} KcacheRealLibrary;

/* Opens the real library as `how` says: each candidate that is a file and not the stand-in
 * itself (same device and inode), dlopen'd with RTLD_LOCAL, and taken when `accept` takes it.
 * Its path goes into `path` before it is opened (so a call the library makes into the stand-in
 * while it initializes can find it: KcacheRealLibrary::opening) and stays there on success. The
 * handle, or NULL with each candidate's reason in `why` ("" when there was none). */
void* KcacheOpenReal(const KcacheRealLibrary* how, char* path, size_t path_room, char* why,
                     size_t why_room);

/* Opens `name` in the stand-in's own directory (the file `self` lies in), RTLD_NOW | RTLD_LOCAL,
 * and checks that its `abi_function` answers `abi`. NULL, with a line on stderr that starts with
 * `who` ("libnvrtc.so.13 stand-in") and ends with `without` (what the process does without
 * it), when it cannot be opened or is of another interface. */
void* KcacheOpenBeside(const void* self, const char* name, const char* abi_function, int abi,
                       const char* who, const char* without);

/* $name, or NULL when it is unset or empty. */
const char* KcacheEnv(const char* name);

#ifdef __cplusplus
}
#endif

#endif /* KCACHE_CLIENT_STAND_IN_STAND_IN_H_ */
