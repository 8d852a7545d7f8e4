// libkcache-nvrtc.so: the cache's half of kcache's NVRTC stand-in (nvrtc_cache_abi.h), loaded
// into the caller's process at its first compile. A lookup keys the compile
// (engine/nvrtc/nvrtc_compile.h), lists its entries through kcached's fast path (a program
// named in a directory: first those for any directory), serves the first whose manifest holds
// here; a miss's outcome and manifest are handed to `kcache
// nvrtc-put` (a process of its own, reaped later: the caller does not wait for the store), which
// puts it where the process's launchers put their objects ($KCACHE_SERVER or $KCACHE_STORE).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/launch/cache_budget.h"
#include "client/launch/fast_object_cache.h"
#include "client/launch/helper_processes.h"
#include "client/launch/launch_command.h"
#include "client/launch/unresponsive_mark.h"
#include "client/nvrtc/nvrtc_cache_abi.h"
#include "core/environment.h"
#include "core/library_build.h"
#include "core/process_identity.h"
#include "engine/keys/base_dirs.h"
#include "engine/keys/header_manifest.h"
#include "engine/nvrtc/nvrtc_compile.h"
#include "engine/objects/object_bundle.h"
#include "engine/objects/object_wire.h"
#include "engine/observe/observed_reads.h"

struct KcacheNvrtcLookup {
  kcache::objects::ObjectKey key;
  kcache::objects::NvrtcProgram program;
  // Its cwd is the working directory key1 holds, which the manifest's paths are made from.
  kcache::objects::NvrtcContext context;
  // A program named in a directory: the directory, and the key its compile has when that
  // directory does not reach NVRTC's output (nvrtc_compile.h NvrtcAnyDirectoryKey).
  std::optional<kcache::objects::NvrtcNameDirectory> directory;
  std::optional<kcache::objects::ObjectKey> any_directory_key;
  kcache::objects::NvrtcOutcome outcome;  // a hit's
  KcacheNvrtcResult result{};             // views into `outcome`
  std::vector<int> lowered_results;
  std::vector<const char*> lowered_names;
};

