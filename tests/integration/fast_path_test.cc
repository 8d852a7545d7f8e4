// The in-pod fast path against a real kcached on a temp socket: the bundled kernels arrive as
// views of the daemon's arena, byte for byte what gRPC serves; a client that cannot take the
// fast path is served over gRPC; a wrong checksum is refused; the lease bound and a closed
// connection give their slots back. The attacks are in hostile_fast_path_test.cc.
#include "client/lib/fast_path.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/artifact.h"
#include "core/kernel_spec.h"
#include "engine/store/store.h"
#include "kcache/kcache.h"
#include "kcache/v1/fast_path.pb.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/fast_socket.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/tree_paths.h"
#include "tests/testutil/wait.h"

namespace kcache {
namespace {

using client::Client;
using client::ClientOptions;
using client::Device;
using client::FetchedKernel;
using ::kcache::testing::DaemonProcess;
using ::kcache::testing::FastSocket;
using ::kcache::testing::WaitFor;

constexpr Device kSm89{8, 9, 13000};

std::unique_ptr<Client> Connect(const std::string& address, bool fast = true) {
  ClientOptions options;
  options.address = address;
  options.local_compile_fallback = false;
  options.deadline = absl::Seconds(120);
  options.fast_path = fast;
  return *Client::Connect(options);
}

// A synthetic cubin of `size` bytes under a kernel of its own, put into the daemon's store
// before it starts; its kernel id in hex.
std::string PutPayload(Store& store, size_t size, int n) {
  KernelSpec spec;
  spec.name = absl::StrCat("payload_", n);
  spec.source = absl::StrCat("// payload ", n, " of ", size);
  Artifact a;
  a.meta.key = ArtifactKey{ComputeKernelId(spec), ArtifactKind::kCubin,
                           Target{TargetKind::kSass, Sm{8, 9}, ArchVariant::kNone}, "test", 0};
  a.meta.kernel_name = spec.name;
  a.bytes.resize(size);
  for (size_t i = 0; i < size; ++i) a.bytes[i] = static_cast<char>((i * 131 + n * 7) >> 3);
  EXPECT_TRUE(store.Put(a).ok());
  return a.meta.key.kernel_id.Hex();
}

// Starts `daemon` with one payload per size; their ids.
std::vector<std::string> StartWithPayloads(DaemonProcess& daemon, std::vector<size_t> sizes) {
  std::vector<std::string> ids;
  {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(daemon.store_path());
    EXPECT_TRUE(store.ok()) << store.status();
    for (size_t i = 0; i < sizes.size(); ++i) {
      ids.push_back(PutPayload(**store, sizes[i], static_cast<int>(i)));
    }
  }
  absl::Status started = daemon.Start();
  EXPECT_TRUE(started.ok()) << started << daemon.Log();
  return ids;
}

// The [start, end) of this process's mapping of kcached's arena, from /proc/self/maps.
std::vector<std::pair<uintptr_t, uintptr_t>> ArenaMappings() {
  std::vector<std::pair<uintptr_t, uintptr_t>> out;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("memfd:kcache-arena") == std::string::npos) continue;
    uintptr_t start = 0, end = 0;
    std::sscanf(line.c_str(), "%lx-%lx", &start, &end);
    out.emplace_back(start, end);
  }
  return out;
}

bool InArena(absl::string_view view) {
  auto p = reinterpret_cast<uintptr_t>(view.data());
  for (auto [start, end] : ArenaMappings()) {
    if (p >= start && p + view.size() < end) return true;
  }
  return false;
}

uint64_t Counter(Client& client, absl::string_view name) {
  absl::StatusOr<client::DaemonStats> stats = client.Stat();
  EXPECT_TRUE(stats.ok()) << stats.status();
  return stats.ok() ? stats->Counter(name) : 0;
}

