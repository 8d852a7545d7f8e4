// For `kcache nvrtc-put`: whether an NVRTC compile's outcome depends on the clock, found from
// what the compile does rather than from how its text is spelled. NVRTC asks the C library for
// the date (ctime) at every compile and makes __DATE__ and __TIME__ of it; a program can expand
// them however it likes (token pasting, a header, an option, a line splice). Compiled again here
// with ctime answering a date whose every field holds a quote and a backslash, any expansion of
// either macro is a token NVRTC cannot lex ("unrecognized token", an error no option or pragma
// turns off): the same result and log as the caller's compile show that nothing expanded them.
//
// The C library's date functions are defined in this file and exported by the kcache executable
// (client/cli/clock_probe.dynlist), so that the NVRTC it loads calls them; outside a probe they
// answer as the C library does. A binary that does not export them never sees a probe's ctime
// call, and so never passes one.
#ifndef KCACHE_CLIENT_CLI_NVRTC_CLOCK_PROBE_H_
#define KCACHE_CLIENT_CLI_NVRTC_CLOCK_PROBE_H_

#include "absl/status/status.h"
#include "engine/nvrtc/nvrtc_compile.h"

namespace kcache::cli {

// The date ctime answers while a probe compiles: "Www Mmm dd hh:mm:ss yyyy\n" with a quote and
// a backslash in every field.
inline constexpr char kPoisonedDate[] = "X\"\\ \"\\\" \"\\ \"\\:\"\\:\"\\ \"\\\"\\\n";

// OK when `program`, compiled again in context.cwd by context.library with the date poisoned,
// gives `outcome`'s result and log (its outputs may differ run to run: NOTES on template-heavy
// kernels). FailedPrecondition saying why the outcome may depend on the clock: another result or
// log; NVRTC made a date some other way than ctime (localtime, gmtime, strftime, asctime: not
// poisoned, so not shown); NVRTC asked for no date (nothing was poisoned). Also the compile's
// own failures (the library does not load).
absl::Status CheckNvrtcClockFree(const objects::NvrtcProgram& program,
                                 const objects::NvrtcContext& context,
                                 const objects::NvrtcOutcome& outcome);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_NVRTC_CLOCK_PROBE_H_
