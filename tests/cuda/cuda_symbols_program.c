/* Looks up every function of the toolkit's driver stub (client/cuda/cuda_entries.h) and those of
 * tests/cuda/fake_cuda_answers.h that no toolkit has, every way a process does, in the
 * libcuda.so.1 that dlopen gives (the driver, or kcache's stand-in preloaded in front of it), and
 * prints one line per lookup: how, the name, and what the function found answers when called
 * (a fake driver's functions answer their name's number), or "missing". The lines of a run with
 * the stand-in and one without are compared (tests/integration/cuda_symbols_test.cc).
 *
 *   cuda_symbols_program
 *   cuda_symbols_program calls N NAME    calls NAME (found by dlsym) N times and prints
 *                                        "calls N NAME NS ns/call" (bench/cuda_standin)
 *
 * The lookups: dlsym; dlvsym with the version "libcuda.so.1"; cuGetProcAddress_v2 for CUDA
 * 11.3, 12.0, 12.9 and 13.0, each with flags 0 (default), 1 (legacy stream) and 2 (per-thread
 * default stream), and cuGetProcAddress for 13.0. The stand-in's own functions (module loads,
 * cuInit, the lookups themselves) are looked up, not called: with the arguments of this program
 * they would load nothing. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/cuda/cuda_entries.h"
#include "tests/cuda/fake_cuda_answers.h"

typedef int (*AnyFunction)(void);
typedef int (*GetProcAddressV2)(const char*, void**, int, unsigned long long, int*);
typedef int (*GetProcAddress)(const char*, void**, int, unsigned long long);

static void Print(const char* how, const char* name, void* function, int call) {
  if (function == NULL) {
    printf("%s %s missing\n", how, name);
  } else if (call) {
    printf("%s %s answers %d\n", how, name, ((AnyFunction)function)());
  } else {
    printf("%s %s found\n", how, name);
  }
}

static void LookUp(void* driver, const char* name, int call) {
  static const int kVersions[] = {11030, 12000, 12090, 13000};
  Print("dlsym", name, dlsym(driver, name), call);
  Print("dlvsym", name, dlvsym(driver, name, "libcuda.so.1"), call);
  GetProcAddressV2 v2 = (GetProcAddressV2)dlsym(driver, "cuGetProcAddress_v2");
  GetProcAddress v1 = (GetProcAddress)dlsym(driver, "cuGetProcAddress");
  char how[64];
  for (size_t v = 0; v2 != NULL && v < sizeof kVersions / sizeof kVersions[0]; ++v) {
    for (unsigned long long flags = 0; flags < 3; ++flags) {
      void* function = NULL;
      int status = -1;
      int result = v2(name, &function, kVersions[v], flags, &status);
      snprintf(how, sizeof how, "cuGetProcAddress_v2(%d,%llu)=%d,%d", kVersions[v], flags, result,
               status);
      Print(how, name, function, call);
    }
  }
  if (v1 != NULL) {
    void* function = NULL;
    int result = v1(name, &function, 13000, 0);
    snprintf(how, sizeof how, "cuGetProcAddress(13000,0)=%d", result);
    Print(how, name, function, call);
  }
}

/* Times `count` calls of `name`. */
static int Calls(void* driver, long count, const char* name) {
  AnyFunction function = (AnyFunction)dlsym(driver, name);
  if (function == NULL || count <= 0) {
    fprintf(stderr, "cuda_symbols_program: no %s, or no count\n", name);
    return 2;
  }
  volatile int sink = function(); /* the first call resolves the stand-in's jump */
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (long i = 0; i < count; ++i) sink += function();
  clock_gettime(CLOCK_MONOTONIC, &end);
  double ns = (double)(end.tv_sec - start.tv_sec) * 1e9 + (double)(end.tv_nsec - start.tv_nsec);
  printf("calls %ld %s %.2f ns/call\n", count, name, ns / (double)count);
  return sink == 0 ? 3 : 0;
}

int main(int argc, char** argv) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == NULL) {
    fprintf(stderr, "cuda_symbols_program: %s\n", dlerror());
    return 1;
  }
  if (argc == 4 && strcmp(argv[1], "calls") == 0) return Calls(driver, atol(argv[2]), argv[3]);
#define CALLED(name) LookUp(driver, #name, 1);
#define NOT_CALLED(name) LookUp(driver, #name, 0);
  KCACHE_CUDA_FUNCTIONS(CALLED, NOT_CALLED)
  FAKE_CUDA_FUTURE_FUNCTIONS(CALLED)
  return 0;
}
