// TCPStore in one process: clients on threads, raw sockets for misbehaving clients.
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <asio.hpp>

#include "idist/error.hpp"
#include "store/tcp_store.hpp"
#include "store/tcp_store_protocol.hpp"
#include "store/tcp_store_server.hpp"
#include "store_test_util.hpp"
#include "support/time_scale.hpp"

namespace {
using namespace std::chrono_literals;
using idist::store::TCPStore;
using idist::test::free_port;
using idist::test::seconds_since;
using Clock = std::chrono::steady_clock;
namespace detail = idist::store::detail;

std::vector<char> bytes(std::string_view s) { return {s.begin(), s.end()}; }

// A server on a free port, expecting `world_size` clients, not waiting for them in its constructor.
std::unique_ptr<TCPStore> make_server(int world_size = 1, std::chrono::milliseconds timeout = 10s) {
  return std::make_unique<TCPStore>("127.0.0.1", 0, true, world_size, timeout, false);
}

std::unique_ptr<TCPStore> make_client(const TCPStore& server, std::chrono::milliseconds timeout = 10s) {
  return std::make_unique<TCPStore>("127.0.0.1", server.port(), false, server.world_size(), timeout);
}

// A client that speaks raw bytes (for protocol violations), after a valid handshake.
class RawClient {
 public:
  explicit RawClient(int port) : socket_(io_) {
    socket_.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
    detail::Writer w;
    w.u32(detail::kProtocolVersion);
    w.str("");
    send_frame(static_cast<std::uint8_t>(detail::Op::Hello), w.buffer());
    std::array<unsigned char, detail::kHeaderBytes> reply{};
    asio::read(socket_, asio::buffer(reply));
  }
  void send(const void* data, std::size_t size) { asio::write(socket_, asio::buffer(data, size)); }
  void send(const std::vector<char>& data) { send(data.data(), data.size()); }
  // A whole request frame with the given opcode and payload.
  void send_frame(std::uint8_t code, const std::vector<char>& payload) {
    const auto h = detail::encode_header(code, static_cast<std::uint32_t>(payload.size()));
    send(h.data(), h.size());
    send(payload);
  }
  // True when the server closes the connection within `timeout` (EOF or reset); false when it stays open.
  bool closed_by_server(std::chrono::milliseconds timeout) {
    pollfd p{socket_.native_handle(), POLLIN, 0};
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char buf[4096];
      const auto n = ::recv(socket_.native_handle(), buf, sizeof buf, 0);
      if (n <= 0) return true;  // 0: EOF, < 0: reset
    }
  }
  void close() { socket_.close(); }

 private:
  asio::io_context io_;
  asio::ip::tcp::socket socket_;
};

// A well-behaved client still gets service: the property every misbehaviour test ends with.
void expect_server_serves(const TCPStore& server, const std::string& key) {
  auto client = make_client(server, 5s);
  client->set(key, bytes("still-serving"));
  EXPECT_EQ(client->get_string(key), "still-serving");
  EXPECT_EQ(server.port(), client->port());
}

}  // namespace

TEST(TCPStore, SetGetOverwriteCheck) {
  auto server = make_server();
  server->set("a", bytes("1"));
  EXPECT_EQ(server->get("a"), bytes("1"));
  server->set("a", bytes("two"));
  EXPECT_EQ(server->get_string("a"), "two");
  server->set("empty", {});
  EXPECT_TRUE(server->get("empty").empty());
  EXPECT_TRUE(server->check({"a", "empty"}));
  EXPECT_FALSE(server->check({"a", "missing"}));
  EXPECT_TRUE(server->check({}));
  // Binary values with zero bytes survive.
  std::vector<char> binary = {'\0', '\x01', '\xff', '\0'};
  server->set("bin", binary);
  EXPECT_EQ(server->get("bin"), binary);
  EXPECT_EQ(server->describe(), "tcp://127.0.0.1:" + std::to_string(server->port()));
}

TEST(TCPStore, AddIsACounterStoredAsText) {
  auto server = make_server();
  EXPECT_EQ(server->add("c", 5), 5);
  EXPECT_EQ(server->add("c", -2), 3);
  EXPECT_EQ(server->add("c", 0), 3);
  EXPECT_EQ(server->get_string("c"), "3");
  server->set("n", bytes("41"));
  EXPECT_EQ(server->add("n", 1), 42);
}

