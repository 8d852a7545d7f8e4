// Named objects: client-made values stored under a name the client chose (the Redis door's
// keys, docs/torch-compile.md), as object entries of the object cache (object_cache.h), so
// they share its store, checksums, LRU bound and the client-made trust rule.
//
// A name's entry: its key is NamedValueKey(name) (core/object_entry.h), its source the name,
// C-escaped for listings, its one key field ("name", the same). The bundle holds the value as
// its object and the name as its only target, and a read checks that name: a value is never
// served for another name.
#ifndef KCACHE_ENGINE_OBJECTS_NAMED_OBJECT_H_
#define KCACHE_ENGINE_OBJECTS_NAMED_OBJECT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/objects/object_cache.h"

namespace kcache::objects {

// Stores `value` under `name`, replacing what was there. The cache's errors pass through
// (ResourceExhausted over its byte bound or on a full disk; AlreadyExists when a baked store
// holds the name). `put_by` says who put it (ObjectEntry::put_by).
absl::Status PutNamedObject(ObjectCache& cache, absl::string_view name, std::string value,
                            std::string put_by = "");

// The value under `name`. NotFound when absent, corrupt, or not this name's.
absl::StatusOr<std::string> GetNamedObject(ObjectCache& cache, absl::string_view name);

// Whether `cache` lists an entry under `name` (a store's or, through kcached, the fleet
// tier's): what EXISTS, DEL and SET's NX and XX ask. The listing only; the value is not read.
// False when the listing fails.
bool HoldsNamedObject(ObjectCache& cache, absl::string_view name);

// Deletes the value under `name` from the writable store (OK when absent).
absl::Status DeleteNamedObject(ObjectCache& cache, absl::string_view name);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_OBJECTS_NAMED_OBJECT_H_
