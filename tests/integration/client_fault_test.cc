// libkcache against faults a real kcached does not produce on demand: a fake KernelCache
// server (in this process, on a temp unix socket) that sends a wrong checksum, a truncated or
// misordered stream, answers slowly or UNAVAILABLE. Also the circuit breaker on a fake clock.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "client/lib/circuit_breaker.h"
#include "core/artifact.h"
#include "kcache/kcache.h"
#include "kcache/v1/kcache.grpc.pb.h"
#include "tests/testutil/client_kernels.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

using client::BreakerState;
using client::CircuitBreaker;
using client::Client;
using client::ClientOptions;
using client::Device;
using client::FetchedKernel;
using client::KernelSource;
using Clock = std::chrono::steady_clock;

constexpr Device kSm89{8, 9, 13000};

// What the fake answers Resolve with: writes parts, returns the final status.
using ResolveScript = std::function<grpc::Status(grpc::ServerWriter<v1::ResolveResponse>* writer)>;

class FakeKernelCache final : public v1::KernelCache::Service {
 public:
  explicit FakeKernelCache(ResolveScript script) : script_(std::move(script)) {}
  grpc::Status Resolve(grpc::ServerContext*, const v1::ResolveRequest*,
                       grpc::ServerWriter<v1::ResolveResponse>* writer) override {
    ++calls;
    return script_(writer);
  }
  std::atomic<int> calls{0};

 private:
  ResolveScript script_;
};

class FakeServer {
 public:
  explicit FakeServer(ResolveScript script) : service_(std::move(script)) {
    address_ = "unix://" + (dir_ / "fake.sock");
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address_, grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~FakeServer() { server_->Shutdown(std::chrono::system_clock::now()); }
  const std::string& address() const { return address_; }
  int calls() const { return service_.calls; }

 private:
  ::kcache::testing::TempDir dir_;
  std::string address_;
  FakeKernelCache service_;
  std::unique_ptr<grpc::Server> server_;
};

v1::ResolveResponse Header(const std::string& payload, uint64_t checksum) {
  v1::ResolveResponse r;
  v1::ArtifactHeader* h = r.mutable_header();
  h->set_kernel_name("saxpy");
  h->set_kind(v1::ARTIFACT_KIND_CUBIN);
  h->set_target("sm_89");
  h->set_size(payload.size());
  h->set_checksum(checksum);
  h->set_rule(v1::SERVE_RULE_EXACT_SASS);
  h->set_tier(v1::TIER_MEMORY);
  return r;
}

v1::ResolveResponse Chunk(const std::string& bytes) {
  v1::ResolveResponse r;
  r.set_chunk(bytes);
  return r;
}

// Sends `payload` in `chunk` byte pieces after a header carrying `checksum`, dropping the last
// `drop` bytes.
ResolveScript Send(std::string payload, uint64_t checksum, size_t chunk, size_t drop = 0) {
  return [=](grpc::ServerWriter<v1::ResolveResponse>* w) {
    w->Write(Header(payload, checksum));
    std::string sent = payload.substr(0, payload.size() - drop);
    for (size_t at = 0; at < sent.size(); at += chunk) w->Write(Chunk(sent.substr(at, chunk)));
    return grpc::Status::OK;
  };
}

std::unique_ptr<Client> Connect(const std::string& address, bool fallback,
                                int breaker_failures = 3) {
  ClientOptions options;
  options.address = address;
  options.local_compile_fallback = fallback;
  options.breaker_failures = breaker_failures;
  options.deadline = absl::Seconds(5);
  return *Client::Connect(options);
}

KernelSource Saxpy() { return ::kcache::testing::SaxpySource(); }

std::string Payload() {
  std::string p(300000, '\0');
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<char>(i * 131 + 7);
  return p;
}

TEST(ClientFaultTest, ManySmallChunksReassembleIntact) {
  std::string payload = Payload();
  FakeServer fake(Send(payload, PayloadChecksum(payload), 999));
  absl::StatusOr<FetchedKernel> k = Connect(fake.address(), false)->ResolveByName("saxpy", kSm89);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_TRUE(k->data() == payload);
  EXPECT_EQ(k->served_from, client::ServedFrom::kDaemonMemory);
}

TEST(ClientFaultTest, ChecksumMismatchIsDataLossNeverAKernel) {
  std::string payload = Payload();
  FakeServer fake(Send(payload, PayloadChecksum(payload) ^ 1, 1 << 20));
  absl::StatusOr<FetchedKernel> k = Connect(fake.address(), false)->ResolveByName("saxpy", kSm89);
  EXPECT_EQ(k.status().code(), absl::StatusCode::kDataLoss) << k.status();
  EXPECT_NE(k.status().message().find("checksum"), std::string::npos) << k.status();
}

TEST(ClientFaultTest, TruncatedStreamIsDataLoss) {
  std::string payload = Payload();
  FakeServer fake(Send(payload, PayloadChecksum(payload), 4096, 10));
  absl::StatusOr<FetchedKernel> k = Connect(fake.address(), false)->ResolveByName("saxpy", kSm89);
  EXPECT_EQ(k.status().code(), absl::StatusCode::kDataLoss) << k.status();
  EXPECT_NE(k.status().message().find("got 299990 of 300000 bytes"), std::string::npos)
      << k.status();
}

TEST(ClientFaultTest, ChunkBeforeHeaderOrExtraBytesIsDataLoss) {
  FakeServer chunk_first([](grpc::ServerWriter<v1::ResolveResponse>* w) {
    w->Write(Chunk("abc"));
    return grpc::Status::OK;
  });
  EXPECT_EQ(Connect(chunk_first.address(), false)->ResolveByName("x", kSm89).status().code(),
            absl::StatusCode::kDataLoss);
  FakeServer too_long([](grpc::ServerWriter<v1::ResolveResponse>* w) {
    w->Write(Header("abc", PayloadChecksum("abc")));
    w->Write(Chunk("abcd"));
    return grpc::Status::OK;
  });
  EXPECT_EQ(Connect(too_long.address(), false)->ResolveByName("x", kSm89).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(ClientFaultTest, BrokenStreamFallsBackToLocalCompileAndCountsAsAFailure) {
  std::string payload = Payload();
  FakeServer fake(Send(payload, PayloadChecksum(payload) + 1, 1 << 20));
  std::unique_ptr<Client> c = Connect(fake.address(), true, /*breaker_failures=*/1);
  absl::StatusOr<FetchedKernel> k = c->Resolve(Saxpy(), kSm89);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->served_from, client::ServedFrom::kLocalCompile);
  EXPECT_NE(k->data(), payload);
  EXPECT_EQ(c->breaker_state(), BreakerState::kOpen);
}

TEST(ClientFaultTest, SlowDaemonHitsTheDeadline) {
  FakeServer fake([](grpc::ServerWriter<v1::ResolveResponse>*) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    return grpc::Status::OK;
  });
  ClientOptions options;
  options.address = fake.address();
  options.local_compile_fallback = false;
  options.deadline = absl::Milliseconds(200);
  std::unique_ptr<Client> c = *Client::Connect(options);
  Clock::time_point start = Clock::now();
  absl::StatusOr<FetchedKernel> k = c->ResolveByName("saxpy", kSm89);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  EXPECT_EQ(k.status().code(), absl::StatusCode::kDeadlineExceeded) << k.status();
  EXPECT_GE(ms, 190);
  EXPECT_LT(ms, 1500);
}

TEST(ClientFaultTest, UnavailableAnswerFallsBackButNotFoundDoesNotTripTheBreaker) {
  FakeServer unavailable([](grpc::ServerWriter<v1::ResolveResponse>*) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
  });
  std::unique_ptr<Client> c = Connect(unavailable.address(), true);
  absl::StatusOr<FetchedKernel> k = c->Resolve(Saxpy(), kSm89);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->served_from, client::ServedFrom::kLocalCompile);

  FakeServer not_found([](grpc::ServerWriter<v1::ResolveResponse>*) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "kernel unknown");
  });
  std::unique_ptr<Client> d = Connect(not_found.address(), true, /*breaker_failures=*/1);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(d->ResolveByName("saxpy", kSm89).status().code(), absl::StatusCode::kNotFound);
  }
  EXPECT_EQ(d->breaker_state(), BreakerState::kClosed);
  EXPECT_EQ(not_found.calls(), 3);
}

