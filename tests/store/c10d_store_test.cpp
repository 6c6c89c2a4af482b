// C10dStore (src/store/c10d/) against a real c10d TCPStore server: torch's own in a Python child (1.13
// here, protocol 1), and the stand-ins for torch 2.x's two servers (protocol 2). A Python client of the
// same server reads what idist wrote and writes what idist reads.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "python_store.hpp"
#include "store/c10d/c10d_store.hpp"
#include "store/prefix_store.hpp"
#include "store_test_util.hpp"
#include "support/scoped_env.hpp"
#include "support/time_scale.hpp"

namespace {
using namespace std::chrono_literals;
using idist::store::C10dStore;
using idist::store::C10dStoreOptions;
using idist::store::c10d::Version;
using idist::test::PythonStore;
using Clock = std::chrono::steady_clock;

std::vector<char> bytes(std::string_view s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<char>& v) { return {v.begin(), v.end()}; }
std::unique_ptr<C10dStore> client(const PythonStore& server, std::chrono::milliseconds timeout = 10s) {
  return std::make_unique<C10dStore>("127.0.0.1", server.port(), timeout, C10dStoreOptions{"test store", {}});
}

// ---- torch's own server (protocol 1 with torch 1.x and 2.0; 2 with torch 2.1 and later) ----

TEST(C10dStoreTorch, DetectsTheProtocolOfTorchsServer) {
  IDIST_REQUIRE_TORCH();
  PythonStore server;
  auto store = client(server);
  // torch 1.x and 2.0 speak protocol 1, 2.1 and later protocol 2.
  const auto answer = server.command("torch");
  int major = 0, minor = 0;
  ASSERT_EQ(std::sscanf(answer.c_str(), "TORCH %d.%d", &major, &minor), 2) << answer;
  const auto expected = major < 2 || (major == 2 && minor < 1) ? Version::V1 : Version::V2;
  EXPECT_EQ(store->version(), expected) << answer;
  EXPECT_EQ(store->describe(), fmt::format("test store tcp://127.0.0.1:{}", server.port()));
}

TEST(C10dStoreTorch, SetGetAddCheck) {
  IDIST_REQUIRE_TORCH();
  PythonStore server;
  auto store = client(server);
  store->set("a", bytes("hello"));
  EXPECT_EQ(text(store->get("a")), "hello");
  store->set("a", bytes("again"));  // overwrite
  EXPECT_EQ(text(store->get("a")), "again");
  store->set("empty", {});
  EXPECT_TRUE(store->get("empty").empty());
  EXPECT_EQ(store->add("n", 5), 5);
  EXPECT_EQ(store->add("n", -2), 3);
  EXPECT_EQ(store->add("n", 0), 3);
  EXPECT_EQ(text(store->get("n")), "3");
  EXPECT_TRUE(store->check({"a", "n"}));
  EXPECT_FALSE(store->check({"a", "nope"}));
  EXPECT_TRUE(store->check({}));
  std::string binary("\0\x01\xff\n", 4);
  store->set("bin", bytes(binary));
  EXPECT_EQ(text(store->get("bin")), binary);
}

TEST(C10dStoreTorch, PythonReadsWhatIdistWrote) {
  IDIST_REQUIRE_TORCH();
  PythonStore server;
  auto store = client(server);
  store->set("from_idist", bytes("value 1"));
  EXPECT_EQ(server.get("from_idist"), "value 1");
  store->add("counter", 41);
  EXPECT_EQ(server.command("add counter 1"), "VALUE 42");
  EXPECT_EQ(store->add("counter", 0), 42);
}

TEST(C10dStoreTorch, IdistReadsWhatPythonWrote) {
  IDIST_REQUIRE_TORCH();
  PythonStore server;
  auto store = client(server);
  server.set("from_python", "value 2");
  EXPECT_EQ(text(store->get("from_python")), "value 2");
  EXPECT_TRUE(store->check({"from_python"}));
}

// idist's PrefixStore over the agent store reads and writes the keys of torch's PrefixStore: the
// "/worker/attempt_<n>" prefix of torchrun's workers.
TEST(C10dStoreTorch, PrefixStoreMatchesTorchsPrefixStore) {
  IDIST_REQUIRE_TORCH();
  PythonStore server;
  auto prefixed = std::make_shared<idist::store::PrefixStore>("/worker/attempt_0", std::shared_ptr(client(server)));
  prefixed->set_string("x", "in attempt 0");
  EXPECT_EQ(server.command("pget /worker/attempt_0 x"), "VALUE " + idist::test::to_hex("in attempt 0"));
  EXPECT_EQ(server.command("pset /worker/attempt_0 y " + idist::test::to_hex("from torch")), "OK");
  EXPECT_EQ(prefixed->get_string("y"), "from torch");
  EXPECT_FALSE(prefixed->check({"z"}));
}

TEST(C10dStoreTorch, WaitReturnsWhenAnotherClientSets) {
  IDIST_REQUIRE_TORCH();
  PythonStore server;
  auto store = client(server);
  std::thread later([&] {
    std::this_thread::sleep_for(300ms);
    server.set("late", "1");
  });
  const auto start = Clock::now();
  store->wait({"late"}, 10s);
  later.join();
  EXPECT_GE(idist::test::seconds_since(start), 0.25);
  EXPECT_EQ(text(store->get("late")), "1");
}

TEST(C10dStoreTorch, WaitTimesOutNamingTheMissingKeysAndRecovers) {
  IDIST_REQUIRE_TORCH();
  PythonStore server;
  auto store = client(server);
  store->set("here", bytes("1"));
  const auto start = Clock::now();
  try {
    store->wait({"here", "absent"}, 400ms);
    FAIL() << "no TimeoutError";
  } catch (const idist::TimeoutError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("missing 'absent'"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("'here'", msg.find("missing")), std::string::npos) << msg;
    EXPECT_NE(msg.find("test store tcp://127.0.0.1"), std::string::npos) << msg;
  }
  const double took = idist::test::seconds_since(start);
  EXPECT_GE(took, 0.39);
  EXPECT_LT(took, idist::test::scaled(5.0));
  // The dropped connection cancelled the wait on the server: the store keeps working, and the key's
  // later arrival wakes nobody stale.
  server.set("absent", "now");
  EXPECT_EQ(text(store->get("absent")), "now");
  store->set("after", bytes("ok"));
  EXPECT_EQ(server.get("after"), "ok");
}

TEST(C10dStoreTorch, GetTimesOutAfterTheStoreTimeout) {
  IDIST_REQUIRE_TORCH();
  PythonStore server;
  auto store = client(server, 500ms);
  const auto start = Clock::now();
  try {
    store->get("never");
    FAIL() << "no TimeoutError";
  } catch (const idist::TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("'never'"), std::string::npos) << e.what();
  }
  EXPECT_LT(idist::test::seconds_since(start), idist::test::scaled(5.0));
  EXPECT_TRUE(store->check({}));
}

