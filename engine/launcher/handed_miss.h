// What a launcher that serves hits only (kcache-launch) made of a command it hands, on a miss,
// to the full launcher (kcache): the real compiler, the key and what the lookup found. kcache
// takes them instead of making them again (LauncherOptions::handed), so that a miss is keyed
// once and listed once. client/launch/handed_miss_record.h is its format across the exec.
#ifndef KCACHE_ENGINE_LAUNCHER_HANDED_MISS_H_
#define KCACHE_ENGINE_LAUNCHER_HANDED_MISS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/keys/command_key.h"
#include "engine/keys/compiler_tools.h"

namespace kcache::objects {

// An entry whose manifest held here but whose bundle the lookup could not fetch (kcached's
// fast path refused it: larger than its arena, the lease bound): the full launcher fetches it
// by id, without listing again. `size`: its bundle's bytes as listed (its transfer time).
struct HandedEntry {
  std::string id;
  uint64_t size = 0;
};

struct HandedMiss {
  std::string compiler_path;    // the real compiler (RealCompiler's answer)
  std::vector<ToolFile> tools;  // as Prepare found them
  ObjectKey key;                // key1, its fields and the normalized source
  // The lookup's listing answered: `listed` holds the ids it listed (for the compile turn) and
  // `fetch` the entries to fetch still. False (the cache could not be opened, the listing
  // failed): the full launcher looks the key up itself.
  bool looked_up = false;
  std::vector<std::string> listed;
  std::vector<HandedEntry> fetch;
};

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_LAUNCHER_HANDED_MISS_H_
