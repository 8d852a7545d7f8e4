// The fast path against hostile or careless workers (docs/kcached.md, "The fast path"): the
// arena is sealed (no write through any mapping or descriptor a worker can make), a thousand
// connections and leases leave the daemon's memory within the arena's bound, garbage gets an
// answer that names what was wrong, and none of it stops other clients being served.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "client/lib/fast_path.h"
#include "core/artifact.h"
#include "core/compiler_command.h"
#include "core/kernel_spec.h"
#include "engine/store/store.h"
#include "kcache/kcache.h"
#include "kcache/v1/fast_path.pb.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/fast_socket.h"
#include "tests/testutil/wait.h"

namespace kcache {
namespace {

using client::Client;
using client::ClientOptions;
using client::DaemonStats;
using client::Device;
using client::FetchedKernel;
using ::kcache::testing::DaemonProcess;
using ::kcache::testing::FastSocket;
using ::kcache::testing::WaitFor;

constexpr Device kSm89{8, 9, 13000};
constexpr size_t kPayload = 200 * 1000;

std::unique_ptr<Client> Connect(const std::string& address, bool fast = true) {
  ClientOptions options;
  options.address = address;
  options.local_compile_fallback = false;
  options.deadline = absl::Seconds(30);
  options.fast_path = fast;
  return *Client::Connect(options);
}

std::string Payload(int n) {
  std::string bytes(kPayload, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 31 + n) >> 2);
  return bytes;
}

// Starts `daemon` with `count` payloads of kPayload bytes; their ids (hex).
std::vector<std::string> StartWithPayloads(DaemonProcess& daemon, int count) {
  std::vector<std::string> ids;
  {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(daemon.store_path());
    EXPECT_TRUE(store.ok()) << store.status();
    for (int n = 0; n < count; ++n) {
      KernelSpec spec;
      spec.name = absl::StrCat("payload_", n);
      spec.source = absl::StrCat("// payload ", n);
      Artifact a;
      a.meta.key = ArtifactKey{ComputeKernelId(spec), ArtifactKind::kCubin,
                               Target{TargetKind::kSass, Sm{8, 9}, ArchVariant::kNone}, "test", 0};
      a.meta.kernel_name = spec.name;
      a.bytes = Payload(n);
      EXPECT_TRUE((*store)->Put(a).ok());
      ids.push_back(a.meta.key.kernel_id.Hex());
    }
  }
  absl::Status started = daemon.Start();
  EXPECT_TRUE(started.ok()) << started << daemon.Log();
  return ids;
}

v1::FastRequest ResolveRequest(uint64_t tag, const std::string& hex_id) {
  v1::FastRequest request;
  request.set_tag(tag);
  *request.mutable_resolve()->mutable_kernel_id() = absl::HexStringToBytes(hex_id);
  request.mutable_resolve()->mutable_device()->set_sm_major(8);
  request.mutable_resolve()->mutable_device()->set_sm_minor(9);
  return request;
}

uint64_t Counter(Client& client, absl::string_view name) {
  absl::StatusOr<client::DaemonStats> stats = client.Stat();
  EXPECT_TRUE(stats.ok()) << stats.status();
  return stats.ok() ? stats->Counter(name) : 0;
}

uint64_t RssBytes(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) << 10;
  }
  return 0;
}

// What a fresh client gets for `id` on the fast path must still be the payload.
void ExpectServedIntact(const std::string& address, const std::string& id, int n) {
  std::unique_ptr<Client> c = Connect(address);
  absl::StatusOr<FetchedKernel> k = c->ResolveById(id, kSm89);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_NE(k->view_owner, nullptr);
  EXPECT_TRUE(k->data() == Payload(n)) << "the bytes others receive changed";
}