TEST(TCPStore, AddOnNonIntegerIsAValueErrorAndTheConnectionSurvives) {
  auto server = make_server();
  server->set("text", bytes("abc"));
  try {
    server->add("text", 1);
    FAIL() << "expected ValueError";
  } catch (const idist::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("'text'"), std::string::npos) << e.what();
  }
  server->set("max", bytes(std::to_string(INT64_MAX)));
  EXPECT_THROW(server->add("max", 1), idist::ValueError);
  EXPECT_EQ(server->add("ok", 2), 2);
}

TEST(TCPStore, KeyAndValueBounds) {
  auto server = make_server();
  EXPECT_THROW(server->set("", bytes("x")), idist::ValueError);
  EXPECT_THROW(server->get(""), idist::ValueError);
  EXPECT_THROW(server->add(std::string(idist::store::kMaxKeyBytes + 1, 'k'), 1), idist::ValueError);
  EXPECT_THROW(server->wait({"ok", ""}, 10ms), idist::ValueError);
  const std::string longest(idist::store::kMaxKeyBytes, 'k');
  server->set(longest, bytes("v"));
  EXPECT_EQ(server->get_string(longest), "v");
  std::vector<char> too_big(idist::store::kMaxValueBytes + 1, 'x');
  EXPECT_THROW(server->set("big", too_big), idist::ValueError);
  too_big.pop_back();  // exactly the limit is accepted
  too_big[12345] = 'y';
  server->set("big", too_big);
  EXPECT_EQ(server->get("big"), too_big);
}

TEST(TCPStore, BadConstructorArguments) {
  EXPECT_THROW(TCPStore("", 1234, false, 1, 1s), idist::ValueError);
  EXPECT_THROW(TCPStore("127.0.0.1", 0, false, 1, 1s), idist::ValueError);
  EXPECT_THROW(TCPStore("127.0.0.1", 70000, true, 1, 1s), idist::ValueError);
  EXPECT_THROW(TCPStore("127.0.0.1", 0, true, 1, 0ms), idist::ValueError);
}

TEST(TCPStore, ClientExpectingAnotherWorldSizeIsRejected) {
  auto server = make_server(4);
  try {
    TCPStore client("127.0.0.1", server->port(), false, 2, 2s);
    FAIL() << "expected ValueError";
  } catch (const idist::ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("serves a world of 4 processes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("world_size = 2"), std::string::npos) << msg;
  }
  EXPECT_EQ(server->num_joined(), 1);                           // the stranger was not counted
  TCPStore unknown("127.0.0.1", server->port(), false, 0, 2s);  // a client that does not know the size is fine
  TCPStore right("127.0.0.1", server->port(), false, 4, 2s);
  EXPECT_EQ(server->num_joined(), 3);
}

TEST(TCPStore, PortInUseIsABackendError) {
  auto server = make_server();
  try {
    TCPStore second("127.0.0.1", server->port(), true, 1, 1s, false);
    FAIL() << "expected BackendError";
  } catch (const idist::BackendError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(server->port())), std::string::npos) << e.what();
  }
}

TEST(TCPStore, WaitReturnsWhenAnotherClientSets) {
  auto server = make_server(2);
  auto client = make_client(*server);
  const auto start = Clock::now();
  std::thread setter([&] {
    std::this_thread::sleep_for(200ms);
    client->set("late", bytes("here"));
  });
  server->wait({"late"}, 5s);
  const double waited = seconds_since(start);
  setter.join();
  EXPECT_GE(waited, 0.15);
  EXPECT_LT(waited, idist::test::scaled(2.0));
  EXPECT_EQ(server->get_string("late"), "here");
}

TEST(TCPStore, GetBlocksUntilTheKeyExists) {
  auto server = make_server(2);
  auto client = make_client(*server);
  std::thread setter([&] {
    std::this_thread::sleep_for(150ms);
    server->set("k", bytes("v"));
  });
  EXPECT_EQ(client->get_string("k"), "v");
  setter.join();
}