namespace kcache::nvrtc {
namespace {

namespace fs = std::filesystem;

// A lookup's time when KCACHE_NVRTC_TIMEOUT_MS does not say: a served compile takes well under
// a millisecond, and a compile this misses pays this at most.
constexpr absl::Duration kDefaultBudget = absl::Milliseconds(50);
// Stores running at once when KCACHE_NVRTC_MAX_STORES does not say (a process compiling a
// thousand programs starts no thousand processes): past them, a miss waits for one to finish,
// kSlotWait at most, and is not stored after that.
constexpr size_t kDefaultMaxStores = 8;
constexpr absl::Duration kSlotWait = absl::Seconds(10);
// How long a lookup in KCACHE_STORE (no kcached: `kcache nvrtc-get` reads the store) may take
// when KCACHE_NVRTC_STORE_TIMEOUT_MS does not say: a process start and a store opened read-only,
// tens of milliseconds; a compile this misses pays this at most.
constexpr absl::Duration kDefaultStoreBudget = absl::Seconds(5);

// What the process shares between compiles, made at the first.
struct Process {
  std::string server, store;
  bool log = false;
  absl::Duration budget = kDefaultBudget;
  absl::Duration store_budget = kDefaultStoreBudget;
  std::shared_ptr<client::FastPath> fast;  // null without a kcached fast path to ask
  std::string driver;                      // the driver NVRTC loads here; "" for none
  std::string shims;                       // $KCACHE_SHIMS_DIR (objects/base_dirs.h)
  std::mutex mutex;                        // guards digests
  std::unique_ptr<objects::FileDigests> digests;
  // The `kcache nvrtc-put` processes that store (none without a kcache beside this library).
  std::unique_ptr<launch::HelperProcesses> stores;
};

void Say(const Process& process, const std::string& line) {
  if (process.log) std::fprintf(stderr, "kcache: nvrtc: %s\n", line.c_str());
}

Process& TheProcess() {
  static Process* process = [] {
    auto* made = new Process;
    made->server = EnvValue("KCACHE_SERVER");
    made->store = EnvValue("KCACHE_STORE");
    made->log = EnvValue("KCACHE_LOG") == "1";
    int64_t ms = 0;
    if (absl::SimpleAtoi(EnvValue("KCACHE_NVRTC_TIMEOUT_MS"), &ms) && ms > 0) {
      made->budget = absl::Milliseconds(ms);
    }
    if (absl::SimpleAtoi(EnvValue("KCACHE_NVRTC_STORE_TIMEOUT_MS"), &ms) && ms > 0) {
      made->store_budget = absl::Milliseconds(ms);
    }
    size_t max_stores = kDefaultMaxStores;
    if (absl::SimpleAtoi(EnvValue("KCACHE_NVRTC_MAX_STORES"), &ms) && ms > 0) {
      max_stores = static_cast<size_t>(ms);
    }
    made->fast = launch::FastPathTo(made->server);
    made->driver = FindCudaDriver();  // NVRTC loads it at its first compile all the same
    made->shims = objects::NormalBaseDir(EnvValue(objects::kShimsDirVariable));
    made->stores = std::make_unique<launch::HelperProcesses>(
        launch::FindKcacheBeside(reinterpret_cast<void*>(&TheProcess)), max_stores);
    std::string state = launch::StateDir();
    made->digests = std::make_unique<objects::FileDigests>(
        state.empty() ? "" : absl::StrCat(state, "/file-digests"));
    if (!made->server.empty() && made->fast == nullptr) {
      Say(*made, absl::StrCat("kcached at ", made->server,
                              " has no fast path: NVRTC compiles are stored, not looked up"));
    }
    if (made->stores->kcache().empty()) {
      Say(*made, "no kcache beside libkcache-nvrtc.so: NVRTC compiles are not stored");
    }
    std::atexit([] { TheProcess().stores->Reap(true); });
    return made;
  }();
  return *process;
}

std::string Cwd() {
  std::error_code ec;
  return fs::current_path(ec).string();
}

objects::NvrtcProgram ProgramOf(const KcacheNvrtcCall& call) {
  objects::NvrtcProgram program;
  program.source = call.source != nullptr ? call.source : "";
  program.name = call.name != nullptr ? call.name : "";
  for (int i = 0; i < call.num_headers; ++i) {
    program.headers.emplace_back(call.include_names[i] != nullptr ? call.include_names[i] : "",
                                 call.headers[i] != nullptr ? call.headers[i] : "");
  }
  for (int i = 0; i < call.num_name_expressions; ++i) {
    program.name_expressions.emplace_back(call.name_expressions[i]);
  }
  for (int i = 0; i < call.num_options; ++i) program.options.emplace_back(call.options[i]);
  return program;
}

std::shared_ptr<launch::CacheBudget> Budget(const Process& process) {
  return std::make_shared<launch::CacheBudget>(
      process.budget, launch::UnresponsiveMark::FromEnvironment(process.server), process.log,
      "KCACHE_NVRTC_TIMEOUT_MS");
}

// Tells kcached that a compile ran uncached, and why.
void NoteUncached(const Process& process, UncachedReason reason, const std::string& why) {
  Say(process, absl::StrCat("compile not cached (", UncachedReasonName(reason), "): ", why));
  if (process.fast == nullptr) return;
  launch::UncachedNotes(process.fast, Budget(process))(reason, "nvrtc");
}

// The lookup's hit, as the stand-in reads it.
void ViewHit(KcacheNvrtcLookup& lookup) {
  const objects::NvrtcOutcome& outcome = lookup.outcome;
  lookup.result.result = outcome.result;
  for (size_t i = 0; i < objects::kNvrtcOutputCount; ++i) {
    const objects::NvrtcOutput& output = outcome.outputs[i];
    lookup.result.outputs[i] = KcacheNvrtcOutput{
        output.size_result, static_cast<size_t>(output.size), output.result, output.bytes.data()};
  }
  for (const auto& [result, name] : outcome.lowered) {
    lookup.lowered_results.push_back(result);
    lookup.lowered_names.push_back(result == 0 ? name.c_str() : nullptr);
  }
  lookup.result.num_lowered = static_cast<int>(outcome.lowered.size());
  lookup.result.lowered_results = lookup.lowered_results.data();
  lookup.result.lowered_names = lookup.lowered_names.data();
}

// Serves the first of `key1`'s entries whose manifest holds here (checked with `dirs`), fetched
// and decoded, into `lookup`; false when none does (or kcached cannot be asked in time).
bool ServeFrom(Process& process, objects::ObjectCache& cache, const CommandKey& key1,
               const objects::BaseDirs& dirs, KcacheNvrtcLookup& lookup) {
  absl::StatusOr<std::vector<ObjectEntry>> entries = cache.List(key1);
  if (!entries.ok()) {
    Say(process, absl::StrCat("lookup failed: ", entries.status().message()));
    return false;
  }
  objects::Environment env = objects::CurrentEnvironment();
  for (const ObjectEntry& entry : *entries) {
    std::string difference;
    bool holds;
    {
      std::lock_guard<std::mutex> lock(process.mutex);
      holds = objects::ManifestMatches(entry.manifest, dirs, env, *process.digests, &difference);
      process.digests->Save();  // what it read, for the next process's check
    }
    if (!holds) {
      Say(process, absl::StrCat("entry ", entry.key.ToString(), " does not hold: ", difference));
      continue;
    }
    absl::StatusOr<objects::HeldBytes> bytes = cache.GetHeld(entry.key);
    if (!bytes.ok()) {
      Say(process, absl::StrCat("entry ", entry.key.ToString(), ": ", bytes.status().message()));
      continue;
    }
    absl::StatusOr<objects::ObjectBundleView> bundle = objects::DecodeBundleView(bytes->bytes);
    absl::StatusOr<objects::NvrtcOutcome> outcome =
        bundle.ok()
            ? objects::DecodeNvrtcOutcome(bundle->object, lookup.program.name_expressions.size())
            : absl::StatusOr<objects::NvrtcOutcome>(bundle.status());
    if (!outcome.ok()) {
      Say(process, absl::StrCat("entry ", entry.key.ToString(), " is damaged (",
                                outcome.status().message(), "): a miss"));
      continue;
    }
    lookup.outcome = *std::move(outcome);
    ViewHit(lookup);
    return true;
  }
  return false;
}

// The entries `kcache nvrtc-get` read from a store for one lookup, as an ObjectCache to serve
// from: listed and fetched from memory, nothing put.
class AnsweredEntries final : public objects::ObjectCache {
 public:
  explicit AnsweredEntries(std::vector<std::pair<ObjectEntry, std::string>> entries)
      : entries_(std::move(entries)) {}
  absl::StatusOr<std::vector<ObjectEntry>> List(const CommandKey& key1) override {
    std::vector<ObjectEntry> listed;
    for (const auto& [entry, bundle] : entries_) {
      if (entry.key.command == key1) listed.push_back(entry);
    }
    return listed;
  }
  absl::StatusOr<std::string> Get(const ObjectEntryKey& key) override {
    for (const auto& [entry, bundle] : entries_) {
      if (entry.key == key) return bundle;
    }
    return absl::NotFoundError(key.ToString());
  }
  absl::Status Put(const ObjectEntry&, std::string) override {
    return absl::UnimplementedError("answered entries are read only");
  }
  absl::StatusOr<std::vector<ObjectEntry>> ListAll() override {
    return absl::UnimplementedError("answered entries are not listed whole");
  }