TEST(HostileFastPathTest, hostile_TheArenaCannotBeWrittenByAWorker) {
  DaemonProcess daemon;
  std::vector<std::string> ids = StartWithPayloads(daemon, 1);
  FastSocket raw;
  ASSERT_TRUE(raw.Connect(daemon.socket_path() + ".fast"));
  ASSERT_GE(raw.arena_fd(), 0);
  int fd = raw.arena_fd();
  size_t size = raw.hello().arena_bytes();
  ASSERT_TRUE(raw.Send(ResolveRequest(1, ids[0])));
  std::optional<v1::FastResponse> answer = raw.ReceiveResponse();
  ASSERT_TRUE(answer.has_value());
  ASSERT_EQ(answer->code(), 0) << answer->message();
  uint64_t offset = answer->offset();

  // A write through the read-only mapping kills the writer.
  pid_t child = fork();
  if (child == 0) {
    signal(SIGSEGV, SIG_DFL);  // not a sanitizer's handler: the kernel's verdict, as it is
    void* p = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) _exit(3);
    static_cast<volatile char*>(p)[offset] = 'X';
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status))
      << "the child wrote to the arena and exited " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGSEGV);

  void* ro = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(ro, MAP_FAILED);
  EXPECT_NE(mprotect(ro, size, PROT_READ | PROT_WRITE), 0) << "mprotect made it writable";
  munmap(ro, size);
  EXPECT_EQ(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), MAP_FAILED);
  EXPECT_NE(ftruncate(fd, 0), 0);
  EXPECT_NE(ftruncate(fd, static_cast<off_t>(size) * 2), 0);
  // fallocate may allocate pages inside the arena (they read as the zeros they were, and count
  // within its bound) but neither grow it nor punch a hole in what others read.
  EXPECT_NE(fallocate(fd, 0, static_cast<off_t>(size), 4096), 0);
  EXPECT_NE(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), 0);
  EXPECT_NE(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), 0) << "the seals are sealed";
  EXPECT_NE(pwrite(fd, "X", 1, static_cast<off_t>(offset)), 1);
  // A descriptor reopened read-write through /proc cannot write either.
  int reopened = open(absl::StrCat("/proc/self/fd/", fd).c_str(), O_RDWR | O_CLOEXEC);
  if (reopened >= 0) {
    EXPECT_NE(pwrite(reopened, "X", 1, static_cast<off_t>(offset)), 1);
    EXPECT_EQ(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, reopened, 0), MAP_FAILED);
    EXPECT_NE(ftruncate(reopened, 0), 0);
    close(reopened);
  }
  // A private copy-on-write mapping may be scribbled on: only this process sees it.
  void* mine = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  if (mine != MAP_FAILED) {
    std::memset(static_cast<char*>(mine) + offset, 'X', kPayload);
    munmap(mine, size);
  }
  ExpectServedIntact(daemon.address(), ids[0], 0);
}