TEST(C10dStoreTorch, WaitWithZeroTimeoutPolls) {
  IDIST_REQUIRE_TORCH();
  PythonStore server;
  auto store = client(server);
  store->set("k", bytes("v"));
  store->wait({"k"}, 0ms);
  EXPECT_THROW(store->wait({"k", "other"}, 0ms), idist::TimeoutError);
  EXPECT_THROW(store->wait({"k"}, -1ms), idist::ValueError);
}

TEST(C10dStoreTorch, AddOnANonIntegerIsAValueError) {
  IDIST_REQUIRE_TORCH();
  PythonStore server;
  auto store = client(server);
  server.set("word", "abc");
  try {
    store->add("word", 1);
    FAIL() << "no ValueError";
  } catch (const idist::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("not a decimal integer"), std::string::npos) << e.what();
  }
  EXPECT_EQ(store->add("number", 2), 2);  // the store reconnected
}

TEST(C10dStoreTorch, BadArguments) {
  IDIST_REQUIRE_TORCH();
  PythonStore server;
  auto store = client(server);
  EXPECT_THROW(store->set("", bytes("x")), idist::ValueError);
  EXPECT_THROW(store->get(std::string(idist::store::kMaxKeyBytes + 1, 'k')), idist::ValueError);
  EXPECT_THROW(store->set("big", std::vector<char>(idist::store::c10d::kMaxValueBytes + 1)), idist::ValueError);
  EXPECT_THROW(C10dStore("", server.port(), 1s), idist::ValueError);
  EXPECT_THROW(C10dStore("127.0.0.1", 0, 1s), idist::ValueError);
  EXPECT_THROW(C10dStore("127.0.0.1", server.port(), 0ms), idist::ValueError);
}

TEST(C10dStoreTorch, ServerGoneIsAnErrorNotAHang) {
  IDIST_REQUIRE_TORCH();
  PythonStore server;
  auto store = client(server, 2s);
  store->set("a", bytes("1"));
  server.kill();
  const auto start = Clock::now();
  EXPECT_THROW(store->set("b", bytes("2")), idist::Error);
  EXPECT_THROW(store->get("a"), idist::Error);
  EXPECT_LT(idist::test::seconds_since(start), idist::test::scaled(10.0));
}