 private:
  std::vector<std::pair<ObjectEntry, std::string>> entries_;
};

// The lookup's entries in KCACHE_STORE, read by `kcache nvrtc-get` (a process of its own, as
// nvrtc-put is: no store is opened in the caller's process), within the store budget; null when
// there is no store or kcache, or the answer did not come.
std::unique_ptr<objects::ObjectCache> StoreEntries(Process& process,
                                                   const KcacheNvrtcLookup& lookup) {
  if (process.store.empty() || process.stores->kcache().empty()) return nullptr;
  std::string keys;
  if (lookup.any_directory_key) absl::StrAppend(&keys, lookup.any_directory_key->key1.Bytes());
  absl::StrAppend(&keys, lookup.key.key1.Bytes());
  absl::StatusOr<std::string> answer =
      process.stores->Ask({"nvrtc-get"}, keys, process.store_budget, objects::kMaxNvrtcGetAnswer);
  absl::StatusOr<std::vector<std::pair<ObjectEntry, std::string>>> entries =
      answer.ok()
          ? objects::DecodeHandedEntries(*answer)
          : absl::StatusOr<std::vector<std::pair<ObjectEntry, std::string>>>(answer.status());
  if (!entries.ok()) {
    Say(process, absl::StrCat("no lookup in ", process.store, ": ", entries.status().message(),
                              " (KCACHE_NVRTC_STORE_TIMEOUT_MS)"));
    return nullptr;
  }
  return std::make_unique<AnsweredEntries>(*std::move(entries));
}

// Serves the compile from an entry for its program in any directory, else from one for its
// exact name: asking kcached's fast path, or, with no kcached, reading KCACHE_STORE.
bool Serve(Process& process, KcacheNvrtcLookup& lookup) {
  std::unique_ptr<objects::ObjectCache> cache;
  if (process.fast != nullptr) {
    std::shared_ptr<launch::CacheBudget> budget = Budget(process);
    if (budget->CompileWithoutAsking()) return false;
    cache = launch::NewFastObjectCache(process.fast, budget);
  } else if (process.server.empty()) {
    cache = StoreEntries(process, lookup);
  }
  if (cache == nullptr) return false;
  if (lookup.any_directory_key &&
      ServeFrom(process, *cache, lookup.any_directory_key->key1,
                objects::NvrtcAnyDirectoryDirs(lookup.context, *lookup.directory), lookup)) {
    return true;
  }
  return ServeFrom(process, *cache, lookup.key.key1, objects::NvrtcDirs(lookup.context), lookup);
}

// Hands `entry` and `bundle` to `kcache nvrtc-put` on its standard input (a memfd), not
// waiting for it: the compile (objects::EncodeNvrtcCompile) framed, for nvrtc-put to compile it
// again under another date (whether the clock reaches the output) and, when its program is named
// in a directory, in others (whether that directory does), then objects::EncodeHandedEntry.
void HandToKcache(Process& process, const KcacheNvrtcLookup& lookup, const ObjectEntry& entry,
                  const std::string& bundle) {
  if (process.stores->kcache().empty()) return;
  std::string handed;
  objects::PutFramed(handed, objects::EncodeNvrtcCompile(lookup.program, lookup.context));
  handed += objects::EncodeHandedEntry(entry, bundle);
  absl::Status started = process.stores->Start({"nvrtc-put"}, handed, kSlotWait);
  if (absl::IsResourceExhausted(started)) {
    Say(process, absl::StrCat("not stored: ", started.message(), " (KCACHE_NVRTC_MAX_STORES)"));
  } else if (!started.ok()) {
    Say(process, absl::StrCat("not stored: ", started.message()));
  }
}

}  // namespace
}  // namespace kcache::nvrtc