TEST(FastPathTest, BundledKernelsAreViewsIdenticalToGrpc) {
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  absl::StatusOr<std::vector<client::KernelSource>> kernels =
      client::LoadManifestKernels(testing::SourcePath("kernels/manifest.yaml"));
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  std::unique_ptr<Client> fast = Connect(daemon.address());
  std::unique_ptr<Client> grpc = Connect(daemon.address(), /*fast=*/false);
  absl::StatusOr<client::WarmTotals> warmed =
      grpc->Warm(*kernels, {"8.9"}, 0, absl::Minutes(10), nullptr);
  ASSERT_TRUE(warmed.ok()) << warmed.status() << daemon.Log();
  int views = 0;
  for (const client::KernelSource& source : *kernels) {
    SCOPED_TRACE(source.name);
    absl::StatusOr<FetchedKernel> over_grpc = grpc->Resolve(source, kSm89);
    absl::StatusOr<FetchedKernel> over_fast = fast->Resolve(source, kSm89);
    ASSERT_EQ(over_grpc.ok(), over_fast.ok()) << over_grpc.status() << " / " << over_fast.status();
    if (!over_grpc.ok()) continue;  // outside the kernel's arch range: refused both ways
    EXPECT_EQ(over_grpc->view_owner, nullptr);
    ASSERT_NE(over_fast->view_owner, nullptr) << "not served on the fast path";
    EXPECT_TRUE(over_fast->bytes.empty());
    EXPECT_TRUE(InArena(over_fast->data())) << "the view is not in the arena's mapping";
    EXPECT_EQ(*(over_fast->data().data() + over_fast->data().size()), 0);  // a C string
    EXPECT_EQ(over_fast->data(), over_grpc->data());
    EXPECT_EQ(over_fast->kernel_id, over_grpc->kernel_id);
    EXPECT_EQ(over_fast->target, over_grpc->target);
    EXPECT_EQ(over_fast->lowered_names, over_grpc->lowered_names);
    EXPECT_EQ(over_fast->served_from, client::ServedFrom::kDaemonMemory);
    ++views;
  }
  EXPECT_GT(views, 0);
  EXPECT_GE(Counter(*grpc, "fast.hits"), static_cast<uint64_t>(views));
}

TEST(FastPathTest, ClientsThatCannotTakeTheFastPathAreServedOverGrpc) {
  DaemonProcess daemon;
  std::vector<std::string> ids = StartWithPayloads(daemon, {200 * 1000});
  EXPECT_EQ(client::FastSocketFor("localhost:7071"), "");  // TCP: no descriptor can cross
  EXPECT_EQ(client::FastSocketFor("unix:///run/k.sock"), "/run/k.sock.fast");
  std::unique_ptr<Client> off = Connect(daemon.address(), /*fast=*/false);
  absl::StatusOr<FetchedKernel> k = off->ResolveById(ids[0], kSm89);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->view_owner, nullptr);
  EXPECT_EQ(k->bytes.size(), 200u * 1000);
  // A fast socket that is not there: gRPC, silently.
  ClientOptions options;
  options.address = daemon.address();
  options.fast_path_socket = daemon.dir() + "/no-such.fast";
  std::unique_ptr<Client> missing = *Client::Connect(options);
  k = missing->ResolveById(ids[0], kSm89);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->view_owner, nullptr);
  EXPECT_EQ(Counter(*off, "fast.hits"), 0u);
}

TEST(FastPathTest, MissesGoToGrpcWhichCompiles) {
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  client::KernelSource saxpy;
  saxpy.name = "fast_saxpy";
  saxpy.source =
      "extern \"C\" __global__ void fast_saxpy(float a, float* x) { x[threadIdx.x] *= a; }";
  std::unique_ptr<Client> c = Connect(daemon.address());
  absl::StatusOr<FetchedKernel> first = c->Resolve(saxpy, kSm89);
  ASSERT_TRUE(first.ok()) << first.status() << daemon.Log();
  EXPECT_EQ(first->view_owner, nullptr);  // compiled over gRPC
  EXPECT_EQ(first->served_from, client::ServedFrom::kDaemonCompile);
  absl::StatusOr<FetchedKernel> second = c->Resolve(saxpy, kSm89);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(second->view_owner, nullptr);  // now stored: the fast path
  EXPECT_EQ(second->data(), first->data());
  // kcache stat stays truthful: the fast path's miss is not a second request or a miss.
  absl::StatusOr<client::DaemonStats> stats = c->Stat();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->Counter("fast.fallback_miss"), 1u);
  EXPECT_EQ(stats->Counter("fast.hits"), 1u);
  EXPECT_EQ(stats->Counter("resolve.requests"), 2u);
  EXPECT_EQ(stats->Counter("miss.compile_not_allowed"), 0u);
  EXPECT_EQ(stats->Counter("resolve.hit.compile"), 1u);
  EXPECT_EQ(stats->Counter("resolve.hit.memory") + stats->Counter("resolve.hit.local_store"), 1u);
}