TEST(TCPStore, WaitTimesOutWithinTimeoutPlusSlackAndNamesKeysAndJoinCount) {
  auto server = make_server(4);
  server->set("present", bytes("1"));
  const auto start = Clock::now();
  try {
    server->wait({"present", "absent"}, 300ms);
    FAIL() << "expected TimeoutError";
  } catch (const idist::TimeoutError& e) {
    const double elapsed = seconds_since(start);
    EXPECT_GE(elapsed, 0.29);
    EXPECT_LT(elapsed, 0.3 + idist::test::scaled(0.7));
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'absent'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("missing 'absent'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("127.0.0.1:" + std::to_string(server->port())), std::string::npos) << msg;
    EXPECT_NE(msg.find("1 of 4 workers joined"), std::string::npos) << msg;
    EXPECT_NE(msg.find("timed out after 0.3"), std::string::npos) << msg;
  }
  // The connection is still usable after a timeout.
  server->set("after", bytes("x"));
  EXPECT_EQ(server->get_string("after"), "x");
}

TEST(TCPStore, GetUsesTheStoreTimeout) {
  auto server = make_server(1, 400ms);
  const auto start = Clock::now();
  EXPECT_THROW(server->get("never"), idist::TimeoutError);
  const double elapsed = seconds_since(start);
  EXPECT_GE(elapsed, 0.39);
  EXPECT_LT(elapsed, idist::test::scaled(1.2));
}

TEST(TCPStore, WaitWithoutTimeoutArgumentUsesTheStoreTimeout) {
  auto server = make_server(1, 300ms);
  const auto start = Clock::now();
  EXPECT_THROW(server->wait({"never"}), idist::TimeoutError);
  EXPECT_LT(seconds_since(start), idist::test::scaled(1.0));
  server->set("k", bytes("v"));
  server->wait({"k"});  // present: returns at once
}

TEST(TCPStore, ServerWaitsForWorkersAndReportsKOfN) {
  const int port = free_port();
  std::atomic<bool> joined{false};
  std::thread worker([&] {
    TCPStore client("127.0.0.1", port, false, 3, 5s);  // retries until the server listens
    joined = true;
    std::this_thread::sleep_for(1500ms);  // outlive the server's failed constructor
  });
  const auto start = Clock::now();
  try {
    TCPStore server("127.0.0.1", port, true, 3, 800ms);  // 3 expected, 2 arrive (itself and the worker)
    FAIL() << "expected TimeoutError";
  } catch (const idist::TimeoutError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("2 of 3 workers joined"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(port)), std::string::npos) << msg;
  }
  EXPECT_LT(seconds_since(start), idist::test::scaled(2.0));
  worker.join();
  EXPECT_TRUE(joined);
}

TEST(TCPStore, ServerConstructorReturnsOnceAllWorkersJoined) {
  const int port = free_port();
  std::vector<std::thread> workers;
  std::atomic<int> done{0};
  for (int i = 0; i < 3; ++i)
    workers.emplace_back([&] {
      TCPStore client("127.0.0.1", port, false, 4, 10s);
      client.wait({"release"}, 10s);
      ++done;
    });
  TCPStore server("127.0.0.1", port, true, 4, 10s);  // blocks until the 3 workers and itself joined
  EXPECT_EQ(server.num_joined(), 4);
  server.set("release", bytes("1"));
  for (auto& t : workers) t.join();
  EXPECT_EQ(done, 3);
}

TEST(TCPStore, ClientStartedBeforeTheServerConnectsOnceItListens) {
  const int port = free_port();
  std::string got;
  std::thread client_thread([&] {
    TCPStore client("127.0.0.1", port, false, 2, 10s);
    got = client.get_string("greeting");
  });
  std::this_thread::sleep_for(400ms);
  TCPStore server("127.0.0.1", port, true, 2, 10s);
  server.set("greeting", bytes("hello"));
  client_thread.join();
  EXPECT_EQ(got, "hello");
}

TEST(TCPStore, ConnectTimesOutWhenNoServerListens) {
  const int port = free_port();
  const auto start = Clock::now();
  try {
    TCPStore client("127.0.0.1", port, false, 2, 500ms);
    FAIL() << "expected TimeoutError";
  } catch (const idist::TimeoutError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << msg;
    EXPECT_NE(msg.find("could not connect"), std::string::npos) << msg;
  }
  const double elapsed = seconds_since(start);
  EXPECT_GE(elapsed, 0.45);
  EXPECT_LT(elapsed, idist::test::scaled(1.0));
}

TEST(TCPStore, UnresponsiveServerTimesOutEveryCall) {
  // A listening socket that never answers: the kernel completes the TCP handshake, nothing replies.
  asio::io_context io;
  asio::ip::tcp::acceptor silent(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const int port = silent.local_endpoint().port();
  const auto start = Clock::now();
  try {
    TCPStore client("127.0.0.1", port, false, 2, 400ms);  // its join (an add) gets no response
    FAIL() << "expected TimeoutError";
  } catch (const idist::TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("no response"), std::string::npos) << e.what();
  }
  EXPECT_LT(seconds_since(start), idist::test::scaled(1.0));
}

