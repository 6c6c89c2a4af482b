// GlooBackend: send and recv as unbound buffers of the world context, in slots of their own.
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <memory>

#include "backend_kit/op_family.hpp"
#include "gloo/issue.hpp"

namespace idist::gloo_backend {

namespace {
// Gloo's collectives build their slots with prefixes 0x01-0x08 (gloo/types.h); messages of the user's
// tags take one of their own, so that they never match a collective's.
constexpr std::uint8_t kPointToPointSlotPrefix = 0x50;
}  // namespace

Work GlooBackend::do_point_to_point(const PointToPoint& p, Completion how) {
  switch (p.op) {
    case OpType::Send: return transfer(p, /*sending=*/true, how);
    case OpType::Recv:
      return transfer(p, /*sending=*/false, how);
    IDIST_OPTYPES_OUTSIDE_POINT_TO_POINT:
      break;
  }
  backend_kit::outside_family(p.op, backend_kit::OpFamily::PointToPoint);
}

Work GlooBackend::transfer(const PointToPoint& p, bool sending, Completion how) {
  const auto& world = static_cast<const GlooGroup&>(p.group);
  const std::uint64_t slot = gloo::Slot::build(kPointToPointSlotPrefix, std::uint32_t(p.tag));
  const int peer = p.peer;
  const auto timeout = this->timeout();
  const int rank = this->rank();
  const rendezvous::PeerTable& peers = peers_;
  std::shared_ptr<gloo::transport::UnboundBuffer> buffer;
  run_guarded(world, p.op, rank, peers, [&](gloo::Context& ctx) {
    buffer = ctx.createUnboundBuffer(p.data.data, p.data.bytes());
    if (sending)
      buffer->send(peer, slot);
    else
      buffer->recv(peer, slot);
  });
  RetainedOptions* retained = retained_.get();
  auto wait = [&world, buffer, sending, timeout, rank, &peers, op = p.op, retained] {
    try {
      run_guarded(world, op, rank, peers, [&](gloo::Context&) {
        if (sending)
          buffer->waitSend(timeout);
        else
          buffer->waitRecv(timeout);
      });
    } catch (...) {
      retained->keep(buffer);  // the transport thread may still signal it
      throw;
    }
  };
  if (how == Completion::Blocking) {
    wait();
    return Work{};
  }
  // Posted already: only the wait is queued, so crossing isend / irecv pairs never wait on each other.
  auto impl = p2p_lane_->submit(std::move(wait), std::chrono::steady_clock::now() + timeout);
  return Work(std::move(impl), p.op, rank, timeout + kFailureReportGrace);
}

}  // namespace idist::gloo_backend
