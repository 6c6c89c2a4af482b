#include "store/c10d/probe.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "idist/error.hpp"

namespace idist::store::c10d {

namespace {

// Sends `request` on a fresh connection and waits until `bound` for GETNUMKEYS' 8-byte reply.
// Returns the connection when the reply came; else nullptr, with the status in `status`.
std::unique_ptr<Connection> ask(const Connector& connect, const std::vector<char>& request, Clock::time_point bound,
                                Clock::time_point deadline, IoStatus& status) {
  auto conn = connect(deadline);
  status = conn->write(request, bound);
  if (status != IoStatus::Ok) return nullptr;
  std::array<unsigned char, kIntBytes> reply{};
  status = conn->read(reply.data(), reply.size(), bound);
  if (status != IoStatus::Ok) return nullptr;
  return conn;
}

std::vector<char> validated_get_num_keys() {
  auto out = encode_validate();
  const auto q = encode_get_num_keys(Version::V2);
  out.insert(out.end(), q.begin(), q.end());
  return out;
}

}  // namespace

Probed probe_version(const Connector& connect, Clock::time_point deadline, const std::string& where) {
  const auto start = Clock::now();
  auto bound = kFirstProbeBound;
  std::string last = "no round was run";
  while (Clock::now() < deadline) {
    const auto round_end = std::min(deadline, Clock::now() + bound);
    IoStatus status{};
    if (auto conn = ask(connect, encode_get_num_keys(Version::V1), round_end, deadline, status))
      return {Version::V1, std::move(conn)};
    if (status == IoStatus::Closed) {
      // Only version 2's threaded backend closes on version 1's GETNUMKEYS: use the whole deadline.
      if (auto conn = ask(connect, validated_get_num_keys(), deadline, deadline, status))
        return {Version::V2, std::move(conn)};
      throw BackendError(fmt::format(
          "{}: the server closed the connection on both c10d TCPStore protocols' first request; is it a PyTorch "
          "TCPStore?",
          where));
    }
    const auto second_end = std::min(deadline, Clock::now() + bound);
    if (auto conn = ask(connect, validated_get_num_keys(), second_end, deadline, status))
      return {Version::V2, std::move(conn)};
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
