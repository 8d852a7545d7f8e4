/* Which file a process would load for a library's soname without kcache's stand-in, which
 * answers to that soname once preloaded (so the dynamic loader never searches for it again):
 * the paths the stand-in tries, in the order the process would have found them. Plain C needing
 * only the C library (stand_in.h). */
#ifndef KCACHE_CLIENT_STAND_IN_LOADER_SEARCH_H_
#define KCACHE_CLIENT_STAND_IN_LOADER_SEARCH_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { KCACHE_SEARCH_PATH_ROOM = 4096, KCACHE_SEARCH_MAX = 48 };

typedef struct {
  char paths[KCACHE_SEARCH_MAX][KCACHE_SEARCH_PATH_ROOM];
  size_t count;
} KcacheSearch;

/* Appends `dir`/`soname` to `search` (nothing when full or `dir` is empty). */
void KcacheSearchAdd(KcacheSearch* search, const char* dir, const char* soname);

/* Appends, in the loader's order (ld.so(8)), where `soname` is found for each object of the
 * process that names it DT_NEEDED (the program first, then the libraries in load order, the
 * stand-in `self` lies in left out): that object's DT_RPATH when it has no DT_RUNPATH,
 * LD_LIBRARY_PATH, its DT_RUNPATH ($ORIGIN as the object's directory). */
void KcacheSearchNeeded(KcacheSearch* search, const char* soname, const void* self);

/* Appends where a Python process finds `soname` in the nvidia wheels of its environment, as
 * cuda-pathfinder does before the system's loader (and torch through its RPATH): for `program`
 * (NULL: this process's, as it was run) named python or python3[.N], each of `wheel_dirs`
 * ("nvidia/cu13/lib") under lib/python3.* /site-packages (or dist-packages) of the directory
 * above the program's bin/ (a venv's, as run: links not resolved; found on PATH when run by
 * name), of /usr/local for /usr's python (Debian's pip), then of ~/.local. */
void KcacheSearchPythonWheels(KcacheSearch* search, const char* soname,
                              const char* const* wheel_dirs, size_t num_wheel_dirs,
                              const char* program);

/* Appends where dlopen(`soname`) finds it from an object without RPATH or RUNPATH:
 * LD_LIBRARY_PATH, the loader's cache (/etc/ld.so.cache, this machine's x86-64 entries), then
 * the default directories. */
void KcacheSearchSystem(KcacheSearch* search, const char* soname);

/* Where a process finds libnvrtc.so.`major` (13 or 12) without kcache's stand-in, in this order:
 * KcacheSearchNeeded (this process's objects, when `self`, the stand-in's address, is given;
 * NULL: asked for another process, which cannot be seen from here), KcacheSearchPythonWheels (the
 * wheels' nvidia/cu13/lib, then nvidia/cuda_nvrtc/lib; 12: nvidia/cuda_nvrtc/lib),
 * KcacheSearchSystem, then each of `roots`' lib64 (NULL entries skipped): the toolkit roots the
 * stand-in falls back to. */
void KcacheSearchNvrtc(KcacheSearch* search, int major, const void* self,
                       const char* python_program, const char* const* roots, size_t num_roots);

#ifdef __cplusplus
}
#endif

#endif /* KCACHE_CLIENT_STAND_IN_LOADER_SEARCH_H_ */
