/* kcache's libcuda.so.1 stand-in: a library with the CUDA driver's soname and every function the
 * driver exports (cuda_entries.h), that `kcache run` preloads (LD_PRELOAD) into the processes it
 * starts on a node with a driver, so that a program linked with -lcuda, a dlopen("libcuda.so.1")
 * (the CUDA runtime's, Triton's, cuda-python's) and the functions they get through
 * cuGetProcAddress all reach it (docs/ptx-libraries.md, "Serving at load"). Every call is
 * forwarded to the real driver, opened by its full path with dlopen (RTLD_LOCAL) at the first
 * call, once, whichever thread makes it: $KCACHE_REAL_LIBCUDA when set (the only candidate then:
 * `kcache run` sets it), else the first libcuda.so.1 of the usual driver directories that is not
 * this library itself (same device and inode). Without one, every function answers
 * CUDA_ERROR_STUB_LIBRARY, as the toolkit's stub does, and one line on stderr says what to set.
 *
 * Module and library loads (cuModuleLoadData, cuModuleLoadDataEx, cuModuleLoadFatBinary,
 * cuLibraryLoadData, whether called by name or through cuGetProcAddress) are first offered to
 * libkcache-cuda.so (cuda_cache_abi.h), loaded beside this library when there is a kcached to ask
 * ($KCACHE_SERVER) and $KCACHE_CUDA_CACHE is not 0: when it holds SASS for this GPU that the
 * image lacks, the driver is given that SASS, and, if the driver refuses it, the caller's image
 * after all. Any other load, and every other call, reaches the driver exactly as the caller made
 * it.
 *
 * Plain C that needs only the C library, built without kcache's sanitizer and warning flags: it
 * loads into every process `kcache run` starts, where no C++ or sanitizer runtime may follow it.
 * It does nothing until a driver function is called. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/cuda/cuda_cache_abi.h"
#include "client/cuda/cuda_entries.h"
#include "client/stand_in/stand_in.h"

#define EXPORT __attribute__((visibility("default")))
#define HIDDEN __attribute__((visibility("hidden")))

typedef int CUresult;
typedef int CUdevice;
typedef void* CUmodule;
typedef void* CUlibrary;
typedef int CUjit_option;
typedef int CUlibraryOption;
typedef unsigned long long cuuint64_t;

enum {
  kSuccess = 0,
  kStubLibrary = 34,    /* CUDA_ERROR_STUB_LIBRARY */
  kAttributeMajor = 75, /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
  kAttributeMinor = 76, /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR */
};

/* ---------------------------------------------------------------- the real driver's functions */

/* One driver function: the real one once resolved (read by its jump without a lock), and its
 * name. */
typedef struct {
  void* function;
  const char* name;
} Slot;

#define DEFINE_SLOT(name) HIDDEN __attribute__((used)) Slot Slot_##name = {NULL, #name};
KCACHE_CUDA_FUNCTIONS(DEFINE_SLOT, DEFINE_SLOT)

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void* g_driver;                  /* the real driver's handle; NULL: none */
static int g_log;                       /* KCACHE_LOG=1 */
static char g_path[4096];               /* the real driver's path */
static __thread volatile int g_loading; /* this thread is in Load's dlopen of g_path */

#define SAY(...) dprintf(STDERR_FILENO, __VA_ARGS__)

#define Env KcacheEnv

/* The real driver, found and loaded (pthread_once). */
static void Load(void) {
  const char* log = Env("KCACHE_LOG");
  g_log = log != NULL && strcmp(log, "1") == 0;
  /* Where Debian, RHEL, NVIDIA's container toolkit and WSL put the driver. */
  static const char* const kCandidates[] = {
      "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1",
      "/usr/local/nvidia/lib64/libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so.1"};
  KcacheRealLibrary how = {
      .what = "driver",
      .variable = "KCACHE_REAL_LIBCUDA",
      .candidates = kCandidates,
      .num_candidates = sizeof kCandidates / sizeof kCandidates[0],
      .dlopen_flags = RTLD_LAZY,
      .self = (const void*)&Load,
      .opening = &g_loading,
  };
  char why[2048];
  g_driver = KcacheOpenReal(&how, g_path, sizeof g_path, why, sizeof why);
  if (g_driver == NULL) {
    SAY("kcache: libcuda.so.1 stand-in: no CUDA driver (%s): set KCACHE_REAL_LIBCUDA to the path "
        "of the driver's libcuda.so.1; every driver call answers CUDA_ERROR_STUB_LIBRARY until "
        "then\n",
        why[0] ? why : "none found");
  } else if (g_log) {
    SAY("kcache: cuda: forwarding to %s\n", g_path);
  }
}

