// ProbeListener: the probe port, one TCP listener serving two protocols. gRPC connections (the
// kubelet's gRPC probes, grpc_health_probe, grpcurl with reflection) are handed, connected, to
// a gRPC server that has the health and reflection services only; plain HTTP/1.x requests get
// GET /metrics (Prometheus text) and GET /healthz. A connection is told apart by its first
// bytes: a gRPC client opens with the HTTP/2 preface "PRI * HTTP/2.0...", an HTTP/1 client
// with its method. The kcache.v1.KernelCache service is never reachable here.
#ifndef KCACHE_DAEMON_HOST_PROBE_LISTENER_H_
#define KCACHE_DAEMON_HOST_PROBE_LISTENER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace grpc {
class Server;
}

namespace kcache {

struct ProbeListenerOptions {
  std::string address = "127.0.0.1";  // numeric IPv4/IPv6 or a host name; "0.0.0.0" for all
  int port = 0;                       // 0: an ephemeral port (see port())
  // The gRPC server that takes over gRPC connections: started, with no listening port of its
  // own; borrowed, must outlive the listener.
  grpc::Server* grpc_server = nullptr;
  // Renders /metrics; called on a connection's thread, possibly several at once.
  std::function<std::string()> metrics;
  // Whether the daemon serves (GET /healthz: 200 "SERVING", else 503 "NOT_SERVING").
  std::function<bool()> serving;
  // A connection that has not sent its whole request head (or a gRPC preface) by then is
  // closed; also the send timeout of an answer.
  absl::Duration read_timeout = absl::Seconds(5);
  // Connections waiting for their first bytes or their request head. They cost a descriptor
  // each, never a thread; past the bound the oldest is closed to make room, so connections
  // left idle (by accident or on purpose) cannot keep a probe out.
  int max_pending_connections = 256;
  // HTTP requests answered at once (each on a short-lived thread); more are answered 503.
  int max_http_connections = 32;
};

// Thread-safe. One thread accepts and reads the connections until they say what they are;
// each complete HTTP request is answered on a short-lived thread of its own and the connection
// closed (Connection: close); gRPC connections are handed over and live on in the gRPC server.
class ProbeListener {
 public:
  // Binds and starts accepting. FailedPrecondition naming the address when it cannot bind.
  static absl::StatusOr<std::unique_ptr<ProbeListener>> Start(ProbeListenerOptions options);

  ~ProbeListener();  // Stop()

  // The port bound.
  int port() const { return port_; }

  // Accepts put off for want of descriptors or memory (daemon/service/accept_rules.h).
  uint64_t failed() const;

  // Stops accepting, closes the port and the connections still waiting for a request, and
  // waits for the requests being answered. gRPC connections already handed over stay with the gRPC
  // server, which the caller shuts down after this. Idempotent.
  void Stop();

 private:
  class Impl;
  explicit ProbeListener(std::unique_ptr<Impl> impl, int port);
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_HOST_PROBE_LISTENER_H_