TEST(TCPStore, ConcurrentClientsOnThreads) {
  constexpr int kClients = 8;
  constexpr int kAdds = 100;
  auto server = make_server(kClients + 1);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] {
      try {
        auto client = make_client(*server);
        for (int j = 0; j < kAdds; ++j) client->add("counter", 1);
        client->set("key" + std::to_string(i), bytes("value" + std::to_string(i)));
        for (int k = 0; k < kClients; ++k)
          if (client->get_string("key" + std::to_string(k)) != "value" + std::to_string(k)) ++failures;
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        ++failures;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(server->add("counter", 0), kClients * kAdds);
}

TEST(TCPStore, OneClientSharedByThreads) {
  auto server = make_server();
  auto client = make_client(*server);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      for (int j = 0; j < 100; ++j) {
        client->add("shared", 1);
        const auto key = fmt::format("t{}_{}", i, j);
        client->set(key, bytes(key));
        EXPECT_EQ(client->get_string(key), key);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(server->add("shared", 0), 400);
}

TEST(TCPStore, ClientDisconnectingMidRequestLeavesTheServerServing) {
  auto server = make_server();
  {  // half a header
    RawClient raw(server->port());
    const auto h = detail::encode_header(static_cast<std::uint8_t>(detail::Op::Set), 100);
    raw.send(h.data(), 5);
    raw.close();
  }
  {  // a header announcing 100 bytes, then 10 of them
    RawClient raw(server->port());
    const auto h = detail::encode_header(static_cast<std::uint8_t>(detail::Op::Set), 100);
    raw.send(h.data(), h.size());
    raw.send(std::vector<char>(10, 'x'));
    raw.close();
  }
  {  // a WAIT that is pending when the client hangs up; the key is set afterwards
    RawClient raw(server->port());
    detail::Writer w;
    w.u64(60000);
    w.u32(1);
    w.str("pending-key");
    raw.send_frame(static_cast<std::uint8_t>(detail::Op::Wait), w.buffer());
    std::this_thread::sleep_for(50ms);
    raw.close();
  }
  std::this_thread::sleep_for(100ms);
  server->set("pending-key", bytes("1"));  // must not write to the departed waiter
  expect_server_serves(*server, "after-disconnects");
}

TEST(TCPStore, GarbageBytesCloseThatConnectionOnly) {
  auto server = make_server();
  auto bystander = make_client(*server);  // connected before, must keep working
  std::mt19937 rng(1234);
  std::vector<char> garbage(1024);
  for (auto& c : garbage) c = static_cast<char>(rng());
  RawClient raw(server->port());
  raw.send(garbage);
  EXPECT_TRUE(raw.closed_by_server(idist::test::scaled(2s)));
  bystander->set("b", bytes("ok"));
  EXPECT_EQ(bystander->get_string("b"), "ok");
  expect_server_serves(*server, "after-garbage");
}

TEST(TCPStore, ProtocolViolationsCloseTheConnection) {
  auto server = make_server();
  {  // unknown opcode with a valid magic
    RawClient raw(server->port());
    raw.send_frame(99, {});
    EXPECT_TRUE(raw.closed_by_server(idist::test::scaled(2s)));
  }
  {  // SET whose payload has trailing bytes
    RawClient raw(server->port());
    detail::Writer w;
    w.str("k");
    w.str("v");
    w.u8(0);
    raw.send_frame(static_cast<std::uint8_t>(detail::Op::Set), w.buffer());
    EXPECT_TRUE(raw.closed_by_server(idist::test::scaled(2s)));
  }
  {  // an empty key
    RawClient raw(server->port());
    detail::Writer w;
    w.str("");
    w.str("v");
    raw.send_frame(static_cast<std::uint8_t>(detail::Op::Set), w.buffer());
    EXPECT_TRUE(raw.closed_by_server(idist::test::scaled(2s)));
  }
  {  // a key length beyond the key limit inside a small payload
    RawClient raw(server->port());
    detail::Writer w;
    w.u32(static_cast<std::uint32_t>(idist::store::kMaxKeyBytes + 1));
    raw.send_frame(static_cast<std::uint8_t>(detail::Op::Add), w.buffer());
    EXPECT_TRUE(raw.closed_by_server(idist::test::scaled(2s)));
  }
  {  // bytes sent while a WAIT is pending
    RawClient raw(server->port());
    detail::Writer w;
    w.u64(60000);
    w.u32(1);
    w.str("never");
    raw.send_frame(static_cast<std::uint8_t>(detail::Op::Wait), w.buffer());
    std::this_thread::sleep_for(50ms);
    raw.send("x", 1);
    EXPECT_TRUE(raw.closed_by_server(idist::test::scaled(2s)));
  }
  {  // a well-formed request is answered (the raw path itself works)
    RawClient raw(server->port());
    detail::Writer w;
    w.u32(0);
    raw.send_frame(static_cast<std::uint8_t>(detail::Op::Check), w.buffer());
    EXPECT_FALSE(raw.closed_by_server(300ms));
  }
  expect_server_serves(*server, "after-violations");
}

TEST(TCPStore, OversizedLengthPrefixIsRejectedAtOnce) {
  auto server = make_server();
  RawClient raw(server->port());
  const auto h = detail::encode_header(static_cast<std::uint8_t>(detail::Op::Set), 0xFFFFFFFFu);
  raw.send(h.data(), h.size());
  const auto start = Clock::now();
  EXPECT_TRUE(raw.closed_by_server(idist::test::scaled(2s)));  // without waiting for 4 GiB that will never come
  EXPECT_LT(seconds_since(start), idist::test::scaled(1.0));
  RawClient raw2(server->port());
  const auto h2 = detail::encode_header(static_cast<std::uint8_t>(detail::Op::Set),
                                        static_cast<std::uint32_t>(detail::kMaxRequestPayload + 1));
  raw2.send(h2.data(), h2.size());
  EXPECT_TRUE(raw2.closed_by_server(idist::test::scaled(2s)));
  expect_server_serves(*server, "after-oversized");
}

TEST(TCPStore, ServerOutlivesClientsLastRequests) {
  auto server = make_server(2, 5s);
  auto client = make_client(*server);
  std::atomic<bool> destroyed{false};
  const auto start = Clock::now();
  std::thread owner([&] {
    server.reset();  // waits for the other client to disconnect
    destroyed = true;
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(destroyed);
  client->set("last", bytes("words"));  // the server still answers during its owner's shutdown
  EXPECT_EQ(client->get_string("last"), "words");
  client.reset();
  owner.join();
  const double elapsed = seconds_since(start);
  EXPECT_GE(elapsed, 0.3);
  EXPECT_LT(elapsed, idist::test::scaled(2.0));
}

TEST(TCPStore, ShutdownWaitIsBoundedByTheTimeout) {
  auto server = make_server(2, 500ms);
  auto client = make_client(*server, 5s);  // stays connected
  const auto start = Clock::now();
  server.reset();
  const double elapsed = seconds_since(start);
  EXPECT_GE(elapsed, 0.45);
  EXPECT_LT(elapsed, idist::test::scaled(1.5));
  // The server is gone: the client's next call fails (connection lost, then no server to reconnect to).
  EXPECT_THROW(client->set("x", bytes("y")), idist::Error);
}

TEST(TCPStoreServer, DestroyedWithAPendingWaiterAndOpenConnections) {
  auto server = std::make_unique<detail::TCPStoreServer>(0, 2);
  const int port = server->port();
  TCPStore client("127.0.0.1", port, false, 2, 10s);
  EXPECT_EQ(server->num_connections(), 1);
  std::atomic<bool> failed_fast{false};
  std::thread waiter([&] {
    const auto start = Clock::now();
    try {
      client.wait({"never"}, 30s);
    } catch (const idist::BackendError&) {
      failed_fast = seconds_since(start) < 5.0;
    } catch (const idist::Error&) {
    }
  });
  std::this_thread::sleep_for(200ms);
  server.reset();  // closes the connection with the pending WAIT and joins the thread
  waiter.join();
  EXPECT_TRUE(failed_fast);
}

TEST(TCPStoreServer, CountsConnections) {
  detail::TCPStoreServer server(0, 0);
  EXPECT_EQ(server.num_connections(), 0);
  {
    TCPStore a("127.0.0.1", server.port(), false, 0, 5s);
    TCPStore b("127.0.0.1", server.port(), false, 0, 5s);
    EXPECT_EQ(server.num_connections(), 2);
    EXPECT_EQ(a.num_joined(), 2);
  }
  EXPECT_TRUE(server.wait_until_no_clients(idist::test::scaled(2s)));
}
