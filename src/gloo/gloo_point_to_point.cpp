// GlooBackend: send and recv as unbound buffers of the world context, in slots of their own.
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

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
  const std::uint64_t slot = gloo::Slot::build(kPointToPointSlotPrefix, std::uint32_t(p.tag));
  const int peer = p.peer;
  const Buffer data = p.data;
  // Posted at once: only the wait is queued, so crossing isend / irecv pairs never wait on each other.
  auto post = [&](gloo::Context& ctx, PostedExchange& x) {
    if (sending) {
      x.send = ctx.createUnboundBuffer(data.data, data.bytes());
      x.send->send(peer, slot);
      x.sends = 1;
    } else {
      x.recv = ctx.createUnboundBuffer(data.data, data.bytes());
      x.recv->recv(peer, slot);
      x.receives = 1;
    }
  };
  return posted(static_cast<const GlooGroup&>(p.group), p.op, how, post, nullptr);
}

}  // namespace idist::gloo_backend
