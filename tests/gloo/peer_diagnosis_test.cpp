// Naming the peers a failed gloo operation lost (an internal of the gloo backend: the test sees src/).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gloo/peer_diagnosis.hpp"
#include "support/time_scale.hpp"

using namespace std::chrono_literals;
using idist::gloo_backend::lost_peers;

TEST(PeerDiagnosis, AddressesInGlooMessages) {
  const auto a = idist::gloo_backend::bracketed_addresses(
      "Read error [198.18.0.2]:41234: Connection reset by peer; then [198.18.0.2]:5 and [127.0.0.1]:9");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0], "198.18.0.2");
  EXPECT_EQ(a[1], "127.0.0.1");
}

TEST(PeerDiagnosis, AnIoErrorNamesThePeerByRankAndHost) {
  const idist::rendezvous::PeerTable table{{"h1", "198.18.0.1"}, {"h1", "198.18.0.1"}, {"h2", "198.18.0.2"}};
  const auto s = lost_peers("Read error [198.18.0.2]:41234: Connection reset by peer", false, {0, 1, 2}, 0, table, 1s);
  EXPECT_EQ(s, "lost peer rank 2 (host h2, 198.18.0.2)");
  // Two ranks behind one address: both are named, as candidates.
  const auto two = lost_peers("Connection closed by peer [198.18.0.1]:7", false, {0, 1, 2}, 2, table, 1s);
  EXPECT_EQ(two, "lost peers (one of) rank 0 (host h1, 198.18.0.1), rank 1 (host h1, 198.18.0.1)");
  // Not a member of the failed group: not named.
  EXPECT_EQ(lost_peers("Read error [198.18.0.2]:1", false, {0, 1}, 0, table, 1s), "");
}

TEST(PeerDiagnosis, HostsThatRefuseAnswer) {
  // A listening socket that accepts, and a closed port (refused): both prove the host is up.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  const auto t0 = std::chrono::steady_clock::now();
  const auto up = idist::gloo_backend::hosts_answering({"127.0.0.1", "not-an-address"}, port, 500ms);
  EXPECT_TRUE(up[0]);
  EXPECT_FALSE(up[1]);
  EXPECT_TRUE(idist::gloo_backend::hosts_answering({"127.0.0.1"}, 9, 500ms)[0]);  // refused
  EXPECT_LT(std::chrono::steady_clock::now() - t0, idist::test::scaled(2s));
  ::close(fd);
}

TEST(PeerDiagnosis, ATimeoutAmongRanksOfOneHostProbesNothing) {
  // Peers on this host (the loopback) cannot be lost by the network: nothing to probe, nothing named.
  const idist::rendezvous::PeerTable table{{"h1", "127.0.0.1"}, {"h1", "127.0.0.1"}};
  const auto t0 = std::chrono::steady_clock::now();
  // The probe's bound scales with the assertion's, so that the assertion still tells "no probe" apart.
  EXPECT_EQ(lost_peers("Timed out waiting 1000ms for recv operation to complete", true, {0, 1}, 0, table,
                       idist::test::scaled(2s)),
            "");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, idist::test::scaled(1s));
}