TEST(CircuitBreakerTest, OpensAfterNFailuresProbesOnceAfterCooldown) {
  absl::Time now = absl::UnixEpoch();
  CircuitBreaker breaker(2, absl::Seconds(10), [&] { return now; });
  EXPECT_TRUE(breaker.Allow());
  breaker.RecordFailure();
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
  breaker.RecordSuccess();  // a success resets the count
  breaker.RecordFailure();
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
  breaker.RecordFailure();
  EXPECT_EQ(breaker.state(), BreakerState::kOpen);
  EXPECT_FALSE(breaker.Allow());
  EXPECT_EQ(breaker.RetryIn(), absl::Seconds(10));
  now += absl::Seconds(10);
  EXPECT_TRUE(breaker.Allow());   // the probe
  EXPECT_FALSE(breaker.Allow());  // everyone else while it is in flight
  EXPECT_EQ(breaker.state(), BreakerState::kHalfOpen);
  breaker.RecordFailure();  // the probe failed: open for another cool-down
  EXPECT_EQ(breaker.state(), BreakerState::kOpen);
  EXPECT_FALSE(breaker.Allow());
  now += absl::Seconds(10);
  EXPECT_TRUE(breaker.Allow());
  breaker.RecordSuccess();
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
  EXPECT_TRUE(breaker.Allow());
  EXPECT_EQ(breaker.times_opened(), 2u);
}

TEST(CircuitBreakerTest, ZeroFailuresNeverOpens) {
  CircuitBreaker breaker(0, absl::Seconds(10));
  for (int i = 0; i < 100; ++i) breaker.RecordFailure();
  EXPECT_TRUE(breaker.Allow());
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
}

}  // namespace
}  // namespace kcache
