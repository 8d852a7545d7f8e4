// The handed-miss record's codec and binding (handed_miss_record.h states the format).
#include "client/launch/handed_miss_record.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/launch/cache_budget.h"
#include "client/launch/launch_command.h"
#include "core/coding.h"

namespace kcache::launch {
namespace {

constexpr char kMagic[] = "KCHM";
constexpr size_t kMagicSize = 4;
constexpr size_t kDigestSize = 32;

// Whether `entry` (NAME=VALUE) sets a variable the hand-over itself sets or takes away.
bool Unbound(absl::string_view entry) {
  for (absl::string_view name :
       {absl::string_view(kHandedMissEnv), absl::string_view(kTimeoutLeftEnv),
        absl::string_view(kInsideCompileEnv)}) {
    if (absl::StartsWith(entry, name) && entry.size() > name.size() && entry[name.size()] == '=') {
      return true;
    }
  }
  return false;
}

class Writer {
 public:
  void U8(uint8_t v) { bytes_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v) { PutFixed32(bytes_, v); }
  void U64(uint64_t v) { PutFixed64(bytes_, v); }
  void Raw(absl::string_view v) { bytes_.append(v.data(), v.size()); }
  void Str(absl::string_view v) {
    if (v.size() > kMaxHandedMissString) too_large_ = true;
    U32(static_cast<uint32_t>(std::min(v.size(), kMaxHandedMissString)));
    Raw(v.substr(0, kMaxHandedMissString));
  }
  void Count(size_t n) {
    if (n > kMaxHandedMissItems) too_large_ = true;
    U32(static_cast<uint32_t>(n));
  }
  bool too_large() const { return too_large_ || bytes_.size() + kDigestSize > kMaxHandedMissBytes; }
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
  bool too_large_ = false;
};

// Reads what Writer wrote; every read is checked against what is left, and a failed read
// leaves the reader failed (ok() false) with nothing allocated.
class Reader {
 public:
  explicit Reader(absl::string_view bytes) : left_(bytes) {}
  bool ok() const { return ok_; }
  bool done() const { return left_.empty(); }

  // A little-endian integer of 1, 4 or 8 bytes.
  uint64_t Int(size_t size) {
    if (!Take(size)) return 0;
    if (size == 1) return static_cast<uint8_t>(taken_[0]);
    return size == 4 ? DecodeFixed32(taken_.data()) : DecodeFixed64(taken_.data());
  }
  absl::string_view Raw(size_t size) { return Take(size) ? taken_ : absl::string_view(); }
  std::string Str() {
    uint64_t size = Int(4);
    if (size > kMaxHandedMissString) ok_ = false;
    return ok_ ? std::string(Raw(size)) : std::string();
  }
  // A count of items each at least `min_item` bytes long: no larger than what is left allows.
  size_t Count(size_t min_item) {
    uint64_t n = Int(4);
    if (n > kMaxHandedMissItems || n * min_item > left_.size()) ok_ = false;
    return ok_ ? n : 0;
  }

 private:
  bool Take(size_t size) {
    if (!ok_ || size > left_.size()) {
      ok_ = false;
      return false;
    }
    taken_ = left_.substr(0, size);
    left_.remove_prefix(size);
    return true;
  }

