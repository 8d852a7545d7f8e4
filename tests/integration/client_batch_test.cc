// Client::ResolveMany (and the daemon's ResolveMany behind it) against a real kcached on a temp
// unix socket: a batch mixing stored kernels, a compile and refused kernels, answered each on
// its own with stored ones before the compile; the same bytes as single Resolves; a list longer
// than one call takes; failing open when the daemon is away; the daemon's bound on entries.
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <vector>

#include "kcache/kcache.h"
#include "tests/testutil/client_kernels.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/kcache_rpc.h"

namespace kcache {
namespace {

using client::Client;
using client::ClientOptions;
using client::Device;
using client::FetchedKernel;
using client::KernelRef;
using client::KernelSource;
using client::ServedFrom;
using ::kcache::testing::DaemonProcess;

constexpr Device kSm89{8, 9, 13000};

KernelSource Saxpy() { return ::kcache::testing::SaxpySource(); }

KernelSource Scale() { return ::kcache::testing::ScaleSource(); }

std::unique_ptr<Client> Connect(const std::string& address, bool fallback = false) {
  ClientOptions options;
  options.address = address;
  options.deadline = absl::Seconds(60);  // room for compiles on a busy 2-core machine
  options.local_compile_fallback = fallback;
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(options);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

struct Arrival {
  size_t index;
  absl::StatusOr<FetchedKernel> result;
};

class ClientBatchTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(daemon_.Start().ok()) << daemon_.Log(); }

  std::vector<Arrival> ResolveAll(Client& c, const std::vector<KernelRef>& refs) {
    std::vector<Arrival> arrivals;
    c.ResolveMany(refs, kSm89, [&](size_t i, absl::StatusOr<FetchedKernel> result) {
      arrivals.push_back(Arrival{i, std::move(result)});
    });
    return arrivals;
  }

