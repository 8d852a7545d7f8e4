#include "engine/keys/content_digest.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/file_io.h"
#include "core/xxh128.h"

namespace kcache::objects {
namespace {

constexpr size_t kTreeBytes = size_t{64} << 20;
constexpr size_t kTreeChunk = size_t{16} << 20;
// The longest time macro less one: a chunk's scan reaches this far into the next chunk.
constexpr size_t kMacroOverlap = sizeof("__TIMESTAMP__") - 2;

bool IsTimeMacroAt(absl::string_view text, size_t i) {
  absl::string_view rest = text.substr(i);
  return absl::StartsWith(rest, "__DATE__") || absl::StartsWith(rest, "__TIME__") ||
         absl::StartsWith(rest, "__TIMESTAMP__");
}

// One pass over the text for "__D" and "__T", 16 positions at a time (SSE2, every x86-64
// has it), each candidate then compared whole: three memmem passes, one a macro, were a tenth
// of a new pod's first compile (every header read and hashed), and std::string::find, which
// stops at every '_' (headers are full of them), a fifth.
bool HasTimeMacroIn(absl::string_view text) {
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i underscore = _mm_set1_epi8('_');
  const __m128i d = _mm_set1_epi8('D');
  const __m128i t = _mm_set1_epi8('T');
  for (; i + 18 <= text.size(); i += 16) {
    const char* p = text.data() + i;
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 1));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
    __m128i hit =
        _mm_and_si128(_mm_and_si128(_mm_cmpeq_epi8(a, underscore), _mm_cmpeq_epi8(b, underscore)),
                      _mm_or_si128(_mm_cmpeq_epi8(c, d), _mm_cmpeq_epi8(c, t)));
    for (unsigned mask = static_cast<unsigned>(_mm_movemask_epi8(hit)); mask != 0;
         mask &= mask - 1) {
      if (IsTimeMacroAt(text, i + static_cast<size_t>(__builtin_ctz(mask)))) return true;
    }
  }
#endif
  for (; i < text.size(); ++i) {
    if (text[i] == '_' && IsTimeMacroAt(text, i)) return true;
  }
  return false;
}

// Reads `size` bytes at `offset` of `fd` into `out`, resized to what was read: shorter when
// the file ended or a read failed.
void ReadAt(int fd, uint64_t offset, size_t size, std::string& out) {
  out.resize(size);
  out.resize(PreadFull(fd, offset, out.data(), size));
}

// The digest of a file of kTreeBytes or more, and whether it names a time macro when `scan`:
// XXH3-128 over a domain, the size and each kTreeChunk's XXH3-128 in order, the chunks read and
// hashed on up to 8 threads (libtorch_cpu.so, 450 MB, is linked by every Inductor kernel: a new pod
// digests it first). Each chunk's time-macro scan reaches kMacroOverlap bytes into the next.
absl::StatusOr<std::pair<std::string, bool>> TreeDigest(int fd, uint64_t size,
                                                        const std::string& path, bool scan) {
  size_t chunks = static_cast<size_t>((size + kTreeChunk - 1) / kTreeChunk);
  std::vector<Xxh128Digest> digests(chunks);
  std::vector<char> macros(chunks, 0), failed(chunks, 0);
  std::atomic<size_t> next{0};
  auto work = [&] {
    std::string buffer;
    for (size_t i = next++; i < chunks; i = next++) {
      uint64_t offset = uint64_t{i} * kTreeChunk;
      size_t length = static_cast<size_t>(std::min<uint64_t>(kTreeChunk, size - offset));
      size_t with_overlap =
          static_cast<size_t>(std::min<uint64_t>(length + kMacroOverlap, size - offset));
      ReadAt(fd, offset, with_overlap, buffer);
      if (buffer.size() != with_overlap) {
        failed[i] = 1;
        continue;
      }
      digests[i] = Xxh128Of(absl::string_view(buffer.data(), length));
      macros[i] = scan && HasTimeMacroIn(buffer) ? 1 : 0;
    }
  };
  size_t threads = std::min<size_t>({chunks, 8, std::max(1u, std::thread::hardware_concurrency())});
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
  if (std::find(failed.begin(), failed.end(), 1) != failed.end()) {
    return absl::FailedPreconditionError(absl::StrCat("cannot read all of ", path));
  }
  Xxh128 tree;
  tree.Update("kcache.file-tree.v2");
  tree.Update(absl::StrCat(":", size, ":", kTreeChunk, ":"));
  for (const Xxh128Digest& digest : digests) tree.Update(digest.Hex());
  return std::make_pair(tree.Finish().Hex(),
                        std::find(macros.begin(), macros.end(), 1) != macros.end());
}

// The XXH3-128 of a file under kTreeBytes and, when `scan`, whether it names a time macro,
// read a piece at a time into one buffer that stays in the cache (a new pod digests ~200 MB of
// nvcc's tools: a buffer the file's size was page faults and zeroing for every byte). Each
// piece's time-macro scan starts kMacroOverlap bytes into the piece before.
absl::StatusOr<std::pair<std::string, bool>> StreamDigest(int fd, uint64_t size,
                                                          const std::string& path, bool scan) {
  constexpr size_t kPiece = size_t{256} << 10;
  std::string piece, seam;  // seam: the piece before's last kMacroOverlap bytes, then this one's
  Xxh128 hash;
  bool macro = false;
  for (uint64_t offset = 0; offset < size || offset == 0; offset += kPiece) {
    size_t length = static_cast<size_t>(std::min<uint64_t>(kPiece, size - offset));
    ReadAt(fd, offset, length, piece);
    if (piece.size() != length) {
      return absl::FailedPreconditionError(absl::StrCat("cannot read all of ", path));
    }
    hash.Update(piece);
    if (scan && !macro) {
      seam.append(piece, 0, std::min(piece.size(), kMacroOverlap));
      macro = HasTimeMacroIn(seam) || HasTimeMacroIn(piece);
      seam.assign(piece, piece.size() - std::min(piece.size(), kMacroOverlap));
    }
    if (size == 0) break;
  }
  return std::make_pair(hash.Finish().Hex(), macro);
}

}  // namespace

bool NamesTimeMacro(absl::string_view text) { return HasTimeMacroIn(text); }

absl::StatusOr<std::pair<std::string, bool>> ContentDigest(int fd, uint64_t size,
                                                           const std::string& path, bool scan) {
  return size >= kTreeBytes ? TreeDigest(fd, size, path, scan) : StreamDigest(fd, size, path, scan);
}

}  // namespace kcache::objects