/* The real function of `slot` (NULL when the driver has none), resolved once. A call made while
 * Load's thread loads the driver (the driver's own initialization calling an exported function
 * by name) is resolved in the driver being loaded, without waiting for Load, which would never
 * end. */
HIDDEN void* KcacheCudaResolveSlot(Slot* slot) {
  void* function = __atomic_load_n(&slot->function, __ATOMIC_ACQUIRE);
  if (function != NULL) return function;
  if (g_loading) {
    void* loading = dlopen(g_path, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    return loading != NULL ? dlsym(loading, slot->name) : NULL;
  }
  pthread_once(&g_once, Load);
  if (g_driver == NULL) return NULL;
  function = dlsym(g_driver, slot->name);
  if (function != NULL) __atomic_store_n(&slot->function, function, __ATOMIC_RELEASE);
  return function;
}

#define REAL(name) ((__typeof__(&name))KcacheCudaResolveSlot(&Slot_##name))

/* The real driver's path, for kcache's NVRTC cache, which keys NVRTC's compiles by the driver
 * they load (engine/nvrtc/nvrtc_compile.h): "" when there is none. */
EXPORT const char* kcache_cuda_real_driver(void) {
  pthread_once(&g_once, Load);
  return g_driver != NULL ? g_path : "";
}

/* ---------------------------------------------------------------- forwarded functions */

/* Each is a jump to the real function, every argument register and the stack as the caller left
 * them. Its first call (and every call of one the driver lacks) goes through SlowPath, which
 * saves the argument registers, resolves the slot and restores them; without a real function it
 * answers CUDA_ERROR_STUB_LIBRARY. */
#if defined(__x86_64__)
__asm__(
    ".pushsection .text\n"
    ".p2align 4\n"
    ".type kcache_cuda_slow_path, @function\n"
    "kcache_cuda_slow_path:\n"
    "  pushq %rbp\n"
    "  movq %rsp, %rbp\n"
    "  subq $192, %rsp\n"
    "  movq %rdi, 0(%rsp)\n"
    "  movq %rsi, 8(%rsp)\n"
    "  movq %rdx, 16(%rsp)\n"
    "  movq %rcx, 24(%rsp)\n"
    "  movq %r8, 32(%rsp)\n"
    "  movq %r9, 40(%rsp)\n"
    "  movq %rax, 48(%rsp)\n"
    "  movdqu %xmm0, 64(%rsp)\n"
    "  movdqu %xmm1, 80(%rsp)\n"
    "  movdqu %xmm2, 96(%rsp)\n"
    "  movdqu %xmm3, 112(%rsp)\n"
    "  movdqu %xmm4, 128(%rsp)\n"
    "  movdqu %xmm5, 144(%rsp)\n"
    "  movdqu %xmm6, 160(%rsp)\n"
    "  movdqu %xmm7, 176(%rsp)\n"
    "  movq %r11, %rdi\n"
    "  call KcacheCudaResolveSlot\n"
    "  movq %rax, %r11\n"
    "  movq 0(%rsp), %rdi\n"
    "  movq 8(%rsp), %rsi\n"
    "  movq 16(%rsp), %rdx\n"
    "  movq 24(%rsp), %rcx\n"
    "  movq 32(%rsp), %r8\n"
    "  movq 40(%rsp), %r9\n"
    "  movq 48(%rsp), %rax\n"
    "  movdqu 64(%rsp), %xmm0\n"
    "  movdqu 80(%rsp), %xmm1\n"
    "  movdqu 96(%rsp), %xmm2\n"
    "  movdqu 112(%rsp), %xmm3\n"
    "  movdqu 128(%rsp), %xmm4\n"
    "  movdqu 144(%rsp), %xmm5\n"
    "  movdqu 160(%rsp), %xmm6\n"
    "  movdqu 176(%rsp), %xmm7\n"
    "  leave\n"
    "  testq %r11, %r11\n"
    "  jz 1f\n"
    "  jmp *%r11\n"
    "1:\n"
    "  movl $34, %eax\n" /* CUDA_ERROR_STUB_LIBRARY */
    "  ret\n"
    ".size kcache_cuda_slow_path, .-kcache_cuda_slow_path\n"
    ".popsection\n");
#define DEFINE_JUMP(name)                  \
  __asm__(                                 \
      ".pushsection .text\n"               \
      ".p2align 4\n"                       \
      ".globl " #name                      \
      "\n"                                 \
      ".type " #name ", @function\n" #name \
      ":\n"                                \
      "  endbr64\n"                        \
      "  movq Slot_" #name                 \
      "(%rip), %rax\n"                     \
      "  testq %rax, %rax\n"               \
      "  jz 1f\n"                          \
      "  jmp *%rax\n"                      \
      "1:\n"                               \
      "  leaq Slot_" #name                 \
      "(%rip), %r11\n"                     \
      "  jmp kcache_cuda_slow_path\n"      \
      ".size " #name ", .-" #name          \
      "\n"                                 \
      ".popsection\n");
#else
#error "the libcuda.so.1 stand-in forwards the driver's functions in x86-64 assembly only"
#endif
#define DEFINE_NOTHING(name)
KCACHE_CUDA_FUNCTIONS(DEFINE_JUMP, DEFINE_NOTHING)

/* ---------------------------------------------------------------- the cache */

typedef struct {
  const void* (*sass_for)(const KcacheCudaLoad*, size_t*);
  void (*sass_loaded)(const KcacheCudaLoad*, const void*, int);
  void (*begin)(void);
} Cache;
static pthread_once_t g_cache_once = PTHREAD_ONCE_INIT;
static Cache g_cache;
static int g_cache_loaded;

/* Loads libkcache-cuda.so beside this library when there is a driver, a kcached to ask
 * ($KCACHE_SERVER) and $KCACHE_CUDA_CACHE is not 0. */
static void LoadCache(void) {
  if (g_driver == NULL || Env("KCACHE_SERVER") == NULL) return;
  const char* off = Env("KCACHE_CUDA_CACHE");
  if (off != NULL && strcmp(off, "0") == 0) return;
  void* handle = KcacheOpenBeside((const void*)&LoadCache, "libkcache-cuda.so", "kcache_cuda_abi",
                                  KCACHE_CUDA_CACHE_ABI, "libcuda.so.1 stand-in",
                                  "modules load as without kcache");
  if (handle == NULL) return;
  g_cache.sass_for = (__typeof__(g_cache.sass_for))dlsym(handle, "kcache_cuda_sass_for");
  g_cache.sass_loaded = (__typeof__(g_cache.sass_loaded))dlsym(handle, "kcache_cuda_sass_loaded");
  g_cache.begin = (__typeof__(g_cache.begin))dlsym(handle, "kcache_cuda_begin");
  g_cache_loaded = g_cache.sass_for != NULL && g_cache.sass_loaded != NULL && g_cache.begin != NULL;
}

static const Cache* TheCache(void) {
  pthread_once(&g_once, Load);
  pthread_once(&g_cache_once, LoadCache);
  return g_cache_loaded ? &g_cache : NULL;
}

/* Loads the cache and connects it to kcached (a thread's body). */
static void* BeginCache(void* unused) {
  (void)unused;
  const Cache* cache = TheCache();
  if (cache != NULL) cache->begin();
  return NULL;
}

CUresult cuInit(unsigned flags);

/* cuInit, then the cache loaded and connected in a thread of its own, once: a process creates
 * its contexts (a hundred milliseconds and more) before it loads a module, so its first load
 * finds the cache ready instead of loading it then. */
EXPORT CUresult cuInit(unsigned flags) {
  __typeof__(&cuInit) real = REAL(cuInit);
  if (real == NULL) return kStubLibrary;
  CUresult result = real(flags);
  static int started;
  if (result == kSuccess && Env("KCACHE_SERVER") != NULL &&
      !__atomic_exchange_n(&started, 1, __ATOMIC_ACQ_REL)) {
    pthread_attr_t attr;
    pthread_t thread;
    if (pthread_attr_init(&attr) == 0) {
      pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
      /* When no thread starts, the first load loads the cache itself. */
      (void)pthread_create(&thread, &attr, BeginCache, NULL);
      pthread_attr_destroy(&attr);
    }
  }
  return result;
}

/* ---------------------------------------------------------------- loads */

CUresult cuCtxGetDevice(CUdevice* device);
CUresult cuDeviceGet(CUdevice* device, int ordinal);
CUresult cuDeviceGetCount(int* count);
CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice device);
CUresult cuDriverGetVersion(int* version);