  DaemonProcess daemon_;
};

TEST_F(ClientBatchTest, MixedBatchAnswersEachKernelAndStoredOnesBeforeTheCompile) {
  std::unique_ptr<Client> c = Connect(daemon_.address());
  absl::StatusOr<FetchedKernel> saxpy = c->Resolve(Saxpy(), kSm89);  // now stored
  ASSERT_TRUE(saxpy.ok()) << saxpy.status() << daemon_.Log();
  KernelSource bad_option = Saxpy();
  bad_option.options = {"--dont-know-this"};
  KernelSource too_new = Saxpy();  // another kernel (the range is not part of the id)
  too_new.name = "saxpy_sm90";
  too_new.source += "// for 9.0 and newer\n";
  too_new.min_arch = 90;
  auto stub = ::kcache::testing::NewStub(daemon_.address());
  uint64_t compiles_before = ::kcache::testing::StatCounter(*stub, "compile.runs");

  // The compile comes first in the list, and last in the answers.
  std::vector<KernelRef> refs = {
      Scale(),    Saxpy(), KernelRef::Id(saxpy->kernel_id),   KernelRef::Name("saxpy"),
      bad_option, too_new, KernelRef::Name("no_such_kernel"), KernelRef::Id("not-hex")};
  std::vector<Arrival> arrivals = ResolveAll(*c, refs);

  ASSERT_EQ(arrivals.size(), refs.size());
  std::vector<bool> seen(refs.size(), false);
  for (const Arrival& a : arrivals) {
    ASSERT_LT(a.index, refs.size());
    EXPECT_FALSE(seen[a.index]) << "two results for kernel " << a.index;
    seen[a.index] = true;
  }
  EXPECT_EQ(arrivals.back().index, 0u) << "the compile should be answered last";
  std::vector<const absl::StatusOr<FetchedKernel>*> by_index(refs.size());
  for (const Arrival& a : arrivals) by_index[a.index] = &a.result;

  const absl::StatusOr<FetchedKernel>& scale = *by_index[0];
  ASSERT_TRUE(scale.ok()) << scale.status() << daemon_.Log();
  EXPECT_EQ(scale->served_from, ServedFrom::kDaemonCompile);
  EXPECT_FALSE(scale->LoweredName("scale<float>").empty());
  for (size_t i : {1u, 2u, 3u}) {
    const absl::StatusOr<FetchedKernel>& hit = *by_index[i];
    ASSERT_TRUE(hit.ok()) << i << ": " << hit.status();
    EXPECT_EQ(hit->served_from, ServedFrom::kDaemonMemory) << i;
    EXPECT_EQ(hit->data(), saxpy->data()) << i << ": other bytes than a single Resolve's";
    EXPECT_EQ(hit->kernel_id, saxpy->kernel_id) << i;
  }
  EXPECT_EQ(by_index[4]->status().code(), absl::StatusCode::kInvalidArgument)
      << by_index[4]->status();
  EXPECT_NE(by_index[4]->status().message().find("--dont-know-this"), std::string::npos)
      << by_index[4]->status();
  EXPECT_EQ(by_index[5]->status().code(), absl::StatusCode::kNotFound) << by_index[5]->status();
  EXPECT_EQ(by_index[6]->status().code(), absl::StatusCode::kNotFound) << by_index[6]->status();
  EXPECT_NE(by_index[6]->status().message().find("no_such_kernel"), std::string::npos);
  EXPECT_EQ(by_index[7]->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(::kcache::testing::StatCounter(*stub, "compile.runs"), compiles_before + 1);
}

TEST_F(ClientBatchTest, ALongListIsSplitIntoCallsTheDaemonTakes) {
  std::unique_ptr<Client> c = Connect(daemon_.address());
  absl::StatusOr<FetchedKernel> saxpy = c->Resolve(Saxpy(), kSm89);
  ASSERT_TRUE(saxpy.ok()) << saxpy.status() << daemon_.Log();
  std::vector<KernelRef> refs(2500, KernelRef::Id(saxpy->kernel_id));
  std::vector<absl::StatusOr<FetchedKernel>> results = c->ResolveMany(refs, kSm89);
  ASSERT_EQ(results.size(), refs.size());
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status();
    ASSERT_EQ(results[i]->data(), saxpy->data()) << i;
  }
}

TEST_F(ClientBatchTest, DaemonRefusesMoreEntriesThanItsBoundNamingIt) {
  auto stub = ::kcache::testing::NewStub(daemon_.address());
  v1::ResolveManyRequest request;
  v1::ResolveRequest entry;
  entry.set_kernel_name("saxpy");
  entry.mutable_device()->set_sm_major(8);
  entry.mutable_device()->set_sm_minor(9);
  for (int i = 0; i < 1025; ++i) *request.add_kernels() = entry;
  grpc::ClientContext context;
  auto reader = stub->ResolveMany(&context, request);
  v1::ResolveManyResponse part;
  EXPECT_FALSE(reader->Read(&part));
  grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("1025 kernels; the limit is 1024"), std::string::npos)
      << status.error_message();

  // An empty batch is refused too, and the daemon still serves.
  grpc::ClientContext empty_context;
  auto empty = stub->ResolveMany(&empty_context, v1::ResolveManyRequest());
  EXPECT_FALSE(empty->Read(&part));
  EXPECT_EQ(empty->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ClientBatchTest, WithTheDaemonGoneSourcesCompileHereAndNamesFail) {
  std::unique_ptr<Client> c = Connect(daemon_.address(), /*fallback=*/true);
  daemon_.Kill(SIGKILL);
  daemon_.Wait();
  std::vector<absl::StatusOr<FetchedKernel>> results =
      c->ResolveMany({Saxpy(), KernelRef::Name("saxpy")}, kSm89);
  ASSERT_EQ(results.size(), 2u);
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  EXPECT_EQ(results[0]->served_from, ServedFrom::kLocalCompile);
  EXPECT_EQ(results[0]->data().substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_EQ(results[1].status().code(), absl::StatusCode::kUnavailable) << results[1].status();
}

}  // namespace
}  // namespace kcache
