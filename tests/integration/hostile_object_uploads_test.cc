// Hostile uploads to kcached's object service (PutObject, the compiler launchers' puts)
// against a real kcached with small bounds: many uploads started and never finished, many
// finished at once, and an entry whose metadata is huge. kcached's resident memory (VmRSS)
// stays within --object-upload-max-bytes plus slack (and what the store keeps of what it
// wrote), the refused uploads get RESOURCE_EXHAUSTED naming the bound and its flag, and another
// client's lookups are answered throughout.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/object_entry.h"
#include "core/process_identity.h"
#include "kcache/v1/objects.grpc.pb.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/kcache_rpc.h"
#include "tests/testutil/memory_watch.h"
#include "tests/testutil/run.h"
#include "tests/testutil/wait.h"

namespace kcache {
namespace {

using ::kcache::testing::Contains;
using ::kcache::testing::DaemonProcess;
using ::kcache::testing::PeakResidentBytes;
using ::kcache::testing::ResidentBytes;
using ::kcache::testing::RssSampler;
using ::kcache::testing::SteadyClient;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kUploadsBytes = 16 * kMiB;  // --object-upload-max-bytes
constexpr uint64_t kObjectBytes = 4 * kMiB;    // each upload announces this (holds twice it)
// gRPC's buffers and the allocator's slack beside the uploads' own bytes.
constexpr uint64_t kSlackBytes = ::kcache::testing::kAllocatorSlackBytes;

// An entry of `size` bytes under key1 = 32 times `tag`, with no headers.
v1::ObjectEntry Entry(char tag, uint64_t size, const std::string& source = "src/a.cc") {
  v1::ObjectEntry entry;
  entry.set_key1(std::string(32, tag));
  entry.set_entry_id(ManifestId({}));
  entry.set_source(source);
  entry.set_size(size);
  return entry;
}

// One PutObject stream left open: its first message and `sent` bytes written, never finished.
struct OpenUpload {
  grpc::ClientContext context;
  v1::PutObjectResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::PutObjectRequest>> writer;
  bool refused = false;  // a write failed: kcached ended it, so nothing more is written
};

class HostileObjectUploadsTest : public ::testing::Test {
 protected:
  // --object-max-bytes and --object-upload-max-bytes.
  virtual std::vector<std::string> Bounds() {
    return {"--object-max-bytes", "8MiB", "--object-upload-max-bytes", "16MiB"};
  }

  void SetUp() override {
    ::kcache::testing::SmallAsanQuarantine();
    daemon_.options().extra_flags = {"--no-toolkit", "--warm-start-max-bytes", "0"};
    for (std::string& flag : Bounds()) daemon_.options().extra_flags.push_back(std::move(flag));
    ASSERT_TRUE(daemon_.Start().ok()) << daemon_.Log();
    channel_ = grpc::CreateChannel(daemon_.address(), grpc::InsecureChannelCredentials());
    objects_ = v1::ObjectCache::NewStub(channel_);
    kernels_ = ::kcache::testing::NewStub(daemon_.address());
  }

  // Starts an upload announcing `size` and writes `send` bytes of it, 1 MiB a message: the
  // messages of `chunks` in turn (each 1 MiB), or `tag` repeated when there are none.
  std::unique_ptr<OpenUpload> Start(char tag, uint64_t size, uint64_t send,
                                    const std::vector<std::string>& chunks = {}) {
    auto upload = std::make_unique<OpenUpload>();
    upload->writer = objects_->PutObject(&upload->context, &upload->response);
    v1::PutObjectRequest first;
    *first.mutable_entry() = Entry(tag, size);
    if (!upload->writer->Write(first)) upload->refused = true;
    for (uint64_t sent = 0; sent < send && !upload->refused; sent += kMiB) {
      v1::PutObjectRequest more;
      uint64_t part = std::min(kMiB, send - sent);
      more.set_data(chunks.empty() ? std::string(part, tag)
                                   : chunks[(sent / kMiB) % chunks.size()].substr(0, part));
      if (!upload->writer->Write(more)) upload->refused = true;
    }
    return upload;
  }

  // A lookup another launcher makes: answered OK (no entries).
  bool Lookup() {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ListObjectsRequest request;
    request.set_key1(std::string(32, 'L'));
    v1::ListObjectsResponse response;
    return objects_->ListObjects(&context, request, &response).ok();
  }

  uint64_t Counter(const std::string& name) {
    return ::kcache::testing::StatCounter(*kernels_, name);
  }

  // Waits until every upload is taken or refused, then lets what was sent arrive (at most 3 s
  // of kcached's resident memory standing still).
  void WaitUntilSettled(uint64_t held, uint64_t refused) {
    ::kcache::testing::WaitFor([&] {
      return Counter("objects.upload_bytes") == held &&
             Counter("objects.puts_refused_uploads") == refused;
    });
    uint64_t last = 0;
    for (int still = 0, polls = 0; still < 3 && polls < 30; ++polls) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      uint64_t now = ResidentBytes(daemon_.pid());
      still = now == last ? still + 1 : 0;
      last = now;
    }
  }

