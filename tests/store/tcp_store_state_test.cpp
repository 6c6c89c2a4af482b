// The TCPStore server's rules without a network: the key-value state (tcp_store_state.hpp) and the
// request handlers (tcp_store_handlers.hpp) driven directly.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "store/store_join.hpp"
#include "store/tcp_store_handlers.hpp"
#include "store/tcp_store_state.hpp"

namespace idist::store::detail {
namespace {

// Records what the state tells a waiting session.
struct Listener final : WaitListener {
  int present = 0;
  void keys_present() override { ++present; }
};

std::shared_ptr<PendingWait> pending(std::shared_ptr<PendingWait> started) {
  EXPECT_TRUE(started != nullptr);
  return started;
}

std::vector<char> bytes(const std::string& s) { return {s.begin(), s.end()}; }

TEST(TCPStoreState, WaitsCompleteWhenTheirLastKeyArrivesAndGetReturnsTheValue) {
  KeyValueState state(0);
  Listener l;
  auto w = pending(state.wait(Op::Get, {"a"}, &l));
  ASSERT_EQ(w->missing, std::vector<std::string>{"a"});
  EXPECT_FALSE(state.set("a", bytes("xyz")).has_value());
  EXPECT_EQ(l.present, 1);
  Writer reply = state.ok_reply(*w);
  Reader r(reply.buffer().data(), reply.buffer().size());
  std::vector<char> value;
  ASSERT_TRUE(r.bytes(value, 16));
  EXPECT_EQ(value, bytes("xyz"));
  // A wait for keys already present is complete at once and not kept.
  Listener now;
  auto done = pending(state.wait(Op::Wait, {"a"}, &now));
  EXPECT_TRUE(done->missing.empty());
  EXPECT_FALSE(state.set("b", bytes("1")).has_value());
  EXPECT_EQ(now.present, 0);
}

TEST(TCPStoreState, CancelledWaitsAreNeverAnswered) {
  KeyValueState state(0);
  Listener l;
  auto w = pending(state.wait(Op::Wait, {"k"}, &l));
  state.cancel(w);
  state.set("k", bytes("v"));
  EXPECT_EQ(l.present, 0);
  Writer timeout = state.timeout_reply(*w, KeyValueState::Clock::now());
  const auto info = decode_timeout(timeout.buffer());
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->num_missing, 1u);
}

TEST(TCPStoreState, CountersAreDecimalAndReservedKeysBelongToTheServer) {
  KeyValueState state(2);
  EXPECT_EQ(std::get<std::int64_t>(state.add("n", 2)), 2);
  EXPECT_EQ(std::get<std::int64_t>(state.add("n", -5)), -3);
  state.set("text", bytes("abc"));
  EXPECT_TRUE(std::holds_alternative<std::string>(state.add("text", 1)));
  EXPECT_TRUE(state.set(std::string(kReservedPrefix) + "x", bytes("1")).has_value());
  const std::string other = std::string(kReservedPrefix) + "other";
  EXPECT_TRUE(std::holds_alternative<std::string>(state.add(kWorldSizeKey, 1)));
  EXPECT_TRUE(std::holds_alternative<std::string>(state.add(other, 1)));
  EXPECT_EQ(std::get<std::int64_t>(state.add(other, 0)), 0) << "a read of a reserved key is allowed";
  EXPECT_EQ(std::get<std::int64_t>(state.add(kWorldSizeKey, 0)), 2);
  EXPECT_FALSE(state.all_present({other})) << "reading a reserved key created nothing";
}

TEST(TCPStoreState, TimeoutRepliesCountTheProcessesThatJoined) {
  KeyValueState state(3);
  Listener l;
  auto w = pending(state.wait(Op::Wait, {"never"}, &l));
  EXPECT_EQ(std::get<std::int64_t>(state.add(kJoinCountKey, 1)), 1);  // the join's counter is an ordinary key
  EXPECT_EQ(std::get<std::int64_t>(state.add(kJoinCountKey, 1)), 2);
  EXPECT_EQ(state.joined(), 2u);
  Writer reply = state.timeout_reply(*w, KeyValueState::Clock::now());
  const auto info = decode_timeout(reply.buffer());
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->joined, 2u);
  EXPECT_EQ(info->world_size, 3u);
  EXPECT_EQ(l.present, 0);
}

