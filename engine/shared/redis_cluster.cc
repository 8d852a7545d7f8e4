#include "engine/shared/redis_cluster.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "engine/shared/redis_connection.h"
#include "engine/shared/redis_slot.h"

namespace kcache {

std::string RedisAddress::ToString() const { return absl::StrCat(host, ":", port); }

namespace {

absl::StatusOr<RedisAddress> ParseAddress(absl::string_view text, int default_port) {
  RedisAddress address;
  size_t colon = text.rfind(':');
  address.host = std::string(colon == absl::string_view::npos ? text : text.substr(0, colon));
  address.port = default_port;
  if (colon != absl::string_view::npos &&
      (!absl::SimpleAtoi(text.substr(colon + 1), &address.port) || address.port <= 0 ||
       address.port > 65535)) {
    return absl::InvalidArgumentError(absl::StrCat("bad port in \"", text, "\""));
  }
  if (address.host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("no host in \"", text, "\""));
  }
  return address;
}

// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381" -> the address.
std::optional<RedisAddress> RedirectAddress(absl::string_view error) {
  std::vector<absl::string_view> parts = absl::StrSplit(error, ' ');
  if (parts.size() != 3) return std::nullopt;
  absl::StatusOr<RedisAddress> address = ParseAddress(parts[2], 0);
  if (!address.ok() || address->port == 0) return std::nullopt;
  return *address;
}

class ClusterImpl : public RedisCluster {
 public:
  ClusterImpl(RedisEndpoints endpoints, RedisOptions options)
      : endpoints_(std::move(endpoints)), options_(options), slot_owner_(kRedisClusterSlots, -1) {}

  absl::StatusOr<RedisReply> Command(const std::vector<std::string>& args, size_t key_index,
                                     absl::Time deadline) override;
  absl::StatusOr<RedisReply> AnyNodeCommand(const std::vector<std::string>& args) override;
  std::optional<RedisAddress> NodeForSlot(int slot) const override;
  uint64_t map_refreshes() const override { return refreshes_.load(); }
  bool is_cluster() const override { return endpoints_.cluster; }

 private:
  std::shared_ptr<RedisConnection> Connection(const RedisAddress& address);
  // Candidates for a keyless command or a map read: the map's nodes, then the seeds.
  std::vector<RedisAddress> KnownNodes() const;
  // Reads CLUSTER SLOTS from the first node that answers and replaces the map.
  absl::Status RefreshMap(absl::Time deadline);
  absl::Status ApplySlots(const RedisReply& slots, const RedisAddress& asked);
  void SetOwner(int slot, const RedisAddress& address);

  const RedisEndpoints endpoints_;
  const RedisOptions options_;
  std::atomic<uint64_t> refreshes_{0};
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<RedisConnection>> connections_ ABSL_GUARDED_BY(mu_);
  std::vector<RedisAddress> nodes_ ABSL_GUARDED_BY(mu_);  // masters of the map
  std::vector<int> slot_owner_ ABSL_GUARDED_BY(mu_);      // index into nodes_, -1: unknown
};

std::shared_ptr<RedisConnection> ClusterImpl::Connection(const RedisAddress& address) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<RedisConnection>& connection = connections_[address.ToString()];
  if (connection == nullptr) {
    connection =
        std::make_shared<RedisConnection>(address, options_.connect_timeout, options_.io_timeout);
  }
  return connection;
}

std::vector<RedisAddress> ClusterImpl::KnownNodes() const {
  std::vector<RedisAddress> known;
  {
    absl::MutexLock lock(&mu_);
    known = nodes_;
  }
  for (const RedisAddress& seed : endpoints_.seeds) {
    if (std::find(known.begin(), known.end(), seed) == known.end()) known.push_back(seed);
  }
  return known;
}

std::optional<RedisAddress> ClusterImpl::NodeForSlot(int slot) const {
  absl::MutexLock lock(&mu_);
  if (slot < 0 || slot >= kRedisClusterSlots || slot_owner_[slot] < 0) return std::nullopt;
  return nodes_[slot_owner_[slot]];
}

void ClusterImpl::SetOwner(int slot, const RedisAddress& address) {
  absl::MutexLock lock(&mu_);
  auto it = std::find(nodes_.begin(), nodes_.end(), address);
  if (it == nodes_.end()) it = nodes_.insert(nodes_.end(), address);
  slot_owner_[slot] = static_cast<int>(it - nodes_.begin());
}

