// The ncclUniqueId exchange through a store: threads over an in-memory store, and (with the rendezvous
// store compiled in) separate processes over idist's TCPStore. No GPU needed: ncclGetUniqueId only
// touches the network stack.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "idist/config.hpp"
#include "idist/error.hpp"
#include "nccl/store_key_value.hpp"
#include "nccl/unique_id.hpp"
#include "store/tcp_store.hpp"
#include "support/time_scale.hpp"

namespace idist::nccl_backend {
namespace {

using namespace std::chrono_literals;

// The store semantics the exchange relies on, in memory, for threads.
class MemoryStore final : public KeyValueStore {
 public:
  void set(const std::string& key, const std::vector<char>& value) override {
    {
      std::lock_guard lock(mutex_);
      data_[key] = value;
    }
    cv_.notify_all();
  }
  std::vector<char> wait_get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, timeout, [&] { return data_.contains(key); }))
      throw TimeoutError("MemoryStore: key '" + key + "' missing after " + std::to_string(timeout.count()) + " ms");
    return data_.at(key);
  }
  std::size_t size() {
    std::lock_guard lock(mutex_);
    return data_.size();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<char>> data_;
};

UniqueIdBytes real_unique_id() {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  UniqueIdBytes bytes;
  std::memcpy(bytes.data(), &id, bytes.size());
  return bytes;
}

bool all_zero(const UniqueIdBytes& id) {
  return std::all_of(id.begin(), id.end(), [](char c) { return c == 0; });
}

TEST(NcclUniqueId, KeysNameTheCommunicator) {
  EXPECT_EQ(unique_id_key(world_scope()), "idist/nccl/world/unique_id");
  const std::vector<int> ranks = {0, 2, 5};
  EXPECT_EQ(group_scope(ranks), "group/0,2,5");
  EXPECT_EQ(unique_id_key(group_scope(ranks)), "idist/nccl/group/0,2,5/unique_id");
  EXPECT_EQ(kUniqueIdBytes, sizeof(ncclUniqueId));
}

TEST(NcclUniqueId, EveryThreadGetsTheRootsId) {
  MemoryStore store;
  constexpr int kRanks = 4;
  std::vector<UniqueIdBytes> got(kRanks);
  std::vector<int> generated(kRanks, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      got[std::size_t(r)] = exchange_unique_id(
          store, world_scope(), r, 0,
          [&] {
            ++generated[std::size_t(r)];
            return real_unique_id();
          },
          5s);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(generated, (std::vector<int>{1, 0, 0, 0}));  // only the root generates
  EXPECT_FALSE(all_zero(got[0]));
  for (int r = 1; r < kRanks; ++r) EXPECT_EQ(got[std::size_t(r)], got[0]) << "rank " << r;
  EXPECT_EQ(store.size(), 1u);
}

TEST(NcclUniqueId, AGroupsRootIsItsFirstRankAndItsKeyIsSeparate) {
  MemoryStore store;
  const std::vector<int> ranks = {1, 3};
  const std::string scope = group_scope(ranks);
  UniqueIdBytes from_root{}, at_member{};
  std::thread member([&] {
    at_member = exchange_unique_id(
        store, scope, 3, 1, [] { return UniqueIdBytes{}; }, 5s);
  });
  from_root = exchange_unique_id(store, scope, 1, 1, real_unique_id, 5s);
  member.join();
  EXPECT_EQ(at_member, from_root);
  // A world exchange in the same store does not see the group's id.
  EXPECT_THROW(exchange_unique_id(store, world_scope(), 1, 0, real_unique_id, 50ms), TimeoutError);
}

TEST(NcclUniqueId, AMissingRootTimesOutNamingRankRootAndKey) {
  MemoryStore store;
  const auto start = std::chrono::steady_clock::now();
  try {
    exchange_unique_id(store, world_scope(), 2, 0, real_unique_id, 200ms);
    FAIL() << "no timeout";
  } catch (const TimeoutError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("rank 2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("from rank 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("idist/nccl/world/unique_id"), std::string::npos) << msg;
    EXPECT_NE(msg.find("200 ms"), std::string::npos) << msg;
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, 190ms);
  EXPECT_LT(elapsed, idist::test::scaled(5s));
}

TEST(NcclUniqueId, AValueOfTheWrongSizeIsABackendError) {
  MemoryStore store;
  store.set(unique_id_key(world_scope()), std::vector<char>(5, 'x'));
  try {
    exchange_unique_id(store, world_scope(), 1, 0, real_unique_id, 1s);
    FAIL() << "no error";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("5 bytes"), std::string::npos) << e.what();
  }
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(NcclUniqueId, ProcessesExchangeTheIdThroughTheTcpStore) {
  constexpr int kRanks = 3;
  const int port = free_port();
  ASSERT_GT(port, 0);
  std::vector<pid_t> pids;
  std::vector<int> read_ends;
  for (int r = 0; r < kRanks; ++r) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      alarm(60);  // never outlive a broken test
      int rc = 0;
      try {
        auto store = std::make_shared<store::TCPStore>("127.0.0.1", port, r == 0, kRanks, 20s);
        StoreKeyValue kv(store);
        const UniqueIdBytes id = exchange_unique_id(kv, world_scope(), r, 0, real_unique_id, 20s);
        rc = write(fds[1], id.data(), id.size()) == ssize_t(id.size()) ? 0 : 3;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        rc = 2;
      }
      close(fds[1]);
      _exit(rc);
    }
    close(fds[1]);
    pids.push_back(pid);
    read_ends.push_back(fds[0]);
  }
  std::vector<UniqueIdBytes> ids(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    std::size_t got = 0;
    while (got < kUniqueIdBytes) {
      const ssize_t n = read(read_ends[std::size_t(r)], ids[std::size_t(r)].data() + got, kUniqueIdBytes - got);
      if (n <= 0) break;
      got += std::size_t(n);
    }
    close(read_ends[std::size_t(r)]);
    EXPECT_EQ(got, kUniqueIdBytes) << "rank " << r;
  }
  for (int r = 0; r < kRanks; ++r) {
    int status = 0;
    ASSERT_EQ(waitpid(pids[std::size_t(r)], &status, 0), pids[std::size_t(r)]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank " << r << " status " << status;
  }
  EXPECT_FALSE(all_zero(ids[0]));
  for (int r = 1; r < kRanks; ++r) EXPECT_EQ(ids[std::size_t(r)], ids[0]) << "rank " << r;
}

}  // namespace
}  // namespace idist::nccl_backend
