#pragma once
// What every gloo operation of GlooBackend shares (private to src/gloo): running one on a group's
// context with failures translated into idist errors, issuing it on the group's lane or the caller's
// thread, and the helpers of gloo's option classes.
#include <gloo/common/error.h>
#include <gloo/context.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "gloo/gloo_backend.hpp"
#include "gloo/peer_diagnosis.hpp"
#include "idist/error.hpp"

namespace idist::gloo_backend {

// A lost host is one that does not answer a TCP connection attempt within this time.
inline constexpr std::chrono::milliseconds kPeerProbeTimeout{1000};
// How much longer a Work waits than the operation's own timeout: the probe, plus scheduling slack.
inline constexpr std::chrono::milliseconds kFailureReportGrace = kPeerProbeTimeout + std::chrono::milliseconds(1000);

// Calls f(T{}) with an unsigned integer type of `size` bytes: gloo's options take the element size
// from the pointer type, and our reduce functions interpret the bytes by their real dtype.
template <class F>
void with_element_type(std::size_t size, F&& f) {
  switch (size) {
    case 1: f(std::uint8_t{}); return;
    case 2: f(std::uint16_t{}); return;
    case 4: f(std::uint32_t{}); return;
    default: f(std::uint64_t{}); return;
  }
}

// gloo's option classes take a shared_ptr to the context; the lane owns the context for as long as
// it runs operations, so a non-owning alias avoids a reference count per operation.
inline std::shared_ptr<gloo::Context> borrow(gloo::Context& ctx) { return {std::shared_ptr<void>(), &ctx}; }

// A buffer as the T* gloo's options take (inputs included, which gloo does not write).
template <class T>
T* typed(const void* p) {
  return static_cast<T*>(const_cast<void*>(p));
}

// Runs one gloo operation of `group`, translating failures into idist errors that name the operation,
// the rank and the group; the first failure marks the group's communicator unusable.
template <class Run>
void GlooBackend::run_guarded(const GlooGroup& group, OpType op, int rank, const rendezvous::PeerTable& peers,
                              const Run& run) {
  if (group.broken.load(std::memory_order_acquire)) {
    std::lock_guard lock(group.failure_mutex);
    throw BackendError(
        fmt::format("{} on rank {}: the gloo communicator of group {} is unusable after an earlier "
                    "failure ({}); call idist::finalize()",
                    to_string(op), rank, group.name(), group.failure));
  }
  const auto fail = [&](const std::string& detail, bool timed_out) {
    std::string unreachable;  // the peer watch's verdict, when it ended the operation
    {
      std::lock_guard lock(group.failure_mutex);
      unreachable = group.unreachable;
    }
    if (!unreachable.empty()) timed_out = false;
    // Only the first failure of a communicator looks for the lost peers (a bounded network probe).
    const std::string lost = !unreachable.empty() || group.broken.load(std::memory_order_acquire)
                                 ? std::string()
                                 : lost_peers(detail, timed_out, group.ranks(), rank, peers, kPeerProbeTimeout);
    std::string msg;
    if (!unreachable.empty())
      msg = fmt::format("{} on {} (group {}) failed: {} (gloo then reported: {})", to_string(op),
                        rendezvous::describe_rank(peers, rank), group.name(), unreachable, detail);
    else if (lost.empty())
      msg = fmt::format(
          "{} on {} (group {}) failed: {}; a peer may have died or issued a different collective (another "
          "operation, element type, count, reduce op or root: IDIST_DISTRIBUTED_DEBUG=DETAIL names it)",
          to_string(op), rendezvous::describe_rank(peers, rank), group.name(), detail);
    else
      msg = fmt::format("{} on {} (group {}) failed: {}; {}", to_string(op), rendezvous::describe_rank(peers, rank),
                        group.name(), detail, lost);
    {
      std::lock_guard lock(group.failure_mutex);
      if (group.failure.empty()) group.failure = msg;
    }
    group.broken.store(true, std::memory_order_release);
    if (timed_out) throw TimeoutError(msg);
    throw BackendError(msg);
  };
  // The peer watch sees how long this operation has been running.
  struct Busy {
    std::atomic<std::int64_t>& since;
    explicit Busy(std::atomic<std::int64_t>& s) : since(s) {
      since.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_release);
    }
    ~Busy() { since.store(0, std::memory_order_release); }
  };
  try {
    const Busy busy(group.watched.busy_since);
    run(*group.context);
  } catch (const TimeoutError& e) {
    fail(e.what(), true);
  } catch (const Error& e) {
    fail(e.what(), false);
  } catch (const gloo::IoException& e) {
    fail(std::string("gloo I/O error: ") + e.what(), std::strstr(e.what(), "imed out") != nullptr);
  } catch (const std::exception& e) {
    fail(std::string("gloo error: ") + e.what(), false);
  }
}

template <class Run>
Work GlooBackend::issue(const ProcessGroup& pg, OpType op, Completion how, Run run) {
  const auto& group = static_cast<const GlooGroup&>(pg);
  const int rank = this->rank();
  const rendezvous::PeerTable& peers = peers_;
  if (how == Completion::Blocking && group.lane->run_if_idle([&] { run_guarded(group, op, rank, peers, run); }))
    return Work{};
  const auto timeout = this->timeout();
  // One closure per operation: the lane's std::function holds it (a single allocation).
  auto impl =
      group.lane->submit([&group, op, rank, &peers, run = std::move(run)] { run_guarded(group, op, rank, peers, run); },
                         std::chrono::steady_clock::now() + timeout);
  // Gloo enforces the timeout inside the operation, whose error names the lost peers after a bounded
  // probe; the Work's own wait allows for that probe so that the caller gets the precise error.
  Work work(std::move(impl), op, rank, timeout + kFailureReportGrace);
  if (how == Completion::Async) return work;
  work.wait();
  return Work{};
}

}  // namespace idist::gloo_backend
