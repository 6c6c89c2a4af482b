#include "store/c10d/probe.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "idist/error.hpp"

namespace idist::store::c10d {

namespace {

// Opens a fresh connection and says hello in `version`, waiting until `bound` for the reply. Returns the
// connection when the reply came; else nullptr, with the status in `status`.
std::unique_ptr<Connection> ask(const Connector& connect, Version version, Clock::time_point bound,
                                Clock::time_point deadline, IoStatus& status) {
  auto conn = connect(deadline);
  status = hello(*conn, version, bound);
  return status == IoStatus::Ok ? std::move(conn) : nullptr;
}

}  // namespace

IoStatus hello(Connection& conn, Version version, Clock::time_point bound) {
  if (const auto status = conn.write(encode_hello(version), bound); status != IoStatus::Ok) return status;
  std::array<unsigned char, kIntBytes> reply{};
  return conn.read(reply.data(), reply.size(), bound);
}

Probed probe_version(const Connector& connect, Clock::time_point deadline, const std::string& where) {
  const auto start = Clock::now();
  auto bound = kFirstProbeBound;
  std::string last = "no round was run";
  while (Clock::now() < deadline) {
    const auto round_end = std::min(deadline, Clock::now() + bound);
    IoStatus status{};
    if (auto conn = ask(connect, Version::V1, round_end, deadline, status)) return {Version::V1, std::move(conn)};
    // A server accepted the connection: the detection may take the one round both protocols need even
    // when the caller's timeout is shorter (a silent libuv server uses up the first half).
    deadline = std::max(deadline, start + kMinDetection);
    if (status == IoStatus::Closed) {
      // Only version 2's threaded backend closes on version 1's GETNUMKEYS: use the whole deadline.
      if (auto conn = ask(connect, Version::V2, deadline, deadline, status)) return {Version::V2, std::move(conn)};
      throw BackendError(fmt::format(
          "{}: the server closed the connection on protocol 1's first request and did not answer protocol 2's "
          "({}); is it a PyTorch TCPStore?",
          where, status == IoStatus::TimedOut ? "no reply" : "closed too"));
    }
    const auto second_end = std::min(deadline, Clock::now() + bound);
    if (auto conn = ask(connect, Version::V2, second_end, deadline, status)) return {Version::V2, std::move(conn)};
    last = fmt::format("no reply to either protocol's request within {} ms", bound.count());
    bound *= 2;
  }
  throw TimeoutError(fmt::format(
      "{}: could not tell which c10d TCPStore protocol the server speaks within {:.2f} s ({}); is it a "
      "PyTorch TCPStore? Set IDIST_C10D_STORE_PROTOCOL=1 (torch 1.x, 2.0) or 2 (torch 2.1 and later) to skip "
      "the detection",
      where, std::chrono::duration<double>(Clock::now() - start).count(), last));
}

}  // namespace idist::store::c10d
