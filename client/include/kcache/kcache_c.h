/* The C ABI of libkcache, for Python (ctypes) and any language with a C FFI.
 *
 * Built as libkcache.so (client/lib). Rules:
 *  - Handles are opaque. What the library allocates, it frees: kcache_client_free,
 *    kcache_kernel_free, kcache_string_free. Strings and bytes returned by accessors belong
 *    to their handle and live as long as it does.
 *  - Every function that can fail returns an int: KCACHE_OK (0) or a status code (the
 *    canonical codes, the same numbers as gRPC and absl). The message of the calling
 *    thread's last failure is kcache_last_error() (valid until that thread's next call).
 *  - A client handle may be used from several threads at once; a kernel handle is read-only.
 *  - Behaviour (deadlines, local compile fallback, circuit breaker) is the C++ API's:
 *    see kcache.h and docs/client.md.
 */
#ifndef KCACHE_CLIENT_INCLUDE_KCACHE_KCACHE_C_H_
#define KCACHE_CLIENT_INCLUDE_KCACHE_KCACHE_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KCACHE_OK 0
#define KCACHE_CANCELLED 1
#define KCACHE_UNKNOWN 2
#define KCACHE_INVALID_ARGUMENT 3
#define KCACHE_DEADLINE_EXCEEDED 4
#define KCACHE_NOT_FOUND 5
#define KCACHE_ALREADY_EXISTS 6
#define KCACHE_PERMISSION_DENIED 7
#define KCACHE_RESOURCE_EXHAUSTED 8
#define KCACHE_FAILED_PRECONDITION 9
#define KCACHE_ABORTED 10 /* compile error: the NVRTC log is in kcache_last_error() */
#define KCACHE_OUT_OF_RANGE 11
#define KCACHE_UNIMPLEMENTED 12
#define KCACHE_INTERNAL 13
#define KCACHE_UNAVAILABLE 14
#define KCACHE_DATA_LOSS 15
#define KCACHE_UNAUTHENTICATED 16

typedef struct kcache_client kcache_client;
typedef struct kcache_kernel kcache_kernel;

/* Client settings. Fill with kcache_options_init, then change what you need. NULL or ""
 * strings take the default. The struct keeps its size: later fields take the place of
 * `reserved`, which kcache_options_init zeroes and a caller leaves alone. */
typedef struct kcache_options {
  const char* address;      /* default $KCACHE_ADDRESS, else "unix:///run/kcache/kcache.sock" */
  const char* client_name;  /* default "pid-<pid>" */
  const char* toolkit_root; /* local compiles; default $CUDA_HOME, else /usr/local/cuda */
  int64_t deadline_ms;      /* every daemon call; for a resolve, the longest silence (kcache.h
                             * ClientOptions::deadline); default 2000 */
  int32_t local_compile_fallback; /* nonzero: compile here when the daemon is away; default 1 */
  int32_t breaker_failures;       /* consecutive failures that open the circuit; default 3 */
  int64_t breaker_cooldown_ms;    /* how long it stays open; default 10000 */
  int32_t fast_path;        /* nonzero: take the in-pod zero-copy path when the daemon offers it
                             * (docs/client.md); 0: gRPC only; default 1 */
  int32_t wait_limit_ms;    /* the longest wait for a kernel the daemon compiles; default 0 = the
                             * daemon's compile limit (deadline_ms bounds silence, not this) */
  int32_t startup_grace_ms; /* how long the first calls wait for a kcached not there yet; 0 = do
                             * not wait; default $KCACHE_STARTUP_GRACE, else 5000 */
  int32_t reserved[13];
} kcache_options;

typedef struct kcache_device {
  int32_t sm_major;
  int32_t sm_minor;
  uint32_t driver_version; /* e.g. 13000; 0 = unknown */
} kcache_device;

/* A kernel by source. Arrays may be NULL when their count is 0. */
typedef struct kcache_source {
  const char* name;
  const char* source;
  const char* const* header_names;
  const char* const* header_contents;
  size_t num_headers;
  const char* const* options;
  size_t num_options;
  const char* const* name_expressions;
  size_t num_name_expressions;
  int32_t min_arch; /* 75, 89, ...; 0 = no bound */
  int32_t max_arch;
} kcache_source;

const char* kcache_version(void);
const char* kcache_last_error(void);

void kcache_options_init(kcache_options* options);
/* options NULL = every default. Never waits for the daemon (connects on first use). */
int kcache_connect(const kcache_options* options, kcache_client** out);
void kcache_client_free(kcache_client* client);

int kcache_resolve(kcache_client* client, const kcache_source* source, const kcache_device* device,
                   kcache_kernel** out);
int kcache_resolve_by_name(kcache_client* client, const char* name, const kcache_device* device,
                           kcache_kernel** out);
