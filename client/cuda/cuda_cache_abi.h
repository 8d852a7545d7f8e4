/* The C interface between kcache's libcuda.so.1 stand-in (cuda_standin.c: plain C, preloaded
 * into the processes `kcache run` starts when the node has a CUDA driver) and libkcache-cuda.so
 * (cuda_cache.cc: C++, kcache's client), which the stand-in loads (dlopen, RTLD_LOCAL) at the
 * first module or library load of a process that has a kcached to ask ($KCACHE_SERVER). The
 * stand-in forwards every driver call to the real driver and asks the cache, for each image a
 * caller loads, whether kcache holds SASS for this GPU that the image lacks
 * (docs/ptx-libraries.md, "Serving at load"). */
#ifndef KCACHE_CLIENT_CUDA_CUDA_CACHE_ABI_H_
#define KCACHE_CLIENT_CUDA_CUDA_CACHE_ABI_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a type or function below changes: a stand-in and a libkcache-cuda.so of
 * different versions do not work together (kcache_cuda_abi tells, and the stand-in then serves
 * nothing). */
#define KCACHE_CUDA_CACHE_ABI 2

/* One load as the caller asked for it, and the GPU it is for. */
typedef struct {
  const char* function;   /* "cuModuleLoadData", "cuLibraryLoadData", ...: for log lines */
  const void* image;      /* as the caller passed it: a fatbin, a fatbin wrapper, a cubin, PTX */
  int sm_major, sm_minor; /* the GPU the code is loaded for */
  int driver;             /* cuDriverGetVersion, e.g. 13000 */
  unsigned num_options;   /* the JIT options the caller passed (CUjit_option numbers) */
  const int* options;
  void* const* option_values;
} KcacheCudaLoad;

/* The SASS kcache holds for `load`'s image and GPU, which the image lacks: a cubin of `*size`
 * bytes that stays valid for the life of the process; NULL when the load is left to the driver
 * as the caller made it (the image has SASS that runs there, or no PTX kcache could have built
 * from, a JIT option kcache does not key, no kcached, a miss, anything unsure). Thread-safe. */
const void* kcache_cuda_sass_for(const KcacheCudaLoad* load, size_t* size);

/* What the driver answered when given that SASS (a CUresult: 0 loaded); the stand-in then loads
 * the caller's image itself when it was not 0. */
void kcache_cuda_sass_loaded(const KcacheCudaLoad* load, const void* sass, int result);

/* Connects to kcached now (not waiting for its hello), so that the process's first load does not
 * pay for it: the stand-in calls it from a thread of its own after cuInit. Thread-safe. */
void kcache_cuda_begin(void);

/* KCACHE_CUDA_CACHE_ABI of the library. */
int kcache_cuda_abi(void);

#ifdef __cplusplus
}
#endif

#endif /* KCACHE_CLIENT_CUDA_CUDA_CACHE_ABI_H_ */
