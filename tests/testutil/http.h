// Plain TCP and HTTP/1.1 for tests of the probe port: a free port, a raw request, a GET.
#ifndef KCACHE_TESTS_TESTUTIL_HTTP_H_
#define KCACHE_TESTS_TESTUTIL_HTTP_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <random>
#include <string>

namespace kcache::testing {

// True when 127.0.0.1:port can be bound now.
inline bool PortFree(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// A TCP port on 127.0.0.1 in [low, high) that is free now: picked at random and checked; 0 when
// 200 picks found none. Tests pick their listening ports below Linux's ephemeral range (32768
// and up, /proc/sys/net/ipv4/ip_local_port_range): a port there that is free now may be handed
// to any test's outgoing connection before the server it was picked for binds it.
inline int FreePortIn(int low, int high) {
  std::mt19937 random(std::random_device{}());
  for (int i = 0; i < 200; ++i) {
    int port = low + static_cast<int>(random() % static_cast<unsigned>(high - low));
    if (PortFree(port)) return port;
  }
  return 0;
}

// A free port for a kcached's probe port or Redis door: [27000, 32700), apart from the Redis
// servers' ports and cluster buses (tests/testutil/redis_cluster.h).
inline int FreePort() { return FreePortIn(27000, 32700); }

// A TCP connection to 127.0.0.1:port (-1 when refused), with a 10 s receive timeout.
inline int ConnectLoopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// Sends `request` as is and returns everything the server sent until it closed ("" when the
// connection was refused).
inline std::string RawRequest(int port, const std::string& request) {
  int fd = ConnectLoopback(port);
  if (fd < 0) return "";
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string response;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) response.append(buf, static_cast<size_t>(n));
  close(fd);
  return response;
}

struct HttpResponse {
  int status = 0;  // 0 when no valid answer came
  std::string head;
  std::string body;
};

inline HttpResponse HttpRequest(int port, const std::string& method, const std::string& path) {
  std::string raw = RawRequest(
      port, method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: test\r\n\r\n");
  HttpResponse out;
  size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos || raw.compare(0, 9, "HTTP/1.1 ") != 0) return out;
  out.status = std::stoi(raw.substr(9, 3));
  out.head = raw.substr(0, end);
  out.body = raw.substr(end + 4);
  return out;
}

inline HttpResponse HttpGet(int port, const std::string& path) {
  return HttpRequest(port, "GET", path);
}

// The value of the sample in `metrics` (a /metrics body) whose line starts with `series`
// ("name{labels}"), or -1.
inline double MetricSample(const std::string& metrics, const std::string& series) {
  size_t at = metrics.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(metrics.substr(at + series.size() + 2));
}

// The value of `series` on kcached's /metrics at 127.0.0.1:port now (-1 when not answered).
inline double ScrapeSample(int port, const std::string& series) {
  return MetricSample(HttpGet(port, "/metrics").body, series);
}

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_HTTP_H_
