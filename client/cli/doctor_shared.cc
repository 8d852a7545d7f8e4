// kcache doctor --shared URL [--shared-key-file PATH]: is the shared tier reachable, is the
// cluster healthy, and does an entry signed with the key make the round trip?
#include <array>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cli/doctor.h"
#include "core/artifact.h"
#include "engine/shared/redis_cluster.h"
#include "engine/shared/shared_entry.h"

namespace kcache::cli {
namespace {

// A field of CLUSTER INFO ("cluster_state:ok\r\n...") or "".
std::string InfoField(const std::string& info, const std::string& name) {
  size_t at = info.find(name + ":");
  if (at == std::string::npos) return "";
  size_t start = at + name.size() + 1;
  size_t end = info.find_first_of("\r\n", start);
  return info.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// Signs a probe entry, writes it (expiring in a minute), reads it back, opens it, deletes it.
void CheckKeyRoundTrip(RedisCluster& redis, const SharedKeys& keys, CheckReport& report) {
  std::array<uint8_t, KernelId::kSize> id;
  std::mt19937 random(std::random_device{}());
  for (uint8_t& byte : id) byte = static_cast<uint8_t>(random());
  Artifact probe;
  probe.meta.key = ArtifactKey{KernelId(id), ArtifactKind::kPtx, *ParseTarget("compute_75"),
                               "kcache-doctor-probe", 0};
  probe.meta.kernel_name = "kcache doctor probe";
  probe.bytes = "kcache doctor: signing round trip";
  std::string redis_key = SharedEntryRedisKey(probe.meta.key);
  absl::Status written = redis.Set(redis_key, SealSharedEntry(keys, probe), absl::Minutes(1));
  if (!written.ok()) {
    report.Problem(absl::StrCat("cannot write a probe entry: ", written.message()),
                   "check that the user may SET (ACL) and that Redis is not read-only");
    return;
  }
  absl::StatusOr<std::optional<std::string>> read = redis.Get(redis_key);
  redis.Delete(redis_key).IgnoreError();
  if (!read.ok() || !read->has_value()) {
    report.Problem("the probe entry written could not be read back",
                   "check that reads and writes reach the same masters (no proxy that splits "
                   "them)");
    return;
  }
  absl::StatusOr<Artifact> opened = OpenSharedEntry(keys, probe.meta.key, **read);
  if (!opened.ok()) {
    report.Problem(absl::StrCat("the probe entry did not verify: ", opened.status().message()),
                   "Redis changed the value: check for a proxy or module that rewrites values");
    return;
  }
  report.Ok("key accepted: an entry signed with it was written, read back and verified");
}

}  // namespace

CheckReport CheckShared(const std::string& url, const std::string& key_file,
                        const std::string& second_key_file, double timeout_s) {
  CheckReport report("shared", url);
  RedisOptions options;
  options.call_deadline = absl::Seconds(timeout_s);
  options.connect_timeout = absl::Seconds(timeout_s);
  options.io_timeout = absl::Seconds(timeout_s);
  absl::StatusOr<std::unique_ptr<RedisCluster>> redis = RedisCluster::Create(url, options);
  if (!redis.ok()) {
    report.Problem(std::string(redis.status().message()),
                   "use redis://host:port (one Redis) or redis-cluster://h1:p1,h2:p2");
    return report;
  }
  absl::StatusOr<RedisReply> pong = (*redis)->AnyNodeCommand({"PING"});
  if (!pong.ok()) {
    report.details["error"] = std::string(pong.status().message());
    report.Problem(absl::StrCat("not reachable: ", pong.status().message()),
                   "check the address, that Redis runs, and that this machine may reach it");
    return report;
  }
  report.Ok("reachable");
  if ((*redis)->is_cluster()) {
    absl::StatusOr<RedisReply> info = (*redis)->AnyNodeCommand({"CLUSTER", "INFO"});
    std::string text = info.ok() ? info->str : "";
    std::string state = InfoField(text, "cluster_state");
    report.details["cluster_state"] = state;
    report.details["cluster_slots_ok"] = InfoField(text, "cluster_slots_ok");
    report.details["cluster_known_nodes"] = InfoField(text, "cluster_known_nodes");
    if (state == "ok") {
      report.Ok(absl::StrCat("cluster_state ok: ", InfoField(text, "cluster_slots_ok"),
                             " slots served, ", InfoField(text, "cluster_known_nodes"),
                             " nodes known"));
    } else {
      report.Problem(absl::StrCat("cluster_state is '", state.empty() ? "unknown" : state, "'",
                                  info.ok() ? "" : absl::StrCat(": ", info.status().message())),
                     "run `redis-cli --cluster check HOST:PORT` and fix what it reports "
                     "(unassigned slots, failed masters); kcached serves without the shared "
                     "tier meanwhile");
    }
  }
  if (key_file.empty()) {
    report.Info("no --shared-key-file: the signing round trip was not checked");
    return report;
  }
  absl::StatusOr<SharedKeys> keys = SharedKeys::Load(key_file, second_key_file);
  if (!keys.ok()) {
    report.Problem(std::string(keys.status().message()),
                   "give the key file kcached uses (--shared-key-file), readable by this user");
    return report;
  }
  CheckKeyRoundTrip(**redis, *keys, report);
  return report;
}

}  // namespace kcache::cli
