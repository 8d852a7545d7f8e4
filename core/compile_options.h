// The allowlist of NVRTC options a KernelSpec may carry.
#ifndef KCACHE_CORE_COMPILE_OPTIONS_H_
#define KCACHE_CORE_COMPILE_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kcache {

// OK when every option is allowed. Allowed (each option one string, as NVRTC takes them):
// -std=c++{11,14,17,20}, -D<name>[=value], -U<name>, --use_fast_math,
// --ftz/--prec-div/--prec-sqrt/--fmad=true|false, -default-device, -rdc=true|false,
// --extra-device-vectorization, -lineinfo, --dopt=on, --restrict, -w, --maxrregcount=N,
// -Xptxas=-v (and their long/short spellings). Refused with InvalidArgument naming the option
// and the reason: -arch / --gpu-architecture (the target is a field, not an option),
// -I/--include-path (headers travel in the spec), anything that names or writes a file
// (-fdevice-time-trace, --pch-dir, --create-pch, --use-pch, ...), -dlto (LTO-IR is asked for,
// not passed), -O0..-O3 and --dopt=off (NVRTC 13.0 rejects them), split forms such as
// "-D FOO", and any option not in the list.
absl::Status ValidateCompileOptions(const std::vector<std::string>& options);

}  // namespace kcache

#endif  // KCACHE_CORE_COMPILE_OPTIONS_H_
