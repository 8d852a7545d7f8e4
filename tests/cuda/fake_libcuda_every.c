/* A fake CUDA driver (libcuda.so.1) that exports every function of the toolkit's stub
 * (client/cuda/cuda_entries.h) and two that no toolkit has, for the lookup tests of kcache's
 * libcuda.so.1 stand-in (tests/integration/cuda_symbols_test.cc): each function, called with any
 * arguments, answers FakeCudaAnswer(its name), so that a caller can tell which function it
 * reached. cuGetProcAddress and cuGetProcAddress_v2 answer by name as a driver does: for a CUDA
 * version below 12000 the name as given, else its "_v2" variant when there is one, and with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM (flags & 2) its "_ptds" variant when there is
 * one; an unknown name is CUDA_ERROR_NOT_FOUND with CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "client/cuda/cuda_entries.h"
#include "tests/cuda/fake_cuda_answers.h"

#define EXPORT __attribute__((visibility("default")))

#define DEFINE_FUNCTION(name) \
  EXPORT int name(void) { return FakeCudaAnswer(#name); }
#define DEFINE_OWN(name)
KCACHE_CUDA_FUNCTIONS(DEFINE_FUNCTION, DEFINE_OWN)
/* The stand-in's own functions, but the lookups: defined below. */
EXPORT int cuInit(void) { return FakeCudaAnswer("cuInit"); }
EXPORT int cuModuleLoadData(void) { return FakeCudaAnswer("cuModuleLoadData"); }
EXPORT int cuModuleLoadDataEx(void) { return FakeCudaAnswer("cuModuleLoadDataEx"); }
EXPORT int cuModuleLoadFatBinary(void) { return FakeCudaAnswer("cuModuleLoadFatBinary"); }
EXPORT int cuLibraryLoadData(void) { return FakeCudaAnswer("cuLibraryLoadData"); }
#define DEFINE_FUTURE(name) \
  EXPORT int name(void) { return FakeCudaAnswer(#name); }
FAKE_CUDA_FUTURE_FUNCTIONS(DEFINE_FUTURE)

EXPORT int cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                               unsigned long long flags, int* status);
EXPORT int cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                            unsigned long long flags);

typedef struct {
  const char* name;
  void* function;
} Entry;

#define ENTRY(name) {#name, (void*)&name},
static const Entry kEntries[] = {KCACHE_CUDA_FUNCTIONS(ENTRY, ENTRY)
                                     FAKE_CUDA_FUTURE_FUNCTIONS(ENTRY)};

static void* Find(const char* name) {
  for (size_t i = 0; i < sizeof kEntries / sizeof kEntries[0]; ++i) {
    if (strcmp(kEntries[i].name, name) == 0) return kEntries[i].function;
  }
  return NULL;
}

/* `name` with `suffix`, when the fake has that function. */
static void* Variant(const char* name, const char* suffix) {
  char variant[256];
  if (snprintf(variant, sizeof variant, "%s%s", name, suffix) >= (int)sizeof variant) return NULL;
  return Find(variant);
}

EXPORT int cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                               unsigned long long flags, int* status) {
  if (symbol == NULL || pfn == NULL) return kFakeInvalidValue;
  void* found = NULL;
  if (flags & 2) found = Variant(symbol, "_ptds");
  if (found == NULL && cuda_version >= 12000) found = Variant(symbol, "_v2");
  if (found == NULL) found = Find(symbol);
  *pfn = found;
  if (status != NULL) *status = found != NULL ? 0 : 1; /* CU_GET_PROC_ADDRESS_SUCCESS, _NOT_FOUND */
  return found != NULL ? 0 : kFakeNotFound;
}

EXPORT int cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                            unsigned long long flags) {
  return cuGetProcAddress_v2(symbol, pfn, cuda_version, flags, NULL);
}
