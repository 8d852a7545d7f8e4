// A launcher's turn at a miss's compile through kcached (the ObjectCache service's
// AwaitCompile, proto/kcache/v1/objects.proto; docs/torch-extensions.md, "One compile per
// miss"): LauncherOptions::await_turn for KCACHE_SERVER.
//
// The first answer is asked within the command's budget for kcached (cache_budget.h): a kcached
// that does not answer in it is marked unresponsive, as for any call, and the command compiles.
// A wait for another launcher's compile is not counted in the budget: kcached says every 250 ms
// that it still waits, and a wait silent for KCACHE_TIMEOUT_MS (at least a second) is a hung
// kcached (marked; the command compiles). A wait lasts at most the limit kcached states
// (--object-wait-seconds) plus that silence. A launcher that waits says on stderr what for and
// on whom, and at the end whether it was served from that compile or compiles itself, and why.
#ifndef KCACHE_CLIENT_CLI_COMPILE_TURN_REMOTE_H_
#define KCACHE_CLIENT_CLI_COMPILE_TURN_REMOTE_H_

#include <memory>
#include <string>
#include <vector>

#include "client/launch/cache_budget.h"
#include "core/kernel_spec.h"
#include "engine/launcher/launcher.h"

namespace kcache::cli {

// Asks kcached at `address` for the turn at compiling `key1` (`listed`: the entry ids the
// command's lookup listed; `subject`: the command's, for the messages) and waits while another
// launcher holds it. Null when this command compiles on its own at once (kcached away, silent
// or older, the budget spent, no turns there); else the turn (arrived(), or held: destroying it
// after Compiled ends the call).
std::unique_ptr<objects::CompileTurn> AwaitRemoteTurn(const std::string& address,
                                                      std::shared_ptr<launch::CacheBudget> budget,
                                                      const CommandKey& key1,
                                                      const std::vector<std::string>& listed,
                                                      const std::string& subject);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_COMPILE_TURN_REMOTE_H_