  DaemonProcess daemon_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ObjectCache::Stub> objects_;
  std::unique_ptr<v1::KernelCache::Stub> kernels_;
};

TEST_F(HostileObjectUploadsTest, UnfinishedUploadsStayWithinTheUploadBound) {
  ASSERT_TRUE(Lookup());
  const uint64_t baseline = ResidentBytes(daemon_.pid());
  constexpr int kUploads = 14;  // 42 MiB sent if all were held
  std::vector<std::unique_ptr<OpenUpload>> uploads;
  {
    RssSampler rss(daemon_.pid());
    SteadyClient steady([this] { return Lookup(); });
    for (int i = 0; i < kUploads; ++i) {
      uploads.push_back(Start(static_cast<char>('a' + i), kObjectBytes, kObjectBytes - kMiB));
    }
    WaitUntilSettled(4 * kObjectBytes, kUploads - 2);
    steady.Stop();
    rss.Stop();
    EXPECT_GT(steady.answered(), 0);
    EXPECT_EQ(steady.failed(), 0) << "another launcher's lookups went unanswered";
    uint64_t grew = rss.peak() > baseline ? rss.peak() - baseline : 0;
    std::printf(
        "RSS: baseline %llu MiB, peak %llu MiB (grew %llu KiB; bound %llu MiB + %llu MiB "
        "slack)\n",
        static_cast<unsigned long long>(baseline / kMiB),
        static_cast<unsigned long long>(rss.peak() / kMiB),
        static_cast<unsigned long long>(grew >> 10),
        static_cast<unsigned long long>(kUploadsBytes / kMiB),
        static_cast<unsigned long long>(kSlackBytes / kMiB));
    EXPECT_LE(grew, kUploadsBytes + kSlackBytes);
    EXPECT_EQ(Counter("objects.upload_bytes"), 4 * kObjectBytes)
        << "two fit in 16 MiB, each holding twice its size";
  }
  // Which uploads kcached refused is told by their status, not by whether a write failed: a
  // refused upload's writes may all have gone into gRPC's buffers before the refusal came back.
  // Each upload's Finish waits in a thread of its own: the refused ones end with kcached's
  // status, the held ones not until they are cancelled.
  std::vector<std::future<grpc::Status>> finished;
  for (auto& upload : uploads) {
    finished.push_back(std::async(std::launch::async,
                                  [writer = upload->writer.get()] { return writer->Finish(); }));
  }
  auto ended = [&](size_t i) {
    return finished[i].wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  };
  EXPECT_TRUE(::kcache::testing::WaitFor([&] {
    int count = 0;
    for (size_t i = 0; i < finished.size(); ++i) count += ended(i) ? 1 : 0;
    return count >= kUploads - 2;
  }));
  int refused = 0;
  std::vector<size_t> held;
  for (size_t i = 0; i < uploads.size(); ++i) {
    if (!ended(i)) {
      held.push_back(i);
      continue;
    }
    grpc::Status status = finished[i].get();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
    EXPECT_TRUE(Contains(status.error_message(), "--object-upload-max-bytes 16777216"))
        << status.error_message();
    ++refused;
  }
  EXPECT_EQ(refused, kUploads - 2);
  EXPECT_EQ(Counter("objects.puts_refused_uploads"), static_cast<uint64_t>(refused));
  // Once the open ones are gone, their bytes are given back and a whole upload goes through.
  for (size_t i : held) {
    uploads[i]->context.TryCancel();
    EXPECT_EQ(finished[i].get().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_TRUE(::kcache::testing::WaitFor([&] { return Counter("objects.upload_bytes") == 0; }));
  std::unique_ptr<OpenUpload> whole = Start('z', kObjectBytes, kObjectBytes);
  whole->writer->WritesDone();
  grpc::Status status = whole->writer->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

// Uploads finished all at once against a 64 MiB bound: each one's copies on its way to the
// store (the bytes received, their encoded value, RocksDB's write batch and memtable) are what
// its share of the bound counts.
class HostileObjectUploadsWrittenTest : public HostileObjectUploadsTest {
 protected:
  static constexpr uint64_t kBoundBytes = 64 * kMiB;  // --object-upload-max-bytes
  static constexpr uint64_t kEachBytes = 8 * kMiB;
  static constexpr int kUploads = 8;  // 64 MiB announced: the bound, counting each once

  std::vector<std::string> Bounds() override {
    return {"--object-max-bytes", "16MiB", "--object-upload-max-bytes", "64MiB"};
  }
};

TEST_F(HostileObjectUploadsWrittenTest, WrittenUploadsHoldWithinTheUploadBound) {
  // Incompressible bytes (zstd stores them raw): the store keeps all of each.
  std::vector<std::string> chunks(kEachBytes / kMiB);
  std::mt19937_64 random(7);
  for (std::string& chunk : chunks) {
    chunk.resize(kMiB);
    for (size_t i = 0; i < chunk.size(); i += 8) {
      uint64_t word = random();
      std::memcpy(chunk.data() + i, &word, 8);
    }
  }
  ASSERT_TRUE(Lookup());
  const uint64_t baseline = ResidentBytes(daemon_.pid());
  const bool reset = ::kcache::testing::ResetPeakResident(daemon_.pid());
  RssSampler rss(daemon_.pid());
  // Every upload is sent but for its end, so that all those taken are held at once, then all
  // end together and are written side by side.
  std::vector<std::unique_ptr<OpenUpload>> uploads;
  for (int i = 0; i < kUploads; ++i) {
    uploads.push_back(Start(static_cast<char>('a' + i), kEachBytes, kEachBytes, chunks));
  }
  EXPECT_TRUE(::kcache::testing::WaitFor([&] {
    return Counter("objects.upload_bytes") == kBoundBytes;
  })) << "the uploads taken fill the bound";
  WaitUntilSettled(kBoundBytes, Counter("objects.puts_refused_uploads"));
  std::vector<std::future<grpc::Status>> finished;
  for (auto& upload : uploads) {
    finished.push_back(std::async(std::launch::async, [writer = upload->writer.get()] {
      writer->WritesDone();
      return writer->Finish();
    }));
  }
  int stored = 0;
  for (auto& end : finished) {
    grpc::Status status = end.get();
    if (status.ok()) {
      ++stored;
    } else {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
          << status.error_message();
    }
  }
  EXPECT_GT(stored, 0);
  EXPECT_EQ(Counter("objects.stored"), static_cast<uint64_t>(stored));
  EXPECT_TRUE(::kcache::testing::WaitFor([&] { return Counter("objects.upload_bytes") == 0; }));
  rss.Stop();
  uint64_t peak = std::max(rss.peak(), reset ? PeakResidentBytes(daemon_.pid()) : 0);
  uint64_t grew = peak > baseline ? peak - baseline : 0;
  // RocksDB keeps what it wrote in its memtable (64 MiB) until it flushes it to a blob file:
  // the bytes stored, beside what the uploads in flight hold (docs/kcached.md, "Memory").
  uint64_t kept = static_cast<uint64_t>(stored) * kEachBytes;
  std::printf(
      "RSS: baseline %llu MiB, peak %llu MiB (grew %llu MiB for %d uploads of %llu MiB stored; "
      "bound %llu MiB + %llu MiB kept by the store + %llu MiB slack)\n",
      static_cast<unsigned long long>(baseline / kMiB),
      static_cast<unsigned long long>(peak / kMiB), static_cast<unsigned long long>(grew / kMiB),
      stored, static_cast<unsigned long long>(kEachBytes / kMiB),
      static_cast<unsigned long long>(kBoundBytes / kMiB),
      static_cast<unsigned long long>(kept / kMiB),
      static_cast<unsigned long long>(kSlackBytes / kMiB));
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "under AddressSanitizer resident memory is its shadow and quarantine too";
#endif
  EXPECT_LE(grew, kBoundBytes + kept + kSlackBytes);
}

TEST_F(HostileObjectUploadsTest, WhoPutAnEntryIsWhatKcachedSawNotWhatTheClientSays) {
  grpc::ClientContext context;
  v1::PutObjectResponse response;
  auto writer = objects_->PutObject(&context, &response);
  v1::PutObjectRequest first;
  *first.mutable_entry() = Entry('w', 10);
  first.mutable_entry()->set_put_by("uid 4242 pid 1 via kcached on elsewhere");  // forged
  first.set_data(std::string(10, 'd'));
  ASSERT_TRUE(writer->Write(first));
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  grpc::ClientContext list_context;
  v1::ListObjectsRequest request;
  request.set_key1(std::string(32, 'w'));
  v1::ListObjectsResponse listed;
  ASSERT_TRUE(objects_->ListObjects(&list_context, request, &listed).ok());
  ASSERT_EQ(listed.entries_size(), 1);
  EXPECT_EQ(listed.entries(0).put_by(),
            absl::StrCat("uid ", getuid(), " pid ", getpid(), " via kcached on ", HostName()));
  // `kcache ls --server` shows it.
  ::kcache::testing::RunResult ls = ::kcache::testing::Run(
      absl::StrCat(::kcache::testing::KcacheCli(), " ls --server ", daemon_.address()));
  EXPECT_TRUE(
      Contains(ls.output, absl::StrCat("uid ", getuid(), " pid ", getpid(), " via kcached")))
      << ls.output;
  EXPECT_FALSE(Contains(ls.output, "4242")) << ls.output;
}

TEST_F(HostileObjectUploadsTest, AnEntryWithHugeMetadataIsRefusedBeforeItsBytes) {
  grpc::ClientContext context;
  v1::PutObjectResponse response;
  auto writer = objects_->PutObject(&context, &response);
  v1::PutObjectRequest first;
  *first.mutable_entry() = Entry('h', 10, std::string(3 * kMiB, 's'));  // a 3 MiB "path"
  first.set_data(std::string(10, 'd'));
  writer->Write(first);
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_TRUE(Contains(status.error_message(), "--object-entry-max-bytes 1048576"))
      << status.error_message();
  EXPECT_EQ(Counter("objects.puts_refused_entry_too_big"), 1u);
  EXPECT_TRUE(Lookup());
}

}  // namespace
}  // namespace kcache
