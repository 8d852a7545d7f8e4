/* What tests/cuda/fake_libcuda_every.c's functions answer, shared with the program that calls
 * them (tests/cuda/cuda_symbols_program.c), and the functions it exports that no toolkit's stub
 * has (a newer driver's). */
#ifndef KCACHE_TESTS_CUDA_FAKE_CUDA_ANSWERS_H_
#define KCACHE_TESTS_CUDA_FAKE_CUDA_ANSWERS_H_

#include <stdint.h>

enum { kFakeInvalidValue = 1, kFakeNotFound = 500 };

/* A number from 1000 to 100999 that names the function: FNV-1a of its name. */
static inline int FakeCudaAnswer(const char* name) {
  uint32_t hash = 2166136261u;
  for (const char* c = name; *c != '\0'; ++c) hash = (hash ^ (uint8_t)*c) * 16777619u;
  return 1000 + (int)(hash % 100000u);
}

#define FAKE_CUDA_FUTURE_FUNCTIONS(X) X(cuKcacheFutureQuery) X(cuKcacheFutureQuery_v2)

#endif /* KCACHE_TESTS_CUDA_FAKE_CUDA_ANSWERS_H_ */