absl::Status ClusterImpl::ApplySlots(const RedisReply& slots, const RedisAddress& asked) {
  if (slots.type != RedisReply::Type::kArray) {
    return absl::InternalError("CLUSTER SLOTS: not an array");
  }
  std::vector<RedisAddress> nodes;
  std::vector<int> owner(kRedisClusterSlots, -1);
  for (const RedisReply& range : slots.elements) {
    if (range.elements.size() < 3 || range.elements[2].elements.size() < 2) {
      return absl::InternalError("CLUSTER SLOTS: malformed range");
    }
    const RedisReply& master = range.elements[2];
    RedisAddress address{master.elements[0].str, static_cast<int>(master.elements[1].integer)};
    if (address.host.empty()) address.host = asked.host;  // a node that does not know its IP
    auto it = std::find(nodes.begin(), nodes.end(), address);
    if (it == nodes.end()) it = nodes.insert(nodes.end(), address);
    long long first = std::clamp<long long>(range.elements[0].integer, 0, kRedisClusterSlots - 1);
    long long last = std::clamp<long long>(range.elements[1].integer, 0, kRedisClusterSlots - 1);
    for (long long slot = first; slot <= last; ++slot) owner[slot] = it - nodes.begin();
  }
  absl::MutexLock lock(&mu_);
  nodes_ = std::move(nodes);
  slot_owner_ = std::move(owner);
  return absl::OkStatus();
}

absl::Status ClusterImpl::RefreshMap(absl::Time deadline) {
  absl::Status last = absl::UnavailableError("no Redis node known");
  for (const RedisAddress& node : KnownNodes()) {
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    absl::StatusOr<RedisRawReply> reply = Connection(node)->Call({"CLUSTER", "SLOTS"}, false, left);
    if (!reply.ok()) {
      last = reply.status();
      continue;
    }
    if (reply->error) {
      last = absl::UnavailableError(absl::StrCat("CLUSTER SLOTS: ", *reply->error));
      continue;
    }
    if (reply->reply.elements.empty()) {  // a node that lost its view of the cluster
      last = absl::UnavailableError("CLUSTER SLOTS: no slots served");
      continue;
    }
    ++refreshes_;
    return ApplySlots(reply->reply, node);
  }
  return last;
}

absl::StatusOr<RedisReply> ClusterImpl::Command(const std::vector<std::string>& args,
                                                size_t key_index, absl::Time call_deadline) {
  if (key_index >= args.size()) return absl::InvalidArgumentError("redis command without key");
  const absl::Time deadline = std::min(call_deadline, absl::Now() + options_.call_deadline);
  const int slot = RedisKeySlot(args[key_index]);
  std::optional<RedisAddress> target;
  bool asking = false;
  bool refresh = endpoints_.cluster && !NodeForSlot(slot).has_value();
  int redirects = 0;
  absl::Status last = absl::UnavailableError("no Redis node answered");
  while (true) {
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("redis call past its deadline; last: ", last.message()));
    }
    if (refresh) {
      (void)RefreshMap(deadline);  // a failed read leaves the old map: still worth a try
      refresh = false;
    }
    if (!target) target = endpoints_.cluster ? NodeForSlot(slot) : endpoints_.seeds.front();
    if (!target) target = endpoints_.seeds.front();
    absl::StatusOr<RedisRawReply> reply =
        Connection(*target)->Call(args, asking, deadline - absl::Now());
    asking = false;
    if (!reply.ok() || (reply->error && (absl::StartsWith(*reply->error, "CLUSTERDOWN") ||
                                         absl::StartsWith(*reply->error, "TRYAGAIN") ||
                                         absl::StartsWith(*reply->error, "LOADING")))) {
      // The node is gone or the cluster is changing: re-read the map, pause, try again.
      last = reply.ok() ? absl::UnavailableError(*reply->error) : reply.status();
      target.reset();
      refresh = endpoints_.cluster;
      absl::SleepFor(std::min(options_.retry_pause, deadline - absl::Now()));
      continue;
    }
    if (!reply->error) return std::move(reply->reply);
    const std::string& error = *reply->error;
    bool moved = absl::StartsWith(error, "MOVED ");
    if (moved || absl::StartsWith(error, "ASK ")) {
      std::optional<RedisAddress> to = RedirectAddress(error);
      if (!to) return absl::InternalError(absl::StrCat("bad redirect: ", error));
      if (++redirects > options_.max_redirects) {
        return absl::UnavailableError(absl::StrCat("too many redirects; last: ", error));
      }
      if (moved) {
        SetOwner(slot, *to);
        refresh = true;  // a MOVED means the map changed: re-read all of it
      }
      asking = !moved;
      target = *to;
      continue;
    }
    return absl::InternalError(absl::StrCat("redis ", target->ToString(), ": ", error));
  }
}

