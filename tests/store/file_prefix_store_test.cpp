// FileStore (threads and forked processes on one directory), PrefixStore and store_barrier.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "idist/config.hpp"
#include "idist/error.hpp"
#if IDIST_HAVE_GLOO
#include "gloo/gloo_store.hpp"
#endif
#include "store/file_store.hpp"
#include "store/prefix_store.hpp"
#include "store/store_barrier.hpp"
#include "store/tcp_store.hpp"
#include "store_test_util.hpp"
#include "support/temp_dir.hpp"
#include "support/time_scale.hpp"

namespace {

using idist::test::TempDir;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using idist::store::FileStore;
using idist::store::PrefixStore;
using idist::store::Store;
using idist::store::TCPStore;
using idist::test::seconds_since;
using Clock = std::chrono::steady_clock;

std::vector<char> bytes(std::string_view s) { return {s.begin(), s.end()}; }

std::size_t count_store_files(const std::string& dir) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("k_", 0) == 0) ++n;
  return n;
}
}  // namespace

// ---------------------------------------------------------------- FileStore

TEST(FileStore, SetGetAddCheck) {
  TempDir dir("idist-store-test");
  FileStore store(dir.path() + "/store", 5s);
  store.set("a", bytes("1"));
  EXPECT_EQ(store.get_string("a"), "1");
  store.set("a", bytes("2"));
  EXPECT_EQ(store.get_string("a"), "2");
  EXPECT_TRUE(store.check({"a"}));
  EXPECT_FALSE(store.check({"a", "b"}));
  EXPECT_EQ(store.add("n", 3), 3);
  EXPECT_EQ(store.add("n", -1), 2);
  EXPECT_EQ(store.get_string("n"), "2");
  store.set("text", bytes("abc"));
  EXPECT_THROW(store.add("text", 1), idist::ValueError);
  EXPECT_EQ(store.describe(), "file://" + dir.path() + "/store");
}

TEST(FileStore, AnyKeyIsASafeFileName) {
  TempDir dir("idist-store-test");
  FileStore store(dir.path(), 5s);
  for (const std::string key : {"group/1/rank_0", "../escape", ".hidden", "sp ace", "ünï"}) {
    store.set(key, bytes(key));
    EXPECT_EQ(store.get_string(key), key);
  }
  EXPECT_FALSE(fs::exists(fs::path(dir.path()).parent_path() / "escape"));
  EXPECT_THROW(store.set(std::string(300, '/'), bytes("x")), idist::ValueError);  // 900 bytes encoded
  EXPECT_THROW(store.set("", bytes("x")), idist::ValueError);
}