/* The compute capability of `device`; 0 when the driver does not say. */
static int CapabilityOf(CUdevice device, int* major, int* minor) {
  __typeof__(&cuDeviceGetAttribute) attribute = REAL(cuDeviceGetAttribute);
  return attribute != NULL && attribute(major, kAttributeMajor, device) == kSuccess &&
         attribute(minor, kAttributeMinor, device) == kSuccess;
}

/* The GPU a load is for, into `load`: a module's, the current context's device; a library's
 * (loaded for every device), the one compute capability all devices share. 0 when there is none
 * to say (no context, no devices, devices that differ): the load is left to the driver. */
static int GpuOf(int library, KcacheCudaLoad* load) {
  __typeof__(&cuDriverGetVersion) version = REAL(cuDriverGetVersion);
  if (version == NULL || version(&load->driver) != kSuccess) return 0;
  if (!library) {
    __typeof__(&cuCtxGetDevice) current = REAL(cuCtxGetDevice);
    CUdevice device;
    return current != NULL && current(&device) == kSuccess &&
           CapabilityOf(device, &load->sm_major, &load->sm_minor);
  }
  __typeof__(&cuDeviceGetCount) count_of = REAL(cuDeviceGetCount);
  __typeof__(&cuDeviceGet) get = REAL(cuDeviceGet);
  int count = 0;
  if (count_of == NULL || get == NULL || count_of(&count) != kSuccess || count <= 0) return 0;
  for (int i = 0; i < count; ++i) {
    CUdevice device;
    int major = 0, minor = 0;
    if (get(&device, i) != kSuccess || !CapabilityOf(device, &major, &minor)) return 0;
    if (i > 0 && (major != load->sm_major || minor != load->sm_minor)) return 0;
    load->sm_major = major;
    load->sm_minor = minor;
  }
  return 1;
}

