/* kcache's libnvrtc.so.13 stand-in (and, built with KCACHE_NVRTC_MAJOR=12, its libnvrtc.so.12
 * one; below, 13 is the major version it is built for): a library with NVRTC's soname and
 * every symbol NVRTC 13 exports (nvrtc_entries.h), under NVRTC's version node (libnvrtc.map.in),
 * that `kcache run` preloads (LD_PRELOAD) into the processes it starts, so that a program linked
 * with -lnvrtc, a dlopen("libnvrtc.so.13") and cuda-python's loader all reach it instead of the
 * real NVRTC (docs/nvrtc-standin.md). Each call is forwarded to the real NVRTC, opened by its
 * full path with dlopen (RTLD_LOCAL) at the first call, once, whichever thread makes it:
 *   $KCACHE_REAL_NVRTC ($KCACHE_REAL_NVRTC_12 for 12) when set (the only candidate then: a
 *   user's choice, which `kcache run` keeps), else the libnvrtc.so.13 this process would have
 *   loaded without the stand-in (Load below); never this library itself (a candidate that is
 *   the same file, by device and inode, is refused), and only an NVRTC whose nvrtcVersion
 *   says 13.
 * Without one, every entry point answers NVRTC_ERROR_INTERNAL_ERROR (nvrtcGetErrorString says
 * why) and one line on stderr names what to set: the host process goes on. With KCACHE_LOG=1
 * it writes a line when it loads the real NVRTC and one per nvrtcCompileProgram it forwards.
 * When it loads the real NVRTC it routes that library's file, environment and clock calls
 * through nvrtc_reads.c, which records what each compile reads; with KCACHE_NVRTC_READS_LOG
 * set, each compile's record is appended to that file.
 *
 * Plain C that needs only the C library, built without kcache's sanitizer and warning flags: it
 * loads into every process `kcache run` starts (Python, compilers, shells), where no C++ or
 * sanitizer runtime may follow it. It does nothing until an NVRTC function is called. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/nvrtc/nvrtc_cache_abi.h"
#include "client/nvrtc/nvrtc_entries.h"
#include "client/nvrtc/nvrtc_programs.h"
#include "client/nvrtc/nvrtc_reads.h"
#include "client/stand_in/loader_search.h"
#include "client/stand_in/stand_in.h"

#define KCACHE_STRING(x) #x
#define KCACHE_EXPANDED_STRING(x) KCACHE_STRING(x)
/* "13", the soname and the variable naming the real library, for the major version built for. */
#define MAJOR KCACHE_EXPANDED_STRING(KCACHE_NVRTC_MAJOR)
#define SONAME "libnvrtc.so." MAJOR
#define WHO SONAME " stand-in"
#if KCACHE_NVRTC_MAJOR == 13
#define REAL_VARIABLE "KCACHE_REAL_NVRTC"
#else
#define REAL_VARIABLE "KCACHE_REAL_NVRTC_" MAJOR
#endif

#define EXPORT __attribute__((visibility("default")))
#define HIDDEN __attribute__((visibility("hidden")))

/* ---------------------------------------------------------------- the table */

enum {
#define INDEX_RESULT(name, params, args) kIndex_##name,
#define INDEX_OWN(name) kIndex_##name,
#define INDEX_INTERNAL(name, fallback) kIndex_##name,
  KCACHE_NVRTC_FUNCTIONS(INDEX_RESULT, INDEX_OWN, INDEX_INTERNAL) kEntryCount
};

static const char* const kEntryNames[kEntryCount] = {
#define NAME_RESULT(name, params, args) #name,
#define NAME_OWN(name) #name,
#define NAME_INTERNAL(name, fallback) #name,
    KCACHE_NVRTC_FUNCTIONS(NAME_RESULT, NAME_OWN, NAME_INTERNAL)};

/* ---------------------------------------------------------------- state, set once by Load */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void* g_real[kEntryCount]; /* the real library's functions; NULL: it lacks one */
static int g_loaded;              /* a real NVRTC is loaded */
static int g_log;                 /* KCACHE_LOG=1 */
static char g_path[4096];         /* the real NVRTC's path, as it was named */
static int g_major, g_minor;      /* its version */
static char g_told[kEntryCount];  /* "has no NAME" already said */
static int g_recordable;          /* its compiles' reads are recorded (nvrtc_reads.h) */
static char g_unrecordable[1024]; /* ... if not, why */
static const char* g_reads_log;   /* KCACHE_NVRTC_READS_LOG: where each record is appended */