int kcache_resolve_by_id(kcache_client* client, const char* hex_id, const kcache_device* device,
                         kcache_kernel** out);
void kcache_kernel_free(kcache_kernel* kernel);

/* One kernel of a batch: set exactly one of the three. */
typedef struct kcache_kernel_ref {
  const kcache_source* source;
  const char* id;   /* 64 hex digits */
  const char* name; /* a name the daemon's stores know */
} kcache_kernel_ref;

/* One result of kcache_resolve_many: the kernel's index in the list, KCACHE_OK and a kernel
 * handle that the callee owns (free it with kcache_kernel_free), or a status code, a message
 * (valid during the call; the NVRTC log for KCACHE_ABORTED) and NULL. */
typedef void (*kcache_resolve_many_callback)(void* context, size_t index, int status,
                                             const char* message, kcache_kernel* kernel);

/* Resolves `count` kernels in one call (kcache.h Client::ResolveMany): `callback` runs once
 * per kernel, on the calling thread, as each is ready (stored ones first, compiles as they
 * finish), and the function returns once every kernel has had its result. Returns KCACHE_OK
 * then (each kernel's own status went to the callback), or KCACHE_INVALID_ARGUMENT for a NULL
 * argument or a ref with not exactly one field set (then the callback never runs). */
int kcache_resolve_many(kcache_client* client, const kcache_kernel_ref* kernels, size_t count,
                        const kcache_device* device, kcache_resolve_many_callback callback,
                        void* context);

/* Accessors: never fail on a valid handle. */
const void* kcache_kernel_data(const kcache_kernel* kernel, size_t* size);
const char* kcache_kernel_kind(const kcache_kernel* kernel);   /* "cubin", "ptx", "ltoir" */
const char* kcache_kernel_target(const kcache_kernel* kernel); /* "sm_89" */
const char* kcache_kernel_id(const kcache_kernel* kernel);     /* 64 hex digits */
const char* kcache_kernel_name(const kcache_kernel* kernel);
const char* kcache_kernel_rule(const kcache_kernel* kernel); /* "exact_sass", ... */
const char* kcache_kernel_reason(const kcache_kernel* kernel);
const char* kcache_kernel_served_from(const kcache_kernel* kernel); /* "daemon:memory", ... */
int kcache_kernel_needs_jit(const kcache_kernel* kernel);
int kcache_kernel_from_daemon(const kcache_kernel* kernel);
int64_t kcache_kernel_micros(const kcache_kernel* kernel);
/* The lowered name of a name expression, or NULL if the kernel has none for it. */
const char* kcache_kernel_lowered_name(const kcache_kernel* kernel, const char* name_expression);
const char* kcache_kernel_toolkit(const kcache_kernel* kernel);     /* "nvrtc-13.0+9ca007cdb201" */
const char* kcache_kernel_compile_log(const kcache_kernel* kernel); /* "" when none */
/* The kernel's lowered names: kcache_kernel_lowered_at(k, i, &expression) for i below
 * kcache_kernel_lowered_count(k) returns the lowered name and sets `expression` (optional). */
size_t kcache_kernel_lowered_count(const kcache_kernel* kernel);
const char* kcache_kernel_lowered_at(const kcache_kernel* kernel, size_t i,
                                     const char** name_expression);

/* Fills up to `capacity` devices; *count is how many GPUs there are. KCACHE_NOT_FOUND when
 * there is no driver or no GPU (the message says which). */
int kcache_detect_devices(kcache_device* devices, int capacity, int* count);

/* The daemon's statistics as JSON (free with kcache_string_free). */
int kcache_stat_json(kcache_client* client, char** json);
void kcache_string_free(char* text);

/* The kernels of a kcache manifest (docs/manifest.md; variants are kernels of their own), in
 * the manifest's order, read by the same code as `kcache warm` (so their kernel ids are the ones
 * warmed). Errors name the file, line and field (KCACHE_INVALID_ARGUMENT) or the missing file
 * (KCACHE_NOT_FOUND). The sources and every string they point to belong to the manifest handle
 * and live until kcache_manifest_free. */
typedef struct kcache_manifest kcache_manifest;
int kcache_manifest_load(const char* path, kcache_manifest** out);
size_t kcache_manifest_count(const kcache_manifest* manifest);
/* NULL when i >= kcache_manifest_count. */
const kcache_source* kcache_manifest_kernel(const kcache_manifest* manifest, size_t i);
void kcache_manifest_free(kcache_manifest* manifest);

/* ---- Mixed-GPU nodes (docs/client.md, "A node's GPUs") ---------------------------------- */

/* One GPU the process sees (or one a caller describes: zero it, then fill what you know). The
 * struct keeps its size: later fields take the place of `reserved`, which stays zero. */
