// IDIST_DISTRIBUTED_DEBUG=DETAIL on real ranks: each case makes the last rank issue a different
// collective from the others, or the same one with another shape; every rank must raise DesyncError
// naming both calls, and the next matching collective must still work (sequence numbers stay aligned).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "idist/idist.hpp"

namespace {

int world() { return idist::get_world_size(); }
bool odd_one() { return idist::get_rank() == world() - 1; }

// "rank 0" or "ranks 0, 1": the ranks that issued the common call.
std::string common_ranks() {
  std::string s;
  for (int r = 0; r + 1 < world(); ++r) s += fmt::format("{}{}", r ? ", " : "", r);
  return fmt::format("{} {}: ", world() > 2 ? "ranks" : "rank", s);
}

// Runs `call` on this rank, expects DesyncError naming `common` (issued by every rank but the last)
// and `odd` (the last rank), then checks that a matching all_reduce works.
void expect_desync(const std::function<void()>& call, const std::string& common, const std::string& odd) {
  if (world() < 2) GTEST_SKIP() << "needs 2 ranks or more";
  try {
    call();
    ADD_FAILURE() << "rank " << idist::get_rank() << ": no DesyncError";
  } catch (const idist::DesyncError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(common_ranks() + common), std::string::npos) << what;
    EXPECT_NE(what.find(fmt::format("rank {}: {}", world() - 1, odd)), std::string::npos) << what;
    EXPECT_NE(what.find("nothing was executed"), std::string::npos) << what;
  }
  EXPECT_EQ(idist::all_reduce(1), world());  // the group is still usable
}

TEST(DesyncDetail, LevelIsDetail) { EXPECT_EQ(idist::debug_level(), idist::DebugLevel::Detail); }

TEST(DesyncDetail, Length) {
  std::vector<float> v(odd_one() ? 8 : 4, 1.0f);
  expect_desync([&] { idist::all_reduce(v); }, "all_reduce float32[4] SUM", "all_reduce float32[8] SUM");
}

TEST(DesyncDetail, Dtype) {
  std::vector<float> f(4, 1.0f);
  std::vector<double> d(4, 1.0);
  expect_desync([&] { odd_one() ? idist::all_reduce(d) : idist::all_reduce(f); }, "all_reduce float32[4] SUM",
                "all_reduce float64[4] SUM");
}

TEST(DesyncDetail, SameBytesDifferentDtype) {
  std::vector<float> f(8, 1.0f);
  std::vector<double> d(4, 1.0);
  expect_desync([&] { odd_one() ? idist::all_reduce(d) : idist::all_reduce(f); }, "all_reduce float32[8] SUM",
                "all_reduce float64[4] SUM");
}

TEST(DesyncDetail, ReduceOp) {
  std::vector<float> v(4, 1.0f);
  expect_desync([&] { idist::all_reduce(v, odd_one() ? "MAX" : "SUM"); }, "all_reduce float32[4] SUM",
                "all_reduce float32[4] MAX");
}

TEST(DesyncDetail, BroadcastRoot) {
  std::vector<float> v(4, 1.0f);
  expect_desync([&] { idist::broadcast(v, odd_one() ? 1 : 0); }, "broadcast float32[4] src 0",
                "broadcast float32[4] src 1");
}

TEST(DesyncDetail, AllReduceVsBroadcast) {
  std::vector<float> v(4, 1.0f);
  expect_desync([&] { odd_one() ? idist::broadcast(v, 0) : idist::all_reduce(v); }, "all_reduce float32[4] SUM",
                "broadcast float32[4] src 0");
}

TEST(DesyncDetail, AllGatherVsAllReduce) {
  std::vector<float> v(4, 1.0f);
  std::vector<float> out(4 * std::size_t(world()));
  expect_desync(
      [&] {
        odd_one() ? idist::all_reduce(v) : idist::all_gather_into(std::span<const float>(v), std::span<float>(out));
      },
      "all_gather float32[4]", "all_reduce float32[4] SUM");
}

