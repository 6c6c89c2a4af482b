// Adoption of an MPI context the program created itself (ignite's create_from_context / sync()):
// this program calls MPI_Init_thread (MPI_THREAD_SERIALIZED, so idist serialises its MPI calls) and
// MPI_Finalize; idist must find the context without initialize() and never finalize MPI.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <optional>
#include <thread>
#include <vector>

#include "idist/collectives.hpp"
#include "idist/context.hpp"
#include "idist/error.hpp"
#include "mpi/mpi_backend.hpp"
#include "mpi_env.hpp"

namespace {

int mpi_rank() {
  int r = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int mpi_size() {
  int n = -1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
bool mpi_finalized() {
  int flag = 0;
  MPI_Finalized(&flag);
  return flag != 0;
}
const idist::mpi_backend::MPIBackend* mpi_model() {
  return idist::core::backend_as<idist::mpi_backend::MPIBackend>(idist::current_model());
}

// IDIST_TEST_LOCAL_RANK_HINT=k: main() calls idist::set_local_rank(local rank + k) before MPI_Init.
std::optional<int> hint_offset() {
  const char* v = std::getenv("IDIST_TEST_LOCAL_RANK_HINT");
  return v ? std::optional<int>(std::atoi(v)) : std::nullopt;
}

int expected_local_rank() { return idist::test::env_int("OMPI_COMM_WORLD_LOCAL_RANK") + hint_offset().value_or(0); }

TEST(MpiAdopt, QueriesAdoptTheProgramsMpiWithoutInitialize) {
  EXPECT_EQ(idist::get_world_size(), mpi_size());
  EXPECT_EQ(idist::model_name(), "native-dist");
  EXPECT_EQ(idist::backend(), std::optional<std::string>("mpi"));
  EXPECT_EQ(idist::get_rank(), mpi_rank());
  EXPECT_EQ(idist::get_local_rank(), expected_local_rank());
  const auto* m = mpi_model();
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->owns_mpi());
  EXPECT_EQ(m->thread_level(), MPI_THREAD_SERIALIZED);
  EXPECT_EQ(idist::all_reduce(idist::get_rank() + 1), mpi_size() * (mpi_size() + 1) / 2);
}

TEST(MpiAdopt, FinalizeLeavesMpiToTheProgram) {
  idist::finalize();
  EXPECT_FALSE(mpi_finalized());
  // The program's own communicator is untouched.
  int one = 1, sum = 0;
  ASSERT_EQ(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(sum, mpi_size());
}

// ignite's set_local_rank before the program's own init: the hint outlives the serial model and
// every later adoption takes it (here after a finalize, too).
TEST(MpiAdopt, LocalRankHintGivenBeforeMpiInitIsKept) {
  if (!hint_offset()) GTEST_SKIP() << "run with IDIST_TEST_LOCAL_RANK_HINT (ctest: mpi_adopt_hint_np2)";
  EXPECT_EQ(idist::get_local_rank(), expected_local_rank());
  idist::finalize();
  EXPECT_EQ(idist::get_local_rank(), expected_local_rank());
  idist::finalize();
}

TEST(MpiAdopt, SyncAdopts) {
  idist::sync();
  // initialize() refuses only when a backend is current: proof that sync() adopted without a query.
  EXPECT_THROW(idist::initialize("mpi"), idist::ValueError);
  EXPECT_EQ(idist::model_name(), "native-dist");
  idist::finalize();
  EXPECT_FALSE(mpi_finalized());
}

TEST(MpiAdopt, InitializeAdoptsAnInitializedMpi) {
  idist::InitOptions opts;
  opts.timeout = std::chrono::seconds(45);
  idist::initialize("mpi", opts);
  const auto* m = mpi_model();
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->owns_mpi());
  EXPECT_EQ(m->timeout(), std::chrono::seconds(45));
  EXPECT_EQ(idist::broadcast(std::string(mpi_rank() == 0 ? "from rank 0" : "x"), 0), "from rank 0");
  idist::finalize();
  EXPECT_FALSE(mpi_finalized());
}

// Below MPI_THREAD_MULTIPLE, idist's lock keeps two threads out of MPI at the same time.
TEST(MpiAdopt, SerializedLevelStillServesTwoThreads) {
  const int n = idist::get_world_size();  // adopts again
  std::vector<int> everyone(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) everyone[std::size_t(r)] = r;
  const idist::Group other = idist::new_group(everyone);
  constexpr int kIters = 100;
  long a_sum = 0, b_sum = 0;
  std::thread a([&] {
    for (int i = 0; i < kIters; ++i) a_sum += idist::all_reduce(1L);
  });
  std::thread b([&] {
    for (int i = 0; i < kIters; ++i) b_sum += idist::all_reduce(2L, idist::ReduceOp::Sum, other);
  });
  a.join();
  b.join();
  EXPECT_EQ(a_sum, long(kIters) * n);
  EXPECT_EQ(b_sum, 2L * kIters * n);
  idist::finalize();
  EXPECT_FALSE(mpi_finalized());
}

}  // namespace

int main(int argc, char** argv) {
  // Before MPI_Init: idist is serial here and must keep the hint for the context adopted later.
  if (const auto offset = hint_offset())
    idist::set_local_rank(idist::test::env_int("OMPI_COMM_WORLD_LOCAL_RANK") + *offset);
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  idist::test::quiet_non_root_ranks();
  const int rc = RUN_ALL_TESTS();
  MPI_Finalize();
  return rc;
}
