/* Routing a loaded library's own calls of the C library through functions of the caller's: its
 * import slots (its GOT) for those functions are rewritten, once, so that only that library's
 * calls pass through them (the NVRTC stand-in's recorder, nvrtc_reads.h, routes the real
 * NVRTC's this way). Plain C, x86-64. */
#ifndef KCACHE_CLIENT_NVRTC_NVRTC_IMPORTS_H_
#define KCACHE_CLIENT_NVRTC_NVRTC_IMPORTS_H_

#include <stddef.h>

/* One function routed: the library's calls of `name` go to `routed`; what its slot held before
 * (the C library's own function) is kept in *original, for `routed` to call. */
typedef struct {
  const char* name;
  void* routed;
  void** original;
} KcacheImportRoute;

/* Rewrites the import slots of the library loaded as `handle` (dlopen's) for each of `routes`.
 * 0 when done; -1 with why in `why` when the library imports a function that reaches a file,
 * the environment, the clock or another process and no route names (a later library could
 * start to import one: its calls would not be seen), takes such a function's address in a way
 * not followed, or its import table cannot be read or rewritten. A function of the routes the
 * library does not import is never called by it, and needs nothing. */
int KcacheRouteImports(void* handle, const KcacheImportRoute* routes, size_t count, char* why,
                       size_t room);

#endif /* KCACHE_CLIENT_NVRTC_NVRTC_IMPORTS_H_ */
