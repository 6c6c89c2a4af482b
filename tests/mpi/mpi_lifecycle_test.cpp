// initialize("mpi") / finalize() when idist owns MPI: MPI_Init_thread on initialize, MPI_Finalize on
// finalize, then back to the serial model for good. Tests run in declaration order and build on each
// other (one process can initialize MPI only once).
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "idist/collectives.hpp"
#include "idist/context.hpp"
#include "idist/error.hpp"
#include "mpi/mpi_backend.hpp"
#include "mpi_env.hpp"

namespace {

bool mpi_initialized() {
  int flag = 0;
  MPI_Initialized(&flag);
  return flag != 0;
}
bool mpi_finalized() {
  int flag = 0;
  MPI_Finalized(&flag);
  return flag != 0;
}

TEST(MpiLifecycle, SerialWhileMpiIsNotInitialized) {
  ASSERT_FALSE(mpi_initialized());
  EXPECT_EQ(idist::model_name(), "serial") << "nothing to adopt before MPI_Init";
  EXPECT_EQ(idist::get_world_size(), 1);
  EXPECT_FALSE(mpi_initialized()) << "queries must not initialize MPI";
}

TEST(MpiLifecycle, InitializeCallsMpiInitThread) {
  idist::InitOptions opts;
  opts.timeout = std::chrono::seconds(60);
  idist::initialize("mpi", opts);
  EXPECT_TRUE(mpi_initialized());
  EXPECT_EQ(idist::model_name(), "native-dist");
  EXPECT_EQ(idist::get_world_size(), idist::test::env_int("OMPI_COMM_WORLD_SIZE"));
  auto* m = idist::core::backend_as<idist::mpi_backend::MPIBackend>(idist::current_model());
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->owns_mpi());
  EXPECT_EQ(m->timeout(), std::chrono::seconds(60));
  int provided = -1;
  MPI_Query_thread(&provided);
  EXPECT_EQ(m->thread_level(), provided);
  EXPECT_EQ(provided, MPI_THREAD_MULTIPLE) << "Open MPI here is built with MPI_THREAD_MULTIPLE support";
}

TEST(MpiLifecycle, InitializeTwiceIsValueError) {
  try {
    idist::initialize("mpi");
    ADD_FAILURE() << "no exception";
  } catch (const idist::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("already initialized"), std::string::npos) << e.what();
  }
  EXPECT_EQ(idist::all_reduce(1), idist::get_world_size()) << "the running backend still works";
}

// An MPI failure (BackendError naming the MPI function, the rank and MPI's text) leaves the backend
// broken and ends the job at finalize(): tests/mpi/failure_cases.sh checks it in its own jobs.

TEST(MpiLifecycle, FinalizeCallsMpiFinalizeAndReturnsToSerial) {
  idist::finalize();
  EXPECT_TRUE(mpi_finalized());
  EXPECT_EQ(idist::model_name(), "serial");
  EXPECT_EQ(idist::backend(), std::nullopt);
  EXPECT_EQ(idist::get_world_size(), 1);
  EXPECT_EQ(idist::get_rank(), 0);
  EXPECT_EQ(idist::all_reduce(5), 5);
}

TEST(MpiLifecycle, MpiCannotBeInitializedTwiceInOneProcess) {
  try {
    idist::initialize("mpi");
    ADD_FAILURE() << "no exception";
  } catch (const idist::BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("already finalized"), std::string::npos) << e.what();
  }
  EXPECT_EQ(idist::model_name(), "serial");
  idist::finalize();  // a no-op when serial
  EXPECT_EQ(idist::model_name(), "serial");
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  idist::test::quiet_non_root_ranks();
  return RUN_ALL_TESTS();
}
