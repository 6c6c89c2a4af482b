// The TCPStore server's request handlers (see tcp_store_handlers.hpp). A request that does not parse
// exactly closes the connection.
#include "store/tcp_store_handlers.hpp"

#include <utility>

#include <fmt/format.h>

namespace idist::store::detail {

namespace {

Outcome ok(Writer payload = {}) {
  Outcome o;
  o.payload = std::move(payload);
  return o;
}

Outcome error(const std::string& message) {
  Outcome o;
  o.status = Status::Error;
  o.payload.str(message);
  return o;
}

Outcome refuse(std::string reason) {
  Outcome o;
  o.action = Outcome::Action::Close;
  o.refusal = std::move(reason);
  return o;
}

// An ERROR reply after which the connection is closed; the refusal is counted.
Outcome refuse_with_reply(const std::string& message, std::string reason, std::string detail = {}) {
  Outcome o = error(message);
  o.close_after_reply = true;
  o.refusal = std::move(reason);
  o.refusal_detail = std::move(detail);
  return o;
}

Outcome wait_for(Op op, std::vector<std::string> keys, std::uint64_t timeout_ms) {
  Outcome o;
  o.action = Outcome::Action::Wait;
  o.wait_op = op;
  o.wait_keys = std::move(keys);
  o.wait_timeout_ms = timeout_ms;
  return o;
}

bool read_keys(Reader& r, std::vector<std::string>& keys) {
  std::uint32_t n = 0;
  if (!r.u32(n)) return false;
  for (std::uint32_t i = 0; i < n; ++i) {
    std::string key;
    if (!r.str(key, 1, kMaxKeyBytes)) return false;
    keys.push_back(std::move(key));
  }
  return true;
}

// Compares every byte whatever the first difference, so the timing does not tell how much of a guessed
// token was right.
bool same_token(const std::string& given, const std::string& expected) {
  if (given.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < given.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ expected[i]);
  return diff == 0;
}

Outcome on_hello(Reader& r, const RequestContext& ctx) {
  std::uint32_t version = 0;
  std::string token;
  if (!r.u32(version) || !r.str(token, 0, kMaxTokenBytes) || !r.at_end()) return refuse("malformed handshake");
  if (ctx.authenticated) return refuse("second handshake");
  if (version != kProtocolVersion)
    return refuse_with_reply(fmt::format("the server speaks TCPStore protocol version {}, this client {} (mixed "
                                         "idist versions in one job?)",
                                         kProtocolVersion, version),
                             "other protocol version", fmt::format("{}, expected {}", version, kProtocolVersion));
  if (!ctx.token.empty() && !same_token(token, ctx.token)) {
    const char* why = token.empty() ? "no store token" : "wrong store token";
    return refuse_with_reply(fmt::format("the server refused this client: {} (every process of a job needs the "
                                         "token of rank 0: IDIST_STORE_TOKEN, set for its workers by spawn / "
                                         "Parallel)",
                                         why),
                             why);
  }
  Outcome o = ok();
  o.authenticated = true;
  return o;
}

Outcome on_set(Reader& r, const RequestContext& ctx) {
  std::string key;
  std::vector<char> value;
  if (!r.str(key, 1, kMaxKeyBytes) || !r.bytes(value, kMaxValueBytes) || !r.at_end()) return refuse("malformed set");
  if (const auto message = ctx.state.set(key, std::move(value))) return error(*message);
  return ok();
}

Outcome on_add(Reader& r, const RequestContext& ctx) {
  std::string key;
  std::int64_t delta = 0;
  if (!r.str(key, 1, kMaxKeyBytes) || !r.i64(delta) || !r.at_end()) return refuse("malformed add");
  const KeyValueState::Count result = ctx.state.add(key, delta);
  if (const auto* message = std::get_if<std::string>(&result)) return error(*message);
  Writer out;
  out.i64(std::get<std::int64_t>(result));
  return ok(std::move(out));
}

Outcome on_check(Reader& r, const RequestContext& ctx) {
  std::vector<std::string> keys;
  if (!read_keys(r, keys) || !r.at_end()) return refuse("malformed check");
  Writer out;
  out.u8(ctx.state.all_present(keys) ? 1 : 0);
  return ok(std::move(out));
}

Outcome on_get(Reader& r) {
  std::uint64_t timeout_ms = 0;
  std::string key;
  if (!r.u64(timeout_ms) || !r.str(key, 1, kMaxKeyBytes) || !r.at_end()) return refuse("malformed get");
  return wait_for(Op::Get, {std::move(key)}, timeout_ms);
}

Outcome on_wait(Reader& r) {
  std::uint64_t timeout_ms = 0;
  std::vector<std::string> keys;
  if (!r.u64(timeout_ms) || !read_keys(r, keys) || !r.at_end()) return refuse("malformed wait");
  return wait_for(Op::Wait, std::move(keys), timeout_ms);
}

}  // namespace

HeaderVerdict check_header(const unsigned char* bytes, bool authenticated) {
  HeaderVerdict v;
  const auto h = decode_header(bytes);
  if (!h) {
    v.refusal = "bad frame header (not an idist TCPStore client?)";
    return v;
  }
  if (!valid_op(h->code)) {
    v.refusal = "unknown opcode";
    v.refusal_detail = fmt::format("{}", h->code);
    return v;
  }
  v.op = static_cast<Op>(h->code);
  if (!authenticated && v.op != Op::Hello) {
    v.refusal = "first request is not a handshake (HELLO)";
    return v;
  }
  const std::size_t cap = authenticated ? kMaxRequestPayload : kMaxHelloPayload;
  if (h->payload_length > cap) {
    v.refusal = "request longer than the limit";
    v.refusal_detail = fmt::format("{} of {} bytes, limit {}", op_name(v.op), h->payload_length, cap);
    return v;
  }
  v.payload_length = h->payload_length;
  return v;
}

Outcome handle_request(Op op, Reader& r, const RequestContext& ctx) {
  switch (op) {
    case Op::Hello: return on_hello(r, ctx);
    case Op::Set: return on_set(r, ctx);
    case Op::Add: return on_add(r, ctx);
    case Op::Check: return on_check(r, ctx);
    case Op::Get: return on_get(r);
    case Op::Wait: return on_wait(r);
  }
  return refuse("unknown opcode");
}

}  // namespace idist::store::detail
