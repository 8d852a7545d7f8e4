#include "engine/workers/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

// The Landlock ABI as the kernel defines it (linux/landlock.h). Debian 12's header stops at
// ABI 2, so the later rights, the network and scope fields are spelled out here; their values
// are kernel ABI and never change.
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif

namespace kcache {
namespace {

constexpr uint32_t kLandlockCreateRulesetVersion = 1u << 0;
constexpr int kLandlockRulePathBeneath = 1;

constexpr uint64_t kFsExecute = 1ull << 0;
constexpr uint64_t kFsReadFile = 1ull << 2;
constexpr uint64_t kFsReadDir = 1ull << 3;
constexpr uint64_t kFsRightsAbi1 = (1ull << 13) - 1;      // execute … make_sym
constexpr uint64_t kFsRefer = 1ull << 13;                 // ABI 2
constexpr uint64_t kFsTruncate = 1ull << 14;              // ABI 3
constexpr uint64_t kFsIoctlDev = 1ull << 15;              // ABI 5
constexpr uint64_t kNetBindTcp = 1ull << 0;               // ABI 4
constexpr uint64_t kNetConnectTcp = 1ull << 1;            // ABI 4
constexpr uint64_t kScopeAbstractUnixSocket = 1ull << 0;  // ABI 6
constexpr uint64_t kScopeSignal = 1ull << 1;              // ABI 6

struct LandlockRulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;  // ABI 4+
  uint64_t scoped;              // ABI 6+
};

struct __attribute__((packed)) LandlockPathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
};

int LandlockAbi(std::string* why_not) {
  long abi = syscall(__NR_landlock_create_ruleset, nullptr, 0, kLandlockCreateRulesetVersion);
  if (abi > 0) return static_cast<int>(abi);
  switch (errno) {
    case ENOSYS:
      *why_not = "the kernel has no Landlock (Linux 5.13 or newer with CONFIG_SECURITY_LANDLOCK)";
      break;
    case EOPNOTSUPP:
      *why_not = "Landlock is built in but not enabled (add landlock to the lsm= boot parameter)";
      break;
    default:
      *why_not = absl::StrCat("Landlock is refused here (", strerror(errno),
                              "; a container's seccomp profile may forbid it)");
  }
  return 0;
}

// A filter installed with a null program: EFAULT (or EACCES without no_new_privs) means the
// kernel has seccomp filters; EINVAL means it has none. Installs nothing.
bool SeccompAvailable() {
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, nullptr, 0, 0) == 0) return true;
  return errno == EFAULT || errno == EACCES;
}

// Whether this process may create a user namespace: a child tries and reports.
bool UserNamespacesAllowed() {
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) _exit(unshare(CLONE_NEWUSER) == 0 ? 0 : 1);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int ThreadCount() {
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return -1;
  int count = 0;
  while (dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(tasks);
  return count;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

absl::Status ErrnoError(absl::string_view what) {
  return absl::InternalError(absl::StrCat("sandbox: ", what, ": ", strerror(errno)));
}

// Landlock: read and execute beneath `readable`, nothing else of the file system; no TCP
// (ABI 4+); no signals to, or abstract sockets of, processes outside (ABI 6+).
absl::Status RestrictFiles(int abi, const std::vector<std::string>& readable,
                           SandboxReport* report) {
  LandlockRulesetAttr attr = {};
  attr.handled_access_fs = kFsRightsAbi1;
  if (abi >= 2) attr.handled_access_fs |= kFsRefer;
  if (abi >= 3) attr.handled_access_fs |= kFsTruncate;
  if (abi >= 5) attr.handled_access_fs |= kFsIoctlDev;
  size_t attr_size = sizeof(uint64_t);
  if (abi >= 4) {
    attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
    attr_size = 2 * sizeof(uint64_t);
  }
  if (abi >= 6) {
    attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;
    attr_size = sizeof(attr);
  }
  Fd ruleset(static_cast<int>(syscall(__NR_landlock_create_ruleset, &attr, attr_size, 0)));
  if (ruleset.get() < 0) return ErrnoError("could not create a Landlock ruleset");
  for (const std::string& path : readable) {
    Fd folder(open(path.c_str(), O_PATH | O_CLOEXEC | O_DIRECTORY));
    if (folder.get() < 0) return ErrnoError(absl::StrCat("could not open ", path));
    LandlockPathBeneathAttr rule = {kFsExecute | kFsReadFile | kFsReadDir, folder.get()};
    if (syscall(__NR_landlock_add_rule, ruleset.get(), kLandlockRulePathBeneath, &rule, 0) != 0) {
      return ErrnoError(absl::StrCat("could not allow reading ", path));
    }
    char* resolved = realpath(path.c_str(), nullptr);
    report->readable.push_back(resolved != nullptr ? resolved : path);
    free(resolved);
  }
  if (syscall(__NR_landlock_restrict_self, ruleset.get(), 0) != 0) {
    return ErrnoError("could not enforce the Landlock ruleset");
  }
  report->landlock_abi = abi;
  return absl::OkStatus();
}

// Everything a compiler has no business doing, refused with EPERM (the compiler sees an
// ordinary failure; nothing is killed, so a library probing for a feature keeps working).
constexpr const char* kDeniedSyscalls[] = {
    // network
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    // other programs and processes
    "execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    // namespaces, mounts, the root
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    // files reached around Landlock, devices
    "open_by_handle_at", "name_to_handle_at", "mknod", "mknodat", "fanotify_init", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "userfaultfd",
    // the kernel itself
    "bpf", "perf_event_open", "init_module", "finit_module", "delete_module", "kexec_load",
    "kexec_file_load", "reboot", "swapon", "swapoff", "acct", "quotactl", "keyctl", "add_key",
    "request_key", "settimeofday", "clock_settime", "sethostname", "setdomainname",
    "lookup_dcookie", "uselib", "personality"};

absl::Status InstallSeccompFilter() {
  scmp_filter_ctx filter = seccomp_init(SCMP_ACT_ALLOW);
  if (filter == nullptr) return absl::InternalError("sandbox: seccomp_init failed");
  int rc = seccomp_attr_set(filter, SCMP_FLTATR_CTL_NNP, 1);
  for (const char* name : kDeniedSyscalls) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR || rc != 0) continue;  // not on this architecture
    rc = seccomp_rule_add(filter, SCMP_ACT_ERRNO(EPERM), nr, 0);
  }
  // Threads yes, new namespaces no: clone3 hides its flags in memory, so it answers ENOSYS and
  // glibc falls back to clone, whose flags the filter can see.
  int clone3 = seccomp_syscall_resolve_name("clone3");
  if (rc == 0 && clone3 != __NR_SCMP_ERROR) {
    rc = seccomp_rule_add(filter, SCMP_ACT_ERRNO(ENOSYS), clone3, 0);
  }
  for (uint64_t flag : {CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID, CLONE_NEWIPC,
                        CLONE_NEWUTS, CLONE_NEWCGROUP}) {
    if (rc != 0) break;
    rc = seccomp_rule_add(filter, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                          SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
  }
  if (rc == 0) rc = seccomp_load(filter);
  seccomp_release(filter);
  if (rc != 0) {
    return absl::InternalError(
        absl::StrCat("sandbox: could not install the seccomp filter: ", strerror(-rc)));
  }
  return absl::OkStatus();
}

}  // namespace