/* Writes a line to stderr (formatted in one buffer, written at once: lines of several threads
 * do not interleave). */
#define SAY(...) dprintf(STDERR_FILENO, __VA_ARGS__)

#define Env KcacheEnv

/* Takes an NVRTC whose nvrtcVersion says 13 (KcacheAcceptReal). */
static int IsNvrtcOfMajor(void* handle, const char* path, char* why, size_t room) {
  nvrtcResult (*version)(int*, int*) = (nvrtcResult(*)(int*, int*))dlsym(handle, "nvrtcVersion");
  int major = 0, minor = 0;
  if (version == NULL || version(&major, &minor) != KCACHE_NVRTC_SUCCESS ||
      major != KCACHE_NVRTC_MAJOR) {
    snprintf(why, room, "%s is not NVRTC " MAJOR " (nvrtcVersion says %d.%d)", path, major, minor);
    return -1;
  }
  g_major = major;
  g_minor = minor;
  return 0;
}

/* The real NVRTC, found and loaded (pthread_once): $KCACHE_REAL_NVRTC, else the library this
 * process would have loaded without the stand-in (loader_search.h): where the loader finds it
 * for an object that links it, the Python environment's nvidia wheel (cuda-pathfinder's and
 * torch's), where dlopen(SONAME) finds it, then $KCACHE_REAL_CUDA_HOME's (the toolkit behind a
 * kcache run shim root), $CUDA_HOME's, $CUDA_PATH's and /usr/local/cuda's lib64. */
static void Load(void) {
  g_log = Env("KCACHE_LOG") != NULL && strcmp(getenv("KCACHE_LOG"), "1") == 0;
  static KcacheSearch search; /* large: not on the calling thread's stack */
  search.count = 0;
  const char* roots[] = {Env("KCACHE_REAL_CUDA_HOME"), Env("CUDA_HOME"), Env("CUDA_PATH"),
                         "/usr/local/cuda"};
  KcacheSearchNvrtc(&search, KCACHE_NVRTC_MAJOR, (const void*)&Load, NULL, roots,
                    sizeof roots / sizeof roots[0]);
  static const char* candidates[KCACHE_SEARCH_MAX];
  for (size_t i = 0; i < search.count; ++i) candidates[i] = search.paths[i];
  KcacheRealLibrary how = {
      .what = "NVRTC",
      .variable = REAL_VARIABLE,
      .candidates = candidates,
      .num_candidates = search.count,
      .dlopen_flags = RTLD_NOW,
      .accept = IsNvrtcOfMajor,
      .self = (const void*)&Load,
  };
  char why[2048];
  void* handle = KcacheOpenReal(&how, g_path, sizeof g_path, why, sizeof why);
  if (handle != NULL) {
    for (int i = 0; i < kEntryCount; ++i) g_real[i] = dlsym(handle, kEntryNames[i]);
    g_recordable = KcacheNvrtcReadsHook(handle, g_unrecordable, sizeof g_unrecordable) == 0;
    g_loaded = 1;
  }
  if (!g_loaded) {
    SAY("kcache: " WHO ": no real NVRTC (%s): set " REAL_VARIABLE " to the path of the real " SONAME
        "; every NVRTC call fails until then\n",
        why[0] ? why : "none found");
  } else if (g_log) {
    SAY("kcache: nvrtc: forwarding to %s (NVRTC %d.%d)\n", g_path, g_major, g_minor);
  }
  if (g_loaded && !g_recordable) {
    SAY("kcache: " WHO
        ": what %s reads cannot be recorded (%s): its compiles are forwarded, "
        "never cached\n",
        g_path, g_unrecordable);
  }
  g_reads_log = Env("KCACHE_NVRTC_READS_LOG");
}

/* The real function `index` (NULL when there is none), the real NVRTC loaded first. */
static void* Real(int index) {
  pthread_once(&g_once, Load);
  return g_real[index];
}

/* What entry `index` answers without a real function: NVRTC_ERROR_INTERNAL_ERROR, and a line
 * the first time when the real NVRTC is loaded but lacks it. */
