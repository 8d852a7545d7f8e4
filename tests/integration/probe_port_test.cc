// The probe port of a real kcached (tests/testutil/daemon_process.h): gRPC health and
// reflection handed over to the probe's gRPC server, and HTTP /metrics and /healthz on the
// same TCP port.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/store/store.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/http.h"
#include "tests/testutil/kcache_rpc.h"
#include "tests/testutil/run.h"
#include "tests/testutil/synthetic.h"
#include "tests/testutil/wait.h"

namespace kcache {
namespace {

using ::kcache::testing::CallResolve;
using ::kcache::testing::CheckHealth;
using ::kcache::testing::Contains;
using ::kcache::testing::DaemonProcess;
using ::kcache::testing::FreePort;
using ::kcache::testing::HealthStatus;
using ::kcache::testing::HttpGet;
using ::kcache::testing::HttpRequest;
using ::kcache::testing::HttpResponse;

class ProbePortTest : public ::testing::Test {
 protected:
  void StartDaemon(std::vector<std::string> flags = {}) {
    port_ = FreePort();
    flags.push_back("--probe-port");
    flags.push_back(std::to_string(port_));
    daemon_.options().extra_flags = std::move(flags);
    absl::Status started = daemon_.Start();
    ASSERT_TRUE(started.ok()) << started;
    // Start() returns when the main socket answers. The probe port opened before it (a
    // connection is answered, never refused) and says SERVING once kcached has marked itself
    // serving, just after the socket started.
    EXPECT_NE(HttpGet(port_, "/healthz").status, 0) << daemon_.Log();
    ASSERT_TRUE(::kcache::testing::WaitFor([&] {
      return HttpGet(port_, "/healthz").status == 200;
    })) << daemon_.Log();
    stub_ = ::kcache::testing::NewStub(daemon_.address());
  }
  std::string probe() const { return "127.0.0.1:" + std::to_string(port_); }

  static double Sample(const std::string& metrics, const std::string& series) {
    return ::kcache::testing::MetricSample(metrics, series);
  }