TEST(C10dStoreTorch, OverrideOfTheRightVersionSkipsTheProbe) {
  IDIST_REQUIRE_TORCH();
  PythonStore server;
  const auto detected = client(server)->version();
  idist::test::ScopedEnv env;
  env.set("IDIST_C10D_STORE_PROTOCOL", std::to_string(static_cast<int>(detected)));
  auto store = client(server);
  EXPECT_EQ(store->version(), detected);
  store->set("k", bytes("v"));
  EXPECT_EQ(server.get("k"), "v");
}

// A wrong IDIST_C10D_STORE_PROTOCOL fails within the timeout and leaves the server and its keys intact.
TEST(C10dStoreTorch, OverrideOfTheWrongVersionFailsHarmlessly) {
  IDIST_REQUIRE_TORCH();
  PythonStore server;
  server.set("keep", "1");
  const auto detected = client(server)->version();
  const auto wrong = detected == Version::V1 ? Version::V2 : Version::V1;
  const auto keys = server.command("numkeys");
  const auto start = Clock::now();
  EXPECT_THROW(C10dStore("127.0.0.1", server.port(), 1s, C10dStoreOptions{"wrong", wrong}), idist::Error);
  EXPECT_LT(idist::test::seconds_since(start), idist::test::scaled(5.0));
  EXPECT_EQ(server.command("numkeys"), keys);  // no key was set
  auto store = client(server);
  EXPECT_EQ(text(store->get("keep")), "1");
  EXPECT_EQ(server.command("check keep"), "TRUE");
  store->set("more", bytes("2"));
  EXPECT_EQ(server.get("more"), "2");
}

TEST(C10dStore, ConnectTimesOutWithoutAServer) {
  const int port = idist::test::free_port();
  const auto start = Clock::now();
  try {
    C10dStore("127.0.0.1", port, 500ms, C10dStoreOptions{"nobody", {}});
    FAIL() << "no TimeoutError";
  } catch (const idist::TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("nobody tcp://127.0.0.1:{}: could not connect", port)),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(idist::test::seconds_since(start), idist::test::scaled(3.0));
}

// ---- the stand-ins for torch 2.x's servers (protocol 2: VALIDATE first, queries shifted by one) ----

class C10dStoreFakeV2 : public testing::TestWithParam<std::string> {};

TEST_P(C10dStoreFakeV2, DetectsProtocol2AndWorks) {
  IDIST_REQUIRE_TORCH();  // the script itself does not need torch in this mode, but shares its python
  PythonStore server({"--fake", GetParam()});
  const auto start = Clock::now();
  auto store = client(server);
  EXPECT_EQ(store->version(), Version::V2);
  // The threaded backend closes at once; libuv's silence costs one probe bound.
  EXPECT_LT(idist::test::seconds_since(start), idist::test::scaled(3.0));
  store->set("a", bytes("x"));
  EXPECT_EQ(server.get("a"), "x");
  server.set("b", "y");
  EXPECT_EQ(text(store->get("b")), "y");
  EXPECT_EQ(store->add("n", 2), 2);
  EXPECT_EQ(server.command("add n 3"), "VALUE 5");
  EXPECT_TRUE(store->check({"a", "b", "n"}));
  EXPECT_FALSE(store->check({"c"}));
  EXPECT_THROW(store->wait({"c"}, 300ms), idist::TimeoutError);
  EXPECT_EQ(text(store->get("a")), "x");
}

TEST_P(C10dStoreFakeV2, Protocol1OverrideFailsHarmlessly) {
  IDIST_REQUIRE_TORCH();
  PythonStore server({"--fake", GetParam()});
  server.set("keep", "1");
  EXPECT_THROW(C10dStore("127.0.0.1", server.port(), 1s, C10dStoreOptions{"wrong", Version::V1}), idist::Error);
  EXPECT_EQ(text(client(server)->get("keep")), "1");
}

// A store timeout shorter than the detection's two rounds: once the server has accepted the
// connection, detection still gets the time it needs (torch 2.11's libuv server, seen on the GPU
// machine with a 0.5 s store timeout: the first round used the whole timeout).
TEST_P(C10dStoreFakeV2, DetectsTheProtocolUnderAShortStoreTimeout) {
  IDIST_REQUIRE_TORCH();
  PythonStore server({"--fake", GetParam()});
  auto store = client(server, 500ms);
  EXPECT_EQ(store->version(), Version::V2);
  const auto start = Clock::now();
  EXPECT_THROW(store->get("never"), idist::TimeoutError);  // operations keep the store's timeout
  EXPECT_LT(idist::test::seconds_since(start), idist::test::scaled(3.0));
}

INSTANTIATE_TEST_SUITE_P(Backends, C10dStoreFakeV2, testing::Values("v2-threaded", "v2-libuv"));

}  // namespace