TEST(TCPStoreHandlers, MalformedRequestsCloseAndHandshakesCheckTheToken) {
  KeyValueState state(0);
  const std::string token = "secret";
  Writer set;
  set.str("k");  // no value follows
  Reader bad(set.buffer().data(), set.buffer().size());
  const Outcome malformed = handle_request(Op::Set, bad, {state, token, true});
  EXPECT_EQ(malformed.action, Outcome::Action::Close);
  EXPECT_EQ(malformed.refusal, "malformed set");

  Writer hello;
  hello.u32(kProtocolVersion);
  hello.str("wrong");
  Reader r(hello.buffer().data(), hello.buffer().size());
  const Outcome refused = handle_request(Op::Hello, r, {state, token, false});
  EXPECT_EQ(refused.status, Status::Error);
  EXPECT_TRUE(refused.close_after_reply);
  EXPECT_EQ(refused.refusal, "wrong store token");
  EXPECT_FALSE(refused.authenticated);

  Writer good;
  good.u32(kProtocolVersion);
  good.str(token);
  Reader g(good.buffer().data(), good.buffer().size());
  EXPECT_TRUE(handle_request(Op::Hello, g, {state, token, false}).authenticated);

  Writer get;
  get.u64(500);
  get.str("key");
  Reader q(get.buffer().data(), get.buffer().size());
  const Outcome wait = handle_request(Op::Get, q, {state, token, true});
  EXPECT_EQ(wait.action, Outcome::Action::Wait);
  EXPECT_EQ(wait.wait_keys, std::vector<std::string>{"key"});
  EXPECT_EQ(wait.wait_timeout_ms, 500u);
}

TEST(TCPStoreHandlers, HeadersAreCheckedBeforeAnyPayloadIsRead) {
  const auto set_header = encode_header(static_cast<std::uint8_t>(Op::Set), 10);
  EXPECT_EQ(check_header(set_header.data(), false).refusal, "first request is not a handshake (HELLO)");
  const HeaderVerdict ok = check_header(set_header.data(), true);
  EXPECT_TRUE(ok.refusal.empty());
  EXPECT_EQ(ok.op, Op::Set);
  EXPECT_EQ(ok.payload_length, 10u);

  auto bad_magic = set_header;
  bad_magic[0] ^= 1;
  EXPECT_EQ(check_header(bad_magic.data(), true).refusal, "bad frame header (not an idist TCPStore client?)");
  auto reserved = set_header;
  reserved[6] = 1;
  EXPECT_FALSE(check_header(reserved.data(), true).refusal.empty());
  const auto unknown = encode_header(8, 0);
  EXPECT_EQ(check_header(unknown.data(), true).refusal, "unknown opcode");

  // A HELLO may be at most kMaxHelloPayload bytes, any later request kMaxRequestPayload.
  const auto long_hello = encode_header(static_cast<std::uint8_t>(Op::Hello), kMaxHelloPayload + 1);
  EXPECT_EQ(check_header(long_hello.data(), false).refusal, "request longer than the limit");
  const auto longest = encode_header(static_cast<std::uint8_t>(Op::Set), kMaxRequestPayload);
  EXPECT_TRUE(check_header(longest.data(), true).refusal.empty());
  const auto too_long = encode_header(static_cast<std::uint8_t>(Op::Set), kMaxRequestPayload + 1);
  EXPECT_EQ(check_header(too_long.data(), true).refusal_detail,
            fmt::format("set of {} bytes, limit {}", kMaxRequestPayload + 1, kMaxRequestPayload));
}

}  // namespace
}  // namespace idist::store::detail