TEST(FileStore, WaitAndGetTimeOutNamingTheMissingKeys) {
  TempDir dir("idist-store-test");
  FileStore store(dir.path(), 300ms);
  store.set("here", bytes("1"));
  const auto start = Clock::now();
  try {
    store.wait({"here", "absent"}, 250ms);
    FAIL() << "expected TimeoutError";
  } catch (const idist::TimeoutError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("missing 'absent'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(dir.path()), std::string::npos) << msg;
  }
  EXPECT_GE(seconds_since(start), 0.24);
  EXPECT_LT(seconds_since(start), idist::test::scaled(0.8));
  EXPECT_THROW(store.get("absent"), idist::TimeoutError);
}

TEST(FileStore, WaitSeesAnotherStoreOnTheSameDirectory) {
  TempDir dir("idist-store-test");
  FileStore a(dir.path(), 5s);
  FileStore b(dir.path(), 5s);
  std::thread setter([&] {
    std::this_thread::sleep_for(100ms);
    b.set("k", bytes("from-b"));
  });
  EXPECT_EQ(a.get_string("k"), "from-b");
  setter.join();
}

TEST(FileStore, ConcurrentAddsFromProcessesAreAtomic) {
  TempDir dir("idist-store-test");
  constexpr int kWorkers = 4;
  constexpr int kAdds = 50;
  std::vector<pid_t> pids;
  for (int w = 0; w < kWorkers; ++w)
    pids.push_back(idist::test::fork_worker([&, w] {
      FileStore store(dir.path(), 10s);
      for (int i = 0; i < kAdds; ++i) store.add("counter", 1);
      store.set(fmt::format("done{}", w), bytes("1"));
      store.wait({"release"}, 10s);  // keep the store open until the parent has read the counter
      return true;
    }));
  FileStore store(dir.path(), 10s);
  std::vector<std::string> done;
  for (int w = 0; w < kWorkers; ++w) done.push_back(fmt::format("done{}", w));
  store.wait(done, 10s);
  EXPECT_EQ(store.add("counter", 0), kWorkers * kAdds);
  store.set("release", bytes("1"));
  for (pid_t pid : pids) EXPECT_EQ(idist::test::wait_worker(pid, 20s), 0);
}

TEST(FileStore, LastUserOutRemovesOnlyTheStoresFiles) {
  TempDir dir("idist-store-test");
  { std::ofstream(dir.path() + "/user-file.txt") << "keep me"; }
  {
    FileStore a(dir.path(), 5s);
    {
      FileStore b(dir.path(), 5s);
      b.set("x", bytes("1"));
    }
    EXPECT_EQ(a.get_string("x"), "1");  // b left, a still uses the store: nothing removed
  }
  EXPECT_EQ(count_store_files(dir.path()), 0u);
  EXPECT_TRUE(fs::exists(dir.path() + "/user-file.txt"));
  FileStore fresh(dir.path(), 200ms);  // the path can be reused by the next run
  EXPECT_FALSE(fresh.check({"x"}));
}

TEST(FileStore, BadPaths) {
  TempDir dir("idist-store-test");
  { std::ofstream(dir.path() + "/plain-file") << "x"; }
  EXPECT_THROW(FileStore(dir.path() + "/plain-file", 1s), idist::BackendError);
  EXPECT_THROW(FileStore("", 1s), idist::ValueError);
  EXPECT_THROW(FileStore(dir.path(), 0ms), idist::ValueError);
}

// ---------------------------------------------------------------- PrefixStore

TEST(PrefixStore, KeysLiveUnderThePrefix) {
  TempDir dir("idist-store-test");
  auto base = std::make_shared<FileStore>(dir.path(), 2s);
  PrefixStore g1("group1", base);
  PrefixStore g2("group2", base);
  g1.set("rank_0", bytes("one"));
  g2.set("rank_0", bytes("two"));
  EXPECT_EQ(base->get_string("group1/rank_0"), "one");
  EXPECT_EQ(base->get_string("group2/rank_0"), "two");
  EXPECT_EQ(g1.get_string("rank_0"), "one");
  EXPECT_EQ(g1.add("n", 2), 2);
  EXPECT_EQ(g2.add("n", 5), 5);
  EXPECT_EQ(base->add("group1/n", 0), 2);
  EXPECT_TRUE(g1.check({"rank_0", "n"}));
  EXPECT_FALSE(g1.check({"missing"}));
  g1.wait({"rank_0"});
  EXPECT_THROW(g1.wait({"missing"}, 100ms), idist::TimeoutError);
  EXPECT_EQ(g1.timeout(), 2s);
  EXPECT_NE(g1.describe().find("group1"), std::string::npos);
  // Nested prefixes compose.
  PrefixStore nested("sub", std::make_shared<PrefixStore>("group1", base));
  nested.set("k", bytes("v"));
  EXPECT_EQ(base->get_string("group1/sub/k"), "v");
}

TEST(PrefixStore, BadArguments) {
  TempDir dir("idist-store-test");
  auto base = std::make_shared<FileStore>(dir.path(), 1s);
  EXPECT_THROW(PrefixStore("", base), idist::ValueError);
  EXPECT_THROW(PrefixStore("p", nullptr), idist::ValueError);
  PrefixStore p("p", base);
  EXPECT_THROW(p.set("", bytes("x")), idist::ValueError);
}

#if IDIST_HAVE_GLOO
TEST(PrefixStore, OverATCPStoreIsUsableByGloo) {
  auto server = std::make_shared<TCPStore>("127.0.0.1", 0, true, 1, 5s, false);
  PrefixStore group("g", server);
  idist::gloo_backend::GlooStore adapter(group);
  gloo::rendezvous::Store& as_gloo = adapter;  // what Gloo's rendezvous::Context receives
  as_gloo.set("rank_0", bytes("addr"));
  as_gloo.wait({"rank_0"}, 1000ms);
  EXPECT_EQ(as_gloo.get("rank_0"), bytes("addr"));
  EXPECT_TRUE(server->check({"g/rank_0"}));
}
#endif

// ---------------------------------------------------------------- store_barrier

TEST(StoreBarrier, ReleasesEveryoneOnlyWhenAllArrived) {
  constexpr int kRanks = 4;
  auto server = std::make_shared<TCPStore>("127.0.0.1", 0, true, kRanks, 10s, false);
  std::atomic<int> arrived{0}, released{0};
  std::atomic<bool> early_release{false};
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      TCPStore client("127.0.0.1", server->port(), false, kRanks, 10s);
      std::this_thread::sleep_for(std::chrono::milliseconds(50 * r));
      ++arrived;
      idist::store::store_barrier(client, "b0", kRanks, 5s);
      if (arrived != kRanks) early_release = true;
      ++released;
    });
  for (auto& t : threads) t.join();
  EXPECT_FALSE(early_release);
  EXPECT_EQ(released, kRanks);
}

TEST(StoreBarrier, TimeoutSaysHowManyArrived) {
  auto server = std::make_shared<TCPStore>("127.0.0.1", 0, true, 3, 10s, false);
  std::thread other([&] {
    TCPStore client("127.0.0.1", server->port(), false, 3, 10s);
    EXPECT_THROW(idist::store::store_barrier(client, "b1", 3, 400ms), idist::TimeoutError);
  });
  try {
    idist::store::store_barrier(*server, "b1", 3, 400ms);
    FAIL() << "expected TimeoutError";
  } catch (const idist::TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("of 3 ranks arrived at barrier 'b1'"), std::string::npos) << e.what();
  }
  other.join();
  EXPECT_EQ(server->add("b1/arrived", 0), 2);
  EXPECT_THROW(idist::store::store_barrier(*server, "b2", 0, 1s), idist::ValueError);
}
