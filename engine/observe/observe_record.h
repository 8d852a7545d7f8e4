/* How a call's outcome becomes records of the observation log (observe_log.h), in one place for
 * both recorders of what a process reads: the preload every process of an observed compile runs
 * with (observe_preload.c) and kcache's NVRTC stand-in (client/nvrtc/nvrtc_reads.c). A key
 * built from what a compile read must not depend on which recorder saw it, so each recorder
 * only catches the calls (interposed or routed) and hands their outcome here; the rules below
 * decide the records, and the one formatter writes them.
 *
 * The rules:
 *   - Paths are written absolute, resolved against the working directory or the descriptor
 *     they are relative to. A path that cannot be made absolute, and a record that does not fit
 *     a line, is never written cut short: it is recorded as unobservable
 *     (KCACHE_OBSERVE_UNOBSERVABLE), which leaves the compile uncached.
 *   - A read or a look that succeeded records what it found (READ, EXISTS, LEXISTS, LISTED, a
 *     link's target, realpath's result); one that failed records ABSENT (ENOENT, ENOTDIR) or
 *     FAILED with its errno.
 *   - A call that writes a path (opens it to write, creates, removes or truncates it) records
 *     WRITE when it succeeded; when it failed it wrote nothing, and it told the process what is
 *     there: LEXISTS for EEXIST (a lock or a directory made before), else as a failed look.
 *   - readlink of /proc/self/... is not recorded: it names this process, not an input, and
 *     what is found through it is read by paths that are.
 *   - getenv records the variable with its value, or that it is unset; a value that lets the
 *     machine pick the code (-arch=native and the like) is recorded NATIVE as well.
 *
 * Plain C, with no allocation and nothing but the C library: it runs inside compilers and
 * inside NVRTC's calls. Each function hands its records to the recorder's `sink`. */
#ifndef KCACHE_ENGINE_OBSERVE_OBSERVE_RECORD_H_
#define KCACHE_ENGINE_OBSERVE_OBSERVE_RECORD_H_

#include <stddef.h>

/* The longest record line written; a longer one is recorded as unobservable instead. */
#define KCACHE_OBSERVE_LINE_MAX 12288

/* Takes one record: its kind and its first field, and its second field or NULL (unescaped). */
typedef void (*KcacheObserveSink)(char kind, const char* a, const char* b);

/* Formats the record "<kind> <pid> <a>[\t<b>]\n" (observe_log.h: '\\', '\n' and '\t' escaped)
 * into `line`, or, when it does not fit `cap`, the record that stands for it: unobservable,
 * naming the kind of the record lost (never the record cut short). Its length; 0 only when not
 * even that fits. */
size_t KcacheObserveFormat(char* line, size_t cap, long pid, char kind, const char* a,
                           const char* b);

/* `path` made absolute against `dir` (a descriptor, or AT_FDCWD for the working directory),
 * into `out` when it is not already; NULL when it cannot be (or does not fit `cap`). */
const char* KcacheObserveAbsolute(int dir, const char* path, char* out, size_t cap);

/* `path` (relative to `dir`) with the kind `kind` and the second field `value` (or NULL). */
void KcacheObservePath(KcacheObserveSink sink, char kind, int dir, const char* path,
                       const char* value);
/* A look at `path` that failed with `err`. */
void KcacheObserveFailure(KcacheObserveSink sink, int dir, const char* path, int err);
/* A look at `path` that returned `rc` (0: found, recorded as `found`), with `err` on failure. */
void KcacheObserveLook(KcacheObserveSink sink, char found, int dir, const char* path, int rc,
                       int err);
/* A call that writes `path` and returned `rc` (negative: failed with `err`). */
void KcacheObserveWriteResult(KcacheObserveSink sink, int dir, const char* path, int rc, int err);
/* open(2) and its kin (fopen as O_RDONLY or O_WRONLY): `rc` the descriptor, or negative. */
void KcacheObserveOpen(KcacheObserveSink sink, int dir, const char* path, int flags, int rc,
                       int err);
/* readlink of `path`: `n` bytes of the target in `out`, or negative with `err`. */
void KcacheObserveLink(KcacheObserveSink sink, int dir, const char* path, const char* out, long n,
                       int err);
/* realpath (canonicalize_file_name) of `path`: `result`, or NULL with `err`. */
void KcacheObserveRealpath(KcacheObserveSink sink, const char* path, const char* result, int err);
/* getenv of `name`: `value`, or NULL when it is unset. */
void KcacheObserveGetenv(KcacheObserveSink sink, const char* name, const char* value);

/* Whether `text` (an argument, a variable's value, a shell's command) holds an option that
 * lets the machine pick the code: -march=native, -mcpu=native, -mtune=native, nvcc's
 * -arch=native and --gpu-architecture=native, as a word of its own or inside a longer one
 * (`-Xcompiler=-O2,-march=native`, `sh -c "gcc -march=native ..."`), or nvcc's `-arch native`. */
int KcacheObserveNamesNative(const char* text);

#endif /* KCACHE_ENGINE_OBSERVE_OBSERVE_RECORD_H_ */
