// GlooBackend's posted collectives: reduce_scatter(_v) with unequal blocks or on groups whose size is
// not a power of two, all_gather(_v), and all_reduce on groups that span hosts. Each block goes
// straight to the rank that needs it, as unbound buffers of the group's context posted on the caller's
// thread at issue, every receive before any send; the waits and what follows them are queued on the
// point-to-point lane (all_reduce's all-gather: on the group's lane).
//
// Why not Gloo's own algorithms for these:
// - gloo::allgather posts each send before the matching receive. A rank that arrives after its peer
//   found the peer's receive posted, so its half of the buffer goes out first and its own
//   receive's notification waits behind it on the pair: the peer's data starts that much later
//   (16 MiB across 2 hosts at 1 Gbit/s: 210 ms instead of 140 whenever the ranks arrive apart).
// - ReduceScatterHalvingDoubling halves the buffer into equal parts before handing each rank its
//   block: with unequal blocks (ZeRO's whole-parameter ownership) each operation lasts as long as its
//   longest block; it gave wrong sums on 3 ranks and waited forever for an empty block at 4.
// - Both run on the group's lane from start to end, so the operations issued after them wait; posted,
//   the transfers of several operations in flight share both directions of each link.
// - The same holds for gloo::allreduce: across hosts, DDP's buckets then go out one ring at a time,
//   and the link idles between a bucket's steps while backward still produces the next ones.
// The bytes each rank sends are those of a ring: its peers' blocks (reduce-scatter) or its own block
// to each peer (all-gather).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "backend_kit/host_reduce.hpp"
#include "gloo/call_tag.hpp"
#include "gloo/issue.hpp"
#include "gloo/posted_exchange.hpp"

