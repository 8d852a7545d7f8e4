/* A program that loads one CUDA image through the driver API the ways a host process does, for
 * the tests of kcache's libcuda.so.1 stand-in (tests/integration/cuda_standin_test.cc). It finds
 * the driver with dlopen("libcuda.so.1"), as the CUDA runtime does, so the stand-in preloaded in
 * front of it is what it calls.
 *
 *   cuda_load_program MODE FILE [DEVICE]
 *
 * reads FILE (NUL-terminated: PTX text loads as it is) and loads it on DEVICE's primary context
 * (default 0) by MODE:
 *   data          cuModuleLoadData
 *   dataex        cuModuleLoadDataEx with no options
 *   dataex-log    cuModuleLoadDataEx with info and error log buffers (options that change no code)
 *   dataex-maxreg cuModuleLoadDataEx with CU_JIT_MAX_REGISTERS = 32
 *   fatbinary     cuModuleLoadFatBinary
 *   wrapper       cuModuleLoadFatBinary given a __fatBinC_Wrapper_t pointing at FILE's bytes
 *   library       cuLibraryLoadData with no options
 *   procaddress   cuModuleLoadData as cuGetProcAddress_v2 (CUDA 13.0, no flags) answers it
 * Prints "image POINTER result CURESULT load_ms MS", POINTER the image passed to the load and MS
 * the load's wall time (bench/ptx_libraries reads it). With $CUDA_LOAD_RUN=axpy (a GPU, a module
 * mode), it then runs the module's `axpy(float a, const float* x, float* y, int n)` (the one
 * tests/gpu/ptx_library_gpu_test.cc builds) on 4096 floats, x[i] = i, y[i] = 1, a = 2, and
 * prints "axpy SUM" of the y it copies back. Exit 0 when the
 * load answered CUDA_SUCCESS, 1 otherwise (2 for bad arguments or a driver that is missing). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/cuda/fatbin_wrapper.h"

/* CUjit_option values (/usr/local/cuda/include/cuda.h). */
enum {
  kJitMaxRegisters = 0,
  kJitInfoLogBuffer = 3,
  kJitInfoLogBufferSizeBytes = 4,
  kJitErrorLogBuffer = 5,
  kJitErrorLogBufferSizeBytes = 6,
};

typedef int (*InitFn)(unsigned);
typedef int (*DeviceGetFn)(int*, int);
typedef int (*PrimaryCtxRetainFn)(void**, int);
typedef int (*PrimaryCtxReleaseFn)(int);
typedef int (*CtxSetCurrentFn)(void*);
typedef int (*ModuleLoadDataFn)(void**, const void*);
typedef int (*ModuleLoadDataExFn)(void**, const void*, unsigned, int*, void**);
typedef int (*ModuleUnloadFn)(void*);
typedef int (*LibraryLoadDataFn)(void**, const void*, int*, void**, unsigned, int*, void**,
                                 unsigned);
typedef int (*GetProcAddressV2Fn)(const char*, void**, int, unsigned long long, int*);

static void* driver;

static void* Symbol(const char* name) {
  void* found = dlsym(driver, name);
  if (found == NULL) {
    fprintf(stderr, "libcuda.so.1 has no %s\n", name);
    exit(2);
  }
  return found;
}

static void Check(int result, const char* what) {
  if (result == 0) return;
  fprintf(stderr, "%s: CUresult %d\n", what, result);
  exit(1);
}

typedef int (*ModuleGetFunctionFn)(void**, void*, const char*);
typedef int (*MemAllocFn)(unsigned long long*, size_t);
typedef int (*MemFreeFn)(unsigned long long);
typedef int (*MemcpyHtoDFn)(unsigned long long, const void*, size_t);
typedef int (*MemcpyDtoHFn)(void*, unsigned long long, size_t);
typedef int (*LaunchKernelFn)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, void*, void**, void**);
typedef int (*CtxSynchronizeFn)(void);