/* One load as the caller asked for it: `load` calls the driver with another image. */
typedef CUresult (*Loader)(const void* image, void* call);

/* Loads the caller's `image` through `loader`, or first the SASS kcache holds for it, when it
 * has some, through `sass_loader` (a cubin goes to cuModuleLoadData even for a
 * cuModuleLoadFatBinary, which takes fatbins); the caller's image when the driver refuses the
 * SASS. */
static CUresult Serve(const char* function, const void* image, unsigned num_options,
                      const CUjit_option* options, void* const* values, int library, Loader loader,
                      Loader sass_loader, void* call) {
  const Cache* cache = image != NULL ? TheCache() : NULL;
  if (cache != NULL) {
    KcacheCudaLoad load;
    memset(&load, 0, sizeof load);
    load.function = function;
    load.image = image;
    load.num_options = options != NULL ? num_options : 0;
    load.options = options;
    load.option_values = values;
    if (GpuOf(library, &load)) {
      size_t size = 0;
      const void* sass = cache->sass_for(&load, &size);
      if (sass != NULL) {
        CUresult result = sass_loader(sass, call);
        cache->sass_loaded(&load, sass, result);
        if (result == kSuccess) return result;
      }
    }
  }
  return loader(image, call);
}

typedef struct {
  CUmodule* module;
  unsigned num_options;
  CUjit_option* options;
  void** values;
} ModuleCall;

CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned num_options,
                            CUjit_option* options, void** values);
CUresult cuModuleLoadData(CUmodule* module, const void* image);
CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fat_cubin);
CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jit_options,
                           void** jit_values, unsigned num_jit_options,
                           CUlibraryOption* library_options, void** library_values,
                           unsigned num_library_options);

static CUresult LoadData(const void* image, void* call) {
  __typeof__(&cuModuleLoadData) real = REAL(cuModuleLoadData);
  return real != NULL ? real(((ModuleCall*)call)->module, image) : kStubLibrary;
}

static CUresult LoadDataEx(const void* image, void* call) {
  ModuleCall* c = call;
  __typeof__(&cuModuleLoadDataEx) real = REAL(cuModuleLoadDataEx);
  return real != NULL ? real(c->module, image, c->num_options, c->options, c->values)
                      : kStubLibrary;
}