absl::StatusOr<RedisReply> ClusterImpl::AnyNodeCommand(const std::vector<std::string>& args) {
  const absl::Time deadline = absl::Now() + options_.call_deadline;
  absl::Status last = absl::UnavailableError("no Redis node known");
  for (const RedisAddress& node : KnownNodes()) {
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    absl::StatusOr<RedisRawReply> reply = Connection(node)->Call(args, false, left);
    if (!reply.ok()) {
      last = reply.status();
      continue;
    }
    if (reply->error) {
      return absl::InternalError(absl::StrCat("redis ", node.ToString(), ": ", *reply->error));
    }
    return std::move(reply->reply);
  }
  return last;
}

}  // namespace

absl::StatusOr<RedisEndpoints> ParseRedisUrl(absl::string_view url) {
  RedisEndpoints endpoints;
  absl::string_view rest;
  if (absl::StartsWith(url, "redis://")) {
    rest = url.substr(8);
  } else if (absl::StartsWith(url, "redis-cluster://")) {
    rest = url.substr(16);
    endpoints.cluster = true;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("shared tier URL \"", url,
                     "\": expected redis://host:port or redis-cluster://h1:p1,h2:p2"));
  }
  if (absl::EndsWith(rest, "/")) rest.remove_suffix(1);
  for (absl::string_view part : absl::StrSplit(rest, ',', absl::SkipEmpty())) {
    absl::StatusOr<RedisAddress> address = ParseAddress(part, 6379);
    if (!address.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("shared tier URL \"", url, "\": ", address.status().message()));
    }
    endpoints.seeds.push_back(*std::move(address));
  }
  if (endpoints.seeds.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("shared tier URL \"", url, "\": no host"));
  }
  if (!endpoints.cluster && endpoints.seeds.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared tier URL \"", url, "\": redis:// names one host; use redis-cluster:// for more"));
  }
  return endpoints;
}

absl::StatusOr<std::unique_ptr<RedisCluster>> RedisCluster::Create(absl::string_view url,
                                                                   RedisOptions options) {
  absl::StatusOr<RedisEndpoints> endpoints = ParseRedisUrl(url);
  if (!endpoints.ok()) return endpoints.status();
  return std::unique_ptr<RedisCluster>(new ClusterImpl(*std::move(endpoints), options));
}

absl::StatusOr<std::optional<std::string>> RedisCluster::Get(absl::string_view key,
                                                             absl::Time deadline) {
  absl::StatusOr<RedisReply> reply = Command({"GET", std::string(key)}, 1, deadline);
  if (!reply.ok()) return reply.status();
  if (reply->is_nil()) return std::optional<std::string>();
  return std::optional<std::string>(std::move(reply->str));
}

absl::Status RedisCluster::Set(absl::string_view key, absl::string_view value, absl::Duration ttl) {
  std::vector<std::string> args = {"SET", std::string(key), std::string(value)};
  if (ttl > absl::ZeroDuration()) {
    args.push_back("PX");
    args.push_back(absl::StrCat(std::max<int64_t>(1, absl::ToInt64Milliseconds(ttl))));
  }
  return Command(args).status();
}

absl::StatusOr<bool> RedisCluster::SetIfAbsent(absl::string_view key, absl::string_view value,
                                               absl::Duration ttl) {
  absl::StatusOr<RedisReply> reply =
      Command({"SET", std::string(key), std::string(value), "NX", "PX",
               absl::StrCat(std::max<int64_t>(1, absl::ToInt64Milliseconds(ttl)))});
  if (!reply.ok()) return reply.status();
  return !reply->is_nil();
}

absl::Status RedisCluster::Delete(absl::string_view key) {
  return Command({"DEL", std::string(key)}).status();
}

}  // namespace kcache
