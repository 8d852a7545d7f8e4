// Fixed-width integers as bytes: the one place kcache's formats write and read them.
// Little-endian (store values, bundles, frames, key framing, handed records) unless the name
// says big-endian (the key fields that must sort by their number: an artifact key's driver, a
// signed frame's lengths). Pure functions over caller-owned bytes; thread-safe.
#ifndef KCACHE_CORE_CODING_H_
#define KCACHE_CORE_CODING_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace kcache {

// Writes `value` into dst[0..3] / dst[0..7].
inline void EncodeFixed32(char* dst, uint32_t value) {
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<char>(value >> (8 * i));
}
inline void EncodeFixed64(char* dst, uint64_t value) {
  for (int i = 0; i < 8; ++i) dst[i] = static_cast<char>(value >> (8 * i));
}

// Reads src[0..3] / src[0..7]. Precondition: that many bytes are there.
inline uint32_t DecodeFixed32(const char* src) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | static_cast<uint8_t>(src[i]);
  return value;
}
inline uint64_t DecodeFixed64(const char* src) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<uint8_t>(src[i]);
  return value;
}

// Appends `value` to `dst`.
inline void PutFixed32(std::string& dst, uint32_t value) {
  char bytes[4];
  EncodeFixed32(bytes, value);
  dst.append(bytes, sizeof(bytes));
}
inline void PutFixed64(std::string& dst, uint64_t value) {
  char bytes[8];
  EncodeFixed64(bytes, value);
  dst.append(bytes, sizeof(bytes));
}

// Takes an integer off the front of `in`; false, with `in` and `value` unchanged, when fewer
// bytes are left.
inline bool GetFixed32(absl::string_view& in, uint32_t* value) {
  if (in.size() < 4) return false;
  *value = DecodeFixed32(in.data());
  in.remove_prefix(4);
  return true;
}
inline bool GetFixed64(absl::string_view& in, uint64_t* value) {
  if (in.size() < 8) return false;
  *value = DecodeFixed64(in.data());
  in.remove_prefix(8);
  return true;
}

// Big-endian, for bytes that sort as the number does.
inline void PutBigEndian32(std::string& dst, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) dst.push_back(static_cast<char>(value >> shift));
}
inline uint32_t DecodeBigEndian32(const char* src) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value = (value << 8) | static_cast<uint8_t>(src[i]);
  return value;
}

}  // namespace kcache

#endif  // KCACHE_CORE_CODING_H_
