// libFuzzer target: the bytes clients send to idist's TCPStore server. They go through the server's own
// frame-header check and request handlers (tcp_store_handlers.hpp) and its key-value state, as the
// sessions (tcp_store_session.cpp) drive them, without sockets.
//
// Input: u8 config | (u8 session | frame)*, where config bit 0 gives the server a token ("tok") and
// bits 1..3 a world size (0: unknown), and each frame (tcp_store_protocol.hpp) goes to one of four
// sessions, so that one session's SET completes another's pending GET / WAIT. A session that is refused,
// or sends anything while its GET / WAIT is pending, is closed, as on the server; an unfinished frame
// ends the input. Every reply the server builds must be one its client accepts (length, TIMEOUT layout).
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "store/tcp_store_handlers.hpp"
#include "store/tcp_store_protocol.hpp"
#include "store/tcp_store_state.hpp"

namespace {

using namespace idist::store::detail;

constexpr std::size_t kSessions = 4;

// A reply must be one TCPStoreClient reads; anything else is a server bug.
void check_reply(Status status, Writer& payload) {
  if (payload.buffer().size() > kMaxResponsePayload) std::abort();
  if (status == Status::Timeout && !decode_timeout(payload.buffer())) std::abort();
}

struct Session final : WaitListener {
  KeyValueState* state = nullptr;
  bool authenticated = false;
  bool closed = false;
  std::shared_ptr<PendingWait> waiting;

  void keys_present() override {
    auto w = std::move(waiting);
    Writer reply = state->ok_reply(*w);
    check_reply(Status::Ok, reply);
  }

  void close() {
    if (waiting) state->cancel(waiting);
    waiting.reset();
    closed = true;
  }

  void carry_out(Outcome o) {
    switch (o.action) {
      case Outcome::Action::Close: return close();
      case Outcome::Action::Wait: {
        waiting = state->wait(o.wait_op, std::move(o.wait_keys), this);
        if (waiting->missing.empty()) keys_present();
        return;
      }
      case Outcome::Action::Reply: break;
    }
    if (o.authenticated) authenticated = true;
    check_reply(o.status, o.payload);
    if (o.close_after_reply) close();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string token = (data[0] & 1) ? "tok" : "";
  const int world = (data[0] >> 1) & 7;
  KeyValueState state(world == 0 ? -1 : world);
  std::array<Session, kSessions> sessions;
  for (auto& s : sessions) s.state = &state;

  std::size_t at = 1;
  while (at + 1 + kHeaderBytes <= size) {
    Session& s = sessions[data[at] % kSessions];
    const unsigned char* header = data + at + 1;
    at += 1 + kHeaderBytes;
    if (s.closed) continue;
    if (s.waiting) {  // bytes during a pending GET / WAIT: the server drops the connection
      s.close();
      continue;
    }
    const HeaderVerdict v = check_header(header, s.authenticated);
    if (!v.refusal.empty()) {
      s.close();
      continue;
    }
    if (v.payload_length > size - at) break;  // the rest of the frame never arrives
    Reader r(reinterpret_cast<const char*>(data + at), v.payload_length);
    at += v.payload_length;
    s.carry_out(handle_request(v.op, r, RequestContext{state, token, s.authenticated}));
  }
  // What is still pending times out.
  for (auto& s : sessions) {
    if (!s.waiting) continue;
    Writer reply = state.timeout_reply(*s.waiting, KeyValueState::Clock::now());
    check_reply(Status::Timeout, reply);
    s.close();
  }
  return 0;
}
