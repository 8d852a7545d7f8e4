// Client-made objects on the shared fleet tier: kcached's object cache, and Redis after it.
#include "daemon/objects/fleet_object_cache.h"

#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/background_writer.h"
#include "engine/objects/object_schema.h"

namespace kcache::objects {
namespace {

// GET, unless the value is over ARGV[1] bytes: then its size (an integer), so that a value
// planted by anyone who reaches Redis is never read into memory whole.
constexpr char kBoundedGet[] =
    "local v = redis.call('GET', KEYS[1]) "
    "if v and #v > tonumber(ARGV[1]) then return #v end "
    "return v";
// HGETALL, unless the hash has more than ARGV[1] fields or its values more than ARGV[2] bytes:
// then that count (an integer).
constexpr char kBoundedListing[] =
    "local n = redis.call('HLEN', KEYS[1]) "
    "if n > tonumber(ARGV[1]) then return n end "
    "local t = redis.call('HGETALL', KEYS[1]) "
    "local b = 0 "
    "for i = 2, #t, 2 do b = b + #t[i] end "
    "if b > tonumber(ARGV[2]) then return b end "
    "return t";
// HKEYS, unless the hash has more than ARGV[1] fields or its field names more than ARGV[2]
// bytes: then that count (an integer).
constexpr char kBoundedIds[] =
    "local n = redis.call('HLEN', KEYS[1]) "
    "if n > tonumber(ARGV[1]) then return n end "
    "local t = redis.call('HKEYS', KEYS[1]) "
    "local b = 0 "
    "for i = 1, #t do b = b + #t[i] end "
    "if b > tonumber(ARGV[2]) then return b end "
    "return t";

std::string Prefix(const CommandKey& key1) {
  return absl::StrCat("kcache:obj:v1:{", key1.Hex(), "}:");
}

std::string ListingFieldRedisKey(const ObjectEntryKey& key) {
  return absl::StrCat(FleetListingRedisKey(key.command), ":", key.entry_id);
}

class FleetObjectCache final : public ObjectCache, public FleetCompileLeases {
 public:
  FleetObjectCache(std::unique_ptr<ObjectCache> pod, std::unique_ptr<RedisCluster> redis,
                   std::unique_ptr<RedisLeases> leases, FleetObjectOptions options,
                   std::function<void(FleetObjectCount)> count)
      : pod_(std::move(pod)),
        redis_(std::move(redis)),
        leases_(std::move(leases)),
        options_(std::move(options)),
        count_(std::move(count)),
        health_(options_.off_initial, options_.off_max) {}

  absl::StatusOr<std::vector<ObjectEntry>> List(const CommandKey& key1) override {
    absl::StatusOr<std::vector<ObjectEntry>> local = pod_->List(key1);
    if (local.ok() && !local->empty()) return local;
    absl::StatusOr<RedisReply> reply =
        Call({"EVAL", kBoundedListing, "1", FleetListingRedisKey(key1),
              absl::StrCat(kMaxFleetListing), absl::StrCat(kMaxFleetListingBytes)},
             options_.budget);
    if (!reply.ok()) return local;
    std::vector<ObjectEntry> entries;
    if (reply->type == RedisReply::Type::kArray) {
      for (size_t i = 0; i + 1 < reply->elements.size(); i += 2) {
        ObjectEntryKey key{key1, reply->elements[i].str};
        absl::StatusOr<Artifact> opened =
            OpenSharedEntryAt(options_.keys, ObjectStoreKey(key), ListingFieldRedisKey(key),
                              reply->elements[i + 1].str);
        ObjectEntry entry;
        if (opened.ok()) entry = ObjectEntryFromArtifact(opened->meta);
        if (!opened.ok() || ManifestId(entry.manifest) != key.entry_id) {
          Count(FleetObjectCount::kRefused);
          continue;
        }
        entries.push_back(std::move(entry));
      }
    } else {
      Count(FleetObjectCount::kRefused);  // over the listing's bounds
    }
    if (entries.empty()) Count(FleetObjectCount::kMiss);
    return entries;
  }

  absl::StatusOr<std::vector<ObjectEntry>> ListAll() override { return pod_->ListAll(); }

  void RecordUse(const ObjectEntryKey& key) override { pod_->RecordUse(key); }

