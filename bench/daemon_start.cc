#include "bench/daemon_start.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "core/artifact.h"
#include "core/kernel_spec.h"
#include "core/target.h"
#include "engine/store/store.h"

namespace kcache::bench {
namespace {

constexpr int kArtifactsPerKernel = 4;

// Fills `out` with `size` pseudo-random bytes (xorshift64*; incompressible, as cubins nearly are
// to the store's zstd level 1).
void FillRandom(uint64_t seed, size_t size, std::string* out) {
  out->resize(size);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < size; i += 8) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    uint64_t word = x * 0x2545f4914f6cdd1dull;
    std::memcpy(out->data() + i, &word, std::min<size_t>(8, size - i));
  }
}

}  // namespace

absl::Status AddSyntheticArtifacts(const std::string& path, uint64_t artifacts, uint64_t bytes) {
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(path);
  if (!store.ok()) return store.status();
  const char* kTargets[kArtifactsPerKernel] = {"sm_75", "sm_86", "sm_90", "compute_75"};
  uint64_t each = artifacts == 0 ? 0 : bytes / artifacts;
  int64_t now = NowUnixMillis();
  for (uint64_t k = 0; k * kArtifactsPerKernel < artifacts; ++k) {
    KernelRecord record;
    record.spec.name = absl::StrCat("synthetic_", k);
    record.spec.source = absl::StrCat("extern \"C\" __global__ void synthetic_", k, "() {}\n");
    record.id = ComputeKernelId(record.spec);
    record.arch.min_arch = 75;
    record.registered_unix_ms = now;
    if (absl::Status s = (*store)->PutKernel(record); !s.ok()) return s;
    for (int t = 0; t < kArtifactsPerKernel && k * kArtifactsPerKernel + t < artifacts; ++t) {
      Artifact artifact;
      artifact.meta.key.kernel_id = record.id;
      artifact.meta.key.target = *ParseTarget(kTargets[t]);
      artifact.meta.key.kind = t == 3 ? ArtifactKind::kPtx : ArtifactKind::kCubin;
      artifact.meta.key.toolkit = "nvrtc-13.0+synthetic";
      artifact.meta.kernel_name = record.spec.name;
      artifact.meta.min_driver = 13000;
      artifact.meta.compile_micros = 100000;
      FillRandom(k * kArtifactsPerKernel + t, each, &artifact.bytes);
      if (absl::Status s = (*store)->Put(artifact); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<double> StartTimed(testing::DaemonProcess& daemon) {
  std::string path = daemon.dir() + "/notify.sock";
  unlink(path.c_str());
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), std::min(path.size(), sizeof(address.sun_path) - 1));
  if (fd < 0 || bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    if (fd >= 0) close(fd);
    return absl::InternalError(absl::StrCat("cannot bind ", path, ": ", std::strerror(errno)));
  }
  setenv("NOTIFY_SOCKET", path.c_str(), 1);
  Clock::time_point start = Clock::now();
  absl::Status spawned = daemon.Spawn();
  unsetenv("NOTIFY_SOCKET");
  double micros = -1;
  while (spawned.ok() && micros < 0 && MicrosSince(start) < 60e6 && daemon.Running()) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buffer[512];
    ssize_t got = recv(fd, buffer, sizeof(buffer), 0);
    if (got > 0 && absl::StrContains(absl::string_view(buffer, got), "READY=1")) {
      micros = MicrosSince(start);
    }
  }
  close(fd);
  unlink(path.c_str());
  if (!spawned.ok()) return spawned;
  if (micros < 0) {
    return absl::InternalError(absl::StrCat("kcached was not ready; its log:\n", daemon.Log()));
  }
  if (absl::Status s = daemon.WaitUntilServing(); !s.ok()) return s;
  return micros;
}

}  // namespace kcache::bench
