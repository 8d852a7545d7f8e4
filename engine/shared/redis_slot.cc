#include "engine/shared/redis_slot.h"

namespace kcache {

uint16_t RedisCrc16(absl::string_view data) {
  uint16_t crc = 0;
  for (unsigned char byte : data) {
    crc ^= static_cast<uint16_t>(byte) << 8;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<uint16_t>(crc << 1);
    }
  }
  return crc;
}

int RedisKeySlot(absl::string_view key) {
  size_t open = key.find('{');
  if (open != absl::string_view::npos) {
    size_t close = key.find('}', open + 1);
    if (close != absl::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return RedisCrc16(key) & (kRedisClusterSlots - 1);
}

}  // namespace kcache