  absl::StatusOr<std::string> Get(const ObjectEntryKey& key) override {
    return GetEntry(key).bundle;
  }

  absl::Status Put(const ObjectEntry& entry, std::string bundle) override {
    uint64_t size = bundle.size();
    absl::Status put = pod_->Put(entry, bundle);  // a copy: `bundle` is queued for the fleet
    if (!put.ok()) return put;
    if (!writes_.Add(Write{entry, std::move(bundle), ""}, size)) {
      Count(FleetObjectCount::kWriteDropped);
    }
    return absl::OkStatus();
  }

  LeaseWait Await(const CommandKey& key1, const absl::flat_hash_set<std::string>& seen_before,
                  absl::Time give_up,
                  std::function<bool(const std::string& holder)> keep_waiting) override {
    // What arrives is an entry the tier did not list when the wait began (one it did, this
    // kcached's lookups see as they always do), nor the launcher's lookup listed.
    absl::StatusOr<std::vector<std::string>> listed_now = ListedIds(key1);
    if (!listed_now.ok()) return LeaseWait{};             // kFailed: compile without the lease
    absl::flat_hash_set<std::string> seen = seen_before;  // and each id fetched once
    seen.insert(listed_now->begin(), listed_now->end());
    RedisLeases::Hooks hooks;
    hooks.keep_waiting = std::move(keep_waiting);
    hooks.arrived = [&]() -> std::optional<bool> {
      absl::StatusOr<std::vector<std::string>> ids = ListedIds(key1);
      if (!ids.ok()) return std::nullopt;
      bool any = false;
      for (const std::string& id : *ids) {
        if (seen.contains(id)) continue;
        Fetched fetched = GetEntry(ObjectEntryKey{key1, id});  // verified, and copied here
        // An entry the tier did not answer for (a failed call) is asked for again.
        if (fetched.answered) seen.insert(id);
        any = fetched.bundle.ok() || any;
      }
      return any;
    };
    return leases_->Await(FleetTurnRedisKey(key1), give_up, hooks);
  }

  void Release(const CommandKey& key1) override {
    writes_.AddAlways(Write{{}, "", FleetTurnRedisKey(key1)});
  }

  absl::Status Delete(const ObjectEntryKey& key) override { return pod_->Delete(key); }

  absl::StatusOr<ObjectPage> ListClientMade(const std::string& after) override {
    return pod_->ListClientMade(after);
  }

 private:
  // An entry's bundle: this kcached's copy, else the tier's, verified and copied into this
  // kcached's store (else this kcached's NotFound). `answered` is false when the tier was asked
  // and did not answer (the call failed, or the tier is switched off): asking later may find it.
  struct Fetched {
    absl::StatusOr<std::string> bundle;
    bool answered = true;
  };
  Fetched GetEntry(const ObjectEntryKey& key) {
    absl::StatusOr<std::string> local = pod_->Get(key);
    if (local.ok()) return {std::move(local)};
    std::string redis_key = FleetObjectRedisKey(key);
    uint64_t bound = options_.max_object_bytes + kMaxFleetMetaBytes + kSharedEntryOverhead;
    absl::StatusOr<RedisReply> reply =
        Call({"EVAL", kBoundedGet, "1", redis_key, absl::StrCat(bound)}, options_.budget);
    if (!reply.ok()) return {std::move(local), false};
    if (reply->is_nil()) {
      Count(FleetObjectCount::kMiss);
      return {std::move(local)};
    }
    absl::StatusOr<Artifact> artifact =
        reply->type == RedisReply::Type::kString
            ? OpenSharedEntryAt(options_.keys, ObjectStoreKey(key), redis_key, reply->str)
            : absl::ResourceExhaustedError("over the bound");
    if (!artifact.ok() || artifact->bytes.size() > options_.max_object_bytes) {
      Count(FleetObjectCount::kRefused);
      return {std::move(local)};
    }
    // A copy for the next lookup; a failure to keep it costs only that.
    pod_->Put(ObjectEntryFromArtifact(artifact->meta), artifact->bytes).IgnoreError();
    Count(FleetObjectCount::kHit);
    return {std::move(artifact->bytes)};
  }

