// Store's front door: bad keys, values and timeouts are refused before any implementation sees them,
// with the same words for every store, and the trivial calls (no keys) never reach an implementation.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "idist/error.hpp"
#include "store/file_store.hpp"
#include "store/prefix_store.hpp"
#include "store/store.hpp"
#include "store/tcp_store.hpp"
#include "support/temp_dir.hpp"

namespace {

using idist::test::TempDir;
using namespace std::chrono_literals;
using idist::store::kMaxKeyBytes;
using idist::store::Store;

// An in-memory store that counts the calls reaching its implementation.
class CountingStore final : public Store {
 public:
  explicit CountingStore(std::size_t max_value = idist::store::kMaxValueBytes) : max_value_(max_value) {}
  std::chrono::milliseconds timeout() const override { return 1s; }
  std::string describe() const override { return "counting store"; }
  std::size_t max_value_bytes() const override { return max_value_; }

  int calls = 0;
  std::vector<std::string> keys_seen;

 private:
  void do_set(const std::string& key, const std::vector<char>& data) override {
    seen({key});
    data_[key] = data;
  }
  std::vector<char> do_get(const std::string& key) override {
    seen({key});
    return data_.at(key);
  }
  std::int64_t do_add(const std::string& key, std::int64_t delta) override {
    seen({key});
    return delta;
  }
  bool do_check(const std::vector<std::string>& keys) override {
    seen(keys);
    return true;
  }
  void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds) override { seen(keys); }
  void seen(const std::vector<std::string>& keys) {
    ++calls;
    keys_seen.insert(keys_seen.end(), keys.begin(), keys.end());
  }

  std::size_t max_value_;
  std::map<std::string, std::vector<char>> data_;
};

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const idist::ValueError& e) {
    return e.what();
  }
  return "(no ValueError)";
}

// Every bad argument of every call, on `store`; returns the messages.
std::vector<std::string> refusals(Store& store) {
  const std::string empty, long_key(kMaxKeyBytes + 1, 'k');
  const std::vector<char> big(store.max_value_bytes() + 1);
  return {
      error_of([&] { store.set(empty, {}); }),
      error_of([&] { store.set(long_key, {}); }),
      error_of([&] { store.set("k", big); }),
      error_of([&] { store.get(empty); }),
      error_of([&] { store.add(long_key, 1); }),
      error_of([&] {
        store.check({"a", empty});
      }),
      error_of([&] {
        store.wait({"a", long_key}, 1s);
      }),
      error_of([&] { store.wait({"a"}, -1ms); }),
  };
}

const std::vector<std::string> kWords = {
    "key should be a non-empty string, got ''",
    "is 4097 bytes, more than the limit of 4096 bytes",
    "more than the limit of",
    "key should be a non-empty string, got ''",
    "is 4097 bytes, more than the limit of 4096 bytes",
    "key should be a non-empty string, got ''",
    "is 4097 bytes, more than the limit of 4096 bytes",
    "wait timeout should be >= 0, got -1 ms",
};

void expect_refusals(Store& store) {
  const auto messages = refusals(store);
  ASSERT_EQ(messages.size(), kWords.size());
  for (std::size_t i = 0; i < messages.size(); ++i) {
    EXPECT_NE(messages[i].find(kWords[i]), std::string::npos) << store.describe() << ": " << messages[i];
    EXPECT_EQ(messages[i].rfind(store.describe(), 0), 0u) << "names the store first: " << messages[i];
  }
}
}  // namespace

TEST(StoreFrontDoor, BadArgumentsNeverReachTheImplementation) {
  CountingStore store;
  expect_refusals(store);
  EXPECT_EQ(store.calls, 0);
}

TEST(StoreFrontDoor, NoKeysIsAnsweredAtTheDoor) {
  CountingStore store;
  EXPECT_TRUE(store.check({}));
  store.wait({}, 0ms);
  store.wait({});
  EXPECT_EQ(store.calls, 0);
  store.wait({"a"}, 0ms);  // a timeout of 0 is a poll, not an error
  EXPECT_EQ(store.calls, 1);
}

TEST(StoreFrontDoor, TheImplementationsValueLimitIsTheOneChecked) {
  CountingStore store(16);
  EXPECT_NE(error_of([&] { store.set("k", std::vector<char>(17)); }).find("17 bytes, more than the limit of 16"),
            std::string::npos);
  store.set("k", std::vector<char>(16));
  EXPECT_EQ(store.get("k").size(), 16u);
  EXPECT_EQ(store.calls, 2);
}

TEST(StoreFrontDoor, APrefixStoreChecksItsKeysAndTheUnderlyingOneThePrefixedKeys) {
  auto base = std::make_shared<CountingStore>(16);
  idist::store::PrefixStore view("p", base);
  expect_refusals(view);
  EXPECT_EQ(base->calls, 0);
  EXPECT_EQ(view.max_value_bytes(), 16u);
  // A key that fits alone but not behind the prefix: refused by the underlying store, which names itself.
  const auto message = error_of([&] { view.set(std::string(kMaxKeyBytes - 1, 'k'), {}); });
  EXPECT_EQ(message.rfind("counting store: key 'p/kkk", 0), 0u) << message;
  view.add("n", 2);
  EXPECT_EQ(base->keys_seen, std::vector<std::string>{"p/n"});
}

TEST(StoreFrontDoor, EveryStoreRefusesWithTheSameWords) {
  idist::store::TCPStore tcp("127.0.0.1", 0, true, 1, 10s);
  expect_refusals(tcp);
  TempDir dir("idist-front-door");
  idist::store::FileStore file(dir.path(), 10s);
  expect_refusals(file);
  tcp.set("still", {'o', 'k'});  // the refusals did not break the connection
  EXPECT_EQ(tcp.get_string("still"), "ok");
}