// The fast path asks for a kernel given by source by the id libkcache computes from it: every
// part of the spec that the id covers (source, a header's content, an option, a name
// expression) gives a new id, so a changed spec is never served the artifact of the one before
// it. Each change is a fast-path miss compiled over gRPC, then a fast-path hit of its own.
TEST(FastPathTest, AChangedSpecAskedByIdIsNeverServedTheOldArtifact) {
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  client::KernelSource base;
  base.name = "fast_scale";
  base.source =
      "#include \"scale.cuh\"\n"
      "template <typename T> __global__ void fast_scale(T* x) { x[threadIdx.x] *= T(kScale); }\n";
  base.headers = {{"scale.cuh", "constexpr float kScale = 2.0f;\n"}};
  base.name_expressions = {"fast_scale<float>"};
  std::unique_ptr<Client> c = Connect(daemon.address());
  ASSERT_TRUE(c->Resolve(base, kSm89).ok()) << daemon.Log();
  absl::StatusOr<FetchedKernel> hit = c->Resolve(base, kSm89);
  ASSERT_TRUE(hit.ok()) << hit.status();
  ASSERT_NE(hit->view_owner, nullptr) << "the unchanged spec is not a fast-path hit";
  EXPECT_EQ(hit->kernel_id, client::LocalCompiler::KernelIdOf(base));

  std::vector<std::pair<std::string, client::KernelSource>> changed;
  changed.emplace_back("source", base);
  changed.back().second.source += "// changed\n";
  changed.emplace_back("header content", base);
  changed.back().second.headers["scale.cuh"] = "constexpr float kScale = 3.0f;\n";
  changed.emplace_back("option", base);
  changed.back().second.options = {"--use_fast_math"};
  changed.emplace_back("name expression", base);
  changed.back().second.name_expressions = {"fast_scale<double>"};
  for (const auto& [what, spec] : changed) {
    SCOPED_TRACE(what);
    absl::StatusOr<FetchedKernel> first = c->Resolve(spec, kSm89);
    ASSERT_TRUE(first.ok()) << first.status() << daemon.Log();
    EXPECT_EQ(first->view_owner, nullptr) << "served on the fast path before it was compiled";
    EXPECT_EQ(first->served_from, client::ServedFrom::kDaemonCompile);
    EXPECT_NE(first->kernel_id, hit->kernel_id);
    EXPECT_EQ(first->kernel_id, client::LocalCompiler::KernelIdOf(spec));
    absl::StatusOr<FetchedKernel> again = c->Resolve(spec, kSm89);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_NE(again->view_owner, nullptr) << "not a fast-path hit once compiled";
    EXPECT_EQ(again->kernel_id, first->kernel_id);
    EXPECT_EQ(again->data(), first->data());
  }
  // The same through one batch: the unchanged spec is a hit, each changed one its own kernel.
  std::vector<client::KernelRef> batch{base};
  for (const auto& [what, spec] : changed) batch.emplace_back(spec);
  std::vector<absl::StatusOr<FetchedKernel>> got = c->ResolveMany(batch, kSm89);
  ASSERT_EQ(got.size(), batch.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].ok()) << i << ": " << got[i].status();
    EXPECT_NE(got[i]->view_owner, nullptr) << i;
    EXPECT_EQ(got[i]->kernel_id, client::LocalCompiler::KernelIdOf(batch[i].source)) << i;
  }
}

