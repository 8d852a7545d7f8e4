/* The __fatBinC_Wrapper_t a host program registers its fatbin with (its layout and magic as
 * engine/fatbin/fatbin.h, kFatbinWrapperMagic, describes them), for the plain C programs of
 * cuda_standin_test: the load program makes one, the fake driver reads one. */
#ifndef KCACHE_TESTS_CUDA_FATBIN_WRAPPER_H_
#define KCACHE_TESTS_CUDA_FATBIN_WRAPPER_H_

#define KCACHE_FATBIN_WRAPPER_MAGIC 0x466243b1

typedef struct {
  int magic;
  int version;
  const unsigned long long* data;
  void* filename_or_fatbins;
} FatbinWrapper;

#endif /* KCACHE_TESTS_CUDA_FATBIN_WRAPPER_H_ */
