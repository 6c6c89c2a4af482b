// libFuzzer target: the replies idist's c10d TCPStore client (src/store/c10d) reads from a server. A
// scripted peer stands in for the socket (C10dStoreOptions::connect): whatever the client writes is
// accepted, and its reads are served from the input until it runs out, when the peer closes (or goes
// silent: TimedOut). The client's own code parses everything: the hello and version probe, CHECK / WAIT
// bytes, ADD's i64, GET's length and value.
//
// Input: u8 mode | u8 op × 4 | the server's reply bytes. mode bits 0..1: protocol 1, 2, or probed;
// bit 2: a peer out of bytes goes silent instead of closing. Each op byte: bits 0..2 the call (set, get,
// add, check, wait, wait with timeout 0), bits 3..5 how many keys (1..8) for check / wait.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "idist/error.hpp"
#include "store/c10d/c10d_store.hpp"
#include "store/c10d/connection.hpp"

namespace {

using idist::store::C10dStore;
using idist::store::C10dStoreOptions;
namespace c10d = idist::store::c10d;

// The server's side of every connection, in order: one stream of reply bytes.
struct Script {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t at = 0;
  bool silent_at_end = false;
  int connections = 0;
};

class ScriptedPeer final : public c10d::Connection {
 public:
  explicit ScriptedPeer(Script& script) : script_(script) {}
  c10d::IoStatus connect(const std::string&, int, c10d::Clock::time_point) override { return c10d::IoStatus::Ok; }
  c10d::IoStatus write(const std::vector<char>&, c10d::Clock::time_point) override {
    return open_ ? c10d::IoStatus::Ok : end("not connected");
  }
  c10d::IoStatus read(void* out, std::size_t n, c10d::Clock::time_point) override {
    if (!open_) return end("not connected");
    if (script_.size - script_.at < n) {
      script_.at = script_.size;
      return script_.silent_at_end ? timed_out() : end("end of the script");
    }
    std::memcpy(out, script_.data + script_.at, n);
    script_.at += n;
    return c10d::IoStatus::Ok;
  }
  void close() override { open_ = false; }
  bool is_open() const override { return open_; }
  const std::string& error() const override { return error_; }

 private:
  c10d::IoStatus end(const char* why) {
    open_ = false;
    error_ = why;
    return c10d::IoStatus::Closed;
  }
  c10d::IoStatus timed_out() {
    open_ = false;
    error_ = "no reply in time";
    return c10d::IoStatus::TimedOut;
  }
  Script& script_;
  bool open_ = true;
  std::string error_;
};

std::vector<std::string> keys(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back("k" + std::to_string(i));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t kOps = 4;
  if (size < 1 + kOps) return 0;
  Script script{data + 1 + kOps, size - 1 - kOps};
  script.silent_at_end = (data[0] & 4) != 0;
  C10dStoreOptions options;
  switch (data[0] & 3) {
    case 0: options.version = c10d::Version::V1; break;
    case 1: options.version = c10d::Version::V2; break;
    default: break;  // probed
  }
  options.connect = [&script](c10d::Clock::time_point) -> std::unique_ptr<c10d::Connection> {
    // Bounds the reconnections of one input (a probe of a silent peer would retry until its deadline).
    if (++script.connections > 16) throw idist::BackendError("fuzz: no more connections");
    return std::make_unique<ScriptedPeer>(script);
  };
  try {
    C10dStore store("127.0.0.1", 29500, std::chrono::milliseconds(1000), options);
    for (std::size_t i = 0; i < kOps; ++i) {
      const std::uint8_t op = data[1 + i];
      const auto ks = keys(1 + ((op >> 3) & 7));
      try {
        switch (op & 7) {
          case 0: store.set("k0", {'v'}); break;
          case 1: {
            const auto v = store.get("k0");
            if (v.size() > idist::store::kMaxValueBytes) __builtin_trap();
            break;
          }
          case 2: store.add("k0", 1); break;
          case 3: store.check(ks); break;
          case 4: store.wait(ks, std::chrono::milliseconds(1000)); break;
          default: store.wait(ks, std::chrono::milliseconds(0)); break;
        }
      } catch (const idist::Error&) {  // the client's answer to a bad reply: expected
      }
    }
  } catch (const idist::Error&) {
  }
  return 0;
}