typedef struct kcache_gpu {
  int32_t ordinal;      /* CUDA device ordinal in this process */
  kcache_device device; /* its SM and the driver's version */
  char name[256];       /* "NVIDIA H100 80GB HBM3"; "" when unknown */
  char uuid[96];        /* "GPU-8f2c...", or "MIG-..."; "" when unknown */
  char visible_as[96];  /* its CUDA_VISIBLE_DEVICES entry; "" when unset or not matched */
  int32_t reserved[8];
} kcache_gpu;

/* Fills up to `capacity` GPUs, in the driver's order (CUDA_VISIBLE_DEVICES and MIG applied);
 * *count is how many there are. KCACHE_NOT_FOUND without a driver or a GPU (the message says
 * which, and when CUDA_VISIBLE_DEVICES hides them). */
int kcache_detect_gpus(kcache_gpu* gpus, int capacity, int* count);

/* KCACHE_OK when `kernel` runs on `gpu` by the serving rules and its driver loads it (a
 * driver_version of 0 is not checked); KCACHE_FAILED_PRECONDITION with a message naming the
 * kernel, its target, the GPU and what to do ("softmax is sm_89 SASS; GPU 0 is NVIDIA H100
 * (sm_90): resolve it for 9.0 ..."); KCACHE_INVALID_ARGUMENT for LTO-IR. Calls no driver: a
 * loader (cuda.core, CuPy, your own) checks before it loads. */
int kcache_kernel_check_gpu(const kcache_kernel* kernel, const kcache_gpu* gpu);

/* The kernel's entry points (extern "C" and lowered names), one per line, to look up at load
 * (free with kcache_string_free). KCACHE_INVALID_ARGUMENT for LTO-IR or bytes that do not
 * parse. */
int kcache_kernel_entry_points(const kcache_kernel* kernel, char** names);

/* One result of kcache_resolve_for_gpus: kernel `index` for the distinct device first used by
 * GPU `first_gpu`, as kcache_resolve_many_callback gives it (the callee owns `kernel`). */
typedef void (*kcache_resolve_for_gpus_callback)(void* context, size_t first_gpu, size_t index,
                                                 int status, const char* message,
                                                 kcache_kernel* kernel);

/* Resolves `count` kernels for every one of `num_gpus` GPUs in one call: one batch per distinct
 * device (SM and driver), run at once, not one per GPU. `device_of_gpu` (num_gpus entries) gets,
 * for each GPU g, the index of the first GPU with the same device: GPU g runs the kernels the
 * callback reported under first_gpu == device_of_gpu[g]. The callback runs on the calling
 * thread, once per (distinct device, kernel), after every batch has finished. Returns as
 * kcache_resolve_many. */
int kcache_resolve_for_gpus(kcache_client* client, const kcache_kernel_ref* kernels, size_t count,
                            const kcache_gpu* gpus, size_t num_gpus, size_t* device_of_gpu,
                            kcache_resolve_for_gpus_callback callback, void* context);

/* Where the daemon is with a kernel it compiles for a resolve (docs/client.md, "Progress"). */
#define KCACHE_STAGE_UNKNOWN 0   /* not said (yet), or a daemon too old to say */
#define KCACHE_STAGE_QUEUED 1    /* waiting for a free compile worker */
#define KCACHE_STAGE_COMPILING 2 /* being compiled */
#define KCACHE_STAGE_SHARED 3 /* in the shared tier, or compiled by another daemon of the fleet */
typedef struct kcache_progress {
  size_t index;           /* the kernel's index in the list of a batch; 0 for one kernel */
  int32_t stage;          /* KCACHE_STAGE_* */
  uint32_t queued_behind; /* KCACHE_STAGE_QUEUED: compiles running, plus those ahead of it */
  int64_t elapsed_ms;     /* since the daemon accepted the call */
  int64_t compiling_ms;   /* KCACHE_STAGE_COMPILING: since the compile started */
  int64_t expected_ms;    /* how long a compile of the same kernel took before; 0: not known */
} kcache_progress;

/* `progress` lives for the call only. */
typedef void (*kcache_progress_callback)(void* context, const kcache_progress* progress);

/* Every later resolve through `client` calls `callback` with each progress the daemon sends
 * while it compiles (about every 0.5 s per waiting kernel), on the thread reading the daemon's
 * answers: the resolving thread (kcache_resolve_for_gpus: one thread per device, at once).
 * It must be quick and must not call the client. NULL: none. Set it before the client is
 * shared between threads. */
void kcache_set_progress_callback(kcache_client* client, kcache_progress_callback callback,
                                  void* context);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KCACHE_CLIENT_INCLUDE_KCACHE_KCACHE_C_H_ */