// A fake daemon's fast socket whose answer carries a wrong checksum.
TEST(FastPathTest, ChecksumMismatchIsRefused) {
  ::kcache::testing::TempDir dir;
  std::string path = dir / "fake.fast";
  int listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  std::string payload(4096, 'p');
  std::thread fake([&] {
    int arena = memfd_create("fake-arena", MFD_CLOEXEC);
    ASSERT_EQ(ftruncate(arena, 1 << 16), 0);
    ASSERT_EQ(pwrite(arena, payload.data(), payload.size(), 0), 4096);
    int fd = accept(listener, nullptr, nullptr);
    v1::FastHello hello;
    hello.set_version(1);
    hello.set_arena_bytes(1 << 16);
    std::string packet = hello.SerializeAsString();
    iovec iov{packet.data(), packet.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &arena, sizeof(int));
    ASSERT_GT(sendmsg(fd, &msg, 0), 0);
    std::string buffer(1 << 20, '\0');
    ssize_t got = recv(fd, buffer.data(), buffer.size(), 0);
    v1::FastRequest request;
    ASSERT_TRUE(request.ParseFromArray(buffer.data(), static_cast<int>(got)));
    v1::FastResponse response;
    response.set_tag(request.tag());
    response.mutable_header()->set_size(payload.size());
    response.mutable_header()->set_checksum(PayloadChecksum(payload) ^ 1);
    response.set_offset(0);
    response.set_lease(7);
    packet = response.SerializeAsString();
    ASSERT_GT(send(fd, packet.data(), packet.size(), 0), 0);
    got = recv(fd, buffer.data(), buffer.size(), 0);  // the lease comes back, or the close
    close(fd);
    close(arena);
  });
  client::FastPath fast(path);
  v1::ResolveRequest request;
  request.set_kernel_name("anything");
  client::FastPath::Answer answer = fast.Resolve(request, absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status().code(), absl::StatusCode::kDataLoss) << answer->status();
  EXPECT_EQ(fast.checksum_failures(), 1u);
  EXPECT_EQ(fast.served(), 0u);
  fake.join();
  close(listener);
}

// FastPath::ResolveMany, the pipelined batch entry: answers in the order asked, each a view,
// nullopt (ask gRPC) or InvalidArgument, over more than one window of requests.
TEST(FastPathTest, ResolveManyAnswersInOrder) {
  DaemonProcess daemon;
  std::vector<std::string> ids = StartWithPayloads(daemon, {1000, 200 * 1000, 64, 4 << 20});
  client::FastPath fast(daemon.socket_path() + ".fast");
  std::vector<v1::ResolveRequest> requests;
  for (int i = 0; i < 100; ++i) {
    v1::ResolveRequest r;
    r.set_kernel_id(absl::HexStringToBytes(ids[i % ids.size()]));
    r.mutable_device()->set_sm_major(8);
    r.mutable_device()->set_sm_minor(9);
    if (i == 37) r.set_kernel_id(std::string(32, '\x01'));  // unknown: a miss, gRPC's to answer
    if (i == 71) r.clear_device();                          // malformed
    requests.push_back(r);
  }
  std::vector<client::FastPath::Answer> answers =
      fast.ResolveMany(requests, absl::Now() + absl::Seconds(30));
  ASSERT_EQ(answers.size(), requests.size());
  std::unique_ptr<Client> grpc = Connect(daemon.address(), /*fast=*/false);
  std::vector<std::string> expected;
  for (const std::string& id : ids)
    expected.push_back(std::string(grpc->ResolveById(id, kSm89)->data()));
  for (int i = 0; i < 100; ++i) {
    SCOPED_TRACE(i);
    if (i == 37) {
      EXPECT_FALSE(answers[i].has_value());
    } else if (i == 71) {
      ASSERT_TRUE(answers[i].has_value());
      EXPECT_EQ(answers[i]->status().code(), absl::StatusCode::kInvalidArgument);
    } else {
      ASSERT_TRUE(answers[i].has_value() && answers[i]->ok());
      EXPECT_TRUE((*answers[i])->data() == expected[i % ids.size()]);
      EXPECT_TRUE(InArena((*answers[i])->data()));
    }
  }
  EXPECT_EQ(fast.served(), 98u);
  EXPECT_EQ(Counter(*grpc, "fast.leases_held"), 98u);
  answers.clear();  // every lease given back
  EXPECT_TRUE(WaitFor([&] { return Counter(*grpc, "fast.leases_held") == 0; }))
      << Counter(*grpc, "fast.leases_held") << " leases still held";
}

