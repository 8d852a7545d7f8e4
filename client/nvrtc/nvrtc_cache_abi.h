/* The C interface between kcache's NVRTC stand-in (nvrtc_standin.c: plain C, preloaded into
 * every process `kcache run` starts) and libkcache-nvrtc.so (nvrtc_cache.cc: C++, kcache's
 * object cache), which the stand-in loads (dlopen, RTLD_LOCAL) at the first compile of a
 * process that has a kcached or a store to keep compiles in ($KCACHE_SERVER, $KCACHE_STORE). The
 * stand-in keeps each program's calls and answers the output getters of a served compile;
 * libkcache-nvrtc.so keys compiles (engine/nvrtc/nvrtc_compile.h), looks them up and stores them
 * (docs/nvrtc-standin.md). */
#ifndef KCACHE_CLIENT_NVRTC_NVRTC_CACHE_ABI_H_
#define KCACHE_CLIENT_NVRTC_NVRTC_CACHE_ABI_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a type or function below changes: a stand-in and a libkcache-nvrtc.so of
 * different versions do not work together (kcache_nvrtc_abi tells, and the stand-in then caches
 * nothing). */
#define KCACHE_NVRTC_CACHE_ABI 1

/* One compile as the caller gave it. Strings are NUL-terminated; each array has its count. */
typedef struct {
  const char* library; /* the real NVRTC's path */
  int major, minor;    /* its nvrtcVersion */
  const char* source;
  const char* name; /* NULL when the caller gave none */
  int num_headers;
  const char* const* headers;       /* contents */
  const char* const* include_names; /* names */
  int num_options;
  const char* const* options;
  int num_name_expressions;
  const char* const* name_expressions;
} KcacheNvrtcCall;

/* What an output's two getters answered (nvrtcGetPTXSize and nvrtcGetPTX, ...): each one's
 * nvrtcResult, the size, and the bytes (NULL when the content getter failed). */
typedef struct {
  int size_result;
  size_t size;
  int result;
  const char* bytes;
} KcacheNvrtcOutput;

enum {
  KCACHE_NVRTC_PTX,
  KCACHE_NVRTC_CUBIN,
  KCACHE_NVRTC_LTOIR,
  KCACHE_NVRTC_OPTIXIR,
  KCACHE_NVRTC_TILEIR,
  KCACHE_NVRTC_LOG,
  KCACHE_NVRTC_OUTPUTS
};

/* What a compile gave: its result, every output getter's answers, and nvrtcGetLoweredName's for
 * each of the call's name expressions, in the call's order. */
typedef struct {
  int result;
  KcacheNvrtcOutput outputs[KCACHE_NVRTC_OUTPUTS];
  int num_lowered;
  const int* lowered_results;
  const char* const* lowered_names; /* NULL where the result is not NVRTC_SUCCESS */
} KcacheNvrtcResult;

typedef struct KcacheNvrtcLookup KcacheNvrtcLookup;

/* KCACHE_NVRTC_CACHE_ABI as libkcache-nvrtc.so was built. */
int kcache_nvrtc_abi(void);

/* Looks `call` up, in the calling process (its working directory and environment are the
 * compile's). NULL when the compile is not to be cached or nothing can be asked (a line on stderr
 * with KCACHE_LOG=1 says why); else a lookup to release, with *hit the result to serve (owned by
 * the lookup) or NULL on a miss. Never takes more than the lookup budget (KCACHE_NVRTC_BUDGET_MS,
 * default 50 ms): a kcached away or hung is a miss. */
KcacheNvrtcLookup* kcache_nvrtc_lookup(const KcacheNvrtcCall* call, const KcacheNvrtcResult** hit);

/* After a miss: the real compile's result, and the stand-in's record of what it read
 * (nvrtc_reads.h; `complete` 0 when a fact was lost), made from `started` (CLOCK_REALTIME seconds,
 * read before it started). Stores it when it can be keyed (not waiting for the store to finish);
 * otherwise counts it uncached, by reason. */
void kcache_nvrtc_store(KcacheNvrtcLookup* lookup, const KcacheNvrtcResult* produced,
                        const char* record, size_t record_length, int complete, double started);

void kcache_nvrtc_release(KcacheNvrtcLookup* lookup);

#ifdef __cplusplus
}
#endif

#endif /* KCACHE_CLIENT_NVRTC_NVRTC_CACHE_ABI_H_ */
