// Interface selection (rendezvous::choose_interface / select_interface) and the peer table
// (exchange_peers, unreachable_addresses) that every gloo rank checks before connecting.
#include <gtest/gtest.h>

#include <thread>

#include "idist/error.hpp"
#include "rendezvous/network_interface.hpp"
#include "rendezvous/peer_table.hpp"
#include "store/tcp_store.hpp"
#include "support/time_scale.hpp"

using namespace std::chrono_literals;
using idist::rendezvous::choose_interface;
using idist::rendezvous::InterfaceAddress;
using idist::rendezvous::InterfaceQuery;
using idist::rendezvous::PeerTable;

namespace {

// A host as the emulated cluster makes it: loopback, one bridge-facing interface, a container bridge.
InterfaceQuery query(std::string master, std::optional<std::string> ip, std::optional<std::string> route, int nnodes) {
  InterfaceQuery q;
  q.master_addr = std::move(master);
  q.master_ip = std::move(ip);
  q.route_source = std::move(route);
  q.nnodes = nnodes;
  q.interfaces = {{"lo", "127.0.0.1", true}, {"docker0", "172.17.0.1", false}, {"eth0", "198.18.0.2", false}};
  return q;
}

std::string error_of(const InterfaceQuery& q) {
  try {
    choose_interface(q);
  } catch (const idist::BackendError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ChooseInterface, RemoteMasterUsesTheAddressThatRoutesToIt) {
  const auto c = choose_interface(query("node1", "198.18.0.1", "198.18.0.2", 2));
  EXPECT_EQ(c.name, "eth0");
  EXPECT_EQ(c.address, "198.18.0.2");
  EXPECT_NE(c.describe().find("routes to MASTER_ADDR node1 (198.18.0.1)"), std::string::npos) << c.describe();
}

TEST(ChooseInterface, LocalMasterOnOneNodeUsesTheLoopback) {
  // Debian resolves a host's own name to 127.0.1.1: the route to it leaves from the loopback.
  const auto c = choose_interface(query("node1", "127.0.1.1", "127.0.0.1", 1));
  EXPECT_EQ(c.name, "lo");
  EXPECT_EQ(c.address, "127.0.0.1");
}

TEST(ChooseInterface, LocalMasterOfAMultiNodeWorldAvoidsLoopbackAndContainerBridges) {
  const auto c = choose_interface(query("node1", "127.0.1.1", "127.0.0.1", 2));
  EXPECT_EQ(c.name, "eth0");
  EXPECT_EQ(c.address, "198.18.0.2");
}

TEST(ChooseInterface, IfnameVariableWins) {
  auto q = query("node1", "198.18.0.1", "198.18.0.2", 2);
  q.ifname = "docker0,eth0";  // the first name of a list, as PyTorch
  EXPECT_EQ(choose_interface(q).address, "172.17.0.1");
}

TEST(ChooseInterface, ErrorsNameMasterCandidatesAndVariable) {
  auto unknown = query("node1", "198.18.0.1", "198.18.0.2", 2);
  unknown.ifname = "ib0";
  const std::string e1 = error_of(unknown);
  EXPECT_NE(e1.find("GLOO_SOCKET_IFNAME names 'ib0'"), std::string::npos) << e1;
  EXPECT_NE(e1.find("eth0 198.18.0.2"), std::string::npos) << e1;

  const std::string e2 = error_of(query("nosuchhost", std::nullopt, std::nullopt, 2));
  EXPECT_NE(e2.find("MASTER_ADDR 'nosuchhost' does not resolve"), std::string::npos) << e2;
  EXPECT_NE(e2.find("GLOO_SOCKET_IFNAME is not set"), std::string::npos) << e2;

  const std::string e3 = error_of(query("node9", "198.18.1.9", std::nullopt, 2));
  EXPECT_NE(e3.find("no local address routes to MASTER_ADDR 'node9'"), std::string::npos) << e3;

  auto only_loopback = query("node1", "127.0.1.1", "127.0.0.1", 2);
  only_loopback.interfaces = {{"lo", "127.0.0.1", true}};
  const std::string e4 = error_of(only_loopback);
  EXPECT_NE(e4.find("spans 2 nodes"), std::string::npos) << e4;
  EXPECT_NE(e4.find("candidate interfaces: lo 127.0.0.1"), std::string::npos) << e4;
}

TEST(SelectInterface, LoopbackMasterOnThisMachine) {
  ::unsetenv("GLOO_SOCKET_IFNAME");
  const auto c = idist::rendezvous::select_interface("127.0.0.1", 1);
  EXPECT_EQ(c.address, "127.0.0.1");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(idist::rendezvous::select_interface("no-such-host.invalid", 2), idist::BackendError);
  EXPECT_LT(std::chrono::steady_clock::now() - t0,
            idist::test::scaled(10s));  // an error within seconds, never a wait to the timeout
}

TEST(PeerTable, LoopbackAcrossHostsIsRefusedNamingTheRank) {
  const PeerTable ok_one_host{{"a", "127.0.0.1"}, {"a", "127.0.0.1"}};
  EXPECT_FALSE(idist::rendezvous::unreachable_addresses(ok_one_host, "GLOO_SOCKET_IFNAME"));
  const PeerTable ok_two_hosts{{"a", "198.18.0.1"}, {"b", "198.18.0.2"}};
  EXPECT_FALSE(idist::rendezvous::unreachable_addresses(ok_two_hosts, "GLOO_SOCKET_IFNAME"));
  const PeerTable bad{{"a", "198.18.0.1"}, {"a", "198.18.0.1"}, {"b", "127.0.1.1"}};
  const auto why = idist::rendezvous::unreachable_addresses(bad, "GLOO_SOCKET_IFNAME");
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("rank 2 (host b, 127.0.1.1)"), std::string::npos) << *why;
  EXPECT_NE(why->find("GLOO_SOCKET_IFNAME"), std::string::npos) << *why;
  EXPECT_EQ(idist::rendezvous::describe_rank(bad, 1), "rank 1 (host a, 198.18.0.1)");
  EXPECT_EQ(idist::rendezvous::describe_rank(bad, 7), "rank 7");
}

TEST(PeerTable, EncodeDecodeAndMalformed) {
  const PeerTable t{{"h1", "198.18.0.1"}, {"h2", "198.18.0.2"}};
  const auto back = idist::rendezvous::decode_peer_table(idist::rendezvous::encode_peer_table(t), 2);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].host, "h2");
  EXPECT_EQ(back[1].address, "198.18.0.2");
  EXPECT_THROW(idist::rendezvous::decode_peer_table("h1 198.18.0.1\n", 2), idist::BackendError);
}

TEST(PeerTable, ExchangeGivesEveryRankTheSameTable) {
  constexpr int n = 3;
  auto server = std::make_unique<idist::store::TCPStore>("127.0.0.1", 0, true, n, 10s, false);
  std::vector<PeerTable> tables(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        idist::store::TCPStore client("127.0.0.1", server->port(), false, n, 10s);
        tables[r] = idist::rendezvous::exchange_peers(
            client, r, n, {"host" + std::to_string(r / 2), "10.0.0." + std::to_string(r)}, 5s);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    ASSERT_EQ(tables[r].size(), std::size_t(n));
    for (int p = 0; p < n; ++p) {
      EXPECT_EQ(tables[r][p].host, "host" + std::to_string(p / 2));
      EXPECT_EQ(tables[r][p].address, "10.0.0." + std::to_string(p));
    }
  }
}