namespace idist::gloo_backend {

namespace {

constexpr std::uint64_t kPostedSlotPrefix = 0x51;

// The slot of one posted collective: a prefix of its own (Gloo's collectives use 0x01-0x08, idist's
// send / recv 0x50), 32 bits hashed from what the ranks must agree on (the operation, `call`'s tag
// and every block's length: ranks that disagree never match and time out, instead of Gloo aborting
// on a longer message than was posted) and the low 24 bits of `seq`, the group's count of posted
// collectives, which keep the operations in flight apart.
std::uint64_t posted_slot(OpType op, std::uint32_t call, const std::vector<std::size_t>& blocks, std::uint32_t seq) {
  std::uint64_t h = (std::uint64_t(call) << 8) ^ std::uint64_t(op);
  for (const std::size_t b : blocks) h = (h ^ b) * 0x100000001B3ull;
  const std::uint32_t agreed = std::uint32_t(h >> 32) ^ std::uint32_t(h);
  return (kPostedSlotPrefix << 56) | (std::uint64_t(agreed) << 24) | (seq & 0xFFFFFFu);
}

// The byte offset of each group rank's block, then the end: `lengths` in elements of `esize` bytes.
std::vector<std::size_t> block_offsets(const std::vector<std::size_t>& lengths, std::size_t esize) {
  std::vector<std::size_t> at(lengths.size() + 1, 0);
  for (std::size_t p = 0; p < lengths.size(); ++p) at[p + 1] = at[p] + lengths[p] * esize;
  return at;
}

// A reduce-scatter's transfers: every peer's contribution to this rank's block received into the
// rows of x.scratch (group rank order), and the other blocks of `in` (offsets `at`) sent to their owners.
void post_reduce_scatter(gloo::Context& ctx, PostedExchange& x, const void* in, const std::vector<std::size_t>& at,
                         int me, std::uint64_t slot) {
  const int n = int(at.size()) - 1;
  const std::size_t mine = at[std::size_t(me) + 1] - at[std::size_t(me)];
  if (mine > 0) {
    x.scratch.resize(std::size_t(n) * mine);
    x.recv = ctx.createUnboundBuffer(x.scratch.data(), x.scratch.size());
    for (int p = 0; p < n; ++p)
      if (p != me) {
        x.recv->recv(p, slot, std::size_t(p) * mine, mine);
        ++x.receives;
      }
  }
  x.send = ctx.createUnboundBuffer(const_cast<void*>(in), at.back());
  for (std::size_t p = 0; p < std::size_t(n); ++p)
    if (int(p) != me && at[p + 1] > at[p]) {
      x.send->send(int(p), slot, at[p], at[p + 1] - at[p]);
      ++x.sends;
    }
}

// After post_reduce_scatter's waits: this rank's `mine` bytes of block, its own contribution
// `own_block` in its row, reduced in group rank order into `out`.
void reduce_own_block(PostedExchange& x, const void* own_block, void* out, std::size_t mine, int me, int n, DType dtype,
                      ReduceOp reduce_op) {
  if (mine == 0) return;
  std::memcpy(x.scratch.data() + std::size_t(me) * mine, own_block, mine);
  backend_kit::reduce_rows(out, x.scratch.data(), mine / dtype_size(dtype), n, dtype, reduce_op);
}

// An all-gather's transfers: each peer's block received into `out` at its offset `at`, and this
// rank's `mine_bytes` at `mine` sent to every peer.
void post_all_gather(gloo::Context& ctx, PostedExchange& x, void* out, const std::vector<std::size_t>& at, int me,
                     const void* mine, std::size_t mine_bytes, std::uint64_t slot) {
  const int n = int(at.size()) - 1;
  x.recv = ctx.createUnboundBuffer(out, at.back());
  for (std::size_t p = 0; p < std::size_t(n); ++p)
    if (int(p) != me && at[p + 1] > at[p]) {
      x.recv->recv(int(p), slot, at[p], at[p + 1] - at[p]);
      ++x.receives;
    }
  if (mine_bytes == 0) return;
  x.send = ctx.createUnboundBuffer(const_cast<void*>(mine), mine_bytes);
  for (int p = 0; p < n; ++p)
    if (p != me) {
      x.send->send(p, slot, 0, mine_bytes);
      ++x.sends;
    }
}

}  // namespace

void PostedExchange::wait(std::chrono::steady_clock::time_point deadline) const {
  for (int i = 0; i < receives; ++i) recv->waitRecv(deadline);
  for (int i = 0; i < sends; ++i) send->waitSend(deadline);
}

Work GlooBackend::posted(const GlooGroup& group, OpType op, Completion how, const PostFn& post, DoneFn done) {
  const int rank = this->rank();
  const rendezvous::PeerTable& peers = peers_;
  RetainedOptions* retained = retained_.get();
  auto exchange = std::make_shared<PostedExchange>();
  try {
    run_guarded(group, op, rank, peers, [&](gloo::Context& ctx) { post(ctx, *exchange); });
  } catch (...) {
    retained->keep(exchange);  // the transport thread may still signal its buffers
    throw;
  }
  const auto timeout = this->timeout();
  auto finish = [&group, op, rank, &peers, retained, exchange, timeout, done = std::move(done)] {
    try {
      run_guarded(group, op, rank, peers,
                  [&](gloo::Context&) { exchange->wait(std::chrono::steady_clock::now() + timeout); });
    } catch (...) {
      retained->keep(exchange);
      throw;
    }
    if (done) done(*exchange);
  };
  if (how == Completion::Blocking) {
    finish();
    return Work{};
  }
  auto impl = p2p_lane_->submit(std::move(finish), std::chrono::steady_clock::now() + timeout);
  return Work(std::move(impl), op, rank, timeout + kFailureReportGrace);
}

Work GlooBackend::posted_reduce_scatter(const Reduction& r, const std::vector<int>& blocks, Completion how) {
  const auto& group = static_cast<const GlooGroup&>(r.group);
  const int n = group.size();
  const int me = group.rank();
  const ConstBuffer in = r.in;
  const Buffer out = r.out;
  const DType dtype = in.dtype;
  const ReduceOp reduce_op = r.reduce_op;
  const std::vector<std::size_t> lengths(blocks.begin(), blocks.end());
  const std::vector<std::size_t> at = block_offsets(lengths, dtype_size(dtype));  // in `in`
  const std::size_t own = at[std::size_t(me)], mine = at[std::size_t(me) + 1] - own;
  const std::uint64_t slot = posted_slot(r.op, call_tag(dtype, in.count, int(reduce_op), -1), lengths,
                                         group.posted_operations.fetch_add(1, std::memory_order_relaxed));
  auto post = [&](gloo::Context& ctx, PostedExchange& x) { post_reduce_scatter(ctx, x, in.data, at, me, slot); };
  auto done = [in, out, own, me, n, mine, dtype, reduce_op](PostedExchange& x) {
    reduce_own_block(x, static_cast<const std::byte*>(in.data) + own, out.data, mine, me, n, dtype, reduce_op);
  };
  return posted(group, r.op, how, post, std::move(done));
}

Work GlooBackend::posted_all_reduce(const Reduction& r, Completion how) {
  const auto& group = static_cast<const GlooGroup&>(r.group);
  const int n = group.size();
  const int me = group.rank();
  const Buffer data = r.out;  // in place: r.in is the same buffer
  const DType dtype = data.dtype;
  const ReduceOp reduce_op = r.reduce_op;
  if (n == 1) return Work{};
  const std::uint32_t tag = call_tag(dtype, data.count, int(reduce_op), -1);
  if (n == 2) {
    // The whole buffer each way: the bytes of a ring, in one posted transfer per direction.
    const int peer = 1 - me;
    const std::size_t bytes = data.bytes();
    const backend_kit::ReduceFn fn = backend_kit::reduce_function(dtype, reduce_op);
    const std::uint64_t slot =
        posted_slot(r.op, tag, {data.count}, group.posted_operations.fetch_add(1, std::memory_order_relaxed));
    auto post = [&](gloo::Context& ctx, PostedExchange& x) {
      x.scratch.resize(bytes);
      x.recv = ctx.createUnboundBuffer(x.scratch.data(), bytes);
      x.recv->recv(peer, slot, 0, bytes);
      x.send = ctx.createUnboundBuffer(data.data, bytes);
      x.send->send(peer, slot, 0, bytes);
      x.receives = x.sends = 1;
    };
    // Operands in group rank order on both ranks, so that both compute the same bits.
    auto done = [data, fn, me](PostedExchange& x) {
      const void* theirs = x.scratch.data();
      fn(data.data, me == 0 ? data.data : theirs, me == 0 ? theirs : data.data, data.count);
    };
    return posted(group, r.op, how, post, std::move(done));
  }
  // More members: a reduce-scatter posted at issue (each block straight to its owner, who reduces it
  // in rank order), then on the group's lane, which runs collectives in the same order on every rank,
  // an all-gather of the reduced blocks. Both slots are taken now, in issue order.
  std::vector<std::size_t> lengths(std::size_t(n), data.count / std::size_t(n));
  for (std::size_t p = 0; p < data.count % std::size_t(n); ++p) ++lengths[p];
  const std::vector<std::size_t> at = block_offsets(lengths, dtype_size(dtype));
  const std::size_t own = at[std::size_t(me)], mine = at[std::size_t(me) + 1] - own;
  const std::uint32_t seq = group.posted_operations.fetch_add(2, std::memory_order_relaxed);
  const std::uint64_t scatter_slot = posted_slot(r.op, tag, lengths, seq);
  const std::uint64_t gather_slot = posted_slot(r.op, tag, lengths, seq + 1);
  std::byte* const block = static_cast<std::byte*>(data.data) + own;
  auto scatter = std::make_shared<PostedExchange>();
  RetainedOptions* retained = retained_.get();
  try {
    run_guarded(group, r.op, rank(), peers_,
                [&](gloo::Context& ctx) { post_reduce_scatter(ctx, *scatter, data.data, at, me, scatter_slot); });
  } catch (...) {
    retained->keep(scatter);
    throw;
  }
  const auto timeout = this->timeout();
  return issue(group, r.op, how, [=](gloo::Context& ctx) {
    auto gather = std::make_shared<PostedExchange>();
    try {
      scatter->wait(std::chrono::steady_clock::now() + timeout);
      reduce_own_block(*scatter, block, block, mine, me, n, dtype, reduce_op);
      // Every send of the reduce-scatter is over: the other blocks of `data` can be received into.
      post_all_gather(ctx, *gather, data.data, at, me, block, mine, gather_slot);
      gather->wait(std::chrono::steady_clock::now() + timeout);
    } catch (...) {
      retained->keep(scatter);  // the transport thread may still signal their buffers
      retained->keep(gather);
      throw;
    }
  });
}

Work GlooBackend::posted_all_gather(const Gathering& g, std::vector<std::size_t> lengths, Completion how) {
  const auto& group = static_cast<const GlooGroup&>(g.group);
  const int me = group.rank();
  const ConstBuffer in = g.in;
  const Buffer out = g.out;
  const std::vector<std::size_t> at = block_offsets(lengths, dtype_size(in.dtype));  // in `out`
  const std::uint64_t slot = posted_slot(g.op, call_tag(in.dtype, out.count, -1, -1), lengths,
                                         group.posted_operations.fetch_add(1, std::memory_order_relaxed));
  auto post = [&](gloo::Context& ctx, PostedExchange& x) {
    post_all_gather(ctx, x, out.data, at, me, in.data, in.bytes(), slot);
  };
  // This rank's own block last: `in` may be that block of `out` already.
  auto done = [in, out, own = at[std::size_t(me)]](PostedExchange&) {
    std::byte* to = static_cast<std::byte*>(out.data) + own;
    if (in.bytes() > 0 && to != in.data) std::memmove(to, in.data, in.bytes());
  };
  return posted(group, g.op, how, post, std::move(done));
}

}  // namespace idist::gloo_backend