// Client::ResolveMany takes what it can from the fast path in one pipelined exchange and asks
// gRPC for the rest.
TEST(FastPathTest, ClientResolveManyUsesTheFastPath) {
  DaemonProcess daemon;
  std::vector<std::string> ids = StartWithPayloads(daemon, {1000, 200 * 1000, 4096});
  std::unique_ptr<Client> c = Connect(daemon.address());
  std::vector<client::KernelRef> refs;
  for (const std::string& id : ids) refs.push_back(client::KernelRef::Id(id));
  refs.push_back(client::KernelRef::Id(std::string(64, '7')));  // unknown: gRPC says so
  std::vector<absl::StatusOr<FetchedKernel>> results = c->ResolveMany(refs, kSm89);
  ASSERT_EQ(results.size(), refs.size());
  std::unique_ptr<Client> grpc = Connect(daemon.address(), /*fast=*/false);
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].status();
    EXPECT_NE(results[i]->view_owner, nullptr);
    EXPECT_EQ(results[i]->data(), grpc->ResolveById(ids[i], kSm89)->data());
  }
  EXPECT_EQ(results.back().status().code(), absl::StatusCode::kNotFound) << results.back().status();
}

TEST(FastPathTest, ADaemonWithoutTheFastPathServesOverGrpc) {
  testing::DaemonOptions options;
  options.extra_flags = {"--no-toolkit", "--fast-socket", ""};
  DaemonProcess daemon(options);
  std::vector<std::string> ids = StartWithPayloads(daemon, {4096});
  EXPECT_NE(access((daemon.socket_path() + ".fast").c_str(), F_OK), 0);
  std::unique_ptr<Client> c = Connect(daemon.address());
  absl::StatusOr<FetchedKernel> k = c->ResolveById(ids[0], kSm89);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->view_owner, nullptr);
  EXPECT_EQ(k->bytes.size(), 4096u);
}

