// The c10d TCPStore wire protocol (src/store/c10d/protocol.hpp) against byte strings written down from
// PyTorch's sources: version 1 from torch 1.13's TCPStore.cpp (QueryType SET 0 .. DELETE_KEY 8, the client's
// "/" key prefix, u64 lengths), version 2 from torch 2.x's TCPStoreBackend.hpp (VALIDATE 0 with the magic
// 0x3C85F7CE, every other query one higher) and TCPStore.cpp's SendBuffer (query byte, then the arguments).
// C10dReplies: the client's reading of replies, through a scripted peer instead of a socket.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "idist/error.hpp"
#include "store/c10d/c10d_store.hpp"
#include "store/c10d/connection.hpp"
#include "store/c10d/protocol.hpp"
#include "store/store.hpp"

namespace {
using namespace idist::store::c10d;

std::vector<char> b(std::initializer_list<int> bytes) {
  std::vector<char> out;
  for (int x : bytes) out.push_back(static_cast<char>(x));
  return out;
}
std::vector<char> cat(std::vector<char> a, const std::vector<char>& c) {
  a.insert(a.end(), c.begin(), c.end());
  return a;
}
std::vector<char> text(const std::string& s) { return {s.begin(), s.end()}; }
// A little-endian u64 length.
std::vector<char> len(unsigned n) { return b({int(n & 0xFF), int((n >> 8) & 0xFF), 0, 0, 0, 0, 0, 0}); }

TEST(C10dProtocol, QueryBytesOfBothVersions) {
  const std::vector<std::pair<Query, std::pair<int, int>>> table = {
      {Query::Set, {0, 1}},   {Query::Get, {2, 3}},  {Query::Add, {3, 4}},
      {Query::Check, {4, 5}}, {Query::Wait, {5, 6}}, {Query::GetNumKeys, {6, 7}},
  };
  for (const auto& [q, bytes] : table) {
    EXPECT_EQ(query_byte(Version::V1, q), bytes.first);
    EXPECT_EQ(query_byte(Version::V2, q), bytes.second);
  }
  EXPECT_FALSE(query_byte(Version::V1, Query::Validate).has_value());
  EXPECT_EQ(query_byte(Version::V2, Query::Validate), 0);
}

TEST(C10dProtocol, KeysCarryTheClientsSlash) {
  EXPECT_EQ(wire_key("k"), "/k");
  // torch's PrefixStore("/worker/attempt_0") over TCPStore sends "//worker/attempt_0/x".
  EXPECT_EQ(wire_key("/worker/attempt_0/x"), "//worker/attempt_0/x");
}

TEST(C10dProtocol, SetVersion1) {
  const auto expected = cat(cat(cat(cat(b({0}), len(2)), text("/k")), len(3)), text("abc"));
  EXPECT_EQ(encode_set(Version::V1, "k", text("abc")), expected);
}

TEST(C10dProtocol, SetVersion2ShiftsTheQueryOnly) {
  auto v1 = encode_set(Version::V1, "key", text("value"));
  auto v2 = encode_set(Version::V2, "key", text("value"));
  ASSERT_EQ(v1.size(), v2.size());
  EXPECT_EQ(v2[0], 1);
  v2[0] = 0;
  EXPECT_EQ(v1, v2);
}

TEST(C10dProtocol, SetOfAnEmptyValue) {
  EXPECT_EQ(encode_set(Version::V1, "e", {}), cat(cat(cat(b({0}), len(2)), text("/e")), len(0)));
}

TEST(C10dProtocol, GetAndGetNumKeys) {
  EXPECT_EQ(encode_get(Version::V1, "ab"), cat(cat(b({2}), len(3)), text("/ab")));
  EXPECT_EQ(encode_get(Version::V2, "ab"), cat(cat(b({3}), len(3)), text("/ab")));
  EXPECT_EQ(encode_get_num_keys(Version::V1), b({6}));
  EXPECT_EQ(encode_get_num_keys(Version::V2), b({7}));
}

TEST(C10dProtocol, AddIsLittleEndianTwosComplement) {
  EXPECT_EQ(encode_add(Version::V1, "c", 5), cat(cat(cat(b({3}), len(2)), text("/c")), b({5, 0, 0, 0, 0, 0, 0, 0})));
  EXPECT_EQ(encode_add(Version::V2, "c", -2),
            cat(cat(cat(b({4}), len(2)), text("/c")), b({0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF})));
  EXPECT_EQ(encode_add(Version::V1, "c", 0x0102030405060708LL).back(), 0x01);
}

TEST(C10dProtocol, CheckAndWaitCountTheKeys) {
  const auto keys = cat(cat(cat(cat(len(2), len(2)), text("/a")), len(3)), text("/bc"));
  EXPECT_EQ(encode_check(Version::V1, {"a", "bc"}), cat(b({4}), keys));
  EXPECT_EQ(encode_check(Version::V2, {"a", "bc"}), cat(b({5}), keys));
  EXPECT_EQ(encode_wait(Version::V1, {"a", "bc"}), cat(b({5}), keys));
  EXPECT_EQ(encode_wait(Version::V2, {"a", "bc"}), cat(b({6}), keys));
}

TEST(C10dProtocol, ValidateIsQueryZeroAndTheMagicLittleEndian) {
  EXPECT_EQ(encode_validate(), b({0x00, 0xCE, 0xF7, 0x85, 0x3C}));
}

TEST(C10dProtocol, DecodesLittleEndianIntegers) {
  const unsigned char five[8] = {5, 0, 0, 0, 0, 0, 0, 0};
  const unsigned char minus_one[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  const unsigned char big[8] = {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};
  EXPECT_EQ(decode_i64(five), 5);
  EXPECT_EQ(decode_i64(minus_one), -1);
  EXPECT_EQ(decode_u64(big), 0x0102030405060708ULL);
}

TEST(C10dProtocol, VersionOverride) {
  EXPECT_FALSE(parse_version_override("").has_value());
  EXPECT_EQ(parse_version_override("1"), Version::V1);
  EXPECT_EQ(parse_version_override("2"), Version::V2);
  try {
    parse_version_override("3");
    FAIL() << "no ValueError";
  } catch (const idist::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("IDIST_C10D_STORE_PROTOCOL should be 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'3'"), std::string::npos) << e.what();
  }
}

// The version-1 probe is one byte that a version-1 server answers and a version-2 server never runs:
// the probe's safety rests on these bytes.
TEST(C10dProtocol, ProbeBytes) {
  EXPECT_EQ(encode_get_num_keys(Version::V1), b({6}));
  // Version 2's VALIDATE + GETNUMKEYS is 6 bytes: a version-1 server reads a SET whose 8-byte key length
  // is still incomplete, so it allocates and stores nothing.
  auto v2 = encode_validate();
  const auto q = encode_get_num_keys(Version::V2);
  v2.insert(v2.end(), q.begin(), q.end());
  EXPECT_EQ(v2.size(), 6u);
  EXPECT_EQ(v2[0], 0);  // version 1's SET
}

// A server that answers from a fixed script of reply bytes and records what it was sent; it closes the
// connection when the script runs out (the seam of tests/fuzz/fuzz_c10d_replies.cpp).
struct Script {
  std::vector<char> replies;
  std::size_t at = 0;
  std::vector<char> sent;
};

class ScriptedPeer final : public Connection {
 public:
  explicit ScriptedPeer(Script& s) : s_(s) {}
  IoStatus connect(const std::string&, int, Clock::time_point) override { return IoStatus::Ok; }
  IoStatus write(const std::vector<char>& bytes, Clock::time_point) override {
    s_.sent.insert(s_.sent.end(), bytes.begin(), bytes.end());
    return open_ ? IoStatus::Ok : IoStatus::Closed;
  }
  IoStatus read(void* out, std::size_t n, Clock::time_point) override {
    if (!open_ || s_.replies.size() - s_.at < n) {
      open_ = false;
      return IoStatus::Closed;
    }
    std::memcpy(out, s_.replies.data() + s_.at, n);
    s_.at += n;
    return IoStatus::Ok;
  }
  void close() override { open_ = false; }
  bool is_open() const override { return open_; }
  const std::string& error() const override { return error_; }

