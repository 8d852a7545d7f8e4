// Redis Cluster key slots: CRC16 (XMODEM, as Redis Cluster specifies) of the key, or of its
// {hash tag} when it has one, modulo 16384. Pure functions, thread-safe.
#ifndef KCACHE_ENGINE_SHARED_REDIS_SLOT_H_
#define KCACHE_ENGINE_SHARED_REDIS_SLOT_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace kcache {

inline constexpr int kRedisClusterSlots = 16384;

// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0): CRC16("123456789") == 0x31C3.
uint16_t RedisCrc16(absl::string_view data);

// The slot of `key`, 0..16383. When the key holds a '{' followed later by a '}' with at least
// one byte between them, only the bytes between the first '{' and the first '}' after it are
// hashed (a hash tag: "{user}.a" and "{user}.b" share a slot); otherwise the whole key.
int RedisKeySlot(absl::string_view key);

}  // namespace kcache

#endif  // KCACHE_ENGINE_SHARED_REDIS_SLOT_H_
