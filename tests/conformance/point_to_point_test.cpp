// send / recv and their non-blocking forms (torch.distributed's point-to-point calls, which ignite
// does not have) on every backend and world size, through the ComputationModel on Buffers: a message
// of another length to each peer and back, a ring of non-blocking pairs, tags received out of order,
// and the peers and tags each rank must get right.
#include "conformance/beyond_ignite.hpp"

namespace idist::conformance {
namespace {

using idist::Completion;

template <class T>
class PointToPointTyped : public Conformance {};
TYPED_TEST_SUITE(PointToPointTyped, BeyondTypes);

class PointToPointErrors : public Conformance {};

/// Elements of the message between rank 0 and rank `peer`: another length for each peer.
std::size_t message_length(int peer) { return 3 + std::size_t(peer) * 2; }

TYPED_TEST(PointToPointTyped, BlockingToEveryPeerAndBack) {
  IDIST_REQUIRE_WORLD_AT_LEAST(2);
  using T = TypeParam;
  ComputationModel& m = idist::current_model();
  // Rank 0 sends to every other rank in turn (tag = the peer), then receives each one's answer.
  if (rank() == 0) {
    for (int peer = 1; peer < world(); ++peer) {
      SpanBuffer<T> msg(values<T>(message_length(peer), [&](std::size_t i) { return block_value(0, peer, i); }));
      m.send(const_buffer(msg), peer, peer, Completion::Blocking);
    }
    for (int peer = 1; peer < world(); ++peer) {
      SpanBuffer<T> got(values<T>(message_length(peer), [](std::size_t) { return 0; }));
      m.recv(buffer(got), peer, 1000 + peer, Completion::Blocking);
      EXPECT_EQ(mismatch(got.to_host(), message_length(peer),
                         [&](std::size_t i) { return from_int<T>(block_value(peer, 0, i)); }),
                "")
          << type_name<T>() << " from rank " << peer;
    }
  } else {
    const std::size_t n = message_length(rank());
    SpanBuffer<T> got(values<T>(n, [](std::size_t) { return 0; }));
    m.recv(buffer(got), 0, rank(), Completion::Blocking);
    EXPECT_EQ(mismatch(got.to_host(), n, [&](std::size_t i) { return from_int<T>(block_value(0, rank(), i)); }), "")
        << type_name<T>() << " from rank 0";
    SpanBuffer<T> answer(values<T>(n, [&](std::size_t i) { return block_value(rank(), 0, i); }));
    m.send(const_buffer(answer), 0, 1000 + rank(), Completion::Blocking);
  }
}

TYPED_TEST(PointToPointTyped, NonBlockingRingWithTagsReceivedOutOfOrder) {
  IDIST_REQUIRE_WORLD_AT_LEAST(2);
  using T = TypeParam;
  ComputationModel& m = idist::current_model();
  const int next = (rank() + 1) % world(), prev = (rank() + world() - 1) % world();
  const std::size_t n = 9;
  // Two messages to the next rank, tags 1 and 2, each with its own values; the receives are posted
  // first and in the other order, so each must be matched by its tag, not by its arrival.
  SpanBuffer<T> got2(values<T>(n + 1, [](std::size_t) { return 0; }));
  SpanBuffer<T> got1(values<T>(n, [](std::size_t) { return 0; }));
  idist::Work r2 = m.recv(buffer(got2), prev, 2);
  idist::Work r1 = m.recv(buffer(got1), prev, 1);
  SpanBuffer<T> out1(values<T>(n, [&](std::size_t i) { return block_value(rank(), 1, i); }));
  SpanBuffer<T> out2(values<T>(n + 1, [&](std::size_t i) { return block_value(rank(), 2, i); }));
  idist::Work s1 = m.send(const_buffer(out1), next, 1);
  idist::Work s2 = m.send(const_buffer(out2), next, 2);
  r1.wait();
  r2.wait();
  s2.wait();
  s1.wait();
  EXPECT_EQ(mismatch(got1.to_host(), n, [&](std::size_t i) { return from_int<T>(block_value(prev, 1, i)); }), "")
      << type_name<T>() << " tag 1";
  EXPECT_EQ(mismatch(got2.to_host(), n + 1, [&](std::size_t i) { return from_int<T>(block_value(prev, 2, i)); }), "")
      << type_name<T>() << " tag 2";
}

TEST_F(PointToPointErrors, BadPeersAndTags) {
  // Checked before anything is sent, so every rank refuses alone.
  std::vector<double> v(2, 1.0);
  const idist::Buffer data{v.data(), v.size(), idist::DType::Float64, {}};
  ComputationModel& m = idist::current_model();
  const int other = (rank() + 1) % world();
  expect_value_error_on_every_rank([&] { m.send(data, rank(), 0, Completion::Blocking); }, "expected another rank");
  expect_value_error_on_every_rank([&] { m.recv(data, rank(), 0, Completion::Blocking); }, "expected another rank");
  expect_value_error_on_every_rank([&] { m.send(data, world(), 0, Completion::Blocking); }, "dst");
  expect_value_error_on_every_rank([&] { m.recv(data, -1, 0, Completion::Blocking); }, "src");
  if (world() > 1) {
    expect_value_error_on_every_rank([&] { m.send(data, other, -3, Completion::Blocking); }, "non-negative");
    expect_value_error_on_every_rank([&] { m.recv(data, other, -1); }, "non-negative");
  }
}

}  // namespace
}  // namespace idist::conformance
