// The progress thread (IDIST_MPI_PROGRESS_THREAD=1; by default it runs across nodes only): non-blocking
// collectives complete while the caller makes no MPI call, and blocking collectives issued while
// others are in flight keep the program's order on every rank.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

#include "idist/collectives.hpp"
#include "idist/context.hpp"
#include "mpi/mpi_backend.hpp"
#include "mpi_env.hpp"

namespace {

idist::mpi_backend::MPIBackend& model() {
  return *idist::core::backend_as<idist::mpi_backend::MPIBackend>(idist::current_model());
}

TEST(MpiProgress, TheThreadRunsAndTheModelReportsAsyncProgress) {
  EXPECT_TRUE(model().progress_thread());
  EXPECT_TRUE(idist::current_model().has_async_progress());
}

TEST(MpiProgress, ANonBlockingAllReduceCompletesWhileTheCallerSleeps) {
  const int n = idist::get_world_size();
  std::vector<float> v(1 << 20, float(idist::get_rank() + 1));  // 4 MiB: many fragments, several rounds
  idist::barrier();
  idist::Work w = idist::all_reduce_async(std::span<float>(v));
  // No MPI call on this thread: only the progress thread can complete it. is_completed() reads the
  // thread's flag and makes no MPI call either.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!w.is_completed() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(w.is_completed());
  w.wait();
  EXPECT_EQ(v.front(), float(n * (n + 1) / 2));
  EXPECT_EQ(v.back(), float(n * (n + 1) / 2));
}

TEST(MpiProgress, BlockingCollectivesIssuedWhileBucketsFlyKeepTheirOrder) {
  const int n = idist::get_world_size();
  const int r = idist::get_rank();
  std::vector<std::vector<double>> buckets;
  std::vector<idist::Work> works;
  for (int k = 0; k < 6; ++k) {
    buckets.emplace_back(std::size_t(1000) << k, double(r + k));
    works.push_back(idist::all_reduce_async(std::span<double>(buckets.back())));
    // A user's blocking collectives between the buckets, as from a custom autograd function.
    EXPECT_EQ(idist::all_reduce(r + 1), n * (n + 1) / 2);
    EXPECT_EQ(idist::broadcast(r * 10 + k, k % n), (k % n) * 10 + k);
  }
  for (auto& w : works) w.wait();
  for (int k = 0; k < 6; ++k) {
    const double want = n * (n - 1) / 2.0 + double(n * k);
    EXPECT_EQ(buckets[std::size_t(k)].front(), want) << "bucket " << k;
    EXPECT_EQ(buckets[std::size_t(k)].back(), want) << "bucket " << k;
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  idist::test::quiet_non_root_ranks();
  idist::initialize("mpi");
  const int rc = RUN_ALL_TESTS();
  // A collective nobody waits for: finalize() lets the thread complete it before MPI_Finalize.
  std::vector<float> left(1 << 16, 1.0f);
  idist::all_reduce_async(std::span<float>(left));
  idist::finalize();
  return rc;
}
