// Who a connection is (daemon/service/peer_identity.h): the kernel's credentials for a unix
// socket, read from real sockets of this process; the address for TCP; gRPC's peer strings for
// the connections kcached handed over, parsed into the account that per-client bounds key on.
#include "daemon/service/peer_identity.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace kcache {
namespace {

TEST(PeerIdentityTest, AUnixSocketsPeerIsTheKernelsUserAndProcess) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  absl::StatusOr<ucred> cred = PeerCredentials(fds[0]);
  ASSERT_TRUE(cred.ok()) << cred.status();
  EXPECT_EQ(cred->uid, getuid());
  EXPECT_EQ(cred->pid, getpid());
  Peer peer = PeerOfSocket(fds[0]);
  EXPECT_EQ(peer.account, absl::StrCat("uid ", getuid()));
  EXPECT_EQ(peer.words, absl::StrCat("uid ", getuid(), " pid ", getpid()));
  close(fds[0]);
  close(fds[1]);
}

TEST(PeerIdentityTest, ATcpPeerIsItsAddressAndTheAccountLeavesOutThePort) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  socklen_t size = sizeof(address);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size), 0);
  int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  int accepted = accept(listener, nullptr, nullptr);
  ASSERT_GE(accepted, 0);
  sockaddr_in mine{};
  size = sizeof(mine);
  ASSERT_EQ(getsockname(client, reinterpret_cast<sockaddr*>(&mine), &size), 0);
  Peer peer = PeerOfSocket(accepted);
  EXPECT_EQ(peer.account, "ipv4:127.0.0.1");
  EXPECT_EQ(peer.words, absl::StrCat("ipv4:127.0.0.1:", ntohs(mine.sin_port)));
  for (int fd : {accepted, client, listener}) close(fd);
}

TEST(PeerIdentityTest, AHandedOverConnectionIsWhoItsDescriptorWasAcceptedFrom) {
  PeerDirectory peers;
  peers.Accepted(7, ucred{4242, 1000, 1000});
  EXPECT_EQ(peers.Who("fd:7").account, "uid 1000");
  EXPECT_EQ(peers.Who("fd:7").words, "uid 1000 pid 4242");
  // The descriptor number taken by a later connection: the later one's credentials.
  peers.Accepted(7, ucred{99, 2000, 2000});
  EXPECT_EQ(peers.Who("fd:7").words, "uid 2000 pid 99");
  // A pid the kernel could not map into kcached's namespace is left out.
  peers.Accepted(8, ucred{0, 3000, 3000});
  EXPECT_EQ(peers.Who("fd:8").words, "uid 3000");
}

TEST(PeerIdentityTest, PeersWithoutCredentialsAreNamedSoWithoutTakingAnotherUsersAccount) {
  PeerDirectory peers;
  Peer unknown = peers.Who("fd:9");
  EXPECT_EQ(unknown.account, "connection fd:9 (credentials unknown)");
  EXPECT_EQ(peers.Who("fd:x").account, "connection fd:x (credentials unknown)");
  EXPECT_EQ(peers.Who("unix:").account, "unix socket (credentials unknown)");
  EXPECT_EQ(peers.Who("ipv4:10.0.0.7:51234").account, "ipv4:10.0.0.7");
  EXPECT_EQ(peers.Who("ipv4:10.0.0.7:51234").words, "ipv4:10.0.0.7:51234");
  EXPECT_EQ(peers.Who("ipv6:[fd00::7]:443").account, "ipv6:[fd00::7]");
  EXPECT_EQ(peers.Who("ipv6:[fd00::7]").account, "ipv6:[fd00::7]");
}

}  // namespace
}  // namespace kcache