  absl::string_view left_, taken_;
  bool ok_ = true;
};

absl::string_view DigestBytes(const Sha256Digest& digest) {
  return {reinterpret_cast<const char*>(digest.data()), digest.size()};
}

}  // namespace

Sha256Digest BindCommand(const std::vector<std::string>& argv, const std::string& cwd,
                         const std::vector<std::string>& env) {
  std::vector<absl::string_view> bound;
  for (const std::string& entry : env) {
    if (!Unbound(entry)) bound.push_back(entry);
  }
  std::sort(bound.begin(), bound.end());
  Sha256 hash;
  auto field = [&hash](char tag, absl::string_view value) {
    Writer header;
    header.U8(static_cast<uint8_t>(tag));
    header.U64(value.size());
    hash.Update(header.bytes());
    hash.Update(value);
  };
  hash.Update(absl::string_view("kcache.handed_miss.binding\0", 27));
  for (const std::string& arg : argv) field('A', arg);
  field('C', cwd);
  for (absl::string_view entry : bound) field('E', entry);
  return hash.Finish();
}

absl::StatusOr<std::string> EncodeHandedMiss(const objects::HandedMiss& miss,
                                             const Sha256Digest& binding) {
  Writer w;
  w.Raw(absl::string_view(kMagic, kMagicSize));
  w.U32(kHandedMissVersion);
  w.Raw(DigestBytes(binding));
  w.Str(miss.compiler_path);
  w.Count(miss.tools.size());
  for (const objects::ToolFile& tool : miss.tools) {
    w.Str(tool.role);
    w.Str(tool.path);
  }
  w.Raw(miss.key.key1.Bytes());
  w.Count(miss.key.fields.size());
  for (const auto& [name, value] : miss.key.fields) {
    w.Str(name);
    w.Str(value);
  }
  w.Str(miss.key.source);
  w.U8(miss.looked_up ? 1 : 0);
  w.Count(miss.listed.size());
  for (const std::string& id : miss.listed) w.Str(id);
  w.Count(miss.fetch.size());
  for (const objects::HandedEntry& entry : miss.fetch) {
    w.Str(entry.id);
    w.U64(entry.size);
  }
  if (w.too_large()) {
    return absl::InvalidArgumentError(
        "the command is too large to hand over (a string, a count or the record over its bound)");
  }
  Sha256Digest checksum = Sha256Of(w.bytes());
  w.Raw(DigestBytes(checksum));
  return std::move(w.bytes());
}

absl::StatusOr<objects::HandedMiss> DecodeHandedMiss(absl::string_view bytes,
                                                     const Sha256Digest& binding) {
  constexpr size_t kHead = kMagicSize + 4 + kDigestSize;
  if (bytes.size() > kMaxHandedMissBytes || bytes.size() < kHead + kDigestSize) {
    return absl::DataLossError(absl::StrCat("a handed-miss record of ", bytes.size(), " bytes"));
  }
  if (bytes.substr(0, kMagicSize) != absl::string_view(kMagic, kMagicSize)) {
    return absl::DataLossError("not a handed-miss record");
  }
  absl::string_view body = bytes.substr(0, bytes.size() - kDigestSize);
  if (DigestBytes(Sha256Of(body)) != bytes.substr(body.size())) {
    return absl::DataLossError("the handed-miss record is damaged (checksum)");
  }
  Reader r(body.substr(kMagicSize));
  if (uint64_t version = r.Int(4); version != kHandedMissVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("a handed-miss record of version ", version, ", not ", kHandedMissVersion));
  }
  if (r.Raw(kDigestSize) != DigestBytes(binding)) {
    return absl::PermissionDeniedError("the handed-miss record is another command's");
  }
  objects::HandedMiss miss;
  miss.compiler_path = r.Str();
  for (size_t n = r.Count(8); n > 0 && r.ok(); --n) {
    objects::ToolFile tool;
    tool.role = r.Str();
    tool.path = r.Str();
    miss.tools.push_back(std::move(tool));
  }
  absl::StatusOr<CommandKey> key1 = CommandKey::FromBytes(r.Raw(CommandKey::kSize));
  if (key1.ok()) miss.key.key1 = *key1;
  for (size_t n = r.Count(8); n > 0 && r.ok(); --n) {
    std::string name = r.Str();
    miss.key.fields.emplace_back(std::move(name), r.Str());
  }
  miss.key.source = r.Str();
  uint64_t looked_up = r.Int(1);
  miss.looked_up = looked_up == 1;
  for (size_t n = r.Count(4); n > 0 && r.ok(); --n) miss.listed.push_back(r.Str());
  for (size_t n = r.Count(12); n > 0 && r.ok(); --n) {
    objects::HandedEntry entry;
    entry.id = r.Str();
    entry.size = r.Int(8);
    miss.fetch.push_back(std::move(entry));
  }
  if (!r.ok() || !key1.ok() || looked_up > 1 || !r.done() || miss.compiler_path.empty()) {
    return absl::DataLossError("the handed-miss record does not parse");
  }
  return miss;
}

}  // namespace kcache::launch
