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
 *                               nvrtcCompileProgram is logged and cached; the program's calls
 *                               are kept, and a served compile's outputs answered, by the
 *                               wrappers of creating, destroying and naming a program and of
 *                               the output getters)
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
  OWN(nvrtcCreateProgram)                                                                         \
  OWN(nvrtcDestroyProgram)                                                                        \
  OWN(nvrtcCompileProgram)                                                                        \
  OWN(nvrtcGetPTXSize)                                                                            \
  OWN(nvrtcGetPTX)                                                                                \
  OWN(nvrtcGetCUBINSize)                                                                          \
  OWN(nvrtcGetCUBIN)                                                                              \
  OWN(nvrtcGetLTOIRSize)                                                                          \
  OWN(nvrtcGetLTOIR)                                                                              \
  OWN(nvrtcGetOptiXIRSize)                                                                        \
  OWN(nvrtcGetOptiXIR)                                                                            \
  OWN(nvrtcGetTileIRSize)                                                                         \
  OWN(nvrtcGetTileIR)                                                                             \
  OWN(nvrtcGetProgramLogSize)                                                                     \
  OWN(nvrtcGetProgramLog)                                                                         \
  OWN(nvrtcAddNameExpression)                                                                     \
  OWN(nvrtcGetLoweredName)                                                                        \
  RESULT(nvrtcGetPCHHeapSize, (size_t * size), (size))                                            \
  RESULT(nvrtcSetPCHHeapSize, (size_t size), (size))                                              \
  RESULT(nvrtcGetPCHCreateStatus, (nvrtcProgram prog), (prog))                                    \
  RESULT(nvrtcGetPCHHeapSizeRequired, (nvrtcProgram prog, size_t * size), (prog, size))           \
  RESULT(nvrtcSetFlowCallback, (nvrtcProgram prog, int (*callback)(void*, void*), void* payload), \
         (prog, callback, payload))                                                               \
  INTERNAL(__nvrtcCPEx, KCACHE_NVRTC_ERROR_INTERNAL_ERROR)                                        \
  INTERNAL(__nvrtcNvvmHandle, 0)

#endif /* KCACHE_CLIENT_NVRTC_NVRTC_ENTRIES_H_ */
