// The compile worker's sandbox (docs/compile-workers.md, "Sandbox"). A worker compiles source
// that any client of kcached may have sent, so once its toolkit is loaded it gives up
// everything else of the host:
//   files     Landlock: read (and execute) beneath the toolkit's root and include folders,
//             nothing else; no write, create, remove or rename anywhere
//   network   seccomp: no socket, connect, bind; Landlock ABI 4+: no TCP; a network
//             namespace where user namespaces are allowed
//   processes seccomp: no exec, ptrace, namespaces, mounts, kernel modules, BPF, keyrings;
//             Landlock ABI 6+: no signals to or abstract sockets of processes outside it
//   itself    PR_SET_NO_NEW_PRIVS, not dumpable, an empty environment (set by the pool),
//             an empty working folder that no longer exists
// Linux only. What the kernel does not offer is reported, never faked: SandboxReport says
// what is in force, and kcached decides from it whether it compiles what clients send.
#ifndef KCACHE_ENGINE_WORKERS_SANDBOX_H_
#define KCACHE_ENGINE_WORKERS_SANDBOX_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kcache {

// What this kernel offers, found without changing anything (kcache doctor, kcached's start).
struct SandboxSupport {
  int landlock_abi = 0;          // 0: no Landlock (kernel < 5.13, not built in, or disabled)
  std::string landlock_missing;  // why, when landlock_abi == 0
  bool seccomp = false;          // seccomp filters can be installed
  bool user_namespaces = false;  // an unprivileged process may create a user namespace
  // True when the files and network of a worker can be restricted: Landlock and seccomp.
  bool Enough() const { return landlock_abi > 0 && seccomp; }
  // "Landlock ABI 7, seccomp, user namespaces" or "no Landlock (...), seccomp".
  std::string Describe() const;
};
SandboxSupport DetectSandboxSupport();

// What a worker put in force on itself.
struct SandboxReport {
  int landlock_abi = 0;               // the ABI the ruleset was built for; 0: none in force
  bool seccomp = false;               // the syscall filter is installed
  bool namespaces = false;            // in new user, network and IPC namespaces
  bool empty_environment = false;     // started with nothing in its environment
  std::vector<std::string> readable;  // the folders Landlock lets it read
  std::vector<std::string> missing;   // what could not be put in force, and why
  // Files and network restricted: Landlock and seccomp both in force.
  bool Complete() const { return landlock_abi > 0 && seccomp; }
  // One line for logs: "Landlock ABI 7 (reads only /usr/local/cuda-13.0), seccomp,
  // namespaces" or "NOT sandboxed: no Landlock (...)".
  std::string Describe() const;
};

// Step 1, at the worker's start, while it still has one thread: new user, network and IPC
// namespaces when the kernel allows them (recorded in report->namespaces, or why not in
// report->missing), not dumpable, no new privileges, and an empty working folder.
void EnterSandboxNamespaces(SandboxReport* report);

// Step 2, once the toolkit's libraries are loaded (Landlock forbids opening them later) and
// while the process has one thread (Landlock and seccomp bind the calling thread and what it
// starts): Landlock allowing read beneath `readable` only, then the seccomp filter. What the
// kernel lacks is recorded in report->missing; the error is for a step that the kernel offers
// but that failed (a folder that cannot be opened, a second thread already running).
absl::Status RestrictSelf(const std::vector<std::string>& readable, SandboxReport* report);

}  // namespace kcache

#endif  // KCACHE_ENGINE_WORKERS_SANDBOX_H_
