// reduce, gather, scatter, reduce_scatter, all_to_all (even and with split sizes) and send / recv on
// tensors, at any world size, against references computed on this rank (what a serial run of the
// same inputs gives); with a subgroup, several dtypes, non-contiguous tensors, the non-blocking forms
// and the arguments the front door refuses.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "idist/idist.hpp"

namespace {

int ws() { return idist::get_world_size(); }
int rank() { return idist::get_rank(); }

template <class Fn>
std::string value_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const idist::ValueError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_MESSAGE_HAS(msg, text) EXPECT_NE((msg).find(text), std::string::npos) << (msg)

// Element types whose sums of small integers are exact.
const std::vector<c10::ScalarType> kTypes = {torch::kFloat, torch::kDouble, torch::kInt,
                                             torch::kLong,  torch::kHalf,   torch::kBFloat16};

// Rank r's tensor of `shape`: its row index + r + 1 (small integers, exact in every type above).
torch::Tensor input_of(int r, std::int64_t rows, std::int64_t cols, c10::ScalarType st) {
  return (torch::arange(rows, torch::kLong).unsqueeze(1).expand({rows, cols}) + r + 1).to(st);
}

torch::Tensor sum_over_ranks(std::int64_t rows, std::int64_t cols, c10::ScalarType st) {
  auto total = torch::zeros({rows, cols}, torch::kLong);
  for (int r = 0; r < ws(); ++r) total += input_of(r, rows, cols, torch::kLong);
  return total.to(st);
}

// A subgroup listed out of order: the last rank and rank 0 (the world's only rank when serial).
idist::Group subgroup() { return ws() > 1 ? idist::Group{ws() - 1, 0} : idist::Group{0}; }

TEST(BlockReduce, SumToEachDestinationOverDTypes) {
  for (auto st : kTypes) {
    const int dst = ws() - 1;
    auto t = input_of(rank(), 4, 3, st);
    idist::reduce(t, dst, idist::ReduceOp::Sum);
    const auto expected = rank() == dst ? sum_over_ranks(4, 3, st) : input_of(rank(), 4, 3, st);
    EXPECT_TRUE(t.equal(expected)) << c10::toString(st) << " rank " << rank() << "\n" << t;
  }
}

TEST(BlockReduce, MaxIntoNonContiguousTensor) {
  auto base = (torch::arange(12, torch::kLong).reshape({3, 4}) * (rank() + 1));
  auto view = base.t();
  ASSERT_FALSE(view.is_contiguous());
  idist::reduce(view, 0, idist::ReduceOp::Max);
  const auto expected = torch::arange(12, torch::kLong).reshape({3, 4}) * (rank() == 0 ? ws() : rank() + 1);
  EXPECT_TRUE(base.equal(expected)) << base;
}

TEST(BlockGather, OnePerRankInRankOrder) {
  for (auto st : {torch::kFloat, torch::kLong, torch::kBFloat16}) {
    const int dst = ws() > 1 ? 1 : 0;
    const auto t = input_of(rank(), 2, 3, st).t();  // not contiguous
    const auto parts = idist::gather(t, dst);
    if (rank() != dst) {
      EXPECT_TRUE(parts.empty());
      continue;
    }
    ASSERT_EQ(parts.size(), std::size_t(ws()));
    for (int r = 0; r < ws(); ++r)
      EXPECT_TRUE(parts[std::size_t(r)].equal(input_of(r, 2, 3, st).t())) << c10::toString(st) << " part " << r;
  }
}

TEST(BlockScatter, ChunkIOfSourceReachesRankI) {
  for (auto st : {torch::kDouble, torch::kInt, torch::kHalf}) {
    const int src = ws() - 1;
    std::vector<torch::Tensor> chunks;
    if (rank() == src)
      for (int r = 0; r < ws(); ++r) chunks.push_back(input_of(10 * r, 3, 2, st).t());  // not contiguous
    const auto mine = idist::scatter(chunks, src);
    ASSERT_TRUE(mine.defined());
    EXPECT_TRUE(mine.equal(input_of(10 * rank(), 3, 2, st).t())) << c10::toString(st) << "\n" << mine;
  }
}

TEST(BlockReduceScatter, RowsOfThisRankOverDTypes) {
  for (auto st : kTypes) {
    const std::int64_t k = 2;
    const auto input = input_of(rank(), ws() * k, 3, st);
    const auto out = idist::reduce_scatter(input);
    const auto expected = sum_over_ranks(ws() * k, 3, st).narrow(0, rank() * k, k);
    EXPECT_EQ(out.sizes(), expected.sizes());
    EXPECT_TRUE(out.equal(expected)) << c10::toString(st) << "\n" << out;
  }
}

TEST(BlockReduceScatter, NonContiguousInputAndMin) {
  const auto input = input_of(rank(), 3, ws() * 2, torch::kLong).t();  // (ws * 2, 3), not contiguous
  ASSERT_FALSE(input.is_contiguous());
  const auto out = idist::reduce_scatter(input, idist::ReduceOp::Min);
  EXPECT_TRUE(out.equal(input_of(0, 3, ws() * 2, torch::kLong).t().narrow(0, rank() * 2, 2))) << out;
}

// reduce_scatter_v on the ComputationModel: blocks of counts that differ by rank, one of them empty,
// over dtypes, blocking and non-blocking (MPI's path is one MPI_Ireduce per block), on the world and
// on a subgroup of the last two ranks.
TEST(BlockReduceScatterV, UnevenBlocksOverDTypesAndCompletions) {
  auto& m = idist::current_model();
  std::vector<std::size_t> counts;
  for (int r = 0; r < ws(); ++r) counts.push_back(r == 1 ? 0 : std::size_t(2 * r + 3));  // 3, 0, 7
  std::int64_t total = 0, offset = 0;
  for (int r = 0; r < ws(); ++r) {
    if (r < rank()) offset += std::int64_t(counts[std::size_t(r)]);
    total += std::int64_t(counts[std::size_t(r)]);
  }
  const std::int64_t mine = std::int64_t(counts[std::size_t(rank())]);
  for (auto st : kTypes)
    for (auto how : {idist::Completion::Blocking, idist::Completion::Async}) {
      const auto input = input_of(rank(), total, 1, st).flatten().contiguous();
      auto out = torch::full({mine}, -1, st);
      idist::Work w = m.reduce_scatter_v(idist::ConstBuffer(idist::detail::tensor_buffer(input)),
                                         idist::detail::tensor_buffer(out), counts, idist::ReduceOp::Sum, {}, how);
      w.wait();
      const auto expected = sum_over_ranks(total, 1, st).flatten().narrow(0, offset, mine);
      EXPECT_TRUE(out.equal(expected)) << c10::toString(st) << (how == idist::Completion::Async ? " async" : "") << "\n"
                                       << out;
    }
  if (ws() < 2) return;
  // The last two ranks: 4 elements to the first and 1 to the second, then all 5 to the second.
  const idist::Group g = idist::new_group({ws() - 2, ws() - 1});
  const int position = rank() - (ws() - 2);
  const auto input = torch::arange(5, torch::kDouble) * (rank() + 1);
  for (const std::vector<std::size_t>& pair : {std::vector<std::size_t>{4, 1}, std::vector<std::size_t>{0, 5}}) {
    auto out = torch::zeros({position >= 0 ? std::int64_t(pair[std::size_t(position)]) : 0}, torch::kDouble);
    m.reduce_scatter_v(idist::ConstBuffer(idist::detail::tensor_buffer(input)), idist::detail::tensor_buffer(out), pair,
                       idist::ReduceOp::Max, g, idist::Completion::Blocking);
    const std::int64_t from = position == 1 ? std::int64_t(pair[0]) : 0;
    if (position >= 0)
      EXPECT_TRUE(out.equal((torch::arange(5, torch::kDouble) * ws()).narrow(0, from, out.numel()))) << out;
  }
}

TEST(BlockReduceScatterV, RefusesCountsThatDoNotMatchTheBuffers) {
  auto& m = idist::current_model();
  const auto input = torch::zeros({6}, torch::kFloat);
  auto out = torch::zeros({2}, torch::kFloat);
  const auto in_buf = idist::ConstBuffer(idist::detail::tensor_buffer(input));
  const std::vector<std::size_t> short_list(std::size_t(ws() + 1), 1);
  EXPECT_MESSAGE_HAS(value_error_of([&] {
                       m.reduce_scatter_v(in_buf, idist::detail::tensor_buffer(out), short_list, idist::ReduceOp::Sum);
                     }),
                     "reduce_scatter_v: counts has " + std::to_string(ws() + 1) + " entries, expected one per rank");
  std::vector<std::size_t> counts(std::size_t(ws()), 1);
  counts[std::size_t(rank())] = 3;  // out has 2
  EXPECT_MESSAGE_HAS(value_error_of([&] {
                       m.reduce_scatter_v(in_buf, idist::detail::tensor_buffer(out), counts, idist::ReduceOp::Sum);
                     }),
                     "counts[" + std::to_string(rank()) + "] is 3 but this rank receives out.count = 2 elements");
  counts[std::size_t(rank())] = 2;  // sum != 6 unless ws() == 5
  EXPECT_MESSAGE_HAS(value_error_of([&] {
                       m.reduce_scatter_v(in_buf, idist::detail::tensor_buffer(out), counts, idist::ReduceOp::Sum);
                     }),
                     "in has 6 elements, expected the sum of counts = " + std::to_string(ws() + 1));
  auto wrong_type = torch::zeros({2}, torch::kDouble);
  EXPECT_MESSAGE_HAS(
      value_error_of(
          [&] { m.reduce_scatter_v(in_buf, idist::detail::tensor_buffer(wrong_type), counts, idist::ReduceOp::Sum); }),
      "expected the same element type");
}

TEST(BlockAllToAll, BlockJGoesToRankJ) {
  for (auto st : {torch::kFloat, torch::kInt, torch::kBFloat16}) {
    const std::int64_t k = 2;
    // Row q of rank r: r * 8 + q (exact in bfloat16 for these sizes).
    const auto input = (torch::arange(ws() * k, torch::kLong) + 8 * rank()).unsqueeze(1).expand({ws() * k, 2}).to(st);
    const auto out = idist::all_to_all(input);
    ASSERT_EQ(out.sizes(), input.sizes());
    for (int i = 0; i < ws(); ++i) {
      const auto expected =
          (torch::arange(rank() * k, rank() * k + k, torch::kLong) + 8 * i).unsqueeze(1).expand({k, 2}).to(st);
      EXPECT_TRUE(out.narrow(0, i * k, k).equal(expected)) << c10::toString(st) << " block " << i << "\n" << out;
    }
  }
}

TEST(BlockAllToAll, UnevenSplitSizes) {
  // Rank r sends r + j + 1 rows to rank j; row q of that block holds r * 1000 + j * 10 + q.
  std::vector<std::int64_t> in_splits, out_splits;
  std::vector<torch::Tensor> blocks;
  for (int j = 0; j < ws(); ++j) {
    in_splits.push_back(rank() + j + 1);
    out_splits.push_back(j + rank() + 1);
    blocks.push_back(torch::arange(rank() + j + 1, torch::kDouble) + rank() * 1000 + j * 10);
  }
  const auto input = torch::cat(blocks).unsqueeze(1).repeat({1, 2});
  const auto out = idist::all_to_all(input, out_splits, in_splits);
  std::int64_t at = 0;
  for (int i = 0; i < ws(); ++i) {
    const auto expected =
        (torch::arange(i + rank() + 1, torch::kDouble) + i * 1000 + rank() * 10).unsqueeze(1).repeat({1, 2});
    EXPECT_TRUE(out.narrow(0, at, i + rank() + 1).equal(expected)) << "from " << i << "\n" << out;
    at += i + rank() + 1;
  }
  EXPECT_EQ(out.size(0), at);
}

TEST(BlockSubgroup, EveryCollectiveOnALastAndFirstRankGroup) {
  const idist::Group g = subgroup();
  const bool member = rank() == 0 || rank() == ws() - 1;
  const int n = ws() > 1 ? 2 : 1;
  const int last = ws() - 1;
  // Positions in the group follow the sorted ranks: rank 0 first, then the last rank.
  const int position = rank() == 0 ? 0 : 1;

  auto t = input_of(rank(), 2, 2, torch::kFloat);
  idist::reduce(t, last, idist::ReduceOp::Sum, g);
  auto expected = input_of(rank(), 2, 2, torch::kFloat);
  if (rank() == last) {
    expected = input_of(0, 2, 2, torch::kFloat);
    if (n > 1) expected += input_of(last, 2, 2, torch::kFloat);
  }
  EXPECT_TRUE(t.equal(expected)) << t;

  const auto parts = idist::gather(input_of(rank(), 1, 2, torch::kLong), 0, g);
  EXPECT_EQ(parts.size(), rank() == 0 ? std::size_t(n) : 0u);
  if (rank() == 0 && n > 1) EXPECT_TRUE(parts[1].equal(input_of(last, 1, 2, torch::kLong)));

  std::vector<torch::Tensor> chunks;
  if (rank() == last)
    for (int p = 0; p < n; ++p) chunks.push_back(torch::full({3}, 7.0 + p));
  const auto mine = idist::scatter(chunks, last, g);
  EXPECT_EQ(mine.defined(), member);
  if (member) EXPECT_TRUE(mine.equal(torch::full({3}, 7.0 + position))) << mine;

  const auto input = torch::arange(2 * n, torch::kLong) * (rank() + 1);
  const auto rs = idist::reduce_scatter(input, idist::ReduceOp::Sum, g);
  const auto a2a = idist::all_to_all(input, g);
  if (!member) {
    EXPECT_TRUE(rs.equal(input));  // ignite: a rank outside the group gets its input back
    EXPECT_TRUE(a2a.equal(input));
    return;
  }
  const std::int64_t factor = n > 1 ? 1 + (last + 1) : 1;
  EXPECT_TRUE(rs.equal(torch::arange(2 * position, 2 * position + 2, torch::kLong) * factor)) << rs;
  const int other = position == 0 ? last : 0;
  const auto from_other = torch::arange(2 * position, 2 * position + 2, torch::kLong) * (other + 1);
  const auto from_me = torch::arange(2 * position, 2 * position + 2, torch::kLong) * (rank() + 1);
  if (n > 1) EXPECT_TRUE(a2a.narrow(0, 2 * (1 - position), 2).equal(from_other)) << a2a;
  EXPECT_TRUE(a2a.narrow(0, 2 * position, 2).equal(from_me)) << a2a;
}

TEST(BlockAsync, EveryAsyncFormCompletesOnWait) {
  auto r = input_of(rank(), 2, 2, torch::kFloat);
  auto w1 = idist::reduce_async(r, 0);

  const auto in = input_of(rank(), 2, 2, torch::kLong);
  auto gathered = rank() == 0 ? torch::empty({ws() * 2, 2}, torch::kLong) : torch::Tensor();
  auto w2 = idist::gather_async(in, gathered, 0);

  auto scattered = torch::empty({2}, torch::kDouble);
  const auto source = rank() == 0 ? torch::arange(2 * ws(), torch::kDouble) : torch::Tensor();
  auto w3 = idist::scatter_async(source, scattered, 0);

  const auto rs_in = input_of(rank(), 2 * ws(), 1, torch::kInt);
  auto rs_out = torch::empty({2, 1}, torch::kInt);
  auto w4 = idist::reduce_scatter_async(rs_in, rs_out);

  const auto a_in = torch::full({ws()}, rank(), torch::kLong);
  auto a_out = torch::empty({ws()}, torch::kLong);
  auto w5 = idist::all_to_all_async(a_in, a_out);

  std::vector<std::int64_t> ones(std::size_t(ws()), 1);
  auto v_out = torch::empty({ws()}, torch::kLong);
  auto w6 = idist::all_to_all_async(a_in, v_out, ones, ones);

  for (auto* w : {&w1, &w2, &w3, &w4, &w5, &w6}) w->wait();
  if (rank() == 0) EXPECT_TRUE(r.equal(sum_over_ranks(2, 2, torch::kFloat)));
  if (rank() == 0)
    for (int s = 0; s < ws(); ++s) EXPECT_TRUE(gathered.narrow(0, 2 * s, 2).equal(input_of(s, 2, 2, torch::kLong)));
  EXPECT_TRUE(scattered.equal(torch::arange(2 * rank(), 2 * rank() + 2, torch::kDouble))) << scattered;
  EXPECT_TRUE(rs_out.equal(sum_over_ranks(2 * ws(), 1, torch::kInt).narrow(0, 2 * rank(), 2))) << rs_out;
  EXPECT_TRUE(a_out.equal(torch::arange(ws(), torch::kLong))) << a_out;
  EXPECT_TRUE(v_out.equal(torch::arange(ws(), torch::kLong))) << v_out;
}

TEST(BlockErrors, BadArgumentsAreRefusedInTheFrontDoorsWords) {
  auto t = torch::ones({ws(), 2});
  EXPECT_MESSAGE_HAS(
      value_error_of([&] { idist::reduce(t, ws()); }),
      "reduce: dst should be a rank in [0, " + std::to_string(ws()) + "), but given " + std::to_string(ws()));
  EXPECT_MESSAGE_HAS(value_error_of([&] { idist::gather(t, -1); }), "gather: dst should be a rank in");
  EXPECT_MESSAGE_HAS(value_error_of([&] { idist::scatter({}, ws()); }), "scatter: src should be a rank in");
  EXPECT_MESSAGE_HAS(value_error_of([&] { idist::reduce(t, 0, idist::ReduceOp::And); }),
                     "reduce: op AND is bitwise and cannot reduce float32 data");
  EXPECT_MESSAGE_HAS(value_error_of([&] { idist::reduce_scatter(torch::tensor(1.0)); }), "0-dimensional");
  EXPECT_MESSAGE_HAS(value_error_of([&] { idist::all_to_all(torch::tensor(1.0)); }), "0-dimensional");
  EXPECT_MESSAGE_HAS(value_error_of([&] {
                       idist::reduce_scatter_async(t, torch::empty({1, 2}, torch::kLong));
                     }),
                     "out has dtype Long, expected the input's dtype Float");
  EXPECT_MESSAGE_HAS(
      value_error_of([&] {
        idist::reduce_scatter_async(t, torch::empty({3, 2}));
      }),
      "reduce_scatter: in has " + std::to_string(2 * ws()) + " elements, expected out.count * group size");
  EXPECT_MESSAGE_HAS(value_error_of([&] {
                       idist::all_to_all_async(t, torch::empty({ws() + 1, 2}));
                     }),
                     "all_to_all: out has");
  const std::vector<std::int64_t> short_list(std::size_t(ws()) + 1, 0);
  EXPECT_MESSAGE_HAS(value_error_of([&] { idist::all_to_all(t, short_list, short_list); }),
                     "output_split_sizes has " + std::to_string(ws() + 1) + " entries, expected one per rank");
  std::vector<std::int64_t> too_many(std::size_t(ws()), 1);
  too_many[0] = 2;
  EXPECT_MESSAGE_HAS(value_error_of([&] { idist::all_to_all(t, too_many, too_many); }),
                     "input_split_sizes sums to " + std::to_string(ws() + 1) + " rows");
  if (rank() == 0)
    EXPECT_MESSAGE_HAS(value_error_of([&] { idist::gather_async(t, torch::empty({1}), 0); }),
                       "gather: out has 1 elements, expected in.count * group size");
  EXPECT_MESSAGE_HAS(value_error_of([&] { idist::send(t, rank()); }),
                     "send: dst " + std::to_string(rank()) + " is this rank");
  EXPECT_MESSAGE_HAS(value_error_of([&] { idist::recv(t, ws()); }), "recv: src should be a rank in");
  if (ws() > 1) {
    EXPECT_MESSAGE_HAS(value_error_of([&] { idist::send(t, (rank() + 1) % ws(), -1); }),
                       "send: tag should be non-negative, but given -1");
    // dst outside the group: the members refuse it; the others are outside and return at once.
    const std::string msg = value_error_of([&] { idist::reduce(t, 1, idist::ReduceOp::Sum, idist::Group{0}); });
    if (rank() == 0) EXPECT_MESSAGE_HAS(msg, "reduce: dst 1 is not a member of group");
    if (rank() != 0) EXPECT_EQ(msg, "");
    // A dimension 0 that the group size does not divide.
    EXPECT_MESSAGE_HAS(value_error_of([&] { idist::reduce_scatter(torch::ones({ws() + 1})); }),
                       "expected a multiple of the group size " + std::to_string(ws()));
    EXPECT_MESSAGE_HAS(value_error_of([&] { idist::all_to_all(torch::ones({ws() + 1})); }),
                       "expected a multiple of the group size");
  }
  // A bad chunk list on the source raises on every rank (none is left waiting).
  std::vector<torch::Tensor> chunks;
  if (rank() == 0) chunks = {torch::ones({2})};
  if (ws() == 1) chunks.push_back(torch::ones({2}));
  const std::string msg = value_error_of([&] { idist::scatter(chunks, 0); });
  if (rank() == 0) EXPECT_MESSAGE_HAS(msg, "scatter: chunks has");
  if (rank() != 0) EXPECT_MESSAGE_HAS(msg, "scatter: src 0 passed invalid chunks");
  // Everything still works afterwards.
  auto ok = torch::ones({ws()});
  EXPECT_TRUE(idist::reduce_scatter(ok).equal(torch::full({1}, float(ws()))));
}

TEST(BlockPointToPoint, BlockingRing) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  const int right = (rank() + 1) % ws();
  const int left = (rank() + ws() - 1) % ws();
  for (auto st : {torch::kFloat, torch::kLong, torch::kBFloat16}) {
    const auto mine = torch::full({4, 2}, rank() + 1).to(st);
    auto got = torch::zeros({2, 4}, st).t();  // not contiguous: written back
    // Even ranks send first, odd ranks receive first: blocking sends never wait in a cycle.
    if (rank() % 2 == 0) {
      idist::send(mine, right, 7);
      idist::recv(got, left, 7);
    } else {
      idist::recv(got, left, 7);
      idist::send(mine, right, 7);
    }
    EXPECT_TRUE(got.equal(torch::full({4, 2}, left + 1).to(st))) << c10::toString(st) << "\n" << got;
  }
}

