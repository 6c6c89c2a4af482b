// TCPStore hardening: the job's token, the server's own keys, the handshake timeout, the connection and
// memory caps, duplicate ranks and the listening addresses.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "idist/error.hpp"
#include "raw_store_client.hpp"
#include "rendezvous/store_bind.hpp"
#include "store/tcp_store.hpp"
#include "store/tcp_store_protocol.hpp"
#include "store/tcp_store_server.hpp"
#include "store_test_util.hpp"
#include "support/time_scale.hpp"

namespace {
using namespace std::chrono_literals;
using idist::store::TCPStore;
using idist::store::TCPStoreOptions;
using idist::test::RawStoreClient;
using idist::test::seconds_since;
using Clock = std::chrono::steady_clock;
namespace detail = idist::store::detail;

constexpr const char* kToken = "job-secret-0123456789";

std::vector<char> bytes(std::string_view s) { return {s.begin(), s.end()}; }

std::unique_ptr<TCPStore> client(int port, const std::string& token, int world_size = 0, int rank = -1) {
  return std::make_unique<TCPStore>("127.0.0.1", port, false, world_size, 5s, true,
                                    TCPStoreOptions{.token = token, .rank = rank});
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const idist::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A request frame for SET key=value.
std::vector<char> set_payload(const std::string& key, const std::string& value) {
  detail::Writer w;
  w.str(key);
  w.str(value);
  return w.buffer();
}

TEST(TCPStoreToken, ClientsWithoutTheTokenAreRefusedAndChangeNothing) {
  detail::TCPStoreServer server(0, 0, {.token = kToken});
  auto good = client(server.port(), kToken);
  good->set("k", bytes("original"));

  const auto none = error_of([&] { client(server.port(), ""); });
  EXPECT_NE(none.find("no store token"), std::string::npos) << none;
  EXPECT_NE(none.find("IDIST_STORE_TOKEN"), std::string::npos) << none;
  const auto wrong = error_of([&] { client(server.port(), "guess"); });
  EXPECT_NE(wrong.find("wrong store token"), std::string::npos) << wrong;
  EXPECT_THROW(client(server.port(), "guess"), idist::BackendError);

  {  // raw frames without a handshake: closed, nothing stored
    RawStoreClient raw(server.port());
    raw.send_frame(static_cast<std::uint8_t>(detail::Op::Set), set_payload("k", "attacker"));
    EXPECT_TRUE(raw.closed_by_server(idist::test::scaled(2s)));
  }
  {  // a wrong token, then a SET anyway
    RawStoreClient raw(server.port());
    raw.hello("guess");
    raw.send_frame(static_cast<std::uint8_t>(detail::Op::Set), set_payload("k", "attacker"));
    EXPECT_EQ(raw.read_reply(idist::test::scaled(2s)), detail::Status::Error);
    EXPECT_TRUE(raw.closed_by_server(idist::test::scaled(2s)));
  }
  EXPECT_EQ(good->get_string("k"), "original");
  EXPECT_FALSE(good->check({"attacker"}));
  EXPECT_GE(server.stats().refused, 4u);
}

TEST(TCPStoreToken, AServerWithoutTokenAdmitsAnyHandshake) {
  detail::TCPStoreServer server(0, 0);
  auto a = client(server.port(), "");
  auto b = client(server.port(), "whatever");
  a->set("x", bytes("1"));
  EXPECT_EQ(b->get_string("x"), "1");
}

TEST(TCPStoreReservedKeys, NoClientChangesTheServersBookkeeping) {
  TCPStore server("127.0.0.1", 0, true, 2, 5s, false, {.token = kToken, .rank = 0});
  auto c = client(server.port(), kToken, 2, 1);
  EXPECT_EQ(server.num_joined(), 2);
  EXPECT_THROW(c->set(detail::kWorldSizeKey, bytes("1")), idist::ValueError);
  EXPECT_THROW(c->add(detail::kWorldSizeKey, 5), idist::ValueError);
  EXPECT_THROW(c->set(std::string(detail::kReservedPrefix) + "other", bytes("1")), idist::ValueError);
  const auto msg = error_of([&] { c->add(detail::kWorldSizeKey, -1); });
  EXPECT_NE(msg.find("bookkeeping"), std::string::npos) << msg;
  EXPECT_EQ(c->get_string(detail::kWorldSizeKey), "2");
  EXPECT_EQ(c->num_joined(), 2);
  c->set("ordinary", bytes("fine"));  // the connection survived every refusal
  EXPECT_EQ(server.get_string("ordinary"), "fine");
}

TEST(TCPStoreReservedKeys, AddZeroReadsAReservedKeyWithoutCreatingIt) {
  TCPStore server("127.0.0.1", 0, true, 3, 5s, false);
  const std::string flag = std::string(detail::kReservedPrefix) + "flag";
  EXPECT_EQ(server.add(flag, 0), 0);
  EXPECT_FALSE(server.check({flag}));
  const auto msg = error_of([&] { server.wait_for_workers(300ms); });
  EXPECT_NE(msg.find("1 of 3 workers joined"), std::string::npos) << msg;
}

TEST(TCPStoreLimits, ConnectionsWithoutHandshakeTimeOutButClientsIdleBetweenCallsStay) {
  detail::TCPStoreServer server(0, 0, {.handshake_timeout = 300ms});
  auto c = client(server.port(), "");
  RawStoreClient idle(server.port());
  const auto start = Clock::now();
  EXPECT_TRUE(idle.closed_by_server(idist::test::scaled(3s)));
  EXPECT_LT(seconds_since(start), idist::test::scaled(2.0));
  std::this_thread::sleep_for(600ms);  // twice the handshake timeout, idle
  EXPECT_EQ(server.num_connections(), 1);
  c->set("after-idle", bytes("ok"));
  EXPECT_EQ(c->get_string("after-idle"), "ok");
}

TEST(TCPStoreLimits, TheConnectionCapEvictsConnectionsWithoutHandshakeFirst) {
  detail::TCPStoreServer server(0, 0, {.handshake_timeout = 60s, .max_connections = 16});
  auto early = client(server.port(), "");
  std::vector<std::unique_ptr<RawStoreClient>> idle;
  for (int i = 0; i < 40; ++i) idle.push_back(std::make_unique<RawStoreClient>(server.port()));
  const auto start = Clock::now();
  auto late = client(server.port(), "");
  late->set("k", bytes("v"));
  EXPECT_EQ(early->get_string("k"), "v");
  EXPECT_LT(seconds_since(start), idist::test::scaled(1.0));
  EXPECT_LE(server.num_connections(), 16);
}

TEST(TCPStoreLimits, AnnouncedLengthsAllocateNothingAndBufferedBytesAreCapped) {
  constexpr std::size_t kCap = std::size_t{4} << 20;
  detail::TCPStoreServer server(0, 0, {.max_buffered_bytes = kCap});
  {  // before the handshake: an announced 64 MiB is refused at once
    RawStoreClient raw(server.port());
    raw.send_frame(static_cast<std::uint8_t>(detail::Op::Hello), {}, 64u << 20);
    EXPECT_TRUE(raw.closed_by_server(idist::test::scaled(1s)));
  }
  // after a handshake: 20 connections announce 64 MiB each and send 512 KiB (10 MiB together)
  std::vector<std::unique_ptr<RawStoreClient>> raws;
  const std::vector<char> chunk(512 << 10, 'x');
  for (int i = 0; i < 20; ++i) {
    auto& raw = raws.emplace_back(std::make_unique<RawStoreClient>(server.port()));
    raw->hello("");
    raw->read_reply(1s);
    raw->send_frame(static_cast<std::uint8_t>(detail::Op::Set), chunk,
                    static_cast<std::uint32_t>(detail::kMaxRequestPayload));
  }
  std::this_thread::sleep_for(300ms);
  const auto stats = server.stats();
  EXPECT_LE(stats.peak_buffered_bytes, kCap);
  EXPECT_GT(stats.refused, 0u);  // those that went past the cap were closed
  auto c = client(server.port(), "");
  c->set("small", bytes("fits"));
  EXPECT_EQ(c->get_string("small"), "fits");
}

TEST(TCPStoreJoin, ARankClaimedTwiceIsReportedByTheServerAndTheSecondClaimant) {
  auto server = std::make_unique<TCPStore>("127.0.0.1", 0, true, 3, 10s, false, TCPStoreOptions{.rank = 0});
  auto first = client(server->port(), "", 3, 1);
  const auto start = Clock::now();
  const auto second = error_of([&] { client(server->port(), "", 3, 1); });
  EXPECT_NE(second.find("rank 1 was claimed by two processes"), std::string::npos) << second;
  std::string at_server;
  try {
    server->wait_for_workers(10s);
  } catch (const idist::ValueError& e) {
    at_server = e.what();
  }
  EXPECT_NE(at_server.find("rank 1 was claimed by two processes"), std::string::npos) << at_server;
  EXPECT_LT(seconds_since(start), idist::test::scaled(2.0));  // at once, not at the join timeout
  const auto at_first = error_of([&] { first->wait_for_workers(10s); });
  EXPECT_NE(at_first.find("rank 1 was claimed by two processes"), std::string::npos) << at_first;
}

TEST(TCPStoreBind, ALoopbackHostListensOnTheLoopbackOnly) {
  TCPStore server("127.0.0.1", 0, true, 1, 5s);
  EXPECT_EQ(server.server_addresses(), std::vector<std::string>{"127.0.0.1"});
  detail::TCPStoreServer explicit_bind(0, 0, {.bind_addresses = {"127.0.0.1"}});
  EXPECT_EQ(explicit_bind.addresses(), std::vector<std::string>{"127.0.0.1"});
  EXPECT_THROW(detail::TCPStoreServer(0, 0, {.bind_addresses = {"not-an-ip"}}), idist::ValueError);
  // Another local address of this host does not reach a loopback-only server.
  for (const auto& i : idist::rendezvous::list_interfaces()) {
    if (i.loopback) continue;
    asio::io_context io;
    asio::ip::tcp::socket s(io);
    std::error_code ec;
    s.connect(asio::ip::tcp::endpoint(asio::ip::make_address(i.address), static_cast<unsigned short>(server.port())),
              ec);
    EXPECT_TRUE(ec) << "reached the store through " << i.name << " " << i.address;
  }
}

TEST(StoreBindRule, EachCaseOfTheRule) {
  using idist::rendezvous::choose_store_bind_addresses;
  using idist::rendezvous::InterfaceQuery;
  using V = std::vector<std::string>;
  const std::vector<idist::rendezvous::InterfaceAddress> ifs = {{"lo", "127.0.0.1", true},
                                                                {"eth0", "198.18.0.2", false}};
  InterfaceQuery q;
  q.interfaces = ifs;
  q.master_addr = "127.0.0.1";
  EXPECT_EQ(choose_store_bind_addresses(q), V{"127.0.0.1"});
  q.master_addr = "localhost";
  EXPECT_EQ(choose_store_bind_addresses(q), V{"127.0.0.1"});
  q.master_addr = "node0";  // does not resolve
  EXPECT_EQ(choose_store_bind_addresses(q), V{});
  q.master_ip = "127.0.1.1";  // Debian's own-host-name mapping
  q.route_source = "127.0.1.1";
  q.nnodes = 1;
  EXPECT_EQ(choose_store_bind_addresses(q), V{"127.0.1.1"});
  q.nnodes = 2;
  EXPECT_EQ(choose_store_bind_addresses(q), (V{"127.0.1.1", "198.18.0.2"}));
  q.ifname = "lo";  // a wrong GLOO_SOCKET_IFNAME must not hide the store from the other hosts
  EXPECT_EQ(choose_store_bind_addresses(q), (V{"127.0.1.1", "198.18.0.2"}));
  q.ifname.reset();
  q.master_ip = "198.18.0.2";  // this host's address
  q.route_source = "198.18.0.2";
  EXPECT_EQ(choose_store_bind_addresses(q), V{"198.18.0.2"});
  q.master_ip = "203.0.113.9";  // another host's (a forwarded port): every interface
  q.route_source = "198.18.0.2";
  EXPECT_EQ(choose_store_bind_addresses(q), V{});
}

}  // namespace