TEST(DesyncDetail, NonBlockingMismatchRaisesAtIssue) {
  std::vector<float> v(odd_one() ? 2 : 3, 1.0f);
  expect_desync([&] { idist::all_reduce_async(std::span<float>(v)).wait(); }, "all_reduce float32[3] SUM",
                "all_reduce float32[2] SUM");
}

// The collectives ignite does not have, through the ComputationModel: each with another collective,
// and with another count, on the last rank. (all_to_all_v with other counts on one rank is not seen by
// DETAIL, which compares only the element type of all_to_all_v: mismatch_matrix.sh judges that case.)
constexpr idist::Completion kBlocking = idist::Completion::Blocking;
idist::Buffer buf(std::vector<float>& v) { return {v.data(), v.size(), idist::DType::Float32, {}}; }
std::size_t ws() { return std::size_t(world()); }
idist::ComputationModel& model() { return idist::current_model(); }

TEST(DesyncDetail, ReduceVsAllReduce) {
  std::vector<float> v(4, 1.0f);
  expect_desync(
      [&] {
        odd_one() ? model().all_reduce(buf(v), idist::ReduceOp::Sum, {}, kBlocking)
                  : model().reduce(buf(v), idist::ReduceOp::Sum, 0, {}, kBlocking);
      },
      "reduce float32[4] SUM src 0", "all_reduce float32[4] SUM");
}

TEST(DesyncDetail, ReduceCount) {
  std::vector<float> v(odd_one() ? 8 : 4, 1.0f);
  expect_desync([&] { model().reduce(buf(v), idist::ReduceOp::Sum, 0, {}, kBlocking); }, "reduce float32[4] SUM src 0",
                "reduce float32[8] SUM src 0");
}

TEST(DesyncDetail, GatherVsAllGather) {
  std::vector<float> in(4, 1.0f), out(4 * ws());
  expect_desync(
      [&] {
        odd_one() ? model().all_gather(buf(in), buf(out), {}, kBlocking)
                  : model().gather(buf(in), buf(out), 0, {}, kBlocking);
      },
      "gather float32[4] src 0", "all_gather float32[4]");
}

TEST(DesyncDetail, GatherCount) {
  std::vector<float> in(odd_one() ? 8 : 4, 1.0f), out(4 * ws());
  expect_desync([&] { model().gather(buf(in), buf(out), 0, {}, kBlocking); }, "gather float32[4] src 0",
                "gather float32[8] src 0");
}

TEST(DesyncDetail, ScatterVsGather) {
  std::vector<float> whole(4 * ws(), 1.0f), part(4);
  expect_desync(
      [&] {
        odd_one() ? model().gather(buf(part), buf(whole), 0, {}, kBlocking)
                  : model().scatter(buf(whole), buf(part), 0, {}, kBlocking);
      },
      "scatter float32[4] src 0", "gather float32[4] src 0");
}

TEST(DesyncDetail, ScatterCount) {
  std::vector<float> in(4 * ws(), 1.0f), out(odd_one() ? 3 : 4);
  expect_desync([&] { model().scatter(buf(in), buf(out), 0, {}, kBlocking); }, "scatter float32[4] src 0",
                "scatter float32[3] src 0");
}

TEST(DesyncDetail, ReduceScatterVsAllReduce) {
  std::vector<float> in(4 * ws(), 1.0f), out(4);
  expect_desync(
      [&] {
        odd_one() ? model().all_reduce(buf(out), idist::ReduceOp::Sum, {}, kBlocking)
                  : model().reduce_scatter(buf(in), buf(out), idist::ReduceOp::Sum, {}, kBlocking);
      },
      fmt::format("reduce_scatter float32[{}] SUM", 4 * ws()), "all_reduce float32[4] SUM");
}

TEST(DesyncDetail, ReduceScatterCount) {
  const std::size_t per = odd_one() ? 8 : 4;
  std::vector<float> in(per * ws(), 1.0f), out(per);
  expect_desync([&] { model().reduce_scatter(buf(in), buf(out), idist::ReduceOp::Sum, {}, kBlocking); },
                fmt::format("reduce_scatter float32[{}] SUM", 4 * ws()),
                fmt::format("reduce_scatter float32[{}] SUM", 8 * ws()));
}