using kcache::nvrtc::Process;
using kcache::nvrtc::TheProcess;

extern "C" {

__attribute__((visibility("default"))) int kcache_nvrtc_abi(void) { return KCACHE_NVRTC_CACHE_ABI; }

__attribute__((visibility("default"))) KcacheNvrtcLookup* kcache_nvrtc_lookup(
    const KcacheNvrtcCall* call, const KcacheNvrtcResult** hit) {
  *hit = nullptr;
  Process& process = TheProcess();
  process.stores->Reap(false);
  kcache::objects::NvrtcContext context;
  context.library = call->library != nullptr ? call->library : "";
  context.major = call->major;
  context.minor = call->minor;
  context.cwd = kcache::nvrtc::Cwd();
  context.driver = process.driver;
  context.shims = process.shims;
  kcache::objects::NvrtcProgram program = kcache::nvrtc::ProgramOf(*call);
  kcache::UncachedReason reason = kcache::UncachedReason::kNone;
  absl::StatusOr<kcache::objects::ObjectKey> key =
      kcache::objects::NvrtcCommandKey(program, context, &reason);
  if (!key.ok()) {
    kcache::nvrtc::NoteUncached(process, reason, std::string(key.status().message()));
    return nullptr;
  }
  auto lookup = std::make_unique<KcacheNvrtcLookup>();
  lookup->key = *std::move(key);
  lookup->directory = kcache::objects::NvrtcNameDirectoryOf(program.name, context.cwd);
  if (lookup->directory) {
    lookup->any_directory_key =
        kcache::objects::NvrtcAnyDirectoryKey(lookup->key, *lookup->directory);
  }
  lookup->program = std::move(program);
  lookup->context = std::move(context);
  if (kcache::nvrtc::Serve(process, *lookup)) *hit = &lookup->result;
  return lookup.release();
}

__attribute__((visibility("default"))) void kcache_nvrtc_store(KcacheNvrtcLookup* lookup,
                                                               const KcacheNvrtcResult* produced,
                                                               const char* record,
                                                               size_t record_length, int complete,
                                                               double started) {
  Process& process = TheProcess();
  if (!complete) {
    kcache::nvrtc::NoteUncached(process, kcache::UncachedReason::kUnreadableInput,
                                "what the compile read was not recorded whole");
    return;
  }
  kcache::observe::ObservedReads reads =
      kcache::observe::ParseObservation(absl::string_view(record, record_length));
  if (reads.damaged_lines > 0) {
    kcache::nvrtc::NoteUncached(process, kcache::UncachedReason::kUnreadableInput,
                                "the record of what the compile read is damaged");
    return;
  }
  kcache::objects::BaseDirs dirs = kcache::objects::NvrtcDirs(lookup->context);
  kcache::objects::Environment env = kcache::objects::CurrentEnvironment();
  kcache::UncachedReason reason = kcache::UncachedReason::kNone;
  absl::StatusOr<kcache::HeaderManifest> manifest;
  {
    std::lock_guard<std::mutex> lock(process.mutex);
    manifest = kcache::objects::NvrtcManifest(
        reads, dirs, env, *process.digests,
        absl::FromUnixNanos(static_cast<int64_t>(started * 1e9)), &reason);
    process.digests->Save();
  }
  if (!manifest.ok()) {
    kcache::nvrtc::NoteUncached(process, reason, std::string(manifest.status().message()));
    return;
  }
  kcache::objects::NvrtcOutcome outcome;
  outcome.result = produced->result;
  for (size_t i = 0; i < kcache::objects::kNvrtcOutputCount; ++i) {
    const KcacheNvrtcOutput& output = produced->outputs[i];
    outcome.outputs[i] = kcache::objects::KeptNvrtcOutput(output.size_result, output.size,
                                                          output.result, output.bytes);
  }
  for (int i = 0; i < produced->num_lowered; ++i) {
    const char* name = produced->lowered_names[i];
    outcome.lowered.emplace_back(produced->lowered_results[i], name != nullptr ? name : "");
  }
  kcache::objects::ObjectBundle bundle;
  bundle.object = kcache::objects::EncodeNvrtcOutcome(outcome);
  bundle.exit_code = produced->result;
  std::string bytes = kcache::objects::EncodeBundle(bundle);
  kcache::ObjectEntry entry;
  entry.key = kcache::ObjectEntryKey::Of(lookup->key.key1, *manifest);
  entry.source = lookup->key.source;
  entry.manifest = *std::move(manifest);
  entry.fields = lookup->key.fields;
  entry.size = bytes.size();
  entry.put_by = absl::StrCat(kcache::ThisProcessInWords(), " (NVRTC stand-in)");
  kcache::nvrtc::HandToKcache(process, *lookup, entry, bytes);
}

__attribute__((visibility("default"))) void kcache_nvrtc_release(KcacheNvrtcLookup* lookup) {
  delete lookup;
}

}  // extern "C"