std::string SandboxSupport::Describe() const {
  std::vector<std::string> parts;
  parts.push_back(landlock_abi > 0 ? absl::StrCat("Landlock ABI ", landlock_abi)
                                   : absl::StrCat("no Landlock (", landlock_missing, ")"));
  parts.push_back(seccomp ? "seccomp" : "no seccomp filters (CONFIG_SECCOMP_FILTER)");
  parts.push_back(user_namespaces ? "user namespaces" : "no unprivileged user namespaces");
  return absl::StrJoin(parts, ", ");
}

SandboxSupport DetectSandboxSupport() {
  SandboxSupport support;
  support.landlock_abi = LandlockAbi(&support.landlock_missing);
  support.seccomp = SeccompAvailable();
  support.user_namespaces = UserNamespacesAllowed();
  return support;
}

std::string SandboxReport::Describe() const {
  std::vector<std::string> parts;
  if (landlock_abi > 0) {
    parts.push_back(absl::StrCat("Landlock ABI ", landlock_abi, " (reads only ",
                                 absl::StrJoin(readable, ", "), ")"));
  }
  if (seccomp) parts.push_back("seccomp (no sockets, exec, ptrace, mounts, namespaces)");
  if (namespaces) parts.push_back("user, network and IPC namespaces");
  if (empty_environment) parts.push_back("empty environment");
  std::string line = absl::StrJoin(parts, ", ");
  if (!Complete())
    line =
        absl::StrCat("NOT sandboxed", line.empty() ? "" : " (only ", line, line.empty() ? "" : ")");
  if (!missing.empty()) absl::StrAppend(&line, "; missing: ", absl::StrJoin(missing, "; "));
  return line;
}

void EnterSandboxNamespaces(SandboxReport* report) {
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  if (unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC) == 0) {
    report->namespaces = true;
  } else {
    report->missing.push_back(absl::StrCat("no new namespaces (unshare: ", strerror(errno), ")"));
  }
  // An empty working folder that no longer exists: relative paths find nothing, and nothing
  // can be created in it.
  char folder[] = "/tmp/kcache-worker-XXXXXX";
  if (mkdtemp(folder) != nullptr && chdir(folder) == 0) {
    rmdir(folder);
  } else if (chdir("/") != 0) {
    report->missing.push_back("no working folder");
  }
}

absl::Status RestrictSelf(const std::vector<std::string>& readable, SandboxReport* report) {
  int threads = ThreadCount();
  if (threads != 1) {
    return absl::InternalError(
        absl::StrCat("sandbox: the worker has ", threads,
                     " threads before restricting itself; Landlock would bind only one of them"));
  }
  std::string why_not;
  int abi = LandlockAbi(&why_not);
  if (abi > 0) {
    absl::Status files = RestrictFiles(abi, readable, report);
    if (!files.ok()) return files;
  } else {
    report->missing.push_back(why_not);
  }
  if (SeccompAvailable()) {
    absl::Status syscalls = InstallSeccompFilter();
    if (!syscalls.ok()) return syscalls;
    report->seccomp = true;
  } else {
    report->missing.push_back("no seccomp filters (CONFIG_SECCOMP_FILTER)");
  }
  return absl::OkStatus();
}

}  // namespace kcache