// One Client shared by many threads: every answer a verified view of the right bytes.
TEST(FastPathTest, OneClientServesManyThreads) {
  DaemonProcess daemon;
  std::vector<std::string> ids = StartWithPayloads(daemon, {1000, 200 * 1000, 4096});
  std::unique_ptr<Client> grpc = Connect(daemon.address(), /*fast=*/false);
  std::vector<std::string> expected;
  for (const std::string& id : ids) {
    expected.push_back(std::string(grpc->ResolveById(id, kSm89)->data()));
  }
  std::unique_ptr<Client> shared = Connect(daemon.address());
  std::atomic<int> views{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::vector<FetchedKernel> kept;  // some held while others come and go
      for (int i = 0; i < 200; ++i) {
        size_t n = static_cast<size_t>(t + i) % ids.size();
        absl::StatusOr<FetchedKernel> k = shared->ResolveById(ids[n], kSm89);
        if (!k.ok() || k->data() != expected[n]) ++wrong;
        if (k.ok() && k->view_owner != nullptr) ++views;
        if (k.ok() && i % 10 == 0) kept.push_back(*std::move(k));
      }
      for (size_t i = 0; i < kept.size(); ++i) {
        if (kept[i].data() != expected[static_cast<size_t>(t + i * 10) % ids.size()]) ++wrong;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(views.load(), 8 * 200);
}

// A view outlives its daemon; the client goes to gRPC while the fast socket is away and comes
// back to the fast path once it is there again.
TEST(FastPathTest, ViewsOutliveADaemonRestart) {
  DaemonProcess daemon;
  std::vector<std::string> ids = StartWithPayloads(daemon, {200 * 1000});
  std::unique_ptr<Client> c = Connect(daemon.address());
  absl::StatusOr<FetchedKernel> before = c->ResolveById(ids[0], kSm89);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_NE(before->view_owner, nullptr);
  std::string bytes(before->data());
  daemon.Kill(SIGKILL);
  daemon.Wait();
  EXPECT_EQ(before->data(), bytes);  // still mapped, still the same bytes
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  absl::StatusOr<FetchedKernel> during = c->ResolveById(ids[0], kSm89);
  ASSERT_TRUE(during.ok()) << during.status();
  EXPECT_EQ(during->data(), bytes);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the reconnect pause
  absl::StatusOr<FetchedKernel> after = c->ResolveById(ids[0], kSm89);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_NE(after->view_owner, nullptr) << "not back on the fast path";
  EXPECT_EQ(after->data(), bytes);
  before = absl::UnknownError("dropped");  // its lease's release goes nowhere, quietly
  EXPECT_EQ(after->data(), bytes);
}

// A daemon with `flags` holding two payloads of `size` bytes; a client resolves the first on
// the fast path and keeps it (its lease held), then the second, which a bound sends to gRPC.
struct PastABound {
  PastABound(std::vector<std::string> flags, size_t size)
      : daemon([&] {
          testing::DaemonOptions options;
          options.extra_flags = std::move(flags);
          options.extra_flags.push_back("--no-toolkit");
          return options;
        }()),
        ids(StartWithPayloads(daemon, {size, size})),
        c(Connect(daemon.address())),
        held(c->ResolveById(ids[0], kSm89)),
        over(c->ResolveById(ids[1], kSm89)) {}

  // The first came as a view, the second whole over gRPC.
  bool FirstOnTheFastPathSecondOverGrpc(size_t size) const {
    EXPECT_TRUE(held.ok()) << held.status();
    EXPECT_TRUE(over.ok()) << over.status();
    return held.ok() && over.ok() && held->view_owner != nullptr && over->view_owner == nullptr &&
           over->bytes.size() == size;
  }

  DaemonProcess daemon;
  std::vector<std::string> ids;
  std::unique_ptr<Client> c;
  absl::StatusOr<FetchedKernel> held;
  absl::StatusOr<FetchedKernel> over;
};

TEST(FastPathTest, LeaseBoundFallsBackToGrpc) {
  PastABound run({"--fast-leased-max-bytes", "300000"}, 200 * 1000);
  ASSERT_TRUE(run.FirstOnTheFastPathSecondOverGrpc(200 * 1000));
  Client& c = *run.c;
  EXPECT_EQ(Counter(c, "fast.fallback_lease_bound"), 1u);
  run.held = absl::UnknownError("dropped");  // gives the lease back
  absl::StatusOr<FetchedKernel> again = c.ResolveById(run.ids[1], kSm89);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE(again->view_owner, nullptr);
  EXPECT_EQ(again->data(), run.over->data());
  // Three requests, each counted once: the refused fast answer is counted by its gRPC call.
  EXPECT_EQ(Counter(c, "resolve.requests"), 3u);
  EXPECT_EQ(Counter(c, "resolve.hit.memory") + Counter(c, "resolve.hit.local_store"), 3u);
  EXPECT_EQ(Counter(c, "fast.hits"), 2u);
  EXPECT_EQ(Counter(c, "fast.fallback_miss"), 0u);
}

TEST(FastPathTest, AFullArenaFallsBackToGrpcAndCountsOnce) {
  PastABound run({"--fast-arena-bytes", "1MiB"}, 600 * 1000);  // no room for two
  ASSERT_TRUE(run.FirstOnTheFastPathSecondOverGrpc(600 * 1000));
  Client& c = *run.c;
  EXPECT_EQ(Counter(c, "fast.fallback_arena_full"), 1u);
  EXPECT_EQ(Counter(c, "fast.hits"), 1u);
  EXPECT_EQ(Counter(c, "resolve.requests"), 2u);
  EXPECT_EQ(Counter(c, "resolve.hit.memory") + Counter(c, "resolve.hit.local_store"), 2u);
  EXPECT_EQ(Counter(c, "resolve.bytes_served"), 2u * 600 * 1000);
}

TEST(FastPathTest, ClosingTheConnectionFreesItsLeases) {
  DaemonProcess daemon;
  std::vector<std::string> ids = StartWithPayloads(daemon, {200 * 1000});
  std::unique_ptr<Client> admin = Connect(daemon.address(), /*fast=*/false);
  {
    FastSocket raw;
    ASSERT_TRUE(raw.Connect(daemon.socket_path() + ".fast"));
    for (int i = 0; i < 5; ++i) {
      v1::FastRequest request;
      request.set_tag(i + 1);
      *request.mutable_resolve()->mutable_kernel_id() = absl::HexStringToBytes(ids[0]);
      request.mutable_resolve()->mutable_device()->set_sm_major(8);
      request.mutable_resolve()->mutable_device()->set_sm_minor(9);
      ASSERT_TRUE(raw.Send(request));
      std::optional<v1::FastResponse> response = raw.ReceiveResponse();
      ASSERT_TRUE(response.has_value());
      EXPECT_EQ(response->code(), 0) << response->message();
      EXPECT_EQ(response->tag(), static_cast<uint64_t>(i + 1));
    }
    EXPECT_EQ(Counter(*admin, "fast.leases_held"), 5u);
  }  // closed without releasing anything
  EXPECT_TRUE(WaitFor([&] { return Counter(*admin, "fast.leases_held") == 0; }))
      << Counter(*admin, "fast.leases_held") << " leases still held";
}

}  // namespace
}  // namespace kcache
