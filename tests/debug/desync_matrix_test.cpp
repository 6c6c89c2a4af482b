// IDIST_DISTRIBUTED_DEBUG=DETAIL on real ranks: each case makes the last rank issue a different
// collective from the others; every rank must raise DesyncError naming both calls, and the next
// matching collective must still work (sequence numbers stay aligned).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <functional>
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
