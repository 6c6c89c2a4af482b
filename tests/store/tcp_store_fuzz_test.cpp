// A seeded random fuzzer of the TCPStore server's protocol, bounded in count and time: random bytes,
// frames with random opcodes, lengths (up to 4 GiB announced) and payloads, truncated frames and mutated
// valid requests, with and without a handshake, from connections left open or closed at random. Between
// rounds a legitimate client must be served within 1 s, a sentinel key must keep its value and the
// buffered request bytes must stay within the server's cap. IDIST_FUZZ_SEED overrides the seed.
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "raw_store_client.hpp"
#include "store/tcp_store.hpp"
#include "store/tcp_store_protocol.hpp"
#include "store/tcp_store_server.hpp"
#include "store_test_util.hpp"
#include "support/time_scale.hpp"

namespace {
using namespace std::chrono_literals;
using idist::store::TCPStore;
using idist::test::RawStoreClient;
using idist::test::seconds_since;
using Clock = std::chrono::steady_clock;
namespace detail = idist::store::detail;

constexpr int kIterations = 3000;
constexpr auto kTimeBudget = 30s;
constexpr int kMaxOpen = 60;  // connections the fuzzer keeps open at once
constexpr std::size_t kBufferCap = std::size_t{8} << 20;
constexpr const char* kToken = "fuzz-token";

class Fuzzer {
 public:
  explicit Fuzzer(std::uint32_t seed) : rng_(seed) {}

  std::uint32_t below(std::uint32_t n) { return std::uniform_int_distribution<std::uint32_t>(0, n - 1)(rng_); }

  std::vector<char> random_bytes(std::size_t n) {
    std::vector<char> out(n);
    for (auto& c : out) c = static_cast<char>(below(256));
    return out;
  }

  // A request that parses, for mutation.
  std::vector<char> valid_payload(detail::Op op) {
    detail::Writer w;
    const std::string key =
        below(4) == 0 ? std::string(detail::kReservedPrefix) + "world_size" : fmt::format("k{}", below(8));
    switch (op) {
      case detail::Op::Set:
        w.str(key);
        w.str(std::string(below(64), 'v'));
        break;
      case detail::Op::Get:
        w.u64(below(50));
        w.str(key);
        break;
      case detail::Op::Wait:
        w.u64(below(50));
        w.u32(1);
        w.str(key);
        break;
      case detail::Op::Add:
        w.str(key);
        w.i64(static_cast<std::int64_t>(below(7)) - 3);
        break;
      case detail::Op::Check:
        w.u32(1);
        w.str(key);
        break;
      case detail::Op::Hello:
        w.u32(detail::kProtocolVersion);
        w.str(below(2) ? kToken : "nope");
        break;
    }
    return w.buffer();
  }

  // Sends one random thing on `c`.
  void attack(RawStoreClient& c) {
    const auto op = static_cast<detail::Op>(1 + below(6));
    switch (below(6)) {
      case 0: {
        const auto b = random_bytes(1 + below(2048));
        c.send(b.data(), b.size());
        break;
      }
      case 1:  // an announced length far beyond what follows (up to 4 GiB)
        c.send_frame(static_cast<std::uint8_t>(op), random_bytes(below(4096)),
                     below(2) ? 0xFFFFFFFFu : (1u << (10 + below(17))));
        break;
      case 2:  // a random opcode and payload
        c.send_frame(static_cast<std::uint8_t>(below(256)), random_bytes(below(512)));
        break;
      case 3: {  // a valid request with random bytes flipped
        auto p = valid_payload(op);
        for (int i = 0, n = static_cast<int>(below(4)); i < n && !p.empty(); ++i)
          p[below(static_cast<std::uint32_t>(p.size()))] ^= static_cast<char>(1 + below(255));
        c.send_frame(static_cast<std::uint8_t>(op), p);
        break;
      }
      case 4: {  // a truncated valid request
        auto p = valid_payload(op);
        const auto len = static_cast<std::uint32_t>(p.size());
        p.resize(below(len + 1));
        c.send_frame(static_cast<std::uint8_t>(op), p, len);
        break;
      }
      default:  // a valid request
        c.send_frame(static_cast<std::uint8_t>(op), valid_payload(op));
        break;
    }
  }

 private:
  std::mt19937 rng_;
};

TEST(TCPStoreFuzz, ServerStaysResponsiveAndBounded) {
  std::uint32_t seed = 20261123;
  if (const char* s = std::getenv("IDIST_FUZZ_SEED")) seed = static_cast<std::uint32_t>(std::strtoul(s, nullptr, 10));
  std::printf("fuzz seed %u (set IDIST_FUZZ_SEED to replay)\n", seed);
  Fuzzer fuzz(seed);

  TCPStore server("127.0.0.1", 0, true, 0, 10s, false, {.token = kToken});
  // Our own view of the server's limits: a second server with small caps receives the same traffic.
  detail::TCPStoreServer capped(
      0, 0, {.token = kToken, .handshake_timeout = 500ms, .max_connections = 48, .max_buffered_bytes = kBufferCap});
  TCPStore legit("127.0.0.1", capped.port(), false, 0, 5s, true, {.token = kToken});
  legit.set("sentinel", {'s'});
  server.set("sentinel", {'s'});

  std::vector<std::unique_ptr<RawStoreClient>> open;
  const auto start = Clock::now();
  int done = 0;
  double worst = 0;
  for (; done < kIterations && Clock::now() - start < kTimeBudget; ++done) {
    const int port = fuzz.below(2) ? server.port() : capped.port();
    std::unique_ptr<RawStoreClient> c;
    try {
      c = std::make_unique<RawStoreClient>(port);
    } catch (const std::exception&) {
      continue;  // refused while the backlog is full: fine
    }
    if (fuzz.below(3) == 0) c->hello(fuzz.below(2) ? kToken : "wrong");
    for (int i = 0, n = 1 + static_cast<int>(fuzz.below(3)); i < n; ++i) fuzz.attack(*c);
    if (fuzz.below(2)) {
      open.push_back(std::move(c));
      if (static_cast<int>(open.size()) > kMaxOpen) open.erase(open.begin() + fuzz.below(kMaxOpen));
    }
    if (done % 25 == 0) {
      const auto t = Clock::now();
      legit.set("probe", {'p'});
      ASSERT_EQ(legit.get_string("probe"), "p") << "iteration " << done;
      worst = std::max(worst, seconds_since(t));
      ASSERT_LT(seconds_since(t), idist::test::scaled(1.0)) << "iteration " << done;
      ASSERT_LE(capped.stats().peak_buffered_bytes, kBufferCap);
      ASSERT_LE(capped.stats().connections, 48);
    }
  }
  open.clear();
  std::printf("%d rounds in %.1f s; slowest legitimate set+get %.1f ms; refused %llu; peak buffered %zu bytes\n", done,
              seconds_since(start), worst * 1e3, static_cast<unsigned long long>(capped.stats().refused),
              capped.stats().peak_buffered_bytes);
  EXPECT_GE(done, 100);
  EXPECT_EQ(legit.get_string("sentinel"), "s");  // a key the fuzzer never names
  TCPStore check("127.0.0.1", server.port(), false, 0, 5s, true, {.token = kToken});
  EXPECT_EQ(check.get_string("sentinel"), "s");
}

}  // namespace