// reduce_scatter_v's blocks: 5 + j elements for group rank j, one more in block 0 when `longer`.
std::vector<std::size_t> uneven(bool longer) {
  std::vector<std::size_t> c(ws());
  for (std::size_t j = 0; j < c.size(); ++j) c[j] = 5 + j;
  if (longer) c.front() += 1;
  return c;
}
std::size_t total(const std::vector<std::size_t>& c) { return std::accumulate(c.begin(), c.end(), std::size_t{0}); }

TEST(DesyncDetail, ReduceScatterVVsReduceScatter) {
  const std::vector<std::size_t> counts = uneven(false);
  std::vector<float> in(odd_one() ? 4 * ws() : total(counts), 1.0f);
  std::vector<float> out(odd_one() ? 4 : counts[std::size_t(idist::get_rank())]);
  expect_desync(
      [&] {
        odd_one() ? model().reduce_scatter(buf(in), buf(out), idist::ReduceOp::Sum, {}, kBlocking)
                  : model().reduce_scatter_v(buf(in), buf(out), counts, idist::ReduceOp::Sum, {}, kBlocking);
      },
      fmt::format("reduce_scatter_v float32[{}] SUM", total(counts)),
      fmt::format("reduce_scatter float32[{}] SUM", 4 * ws()));
}

TEST(DesyncDetail, ReduceScatterVCounts) {
  const std::vector<std::size_t> counts = uneven(odd_one());
  std::vector<float> in(total(counts), 1.0f), out(counts[std::size_t(idist::get_rank())]);
  expect_desync([&] { model().reduce_scatter_v(buf(in), buf(out), counts, idist::ReduceOp::Sum, {}, kBlocking); },
                fmt::format("reduce_scatter_v float32[{}] SUM", total(uneven(false))),
                fmt::format("reduce_scatter_v float32[{}] SUM", total(uneven(true))));
}

TEST(DesyncDetail, AllToAllVsAllGather) {
  std::vector<float> in(odd_one() ? 4 : 4 * ws(), 1.0f), out(4 * ws());
  expect_desync(
      [&] {
        odd_one() ? model().all_gather(buf(in), buf(out), {}, kBlocking)
                  : model().all_to_all(buf(in), buf(out), {}, kBlocking);
      },
      fmt::format("all_to_all float32[{}]", 4 * ws()), "all_gather float32[4]");
}

TEST(DesyncDetail, AllToAllCount) {
  const std::size_t per = odd_one() ? 8 : 4;
  std::vector<float> in(per * ws(), 1.0f), out(per * ws());
  expect_desync([&] { model().all_to_all(buf(in), buf(out), {}, kBlocking); },
                fmt::format("all_to_all float32[{}]", 4 * ws()), fmt::format("all_to_all float32[{}]", 8 * ws()));
}

TEST(DesyncDetail, AllToAllVVsAllToAll) {
  // all_to_all_v's fingerprint carries no count (each rank receives its own total): [0].
  const std::vector<std::size_t> counts(ws(), 5);
  std::vector<float> in(5 * ws(), 1.0f), out(5 * ws());
  expect_desync(
      [&] {
        odd_one() ? model().all_to_all(buf(in), buf(out), {}, kBlocking)
                  : model().all_to_all_v(buf(in), buf(out), counts, counts, {}, kBlocking);
      },
      "all_to_all_v float32[0]", fmt::format("all_to_all float32[{}]", 5 * ws()));
}

TEST(DesyncDetail, MatchingCollectivesWork) {
  std::vector<double> v(5, 2.0);
  idist::all_reduce(v, "MAX");
  EXPECT_EQ(v[4], 2.0);
  EXPECT_EQ(idist::all_gather(std::string_view("ab")).size(), std::size_t(world()));
  EXPECT_EQ(idist::broadcast(idist::get_rank() + 7, 0), 7);
  idist::barrier();
  std::vector<int> w(3, 1);
  auto work = idist::all_reduce_async(std::span<int>(w));
  work.wait();
  EXPECT_EQ(w[2], world());
}

}  // namespace