static CUresult LoadFatBinary(const void* image, void* call) {
  __typeof__(&cuModuleLoadFatBinary) real = REAL(cuModuleLoadFatBinary);
  return real != NULL ? real(((ModuleCall*)call)->module, image) : kStubLibrary;
}

EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  ModuleCall call = {module, 0, NULL, NULL};
  return Serve("cuModuleLoadData", image, 0, NULL, NULL, 0, LoadData, LoadData, &call);
}

EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned num_options,
                                   CUjit_option* options, void** values) {
  ModuleCall call = {module, num_options, options, values};
  return Serve("cuModuleLoadDataEx", image, num_options, options, values, 0, LoadDataEx, LoadDataEx,
               &call);
}

EXPORT CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fat_cubin) {
  ModuleCall call = {module, 0, NULL, NULL};
  return Serve("cuModuleLoadFatBinary", fat_cubin, 0, NULL, NULL, 0, LoadFatBinary, LoadData,
               &call);
}

typedef struct {
  CUlibrary* library;
  CUjit_option* jit_options;
  void** jit_values;
  unsigned num_jit_options;
  CUlibraryOption* library_options;
  void** library_values;
  unsigned num_library_options;
} LibraryCall;

static CUresult LoadLibraryData(const void* image, void* call) {
  LibraryCall* c = call;
  __typeof__(&cuLibraryLoadData) real = REAL(cuLibraryLoadData);
  return real != NULL ? real(c->library, image, c->jit_options, c->jit_values, c->num_jit_options,
                             c->library_options, c->library_values, c->num_library_options)
                      : kStubLibrary;
}

EXPORT CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jit_options,
                                  void** jit_values, unsigned num_jit_options,
                                  CUlibraryOption* library_options, void** library_values,
                                  unsigned num_library_options) {
  LibraryCall call = {library,         jit_options,    jit_values,         num_jit_options,
                      library_options, library_values, num_library_options};
  return Serve("cuLibraryLoadData", code, num_jit_options, jit_options, jit_values, 1,
               LoadLibraryData, LoadLibraryData, &call);
}

/* ---------------------------------------------------------------- cuGetProcAddress */

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags);
CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                             int* status);

/* What a caller that asked the driver for a function gets: this library's own function when the
 * driver gave the very function this library stands in for (so with the same parameters: a
 * cuGetProcAddress for an older CUDA version may give another variant, which is left as given),
 * else what the driver gave. */
static void* Substitute(void* given) {
  static const struct {
    Slot* real;
    void* own;
  } kOwn[] = {{&Slot_cuInit, (void*)&cuInit},
              {&Slot_cuModuleLoadData, (void*)&cuModuleLoadData},
              {&Slot_cuModuleLoadDataEx, (void*)&cuModuleLoadDataEx},
              {&Slot_cuModuleLoadFatBinary, (void*)&cuModuleLoadFatBinary},
              {&Slot_cuLibraryLoadData, (void*)&cuLibraryLoadData},
              {&Slot_cuGetProcAddress, (void*)&cuGetProcAddress},
              {&Slot_cuGetProcAddress_v2, (void*)&cuGetProcAddress_v2}};
  for (size_t i = 0; i < sizeof kOwn / sizeof kOwn[0]; ++i) {
    if (given == KcacheCudaResolveSlot(kOwn[i].real)) return kOwn[i].own;
  }
  return given;
}

EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                                 cuuint64_t flags) {
  __typeof__(&cuGetProcAddress) real = REAL(cuGetProcAddress);
  if (real == NULL) return kStubLibrary;
  CUresult result = real(symbol, pfn, cuda_version, flags);
  if (result == kSuccess && pfn != NULL && *pfn != NULL) *pfn = Substitute(*pfn);
  return result;
}

EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                    cuuint64_t flags, int* status) {
  __typeof__(&cuGetProcAddress_v2) real = REAL(cuGetProcAddress_v2);
  if (real == NULL) return kStubLibrary;
  CUresult result = real(symbol, pfn, cuda_version, flags, status);
  if (result == kSuccess && pfn != NULL && *pfn != NULL) *pfn = Substitute(*pfn);
  return result;
}
