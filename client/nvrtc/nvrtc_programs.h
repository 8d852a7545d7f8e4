/* The programs of a process, as kcache's NVRTC stand-in keeps them (nvrtc_standin.c): what the
 * caller gave each (nvrtcCreateProgram, nvrtcAddNameExpression), which the cache keys a
 * compile by, and, for a compile served from the cache instead of compiled, what its output
 * getters answer. Keyed by the real NVRTC's program handle. Thread-safe. Plain C. */
#ifndef KCACHE_CLIENT_NVRTC_NVRTC_PROGRAMS_H_
#define KCACHE_CLIENT_NVRTC_NVRTC_PROGRAMS_H_

#include <stddef.h>

#include "client/nvrtc/nvrtc_cache_abi.h"
#include "client/nvrtc/nvrtc_entries.h"

/* Keeps a copy of a program the real nvrtcCreateProgram made. 0 on success; -1 without memory
 * (the program is then never cached: KcacheProgramCall fails for it). */
int KcacheProgramCreated(nvrtcProgram prog, const char* source, const char* name, int num_headers,
                         const char* const* headers, const char* const* include_names);
/* A name expression the real nvrtcAddNameExpression took. */
void KcacheProgramNamed(nvrtcProgram prog, const char* expression);
/* Forgets it (before the real nvrtcDestroyProgram). */
void KcacheProgramDestroyed(nvrtcProgram prog);

/* The call `prog` compiled with `options` makes, for the cache (KcacheNvrtcCall's library and
 * version left to the caller): *call filled, pointing into the snapshot returned (copies: a
 * destroy in another thread cannot pull them away), to free with KcacheProgramCallDone. NULL
 * when the program is not known (made before the stand-in loaded) or without memory. */
typedef struct KcacheProgramSnapshot KcacheProgramSnapshot;
KcacheProgramSnapshot* KcacheProgramCall(nvrtcProgram prog, int num_options,
                                         const char* const* options, KcacheNvrtcCall* call);
void KcacheProgramCallDone(KcacheProgramSnapshot* snapshot);

/* Serves `result` for `prog`: its output getters answer from a copy of it until it is compiled
 * again or destroyed. 0, or -1 without memory (then nothing is served). */
int KcacheProgramServe(nvrtcProgram prog, const KcacheNvrtcResult* result);
/* Stops serving `prog` (before the real NVRTC compiles it). */
void KcacheProgramUnserve(nvrtcProgram prog);

/* For a served program, what output `kind`'s getters answer: 1 with *answer set (size_query:
 * the size getter's result, the size written to *size when it succeeded; else the content
 * getter's, the bytes copied to `out` when it succeeded); 0 when `prog` is not served, or when
 * `size` (`out`) is NULL: the real getter answers that as it does any program. */
int KcacheServedOutput(nvrtcProgram prog, int kind, int size_query, size_t* size, char* out,
                       nvrtcResult* answer);
/* For a served program, nvrtcGetLoweredName's answer for `expression`: 1 with *answer (and
 * *lowered, valid until the program is destroyed or compiled again); 0 when not served, or
 * when `lowered` is NULL (the real NVRTC answers). */
int KcacheServedLoweredName(nvrtcProgram prog, const char* expression, const char** lowered,
                            nvrtcResult* answer);

#endif /* KCACHE_CLIENT_NVRTC_NVRTC_PROGRAMS_H_ */
