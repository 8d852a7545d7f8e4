/* The entry points of kcache's NVRTC stand-ins (nvrtc_standin.c), libnvrtc.so.13 and, built
 * with KCACHE_NVRTC_MAJOR=12, libnvrtc.so.12: every symbol a real NVRTC of that major version
 * exports, in one list. Each is forwarded to the real library; the test nvrtc_standin_test
 * compares what each stand-in exports with `nm -D` of the real libraries here (the toolkit's
 * NVRTC 13, the NVRTC 12.9 wheel's), so a symbol a newer NVRTC adds is noticed.
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
 * NVRTC 12 (12.9) has all the others but not those three, and nvrtcGetNVVMSize and
 * nvrtcGetNVVM (13 dropped them), which answer as nvrtcGetLTOIRSize and nvrtcGetLTOIR do: the
 * stand-in for 12 exports exactly NVRTC 12's (KCACHE_NVRTC_SINCE_13, KCACHE_NVRTC_BEFORE_13),
 * so that a caller probing for a function with dlsym finds what it would without kcache.
 * A real NVRTC that lacks one answers NVRTC_ERROR_INTERNAL_ERROR (or the fallback) for it. */
#ifndef KCACHE_CLIENT_NVRTC_NVRTC_ENTRIES_H_
#define KCACHE_CLIENT_NVRTC_NVRTC_ENTRIES_H_

#include <stddef.h>

typedef int nvrtcResult; /* an enum in nvrtc.h: the same ABI as int */
typedef struct _nvrtcProgram* nvrtcProgram;

/* The NVRTC major version a stand-in is built for: its soname's. */
#ifndef KCACHE_NVRTC_MAJOR
#define KCACHE_NVRTC_MAJOR 13
#endif
#if KCACHE_NVRTC_MAJOR >= 13
#define KCACHE_NVRTC_SINCE_13(entries) entries
#define KCACHE_NVRTC_BEFORE_13(entries)
#else
#define KCACHE_NVRTC_SINCE_13(entries)
#define KCACHE_NVRTC_BEFORE_13(entries) entries
#endif

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
  KCACHE_NVRTC_SINCE_13(OWN(nvrtcGetTileIRSize) OWN(nvrtcGetTileIR))                              \
  KCACHE_NVRTC_BEFORE_13(OWN(nvrtcGetNVVMSize) OWN(nvrtcGetNVVM))                                 \
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
  KCACHE_NVRTC_SINCE_13(INTERNAL(__nvrtcNvvmHandle, 0))

#endif /* KCACHE_CLIENT_NVRTC_NVRTC_ENTRIES_H_ */
