/* The entry points of kcache's libnvrtc.so.13 stand-in (nvrtc_standin.c): every symbol a real
 * NVRTC 13 exports, in one list. Each is forwarded to the real library; the test
 * nvrtc_standin_test compares what the stand-in exports with `nm -D` of the real libraries
 * here, so a symbol a newer NVRTC adds is noticed.
 *
 * KCACHE_NVRTC_FUNCTIONS(RESULT, OWN, INTERNAL) expands, per entry, to one of:
 *   RESULT(name, params, args)  a documented function returning nvrtcResult; its wrapper is
 *                               generated: it forwards `args` and returns
 *                               NVRTC_ERROR_INTERNAL_ERROR without a real NVRTC
 *   OWN(name)                   a documented function whose wrapper is written by hand in
 *                               nvrtc_standin.c (nvrtcGetErrorString's return is a string;
 *                               nvrtcCompileProgram is logged)
 *   INTERNAL(name, fallback)    an undocumented one (cuBLASLt and cuDNN look them up with
 *                               dlsym): forwarded as a jump, register for register, since its
 *                               signature is not published; returns `fallback` without a real
 *                               NVRTC (__nvrtcCPEx returns an nvrtcResult and takes 9
 *                               arguments; __nvrtcNvvmHandle maps a number to a function
 *                               pointer, NULL for one it does not know)
 * Since NVRTC 13.0: all but nvrtcGetTileIRSize, nvrtcGetTileIR and __nvrtcNvvmHandle (13.2).
 * A real NVRTC that lacks one answers NVRTC_ERROR_INTERNAL_ERROR (or the fallback) for it. */
#ifndef KCACHE_CLIENT_NVRTC_NVRTC_ENTRIES_H_
#define KCACHE_CLIENT_NVRTC_NVRTC_ENTRIES_H_

#include <stddef.h>

typedef int nvrtcResult; /* an enum in nvrtc.h: the same ABI as int */
typedef struct _nvrtcProgram* nvrtcProgram;

#define KCACHE_NVRTC_SUCCESS 0
#define KCACHE_NVRTC_ERROR_INTERNAL_ERROR 11

#define KCACHE_NVRTC_FUNCTIONS(RESULT, OWN, INTERNAL)                                             \
  OWN(nvrtcGetErrorString)                                                                        \
  RESULT(nvrtcVersion, (int* major, int* minor), (major, minor))                                  \
  RESULT(nvrtcGetNumSupportedArchs, (int* num_archs), (num_archs))                                \
  RESULT(nvrtcGetSupportedArchs, (int* archs), (archs))                                           \
  RESULT(nvrtcCreateProgram,                                                                      \
         (nvrtcProgram * prog, const char* src, const char* name, int num_headers,                \
          const char* const* headers, const char* const* include_names),                          \
         (prog, src, name, num_headers, headers, include_names))                                  \
  RESULT(nvrtcDestroyProgram, (nvrtcProgram * prog), (prog))                                      \
  OWN(nvrtcCompileProgram)                                                                        \
  RESULT(nvrtcGetPTXSize, (nvrtcProgram prog, size_t * size), (prog, size))                       \
  RESULT(nvrtcGetPTX, (nvrtcProgram prog, char* out), (prog, out))                                \
  RESULT(nvrtcGetCUBINSize, (nvrtcProgram prog, size_t * size), (prog, size))                     \
  RESULT(nvrtcGetCUBIN, (nvrtcProgram prog, char* out), (prog, out))                              \
  RESULT(nvrtcGetLTOIRSize, (nvrtcProgram prog, size_t * size), (prog, size))                     \
  RESULT(nvrtcGetLTOIR, (nvrtcProgram prog, char* out), (prog, out))                              \
  RESULT(nvrtcGetOptiXIRSize, (nvrtcProgram prog, size_t * size), (prog, size))                   \
  RESULT(nvrtcGetOptiXIR, (nvrtcProgram prog, char* out), (prog, out))                            \
  RESULT(nvrtcGetTileIRSize, (nvrtcProgram prog, size_t * size), (prog, size))                    \
  RESULT(nvrtcGetTileIR, (nvrtcProgram prog, char* out), (prog, out))                             \
  RESULT(nvrtcGetProgramLogSize, (nvrtcProgram prog, size_t * size), (prog, size))                \
  RESULT(nvrtcGetProgramLog, (nvrtcProgram prog, char* out), (prog, out))                         \
  RESULT(nvrtcAddNameExpression, (nvrtcProgram prog, const char* const name_expression),          \
         (prog, name_expression))                                                                 \
  RESULT(nvrtcGetLoweredName,                                                                     \
         (nvrtcProgram prog, const char* const name_expression, const char** lowered_name),       \
         (prog, name_expression, lowered_name))                                                   \
  RESULT(nvrtcGetPCHHeapSize, (size_t * size), (size))                                            \
  RESULT(nvrtcSetPCHHeapSize, (size_t size), (size))                                              \
  RESULT(nvrtcGetPCHCreateStatus, (nvrtcProgram prog), (prog))                                    \
  RESULT(nvrtcGetPCHHeapSizeRequired, (nvrtcProgram prog, size_t * size), (prog, size))           \
  RESULT(nvrtcSetFlowCallback, (nvrtcProgram prog, int (*callback)(void*, void*), void* payload), \
         (prog, callback, payload))                                                               \
  INTERNAL(__nvrtcCPEx, KCACHE_NVRTC_ERROR_INTERNAL_ERROR)                                        \
  INTERNAL(__nvrtcNvvmHandle, 0)

#endif /* KCACHE_CLIENT_NVRTC_NVRTC_ENTRIES_H_ */