TEST(BlockPointToPoint, NonBlockingRingMatchesByTag) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  const int right = (rank() + 1) % ws();
  const int left = (rank() + ws() - 1) % ws();
  const auto a = torch::full({5}, 10.0 * rank());
  const auto b = torch::full({3}, 10.0 * rank() + 1);
  auto got_a = torch::zeros({5});
  auto got_b = torch::zeros({3});
  // Every rank sends first and receives the tags in the other order.
  auto s1 = idist::isend(a, right, 3);
  auto s2 = idist::isend(b, right, 5);
  auto r2 = idist::irecv(got_b, left, 5);
  auto r1 = idist::irecv(got_a, left, 3);
  for (auto* w : {&r2, &r1, &s1, &s2}) w->wait();
  EXPECT_TRUE(got_a.equal(torch::full({5}, 10.0 * left))) << got_a;
  EXPECT_TRUE(got_b.equal(torch::full({3}, 10.0 * left + 1))) << got_b;
}

}  // namespace

namespace {

// At IDIST_DISTRIBUTED_DEBUG=DETAIL the new collectives carry fingerprints: a rank that calls another
// one makes every rank raise DesyncError naming both, and nothing is executed.
TEST(BlockDesync, DifferentCollectivesRaiseDesyncErrorAtDetail) {
  if (idist::debug_level() != idist::DebugLevel::Detail || ws() < 2) GTEST_SKIP() << "needs DETAIL and two ranks";
  const auto input = torch::ones({ws() * 2});
  std::string what;
  try {
    if (rank() == ws() - 1)
      idist::all_to_all(input);
    else
      idist::reduce_scatter(input);
  } catch (const idist::DesyncError& e) {
    what = e.what();
  }
  EXPECT_MESSAGE_HAS(what, "reduce_scatter float32[" + std::to_string(2 * ws()) + "]");
  EXPECT_MESSAGE_HAS(what, "all_to_all float32[" + std::to_string(2 * ws()) + "]");
  // The sequence numbers stay aligned: the next collective works.
  EXPECT_TRUE(idist::reduce_scatter(input).equal(torch::full({2}, float(ws()))));
}

}  // namespace