TEST(HostileFastPathTest, hostile_AThousandMappingsStayWithinTheArena) {
  testing::DaemonOptions options;
  options.extra_flags = {"--no-toolkit", "--fast-arena-bytes", "8MiB"};
  DaemonProcess daemon(options);
  std::vector<std::string> ids = StartWithPayloads(daemon, 4);
  std::unique_ptr<Client> admin = Connect(daemon.address(), /*fast=*/false);
  // Warm the memory tier and the arena, then measure.
  for (int n = 0; n < 4; ++n) ExpectServedIntact(daemon.address(), ids[n], n);
  uint64_t rss_before = RssBytes(daemon.pid());
  std::string path = daemon.socket_path() + ".fast";
  int served = 0;
  for (int round = 0; round < 10; ++round) {
    std::vector<std::unique_ptr<client::FastPath>> connections;
    std::vector<FetchedKernel> held;
    for (int i = 0; i < 100; ++i) {  // 100 connections, each its own mapping and a lease
      connections.push_back(std::make_unique<client::FastPath>(path));
      v1::ResolveRequest request;
      *request.mutable_kernel_id() = absl::HexStringToBytes(ids[i % 4]);
      request.mutable_device()->set_sm_major(8);
      request.mutable_device()->set_sm_minor(9);
      client::FastPath::Answer answer =
          connections.back()->Resolve(request, absl::Now() + absl::Seconds(10));
      ASSERT_TRUE(answer.has_value() && answer->ok()) << "round " << round << " #" << i;
      held.push_back(**std::move(answer));
      ++served;
    }
    EXPECT_EQ(Counter(*admin, "fast.leases_held"), 100u);
    EXPECT_LE(Counter(*admin, "fast.arena_bytes"), uint64_t{8} << 20);
  }  // every view and connection dropped
  EXPECT_EQ(served, 1000);
  WaitFor([&] { return Counter(*admin, "fast.leases_held") == 0; });
  EXPECT_EQ(Counter(*admin, "fast.leases_held"), 0u);
  EXPECT_LE(Counter(*admin, "fast.arena_bytes"), 4 * (kPayload + 64));  // one slot each
  uint64_t rss_after = RssBytes(daemon.pid());
  // The arena (8 MiB) plus room for what any thousand requests leave (allocator caches; under
  // AddressSanitizer its quarantine keeps freed memory for a while, so more).
#if defined(__SANITIZE_ADDRESS__)
  constexpr uint64_t kSlack = uint64_t{64} << 20;
#else
  constexpr uint64_t kSlack = uint64_t{16} << 20;
#endif
  EXPECT_LT(rss_after, rss_before + (uint64_t{8} << 20) + kSlack)
      << "kcached grew from " << rss_before << " to " << rss_after << " bytes";
  std::printf("kcached RSS %llu -> %llu bytes over 1000 leased mappings\n",
              static_cast<unsigned long long>(rss_before),
              static_cast<unsigned long long>(rss_after));
}

TEST(HostileFastPathTest, hostile_GarbageGetsAnErrorAndOthersAreServed) {
  DaemonProcess daemon;
  std::vector<std::string> ids = StartWithPayloads(daemon, 1);
  FastSocket raw;
  ASSERT_TRUE(raw.Connect(daemon.socket_path() + ".fast"));
  auto expect_refused = [&](const std::string& packet, absl::string_view says) {
    ASSERT_TRUE(raw.Send(packet));
    std::optional<v1::FastResponse> answer = raw.ReceiveResponse();
    ASSERT_TRUE(answer.has_value()) << "no answer to garbage";
    EXPECT_EQ(answer->code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
    EXPECT_NE(answer->message().find(std::string(says)), std::string::npos) << answer->message();
  };
  expect_refused(std::string("\xff\xff\xff\xff\xff", 5), "does not parse");
  expect_refused(std::string((3 << 20) / 2, 'x'), "at most");
  v1::FastRequest empty;
  empty.set_tag(9);
  expect_refused(empty.SerializeAsString(), "needs one of resolve, release_lease");
  v1::FastRequest release;
  release.set_release_lease(12345);
  expect_refused(release.SerializeAsString(), "no lease 12345");
  v1::FastRequest no_device = ResolveRequest(10, ids[0]);
  no_device.mutable_resolve()->clear_device();
  expect_refused(no_device.SerializeAsString(), "device");
  v1::FastRequest short_id = ResolveRequest(11, ids[0]);
  short_id.mutable_resolve()->set_kernel_id("short");
  expect_refused(short_id.SerializeAsString(), "kernel_id");
  // The same connection, and everyone else, are still served.
  ASSERT_TRUE(raw.Send(ResolveRequest(12, ids[0])));
  std::optional<v1::FastResponse> answer = raw.ReceiveResponse();
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->code(), 0) << answer->message();
  ExpectServedIntact(daemon.address(), ids[0], 0);
  std::unique_ptr<Client> admin = Connect(daemon.address(), /*fast=*/false);
  EXPECT_GE(Counter(*admin, "fast.bad_messages"), 4u);
}