 private:
  Script& s_;
  bool open_ = true;
  std::string error_ = "closed by the script";
};

std::unique_ptr<idist::store::C10dStore> scripted_store(Script& script) {
  idist::store::C10dStoreOptions options;
  options.version = Version::V1;
  options.connect = [&script](Clock::time_point) { return std::make_unique<ScriptedPeer>(script); };
  return std::make_unique<idist::store::C10dStore>("127.0.0.1", 29500, std::chrono::seconds(5), options);
}

TEST(C10dReplies, TheClientSendsTheProtocolsBytesAndReadsItsReplies) {
  Script script;
  // hello (GETNUMKEYS) -> 3 keys; WAIT -> STOP_WAITING; GET -> "ab"; ADD -> 5.
  script.replies =
      cat(cat(cat(b({3, 0, 0, 0, 0, 0, 0, 0}), b({0})), cat(len(2), text("ab"))), b({5, 0, 0, 0, 0, 0, 0, 0}));
  auto store = scripted_store(script);
  EXPECT_EQ(store->get("k"), text("ab"));
  EXPECT_EQ(store->add("n", 2), 5);
  const auto expected =
      cat(cat(cat(encode_hello(Version::V1), encode_wait(Version::V1, {"k"})), encode_get(Version::V1, "k")),
          encode_add(Version::V1, "n", 2));
  EXPECT_EQ(script.sent, expected);
}

TEST(C10dReplies, MalformedRepliesAreBackendErrors) {
  {  // a CHECK reply that is neither READY nor NOT_READY
    Script script;
    script.replies = cat(b({0, 0, 0, 0, 0, 0, 0, 0}), b({7}));
    auto store = scripted_store(script);
    try {
      store->check({"k"});
      FAIL() << "expected BackendError";
    } catch (const idist::BackendError& e) {
      EXPECT_NE(std::string(e.what()).find("unexpected reply 7"), std::string::npos) << e.what();
    }
  }
  {  // a GET value longer than any store holds is refused before it is read
    Script script;
    script.replies = cat(cat(b({0, 0, 0, 0, 0, 0, 0, 0}), b({0})), b({1, 0, 0, 4, 0, 0, 0, 0}));
    auto store = scripted_store(script);
    try {
      store->get("k");
      FAIL() << "expected BackendError";
    } catch (const idist::BackendError& e) {
      EXPECT_NE(std::string(e.what()).find("more than the limit"), std::string::npos) << e.what();
    }
  }
  {  // the server closes in the middle of ADD's reply
    Script script;
    script.replies = cat(b({0, 0, 0, 0, 0, 0, 0, 0}), b({1, 0, 0}));
    auto store = scripted_store(script);
    EXPECT_THROW(store->add("n", 1), idist::BackendError);
  }
}

}  // namespace