static nvrtcResult Missing(int index) {
  if (g_loaded && !__atomic_exchange_n(&g_told[index], 1, __ATOMIC_RELAXED)) {
    SAY("kcache: " WHO ": %s (NVRTC %d.%d) has no %s: it answers NVRTC_ERROR_INTERNAL_ERROR\n",
        g_path, g_major, g_minor, kEntryNames[index]);
  }
  return KCACHE_NVRTC_ERROR_INTERNAL_ERROR;
}

/* ---------------------------------------------------------------- the documented functions */

#define DEFINE_RESULT(name, params, args)                                   \
  EXPORT nvrtcResult name params {                                          \
    nvrtcResult(*real) params = (nvrtcResult(*) params)Real(kIndex_##name); \
    if (real == NULL) return Missing(kIndex_##name);                        \
    return real args;                                                       \
  }
#define DEFINE_NOTHING(...)
KCACHE_NVRTC_FUNCTIONS(DEFINE_RESULT, DEFINE_NOTHING, DEFINE_NOTHING)

/* nvrtcResult's names (nvrtc.h), for nvrtcGetErrorString without a real NVRTC. */
static const char* const kResultNames[] = {"NVRTC_SUCCESS",
                                           "NVRTC_ERROR_OUT_OF_MEMORY",
                                           "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
                                           "NVRTC_ERROR_INVALID_INPUT",
                                           "NVRTC_ERROR_INVALID_PROGRAM",
                                           "NVRTC_ERROR_INVALID_OPTION",
                                           "NVRTC_ERROR_COMPILATION",
                                           "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
                                           "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
                                           "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
                                           "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
                                           "NVRTC_ERROR_INTERNAL_ERROR",
                                           "NVRTC_ERROR_TIME_FILE_WRITE_FAILED",
                                           "NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED",
                                           "NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED",
                                           "NVRTC_ERROR_PCH_CREATE",
                                           "NVRTC_ERROR_CANCELLED",
                                           "NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED"};

EXPORT const char* nvrtcGetErrorString(nvrtcResult result) {
  const char* (*real)(nvrtcResult) = (const char* (*)(nvrtcResult))Real(kIndex_nvrtcGetErrorString);
  if (real != NULL) return real(result);
  if (result == KCACHE_NVRTC_ERROR_INTERNAL_ERROR && !g_loaded) {
    return "NVRTC_ERROR_INTERNAL_ERROR (kcache's " WHO " found no real NVRTC: set " REAL_VARIABLE
           " to the path of the real " SONAME ")";
  }
  if (result >= 0 && (size_t)result < sizeof kResultNames / sizeof kResultNames[0]) {
    return kResultNames[result];
  }
  return "NVRTC_ERROR unknown";
}

static double Milliseconds(const struct timespec* from, const struct timespec* to) {
  return (double)(to->tv_sec - from->tv_sec) * 1e3 + (double)(to->tv_nsec - from->tv_nsec) / 1e6;
}

/* ---------------------------------------------------------------- the cache */

/* libkcache-nvrtc.so's functions (nvrtc_cache_abi.h), loaded once by LoadCache. */
typedef struct {
  KcacheNvrtcLookup* (*lookup)(const KcacheNvrtcCall*, const KcacheNvrtcResult**);
  void (*store)(KcacheNvrtcLookup*, const KcacheNvrtcResult*, const char*, size_t, int, double);
  void (*release)(KcacheNvrtcLookup*);
} Cache;
static pthread_once_t g_cache_once = PTHREAD_ONCE_INIT;
static Cache g_cache;
static int g_cache_loaded;

/* Loads libkcache-nvrtc.so beside this library when there is a kcached or a store to keep
 * compiles in ($KCACHE_SERVER, $KCACHE_STORE), the real NVRTC's compiles can be recorded, and
 * $KCACHE_NVRTC_CACHE is not 0. */
static void LoadCache(void) {
  if (!g_loaded || !g_recordable) return;
  if (Env("KCACHE_SERVER") == NULL && Env("KCACHE_STORE") == NULL) return;
  const char* off = Env("KCACHE_NVRTC_CACHE");
  if (off != NULL && strcmp(off, "0") == 0) return;
  void* handle =
      KcacheOpenBeside((const void*)&LoadCache, "libkcache-nvrtc.so", "kcache_nvrtc_abi",
                       KCACHE_NVRTC_CACHE_ABI, WHO, "NVRTC compiles are forwarded, not cached");
  if (handle == NULL) return;
  g_cache.lookup = (__typeof__(g_cache.lookup))dlsym(handle, "kcache_nvrtc_lookup");
  g_cache.store = (__typeof__(g_cache.store))dlsym(handle, "kcache_nvrtc_store");
  g_cache.release = (__typeof__(g_cache.release))dlsym(handle, "kcache_nvrtc_release");
  g_cache_loaded = g_cache.lookup != NULL && g_cache.store != NULL && g_cache.release != NULL;
}

/* The cache, loaded first (NULL when there is none). */
static const Cache* TheCache(void) {
  pthread_once(&g_once, Load);
  pthread_once(&g_cache_once, LoadCache);
  return g_cache_loaded ? &g_cache : NULL;
}

/* ---------------------------------------------------------------- programs */

typedef nvrtcResult (*SizeGetter)(nvrtcProgram, size_t*);
typedef nvrtcResult (*ContentGetter)(nvrtcProgram, char*);

EXPORT nvrtcResult nvrtcCreateProgram(nvrtcProgram* prog, const char* src, const char* name,
                                      int num_headers, const char* const* headers,
                                      const char* const* include_names) {
  nvrtcResult (*real)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                      const char* const*) = (__typeof__(real))Real(kIndex_nvrtcCreateProgram);
  if (real == NULL) return Missing(kIndex_nvrtcCreateProgram);
  nvrtcResult result = real(prog, src, name, num_headers, headers, include_names);
  if (result == KCACHE_NVRTC_SUCCESS && prog != NULL && *prog != NULL && TheCache() != NULL) {
    KcacheProgramCreated(*prog, src, name, num_headers, headers, include_names);
  }
  return result;
}

EXPORT nvrtcResult nvrtcDestroyProgram(nvrtcProgram* prog) {
  nvrtcResult (*real)(nvrtcProgram*) = (__typeof__(real))Real(kIndex_nvrtcDestroyProgram);
  if (real == NULL) return Missing(kIndex_nvrtcDestroyProgram);
  if (prog != NULL && *prog != NULL) KcacheProgramDestroyed(*prog);
  return real(prog);
}

EXPORT nvrtcResult nvrtcAddNameExpression(nvrtcProgram prog, const char* const name_expression) {
  nvrtcResult (*real)(nvrtcProgram, const char*) =
      (__typeof__(real))Real(kIndex_nvrtcAddNameExpression);
  if (real == NULL) return Missing(kIndex_nvrtcAddNameExpression);
  nvrtcResult result = real(prog, name_expression);
  if (result == KCACHE_NVRTC_SUCCESS) KcacheProgramNamed(prog, name_expression);
  return result;
}

EXPORT nvrtcResult nvrtcGetLoweredName(nvrtcProgram prog, const char* const name_expression,
                                       const char** lowered_name) {
  nvrtcResult answer;
  if (KcacheServedLoweredName(prog, name_expression, lowered_name, &answer)) return answer;
  nvrtcResult (*real)(nvrtcProgram, const char*, const char**) =
      (__typeof__(real))Real(kIndex_nvrtcGetLoweredName);
  if (real == NULL) return Missing(kIndex_nvrtcGetLoweredName);
  return real(prog, name_expression, lowered_name);
}

/* An output's two getters: a served program's answers, else the real ones. */
#define DEFINE_OUTPUT(kind, size_name, name)                                   \
  EXPORT nvrtcResult size_name(nvrtcProgram prog, size_t* size) {              \
    nvrtcResult answer;                                                        \
    if (KcacheServedOutput(prog, kind, 1, size, NULL, &answer)) return answer; \
    SizeGetter real = (SizeGetter)Real(kIndex_##size_name);                    \
    if (real == NULL) return Missing(kIndex_##size_name);                      \
    return real(prog, size);                                                   \
  }                                                                            \
  EXPORT nvrtcResult name(nvrtcProgram prog, char* out) {                      \
    nvrtcResult answer;                                                        \
    if (KcacheServedOutput(prog, kind, 0, NULL, out, &answer)) return answer;  \
    ContentGetter real = (ContentGetter)Real(kIndex_##name);                   \
    if (real == NULL) return Missing(kIndex_##name);                           \
    return real(prog, out);                                                    \
  }
DEFINE_OUTPUT(KCACHE_NVRTC_PTX, nvrtcGetPTXSize, nvrtcGetPTX)
DEFINE_OUTPUT(KCACHE_NVRTC_CUBIN, nvrtcGetCUBINSize, nvrtcGetCUBIN)
DEFINE_OUTPUT(KCACHE_NVRTC_LTOIR, nvrtcGetLTOIRSize, nvrtcGetLTOIR)
DEFINE_OUTPUT(KCACHE_NVRTC_OPTIXIR, nvrtcGetOptiXIRSize, nvrtcGetOptiXIR)
#if KCACHE_NVRTC_MAJOR >= 13
DEFINE_OUTPUT(KCACHE_NVRTC_TILEIR, nvrtcGetTileIRSize, nvrtcGetTileIR)
#define TILEIR_SIZE_GETTER kIndex_nvrtcGetTileIRSize
#define TILEIR_GETTER kIndex_nvrtcGetTileIR
#else
/* NVRTC 12's names of the LTO-IR getters, which answer as those do (nvrtc_entries.h). */
DEFINE_OUTPUT(KCACHE_NVRTC_LTOIR, nvrtcGetNVVMSize, nvrtcGetNVVM)
#define TILEIR_SIZE_GETTER -1 /* NVRTC 12 has none */
#define TILEIR_GETTER -1
#endif
DEFINE_OUTPUT(KCACHE_NVRTC_LOG, nvrtcGetProgramLogSize, nvrtcGetProgramLog)

/* The real getters of each output, in KCACHE_NVRTC_* order; -1: the stand-in has none. */
static const int kSizeGetters[KCACHE_NVRTC_OUTPUTS] = {
    kIndex_nvrtcGetPTXSize,     kIndex_nvrtcGetCUBINSize, kIndex_nvrtcGetLTOIRSize,
    kIndex_nvrtcGetOptiXIRSize, TILEIR_SIZE_GETTER,       kIndex_nvrtcGetProgramLogSize};
static const int kContentGetters[KCACHE_NVRTC_OUTPUTS] = {
    kIndex_nvrtcGetPTX,     kIndex_nvrtcGetCUBIN, kIndex_nvrtcGetLTOIR,
    kIndex_nvrtcGetOptiXIR, TILEIR_GETTER,        kIndex_nvrtcGetProgramLog};

/* What the real NVRTC gives for the compiled `prog`: every output getter's answers and each
 * name expression's lowered name, into *out (bytes malloc'd: FreeProduced). 0, or -1 without
 * memory. */
static int Produced(nvrtcProgram prog, nvrtcResult result, const KcacheNvrtcCall* call,
                    KcacheNvrtcResult* out) {
  memset(out, 0, sizeof *out);
  out->result = result;
  for (int i = 0; i < KCACHE_NVRTC_OUTPUTS; ++i) {
    KcacheNvrtcOutput* o = &out->outputs[i];
    SizeGetter size = kSizeGetters[i] >= 0 ? (SizeGetter)Real(kSizeGetters[i]) : NULL;
    ContentGetter content =
        kContentGetters[i] >= 0 ? (ContentGetter)Real(kContentGetters[i]) : NULL;
    /* A getter the real NVRTC lacks answers as its wrapper does, without the wrapper's line. */
    o->size_result = size != NULL ? size(prog, &o->size) : KCACHE_NVRTC_ERROR_INTERNAL_ERROR;
    if (o->size_result != KCACHE_NVRTC_SUCCESS) o->size = 0;
    char* bytes = malloc(o->size > 0 ? o->size : 1);
    if (bytes == NULL) return -1;
    o->result = content != NULL ? content(prog, bytes) : KCACHE_NVRTC_ERROR_INTERNAL_ERROR;
    o->bytes = bytes;
  }
  int n = call->num_name_expressions;
  out->num_lowered = n;
  if (n > 0) {
    int* results = calloc((size_t)n, sizeof(int));
    const char** names = calloc((size_t)n, sizeof(char*));
    out->lowered_results = results;
    out->lowered_names = names;
    if (results == NULL || names == NULL) return -1;
    nvrtcResult (*lowered)(nvrtcProgram, const char*, const char**) =
        (__typeof__(lowered))Real(kIndex_nvrtcGetLoweredName);
    for (int i = 0; i < n; ++i) {
      results[i] = lowered != NULL ? lowered(prog, call->name_expressions[i], &names[i])
                                   : KCACHE_NVRTC_ERROR_INTERNAL_ERROR;
      if (results[i] != KCACHE_NVRTC_SUCCESS) names[i] = NULL;
    }
  }
  return 0;
}

static void FreeProduced(KcacheNvrtcResult* produced) {
  for (int i = 0; i < KCACHE_NVRTC_OUTPUTS; ++i) free((char*)produced->outputs[i].bytes);
  free((int*)produced->lowered_results);
  free((char**)produced->lowered_names);
}

/* Appends one compile's record to $KCACHE_NVRTC_READS_LOG, framed by lines that say which
 * compile (its program name) and whether the record is whole. One write: records of compiles
 * in several threads or processes do not interleave. */
static void WriteRecord(const char* name, const char* record, size_t length, int complete) {
  char head[4400];
  int n = snprintf(head, sizeof head, "# nvrtc compile %s%s\n", name != NULL ? name : "",
                   complete ? "" : " (incomplete: not kept whole)");
  if (n < 0) return;
  size_t head_length = (size_t)n < sizeof head ? (size_t)n : sizeof head - 1;
  size_t total = head_length + length + sizeof "# end\n" - 1;
  char* all = malloc(total);
  if (all == NULL) return;
  memcpy(all, head, head_length);
  memcpy(all + head_length, record, length);
  memcpy(all + head_length + length, "# end\n", sizeof "# end\n" - 1);
  int fd = open(g_reads_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) {
    ssize_t written = write(fd, all, total);
    (void)written;
    close(fd);
  }
  free(all);
}

EXPORT nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int num_options,
                                       const char* const* options) {
  nvrtcResult (*real)(nvrtcProgram, int, const char* const*) =
      (nvrtcResult(*)(nvrtcProgram, int, const char* const*))Real(kIndex_nvrtcCompileProgram);
  if (real == NULL) return Missing(kIndex_nvrtcCompileProgram);
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  const Cache* cache = TheCache();
  KcacheNvrtcLookup* lookup = NULL;
  KcacheProgramSnapshot* snapshot = NULL;
  KcacheNvrtcCall call;
  if (cache != NULL) {
    KcacheProgramUnserve(prog); /* compiled again: its own outputs from now */
    snapshot = KcacheProgramCall(prog, num_options, options, &call);
    if (snapshot != NULL) {
      call.library = g_path;
      call.major = g_major;
      call.minor = g_minor;
      const KcacheNvrtcResult* hit = NULL;
      lookup = cache->lookup(&call, &hit);
      if (hit != NULL && KcacheProgramServe(prog, hit) == 0) {
        nvrtcResult result = hit->result;
        cache->release(lookup);
        KcacheProgramCallDone(snapshot);
        clock_gettime(CLOCK_MONOTONIC, &end);
        if (g_log) {
          SAY("kcache: nvrtc: nvrtcCompileProgram served by kcache: %s, %d options, %.2f ms\n",
              nvrtcGetErrorString(result), num_options, Milliseconds(&start, &end));
        }
        return result;
      }
    }
  }
  KcacheNvrtcReads* reads =
      g_recordable && (lookup != NULL || g_reads_log != NULL) ? KcacheNvrtcReadsBegin() : NULL;
  struct timespec started;
  clock_gettime(CLOCK_REALTIME, &started);
  nvrtcResult result = real(prog, num_options, options);
  char* record = NULL;
  size_t length = 0;
  int complete = 0;
  if (reads != NULL) record = KcacheNvrtcReadsEnd(reads, &length, &complete);
  clock_gettime(CLOCK_MONOTONIC, &end);
  if (lookup != NULL) {
    KcacheNvrtcResult produced;
    memset(&produced, 0, sizeof produced);
    if (record != NULL && Produced(prog, result, &call, &produced) == 0) {
      cache->store(lookup, &produced, record, length, complete,
                   (double)started.tv_sec + (double)started.tv_nsec / 1e9);
    }
    FreeProduced(&produced);
    cache->release(lookup);
  }
  if (snapshot != NULL) KcacheProgramCallDone(snapshot);
  if (record != NULL && g_reads_log != NULL) {
    char name[64];
    snprintf(name, sizeof name, "%p", (void*)prog);
    WriteRecord(name, record, length, complete);
  }
  free(record);
  if (g_log) {
    SAY("kcache: nvrtc: nvrtcCompileProgram forwarded to %s: %s, %d options, %.1f ms\n", g_path,
        nvrtcGetErrorString(result), num_options, Milliseconds(&start, &end));
  }
  return result;
}

/* ---------------------------------------------------------------- the undocumented functions */

/* Each is a jump to the real function, every argument register and the stack as the caller left
 * them. Its first call (and every call to one the real NVRTC lacks) saves the argument
 * registers, asks Resolve_<name> and restores them; without a real function it returns its
 * fallback. Resolve_<name> stores what it found in Real_<name>, read by the jump's fast path. */
#define DEFINE_RESOLVER(name, fallback)                     \
  HIDDEN void* Real_##name;                                 \
  HIDDEN void* Resolve_##name(void) {                       \
    void* real = Real(kIndex_##name);                       \
    if (real == NULL) {                                     \
      Missing(kIndex_##name);                               \
      return NULL;                                          \
    }                                                       \
    __atomic_store_n(&Real_##name, real, __ATOMIC_RELEASE); \
    return real;                                            \
  }
KCACHE_NVRTC_FUNCTIONS(DEFINE_NOTHING, DEFINE_NOTHING, DEFINE_RESOLVER)

#if defined(__x86_64__)
#define DEFINE_JUMP(name, fallback) \
  __asm__(".pushsection .text\n"                                           \
          ".p2align 4\n"                                                   \
          ".globl " #name "\n"                                             \
          ".type " #name ", @function\n" #name ":\n"                       \
          "  endbr64\n"                                                    \
          "  movq Real_" #name "(%rip), %rax\n"                            \
          "  testq %rax, %rax\n"                                           \
          "  jz 1f\n"                                                      \
          "  jmp *%rax\n"                                                  \
          "1:\n"                                                           \
          "  pushq %rbp\n"                                                 \
          "  movq %rsp, %rbp\n"                                            \
          "  subq $192, %rsp\n"                                            \
          "  movq %rdi, 0(%rsp)\n"                                         \
          "  movq %rsi, 8(%rsp)\n"                                         \
          "  movq %rdx, 16(%rsp)\n"                                        \
          "  movq %rcx, 24(%rsp)\n"                                        \
          "  movq %r8, 32(%rsp)\n"                                         \
          "  movq %r9, 40(%rsp)\n"                                         \
          "  movq %rax, 48(%rsp)\n"                                        \
          "  movdqu %xmm0, 64(%rsp)\n"                                     \
          "  movdqu %xmm1, 80(%rsp)\n"                                     \
          "  movdqu %xmm2, 96(%rsp)\n"                                     \
          "  movdqu %xmm3, 112(%rsp)\n"                                    \
          "  movdqu %xmm4, 128(%rsp)\n"                                    \
          "  movdqu %xmm5, 144(%rsp)\n"                                    \
          "  movdqu %xmm6, 160(%rsp)\n"                                    \
          "  movdqu %xmm7, 176(%rsp)\n"                                    \
          "  call Resolve_" #name "\n"                                     \
          "  movq %rax, %r11\n"                                            \
          "  movq 0(%rsp), %rdi\n"                                         \
          "  movq 8(%rsp), %rsi\n"                                         \
          "  movq 16(%rsp), %rdx\n"                                        \
          "  movq 24(%rsp), %rcx\n"                                        \
          "  movq 32(%rsp), %r8\n"                                         \
          "  movq 40(%rsp), %r9\n"                                         \
          "  movq 48(%rsp), %rax\n"                                        \
          "  movdqu 64(%rsp), %xmm0\n"                                     \
          "  movdqu 80(%rsp), %xmm1\n"                                     \
          "  movdqu 96(%rsp), %xmm2\n"                                     \
          "  movdqu 112(%rsp), %xmm3\n"                                    \
          "  movdqu 128(%rsp), %xmm4\n"                                    \
          "  movdqu 144(%rsp), %xmm5\n"                                    \
          "  movdqu 160(%rsp), %xmm6\n"                                    \
          "  movdqu 176(%rsp), %xmm7\n"                                    \
          "  leave\n"                                                      \
          "  testq %r11, %r11\n"                                           \
          "  jz 2f\n"                                                      \
          "  jmp *%r11\n"                                                  \
          "2:\n"                                                           \
          "  movq $" KCACHE_EXPANDED_STRING(fallback) ", %rax\n"           \
          "  ret\n"                                                        \
          ".size " #name ", .-" #name "\n"                                \
          ".popsection\n");
#else
#error "the NVRTC stand-ins forward NVRTC's undocumented entries in x86-64 assembly only"
#endif
KCACHE_NVRTC_FUNCTIONS(DEFINE_NOTHING, DEFINE_NOTHING, DEFINE_JUMP)