  DaemonProcess daemon_;
  std::unique_ptr<v1::KernelCache::Stub> stub_;
  int port_ = 0;
};

v1::ResolveRequest ById(const KernelRecord& record, uint32_t major, uint32_t minor) {
  v1::ResolveRequest request;
  request.set_kernel_id(std::string(record.id.Bytes()));
  request.mutable_device()->set_sm_major(major);
  request.mutable_device()->set_sm_minor(minor);
  request.mutable_device()->set_driver_version(13000);
  return request;
}

TEST_F(ProbePortTest, AnswersHealthButNotTheCacheService) {
  StartDaemon({"--no-toolkit"});
  absl::StatusOr<HealthStatus> overall = CheckHealth(probe());
  ASSERT_TRUE(overall.ok()) << overall.status();
  EXPECT_EQ(*overall, HealthStatus::kServing);
  absl::StatusOr<HealthStatus> service = CheckHealth(probe(), "kcache.v1.KernelCache");
  ASSERT_TRUE(service.ok()) << service.status();
  EXPECT_EQ(*service, HealthStatus::kServing);
  auto probe_stub = ::kcache::testing::NewStub(probe());
  grpc::ClientContext context;
  v1::StatResponse stat;
  EXPECT_EQ(probe_stub->Stat(&context, v1::StatRequest(), &stat).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  absl::StatusOr<HealthStatus> on_socket = CheckHealth(daemon_.address(), "kcache.v1.KernelCache");
  ASSERT_TRUE(on_socket.ok());
  EXPECT_EQ(*on_socket, HealthStatus::kServing);
}

TEST_F(ProbePortTest, ReflectionListsTheCacheServiceOnTheSocketOnly) {
  StartDaemon({"--no-toolkit"});
  std::string on_socket = ::kcache::testing::ReflectionListServices(daemon_.address());
  EXPECT_TRUE(Contains(on_socket, "kcache.v1.KernelCache")) << on_socket;
  EXPECT_TRUE(Contains(on_socket, "grpc.health.v1.Health")) << on_socket;
  std::string on_probe = ::kcache::testing::ReflectionListServices(probe());
  EXPECT_TRUE(Contains(on_probe, "grpc.health.v1.Health")) << on_probe;
  EXPECT_FALSE(Contains(on_probe, "kcache.v1.KernelCache")) << on_probe;
}

TEST_F(ProbePortTest, MetricsCountWhatTheDaemonServed) {
  KernelRecord kernel = ::kcache::testing::Record("k", "__global__ void k() {}");
  std::string payload(3000, 'x');
  {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(daemon_.store_path());
    ASSERT_TRUE(store.ok()) << store.status();
    ::kcache::testing::PutSynthetic(**store, kernel, "sm_86", payload);
  }
  StartDaemon(
      {"--no-toolkit", "--warm-start-max-bytes", "0"});  // a store hit, not the warm's answer
  std::string before = HttpGet(port_, "/metrics").body;
  EXPECT_EQ(Sample(before, "kcache_resolve_requests_total"), 0) << before;
  EXPECT_EQ(Sample(before, "kcache_store_artifacts{store=\"" + daemon_.store_path() +
                               "\",role=\"writable\"}"),
            1)
      << before;

  ASSERT_TRUE(CallResolve(*stub_, ById(kernel, 8, 6)).status.ok());  // the store
  ASSERT_TRUE(CallResolve(*stub_, ById(kernel, 8, 6)).status.ok());  // memory
  KernelRecord unknown = ::kcache::testing::Record("u", "__global__ void u() {}");
  EXPECT_EQ(CallResolve(*stub_, ById(unknown, 8, 6)).status.error_code(),
            grpc::StatusCode::NOT_FOUND);

  HttpResponse scraped = HttpGet(port_, "/metrics");
  ASSERT_EQ(scraped.status, 200) << scraped.head;
  EXPECT_TRUE(Contains(scraped.head, "Content-Type: text/plain; version=0.0.4")) << scraped.head;
  const std::string& m = scraped.body;
  EXPECT_EQ(Sample(m, "kcache_resolve_requests_total"), 3) << m;
  EXPECT_EQ(Sample(m, "kcache_resolve_hits_total{tier=\"local_store\"}"), 1) << m;
  EXPECT_EQ(Sample(m, "kcache_resolve_hits_total{tier=\"memory\"}"), 1) << m;
  EXPECT_EQ(Sample(m, "kcache_resolve_rule_total{rule=\"exact_sass\"}"), 2) << m;
  EXPECT_EQ(Sample(m, "kcache_resolve_misses_total{reason=\"unknown_kernel\"}"), 1) << m;
  EXPECT_EQ(Sample(m, "kcache_served_bytes_total"), 2 * payload.size()) << m;
  EXPECT_EQ(Sample(m, "kcache_resolve_duration_seconds_count{outcome=\"memory\"}"), 1) << m;
  EXPECT_EQ(Sample(m, "kcache_resolve_duration_seconds_bucket{outcome=\"memory\",le=\"+Inf\"}"), 1)
      << m;
  EXPECT_EQ(Sample(m, "kcache_resolve_duration_seconds_count{outcome=\"miss\"}"), 1) << m;
  EXPECT_EQ(Sample(m, "kcache_store_up{store=\"" + daemon_.store_path() + "\",role=\"writable\"}"),
            1)
      << m;
  EXPECT_EQ(Sample(m, "kcache_serving"), 1) << m;
  // The same counters as Stat's, by their stable names.
  EXPECT_EQ(::kcache::testing::StatCounter(*stub_, "resolve.hit.local_store"), 1u);
}

TEST_F(ProbePortTest, HealthzAndWhatTheHttpSideRefuses) {
  StartDaemon({"--no-toolkit"});
  HttpResponse health = HttpGet(port_, "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "SERVING\n");
  EXPECT_EQ(HttpGet(port_, "/").status, 404);
  EXPECT_EQ(HttpGet(port_, "/metrics?x=1").status, 200);  // a query string is ignored
  HttpResponse post = HttpRequest(port_, "POST", "/metrics");
  EXPECT_EQ(post.status, 405);
  EXPECT_TRUE(Contains(post.head, "Allow: GET, HEAD")) << post.head;
  HttpResponse head = HttpRequest(port_, "HEAD", "/metrics");
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());
  std::string garbage = ::kcache::testing::RawRequest(port_, "HELLO\r\n\r\n");
  EXPECT_TRUE(Contains(garbage, "400 Bad Request")) << garbage;
  // The daemon still answers after all of it.
  absl::StatusOr<HealthStatus> overall = CheckHealth(probe());
  ASSERT_TRUE(overall.ok()) << overall.status();
}

TEST_F(ProbePortTest, SilentConnectionsBlockNeitherProbesNorShutdown) {
  StartDaemon({"--no-toolkit"});
  std::vector<int> silent;
  for (int i = 0; i < 4; ++i) silent.push_back(::kcache::testing::ConnectLoopback(port_));
  absl::StatusOr<HealthStatus> overall = CheckHealth(probe());
  ASSERT_TRUE(overall.ok()) << overall.status();
  EXPECT_EQ(*overall, HealthStatus::kServing);
  EXPECT_EQ(HttpGet(port_, "/healthz").status, 200);
  auto start = std::chrono::steady_clock::now();
  daemon_.Kill(SIGTERM);
  EXPECT_EQ(daemon_.Wait(std::chrono::seconds(20)), 0) << daemon_.Log();
  // Shutdown wakes the silent connections rather than wait out their read timeout (5 s).
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  for (int fd : silent) close(fd);
}

TEST_F(ProbePortTest, PortInUseIsRefusedWithTheFix) {
  StartDaemon({"--no-toolkit"});
  DaemonProcess second;
  second.options().extra_flags = {"--no-toolkit", "--probe-port", std::to_string(port_)};
  ASSERT_TRUE(second.Spawn().ok());
  EXPECT_EQ(second.Wait(), 1);
  EXPECT_TRUE(Contains(second.Log(), "the port is in use")) << second.Log();
  EXPECT_TRUE(Contains(second.Log(), "--probe-port")) << second.Log();
}

}  // namespace
}  // namespace kcache