/* Runs `module`'s axpy (CUDA_LOAD_RUN=axpy) and prints the sum of the y it computed. */
static void RunAxpy(void* module) {
  enum { kCount = 4096 };
  static float x[kCount], y[kCount];
  for (int i = 0; i < kCount; ++i) {
    x[i] = (float)i;
    y[i] = 1.0f;
  }
  void* function = NULL;
  Check(((ModuleGetFunctionFn)Symbol("cuModuleGetFunction"))(&function, module, "axpy"),
        "cuModuleGetFunction(axpy)");
  unsigned long long dx = 0, dy = 0;
  Check(((MemAllocFn)Symbol("cuMemAlloc_v2"))(&dx, sizeof x), "cuMemAlloc");
  Check(((MemAllocFn)Symbol("cuMemAlloc_v2"))(&dy, sizeof y), "cuMemAlloc");
  Check(((MemcpyHtoDFn)Symbol("cuMemcpyHtoD_v2"))(dx, x, sizeof x), "cuMemcpyHtoD");
  Check(((MemcpyHtoDFn)Symbol("cuMemcpyHtoD_v2"))(dy, y, sizeof y), "cuMemcpyHtoD");
  float a = 2.0f;
  int n = kCount;
  void* args[] = {&a, &dx, &dy, &n};
  Check(((LaunchKernelFn)Symbol("cuLaunchKernel"))(function, kCount / 256, 1, 1, 256, 1, 1, 0, NULL,
                                                   args, NULL),
        "cuLaunchKernel");
  Check(((CtxSynchronizeFn)Symbol("cuCtxSynchronize"))(), "cuCtxSynchronize");
  Check(((MemcpyDtoHFn)Symbol("cuMemcpyDtoH_v2"))(y, dy, sizeof y), "cuMemcpyDtoH");
  ((MemFreeFn)Symbol("cuMemFree_v2"))(dx);
  ((MemFreeFn)Symbol("cuMemFree_v2"))(dy);
  double sum = 0;
  for (int i = 0; i < kCount; ++i) sum += y[i];
  printf("axpy %.1f\n", sum);
}

static char* ReadFile(const char* path) {
  FILE* file = fopen(path, "rb");
  if (file == NULL) {
    perror(path);
    exit(2);
  }
  fseek(file, 0, SEEK_END);
  long size = ftell(file);
  fseek(file, 0, SEEK_SET);
  char* bytes = malloc((size_t)size + 1);
  if (bytes == NULL || fread(bytes, 1, (size_t)size, file) != (size_t)size) {
    fprintf(stderr, "%s: cannot read %ld bytes\n", path, size);
    exit(2);
  }
  bytes[size] = '\0';
  fclose(file);
  return bytes;
}

