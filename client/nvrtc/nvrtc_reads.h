/* What the real NVRTC reads while it compiles, as kcache's NVRTC stand-in records it
 * (nvrtc_standin.c; docs/nvrtc-standin.md, "What a compile reads").
 *
 * NVRTC compiles in the caller's process, so no other process can watch it as kcache's
 * launchers watch a compiler (engine/observe/). Instead, the stand-in routes the real NVRTC's
 * own calls of the C library's file, environment, clock and process functions through itself:
 * it rewrites the real library's import slots (its GOT) for those functions, once, when it loads
 * it. Calls from anything else in the process (other threads reading weights, logs, Python
 * modules) do not pass through it, so a compile's record holds what NVRTC itself looked at.
 *
 * A record is text in the observation log's format (engine/observe/observe_log.h: one
 * "<kind> <pid> <payload>" line per fact, paths absolute), made by the rules the compilers' preload
 * follows too (engine/observe/observe_record.h), so engine/observe/observed_reads.h reads it back
 * and keys it alike. A call made on a thread that is compiling goes to that compile's record; one
 * made on a thread of NVRTC's own (no compile of the thread's) goes to every compile under way.
 *
 * Plain C, like the stand-in. */
#ifndef KCACHE_CLIENT_NVRTC_NVRTC_READS_H_
#define KCACHE_CLIENT_NVRTC_NVRTC_READS_H_

#include <stddef.h>

/* A record that cannot be kept whole is not kept: past this, a compile's record is incomplete. */
#define KCACHE_NVRTC_READS_MAX_BYTES ((size_t)64 << 20)

/* Routes the calls of the library loaded as `handle` (dlopen's) through the recorder. 0 when
 * every import of it that reaches a file, the environment, the clock or another process is
 * routed; -1 otherwise, with why in `why` (the library imports such a function the recorder
 * does not know, or its import table cannot be read and rewritten): its compiles then cannot be
 * recorded, and must not be cached. Call once per library, before its first compile. */
int KcacheNvrtcReadsHook(void* handle, char* why, size_t room);

typedef struct KcacheNvrtcReads KcacheNvrtcReads;

/* Starts recording a compile on this thread. NULL when it cannot (too many at once, no
 * memory): the compile then runs unrecorded. */
KcacheNvrtcReads* KcacheNvrtcReadsBegin(void);

/* Stops recording it and returns its record (malloc'd, NUL-terminated, for free()), its length
 * in *length; *complete is 1 when every fact went into it, 0 when one was lost (memory, the
 * size cap), in which case the record must not key anything. NULL only when out of memory. */
char* KcacheNvrtcReadsEnd(KcacheNvrtcReads* reads, size_t* length, int* complete);

#endif /* KCACHE_CLIENT_NVRTC_NVRTC_READS_H_ */