  // One command on the key args[1] (EVAL's key is args[3]); a failure is counted and switches
  // the tier off for a while (health_). While off: Unavailable, uncounted.
  absl::StatusOr<RedisReply> Call(const std::vector<std::string>& args, absl::Duration limit) {
    absl::Time now = absl::Now();
    if (!health_.Available(now)) {
      return absl::UnavailableError("the fleet tier is switched off after an error");
    }
    size_t key_index = args[0] == "EVAL" ? 3 : 1;
    absl::StatusOr<RedisReply> reply = redis_->Command(args, key_index, now + limit);
    if (reply.ok()) {
      health_.RecordSuccess();
    } else {
      Count(FleetObjectCount::kError);
      health_.RecordFailure(absl::Now());
    }
    return reply;
  }

  // The entry ids key1's listing holds (Unavailable while the tier is switched off; counted
  // refused and ResourceExhausted over the bounds).
  absl::StatusOr<std::vector<std::string>> ListedIds(const CommandKey& key1) {
    absl::StatusOr<RedisReply> reply =
        Call({"EVAL", kBoundedIds, "1", FleetListingRedisKey(key1), absl::StrCat(kMaxFleetListing),
              absl::StrCat(kMaxFleetTurnIdBytes)},
             options_.budget);
    if (!reply.ok()) return reply.status();
    if (reply->type != RedisReply::Type::kArray) {
      Count(FleetObjectCount::kRefused);
      return absl::ResourceExhaustedError("the fleet listing is over its bounds");
    }
    std::vector<std::string> ids;
    for (const RedisReply& id : reply->elements) ids.push_back(id.str);
    return ids;
  }

  struct Write {
    ObjectEntry entry;
    std::string bundle;
    std::string release;  // non-empty: only release this lease
  };
  // The writer thread's: seals and writes each queued entry, the entry before its listing (a
  // listing never names an entry not yet written), and releases a lease after the entries
  // queued before it.
  void WriteOne(const Write& write) {
    if (!write.release.empty()) {
      leases_->Release(write.release);
      return;
    }
    const ObjectEntry& entry = write.entry;
    std::string redis_key = FleetObjectRedisKey(entry.key);
    std::string frame =
        SealSharedEntryAt(options_.keys, ArtifactFromObjectEntry(entry, write.bundle), redis_key);
    std::string listing_frame = SealSharedEntryAt(options_.keys, ArtifactFromObjectEntry(entry, ""),
                                                  ListingFieldRedisKey(entry.key));
    if (Call({"SET", redis_key, frame}, options_.write_deadline).ok() &&
        Call({"HSET", FleetListingRedisKey(entry.key.command), entry.key.entry_id, listing_frame},
             options_.write_deadline)
            .ok()) {
      Count(FleetObjectCount::kPut);
    }
  }

  void Count(FleetObjectCount what) {
    if (count_) count_(what);
  }

  std::unique_ptr<ObjectCache> pod_;
  std::unique_ptr<RedisCluster> redis_;
  std::unique_ptr<RedisLeases> leases_;
  const FleetObjectOptions options_;
  const std::function<void(FleetObjectCount)> count_;
  TierHealth health_;

  // At most kMaxFleetWritesQueued entries and max_object_bytes of bundles wait; at
  // destruction what waits is dropped (its lease expires). Last: joined first.
  BackgroundWriter<Write> writes_{
      BackgroundWriterBounds{kMaxFleetWritesQueued, options_.max_object_bytes},
      AtDestruction::kAbandon, [this](Write& write) { WriteOne(write); }};
};

}  // namespace

std::string FleetObjectRedisKey(const ObjectEntryKey& key) {
  return absl::StrCat(Prefix(key.command), key.entry_id);
}

std::string FleetListingRedisKey(const CommandKey& key1) {
  return absl::StrCat(Prefix(key1), "list");
}

std::string FleetTurnRedisKey(const CommandKey& key1) { return absl::StrCat(Prefix(key1), "turn"); }

FleetObjects NewFleetObjectCache(std::unique_ptr<ObjectCache> pod,
                                 std::unique_ptr<RedisCluster> redis,
                                 std::unique_ptr<RedisLeases> leases, FleetObjectOptions options,
                                 std::function<void(FleetObjectCount)> count) {
  auto cache = std::make_unique<FleetObjectCache>(
      std::move(pod), std::move(redis), std::move(leases), std::move(options), std::move(count));
  FleetObjects made;
  made.leases = cache.get();
  made.cache = std::move(cache);
  return made;
}

}  // namespace kcache::objects