/* Loads `image` by `mode`; *loaded is the image pointer passed. -1 for an unknown mode. */
static int Load(const char* mode, char* bytes, const void** loaded, void** module, void** library) {
  static FatbinWrapper wrapper = {KCACHE_FATBIN_WRAPPER_MAGIC, 1, NULL, NULL};
  ModuleLoadDataExFn load_ex = (ModuleLoadDataExFn)Symbol("cuModuleLoadDataEx");
  *loaded = bytes;
  if (strcmp(mode, "data") == 0) {
    return ((ModuleLoadDataFn)Symbol("cuModuleLoadData"))(module, bytes);
  }
  if (strcmp(mode, "dataex") == 0) return load_ex(module, bytes, 0, NULL, NULL);
  if (strcmp(mode, "dataex-log") == 0) {
    static char info[4096], error[4096];
    int options[] = {kJitInfoLogBuffer, kJitInfoLogBufferSizeBytes, kJitErrorLogBuffer,
                     kJitErrorLogBufferSizeBytes};
    void* values[] = {info, (void*)(uintptr_t)sizeof info, error, (void*)(uintptr_t)sizeof error};
    return load_ex(module, bytes, 4, options, values);
  }
  if (strcmp(mode, "dataex-maxreg") == 0) {
    int options[] = {kJitMaxRegisters};
    void* values[] = {(void*)(uintptr_t)32};
    return load_ex(module, bytes, 1, options, values);
  }
  if (strcmp(mode, "fatbinary") == 0) {
    return ((ModuleLoadDataFn)Symbol("cuModuleLoadFatBinary"))(module, bytes);
  }
  if (strcmp(mode, "wrapper") == 0) {
    wrapper.data = (const unsigned long long*)bytes;
    *loaded = &wrapper;
    return ((ModuleLoadDataFn)Symbol("cuModuleLoadFatBinary"))(module, &wrapper);
  }
  if (strcmp(mode, "library") == 0) {
    return ((LibraryLoadDataFn)Symbol("cuLibraryLoadData"))(library, bytes, NULL, NULL, 0, NULL,
                                                            NULL, 0);
  }
  if (strcmp(mode, "procaddress") == 0) {
    void* function = NULL;
    int status = -1;
    Check(((GetProcAddressV2Fn)Symbol("cuGetProcAddress_v2"))("cuModuleLoadData", &function, 13000,
                                                              0, &status),
          "cuGetProcAddress_v2(cuModuleLoadData)");
    if (function == NULL || status != 0) {
      fprintf(stderr, "cuGetProcAddress_v2(cuModuleLoadData): status %d\n", status);
      exit(1);
    }
    return ((ModuleLoadDataFn)function)(module, bytes);
  }
  return -1;
}

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: %s MODE FILE [DEVICE]\n", argv[0]);
    return 2;
  }
  driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == NULL) {
    fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror());
    return 2;
  }
  int ordinal = argc == 4 ? atoi(argv[3]) : 0, device = -1;
  void* context = NULL;
  Check(((InitFn)Symbol("cuInit"))(0), "cuInit");
  Check(((DeviceGetFn)Symbol("cuDeviceGet"))(&device, ordinal), "cuDeviceGet");
  Check(((PrimaryCtxRetainFn)Symbol("cuDevicePrimaryCtxRetain"))(&context, device),
        "cuDevicePrimaryCtxRetain");
  Check(((CtxSetCurrentFn)Symbol("cuCtxSetCurrent"))(context), "cuCtxSetCurrent");

  char* bytes = ReadFile(argv[2]);
  const void* loaded = NULL;
  void *module = NULL, *library = NULL;
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  int result = Load(argv[1], bytes, &loaded, &module, &library);
  clock_gettime(CLOCK_MONOTONIC, &end);
  if (result == -1) {
    fprintf(stderr, "unknown mode %s\n", argv[1]);
    return 2;
  }
  printf("image %p result %d load_ms %.3f\n", loaded, result,
         (double)(end.tv_sec - start.tv_sec) * 1e3 + (double)(end.tv_nsec - start.tv_nsec) / 1e6);
  fflush(stdout);
  const char* run = getenv("CUDA_LOAD_RUN");
  if (result == 0 && run != NULL && strcmp(run, "axpy") == 0 && module != NULL) RunAxpy(module);
  /* $CUDA_LOAD_THEN: more files, colon-separated, each loaded the same way after the first (a
   * process's later loads, for bench/ptx_libraries): "then_ms MS" for each. */
  const char* then = getenv("CUDA_LOAD_THEN");
  while (result == 0 && then != NULL && then[0] != '\0') {
    const char* colon = strchr(then, ':');
    char next[4096];
    snprintf(next, sizeof next, "%.*s", (int)(colon != NULL ? colon - then : (long)strlen(then)),
             then);
    char* more = ReadFile(next);
    const void* also = NULL;
    void *more_module = NULL, *more_library = NULL;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int again = Load(argv[1], more, &also, &more_module, &more_library);
    clock_gettime(CLOCK_MONOTONIC, &end);
    printf("then_ms %.3f result %d\n",
           (double)(end.tv_sec - start.tv_sec) * 1e3 + (double)(end.tv_nsec - start.tv_nsec) / 1e6,
           again);
    then = colon != NULL ? colon + 1 : NULL;
  }
  fflush(stdout);
  if (module != NULL) Check(((ModuleUnloadFn)Symbol("cuModuleUnload"))(module), "cuModuleUnload");
  if (library != NULL) {
    Check(((ModuleUnloadFn)Symbol("cuLibraryUnload"))(library), "cuLibraryUnload");
  }
  Check(((PrimaryCtxReleaseFn)Symbol("cuDevicePrimaryCtxRelease_v2"))(device),
        "cuDevicePrimaryCtxRelease_v2");
  free(bytes);
  return result == 0 ? 0 : 1;
}