// A client sending message after message whose string is not UTF-8 is refused each time, and
// libprotobuf's line about it reaches kcached's log at most 5 times a minute: the rest counted.
TEST(HostileFastPathTest, hostile_InvalidUtf8DoesNotFloodTheLog) {
  DaemonProcess daemon;
  StartWithPayloads(daemon, 1);
  FastSocket raw;
  ASSERT_TRUE(raw.Connect(daemon.socket_path() + ".fast"));
  v1::FastRequest bad;
  bad.set_tag(7);
  bad.set_note_uncached_option("ok");
  std::string packet = bad.SerializeAsString();
  size_t at = packet.find("ok");
  ASSERT_NE(at, std::string::npos);
  packet.replace(at, 2, "\xff\xfe");
  constexpr int kSent = 60;
  for (int i = 0; i < kSent; ++i) {
    ASSERT_TRUE(raw.Send(packet));
    std::optional<v1::FastResponse> answer = raw.ReceiveResponse();
    ASSERT_TRUE(answer.has_value()) << i;
    EXPECT_EQ(answer->code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  }
  std::unique_ptr<Client> admin = Connect(daemon.address(), /*fast=*/false);
  uint64_t dropped = Counter(*admin, "log.protobuf_lines_dropped");
  EXPECT_GE(dropped, kSent - 5u);
  std::string log = daemon.Log();
  size_t lines = 0;
  for (size_t i = log.find("libprotobuf"); i != std::string::npos;
       i = log.find("libprotobuf", i + 1)) {
    ++lines;
  }
  EXPECT_LE(lines, 5u) << log;
  EXPECT_GE(lines, 1u) << log;
  EXPECT_EQ(log.find("libprotobuf ERROR"), std::string::npos) << "not libprotobuf's own line";
}

// The launchers' object lookups on the fast path get the gRPC calls' checks: a key1 that is not
// 32 bytes, an entry_id that is not 64 hex digits and a listing of every entry are refused
// naming what was wrong; an absent entry is not found (the launcher asks over gRPC); a key
// with no entries lists none, its listing in the arena under a checksum.
TEST(HostileFastPathTest, hostile_ObjectLookupsAreCheckedAsOverGrpc) {
  DaemonProcess daemon;
  std::vector<std::string> ids = StartWithPayloads(daemon, 1);
  FastSocket raw;
  ASSERT_TRUE(raw.Connect(daemon.socket_path() + ".fast"));
  auto ask = [&](const v1::FastRequest& request) {
    EXPECT_TRUE(raw.Send(request));
    return raw.ReceiveResponse().value_or(v1::FastResponse());
  };
  const int kInvalid = static_cast<int>(absl::StatusCode::kInvalidArgument);
  v1::FastRequest list;
  list.set_tag(1);
  list.mutable_list_objects()->set_key1("short");
  v1::FastResponse answer = ask(list);
  EXPECT_EQ(answer.code(), kInvalid);
  EXPECT_NE(answer.message().find("key1 is not 32 bytes"), std::string::npos) << answer.message();
  list.mutable_list_objects()->set_key1(std::string(32, 'k'));
  list.mutable_list_objects()->set_all(true);
  answer = ask(list);
  EXPECT_EQ(answer.code(), kInvalid);
  EXPECT_NE(answer.message().find("gRPC's ListObjects"), std::string::npos) << answer.message();
  v1::FastRequest get;
  get.set_tag(2);
  get.mutable_get_object()->set_key1(std::string(32, 'k'));
  get.mutable_get_object()->set_entry_id("../../etc/passwd");
  answer = ask(get);
  EXPECT_EQ(answer.code(), kInvalid);
  EXPECT_NE(answer.message().find("entry_id is not 64 hex digits"), std::string::npos)
      << answer.message();
  get.mutable_get_object()->set_entry_id(std::string(64, 'a'));
  answer = ask(get);
  EXPECT_EQ(answer.code(), static_cast<int>(absl::StatusCode::kNotFound)) << answer.message();
  list.mutable_list_objects()->set_all(false);
  answer = ask(list);
  ASSERT_EQ(answer.code(), 0) << answer.message();
  EXPECT_NE(answer.lease(), 0u);
  EXPECT_EQ(answer.header().size(), 0u);  // an empty ListObjectsResponse
  EXPECT_EQ(answer.header().checksum(), PayloadChecksum(""));
  const uint64_t listing_lease = answer.lease();
  // A note of a command run uncached is counted, not answered; a reason out of range is
  // refused.
  for (uint32_t reason : {0u, 17u, 1000u}) {
    v1::FastRequest note;
    note.set_tag(3);
    note.set_note_uncached(reason);
    answer = ask(note);
    EXPECT_EQ(answer.code(), kInvalid) << reason;
    EXPECT_NE(answer.message().find("is no reason"), std::string::npos) << answer.message();
  }
  v1::FastRequest note;
  note.set_note_uncached(static_cast<uint32_t>(UncachedReason::kResponseFile));
  ASSERT_TRUE(raw.Send(note));
  EXPECT_FALSE(raw.ReceiveResponse(200).has_value());
  {  // sent just before the client hangs up (a launcher that execs its compiler): still read
    FastSocket brief;
    ASSERT_TRUE(brief.Connect(daemon.socket_path() + ".fast"));
    ASSERT_TRUE(brief.Send(note));
  }
  std::unique_ptr<Client> admin = Connect(daemon.address(), /*fast=*/false);
  WaitFor([&] { return Counter(*admin, "objects.uncached_response_file") == 2; });
  EXPECT_EQ(Counter(*admin, "objects.uncached_response_file"), 2u);
  EXPECT_EQ(Counter(*admin, "fast.leases_held"), 1u);  // the listing's, until released
  EXPECT_EQ(Counter(*admin, "objects.served"), 0u);
  v1::FastRequest release;
  release.set_release_lease(listing_lease);
  ASSERT_TRUE(raw.Send(release));
  for (int i = 0; i < 100 && Counter(*admin, "fast.leases_held") != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(Counter(*admin, "fast.leases_held"), 0u);
  ExpectServedIntact(daemon.address(), ids[0], 0);
}

// Thousands of random packets and mutated requests, answered or not: the daemon stays up and
// serves others, and the leases they took go with their connections.
TEST(HostileFastPathTest, hostile_RandomPacketsCrashNothing) {
  DaemonProcess daemon;
  std::vector<std::string> ids = StartWithPayloads(daemon, 1);
  std::string valid = ResolveRequest(1, ids[0]).SerializeAsString();
  uint64_t x = 0x9E3779B97F4A7C15ull;
  auto next = [&x] {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
  };
  for (int connection = 0; connection < 20; ++connection) {
    FastSocket raw;
    ASSERT_TRUE(raw.Connect(daemon.socket_path() + ".fast")) << daemon.Log();
    for (int i = 0; i < 200; ++i) {
      std::string packet;
      if (i % 2 == 0) {
        packet.resize(next() % 512);
        for (char& c : packet) c = static_cast<char>(next());
      } else {  // a valid request with a few bytes changed
        packet = valid;
        for (int flips = 0; flips < 3; ++flips) {
          packet[next() % packet.size()] = static_cast<char>(next());
        }
      }
      raw.Send(packet);
      while (raw.Receive(0).has_value()) {
      }
    }
  }
  ASSERT_TRUE(daemon.Running()) << daemon.Log();
  ExpectServedIntact(daemon.address(), ids[0], 0);
  std::unique_ptr<Client> admin = Connect(daemon.address(), /*fast=*/false);
  WaitFor([&] { return Counter(*admin, "fast.leases_held") == 0; });
  EXPECT_EQ(Counter(*admin, "fast.leases_held"), 0u);
}

TEST(HostileFastPathTest, hostile_AClientThatNeverReadsBlocksNoOne) {
  DaemonProcess daemon;
  std::vector<std::string> ids = StartWithPayloads(daemon, 1);
  FastSocket raw;
  ASSERT_TRUE(raw.Connect(daemon.socket_path() + ".fast"));
  std::string packet = ResolveRequest(1, ids[0]).SerializeAsString();
  int sent = 0;
  while (sent < 100000 &&
         send(raw.fd(), packet.data(), packet.size(), MSG_DONTWAIT | MSG_NOSIGNAL) > 0) {
    ++sent;
  }
  EXPECT_GT(sent, 100);
  auto start = std::chrono::steady_clock::now();
  ExpectServedIntact(daemon.address(), ids[0], 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  std::unique_ptr<Client> admin = Connect(daemon.address(), /*fast=*/false);
  // It holds leases only for the answers the daemon could send it, not for all it asked.
  EXPECT_LT(Counter(*admin, "fast.leases_held"), static_cast<uint64_t>(sent));
}

TEST(HostileFastPathTest, hostile_ConnectionsPastTheBoundAreToldWhyAndUseGrpc) {
  testing::DaemonOptions options;
  options.extra_flags = {"--no-toolkit", "--fast-max-connections", "2"};
  DaemonProcess daemon(options);
  std::vector<std::string> ids = StartWithPayloads(daemon, 1);
  std::string path = daemon.socket_path() + ".fast";
  FastSocket first, second, third;
  ASSERT_TRUE(first.Connect(path));
  ASSERT_TRUE(second.Connect(path));
  ASSERT_TRUE(third.Connect(path));
  EXPECT_EQ(third.hello().code(), static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_NE(third.hello().message().find("--fast-max-connections"), std::string::npos);
  EXPECT_LT(third.arena_fd(), 0);
  std::unique_ptr<Client> c = Connect(daemon.address());
  absl::StatusOr<FetchedKernel> k = c->ResolveById(ids[0], kSm89);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->view_owner, nullptr);
  EXPECT_TRUE(k->data() == Payload(0));
  EXPECT_GE(Counter(*c, "fast.connections_refused"), 2u);
}

// Notes of commands run uncached carry the option that decided them: a client naming endless
// distinct options (long, with newlines and quotes) fills the table to --max-uncached-options
// and no further; each name kept is cut to 64 printable bytes; the rest count as "(others)".
TEST(HostileFastPathTest, hostile_UncachedOptionNamesStayBoundedAndPrintable) {
  testing::DaemonOptions options;
  options.extra_flags = {"--no-toolkit", "--max-uncached-options", "4"};
  DaemonProcess daemon(options);
  StartWithPayloads(daemon, 1);
  FastSocket raw;
  ASSERT_TRUE(raw.Connect(daemon.socket_path() + ".fast"));
  constexpr int kNotes = 300;
  for (int i = 0; i < kNotes; ++i) {
    v1::FastRequest note;
    note.set_note_uncached(static_cast<uint32_t>(UncachedReason::kUnknownOption));
    note.set_note_uncached_option(absl::StrCat("-opt", i, "\n\"}\x01", std::string(4000, 'x')));
    ASSERT_TRUE(raw.Send(note));
  }
  std::unique_ptr<Client> admin = Connect(daemon.address(), /*fast=*/false);
  WaitFor([&] { return Counter(*admin, "objects.uncached_unknown_option") == kNotes; });
  absl::StatusOr<DaemonStats> stats = admin->Stat();
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->uncached_options.size(), 5u);  // four kept, and (others)
  uint64_t counted = 0;
  for (const DaemonStats::UncachedOption& option : stats->uncached_options) {
    EXPECT_EQ(option.reason, "unknown_option");
    EXPECT_LE(option.option.size(), 64u);
    for (char c : option.option) EXPECT_TRUE(c > 0x20 && c < 0x7f) << option.option;
    counted += option.count;
  }
  EXPECT_EQ(stats->uncached_options.front().option, "(others)");
  EXPECT_EQ(stats->uncached_options.front().count, static_cast<uint64_t>(kNotes - 4));
  EXPECT_EQ(counted, static_cast<uint64_t>(kNotes));
}

}  // namespace
}  // namespace kcache
