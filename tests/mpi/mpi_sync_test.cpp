// sync(temporary) with ignite's meaning (ignite/distributed/utils.py: sync() and _set_model()), on a
// program that creates and destroys its MPI context itself. In ignite, sync(temporary) asks every
// registered model class for a context (create_from_context); a found one becomes the model, and
// _set_model(model, temporary) leaves _need_to_sync (the lookup every query makes while serial) on
// only when temporary; none found: the serial model again, _need_to_sync untouched. finalize() sets
// the serial model with _need_to_sync on. Tests run in declaration order and build on each other
// (MPI can be initialized once per process).
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>

#include "core/need_to_sync.hpp"
#include "idist/collectives.hpp"
#include "idist/context.hpp"
#include "mpi/mpi_backend.hpp"
#include "mpi_env.hpp"

namespace {

bool mpi_finalized() {
  int flag = 0;
  MPI_Finalized(&flag);
  return flag != 0;
}

int world() { return idist::test::env_int("OMPI_COMM_WORLD_SIZE"); }

TEST(MpiSync, WithoutAContextSyncKeepsSerialAndTheLookup) {
  idist::sync();
  EXPECT_EQ(idist::model_name(), "serial");
  EXPECT_TRUE(idist::core::need_to_sync()) << "nothing adopted: ignite leaves _need_to_sync as it was";
}

TEST(MpiSync, TemporarySyncAdoptsAndKeepsTheLookupOn) {
  int provided = 0;
  ASSERT_EQ(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), MPI_SUCCESS);
  idist::sync(/*temporary=*/true);
  EXPECT_TRUE(idist::core::need_to_sync());
  // initialize() refuses only when a backend is current: sync() adopted before any query.
  EXPECT_THROW(idist::initialize("mpi"), idist::ValueError);
  EXPECT_EQ(idist::backend(), std::optional<std::string>("mpi"));
  EXPECT_EQ(idist::model_name(), "native-dist");
  const auto* m = idist::core::backend_as<idist::mpi_backend::MPIBackend>(idist::current_model());
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->owns_mpi());
}

TEST(MpiSync, ExplicitSyncKeepsTheLiveAdoptedModelAndTurnsTheLookupOff) {
  const idist::ComputationModel* before = &idist::current_model();
  idist::sync();
  EXPECT_EQ(&idist::current_model(), before) << "the context is alive: the same model stays current";
  EXPECT_FALSE(idist::core::need_to_sync()) << "ignite's _set_model(model, temporary=False)";
  EXPECT_EQ(idist::all_reduce(1), world());
}

TEST(MpiSync, FinalizeReturnsToSerialWithTheLookupOn) {
  idist::finalize();
  EXPECT_FALSE(mpi_finalized()) << "an adopted MPI is the program's to finalize";
  EXPECT_TRUE(idist::core::need_to_sync());
  EXPECT_EQ(idist::get_world_size(), world()) << "the next query adopts the program's MPI again";
  EXPECT_EQ(idist::model_name(), "native-dist");
  EXPECT_TRUE(idist::core::need_to_sync()) << "a query's adoption is a temporary sync";
}

TEST(MpiSync, SyncAfterTheProgramFinalizedMpiReturnsToSerial) {
  idist::sync();  // explicit: the lookup off
  EXPECT_FALSE(idist::core::need_to_sync());
  idist::barrier();  // no rank finalizes MPI while another still uses it
  ASSERT_EQ(MPI_Finalize(), MPI_SUCCESS);
  idist::sync();  // must make no MPI call: MPI is finalized
  EXPECT_EQ(idist::model_name(), "serial");
  EXPECT_EQ(idist::backend(), std::nullopt);
  EXPECT_EQ(idist::get_world_size(), 1);
  EXPECT_EQ(idist::all_reduce(5), 5);
  EXPECT_FALSE(idist::core::need_to_sync()) << "ignite: `_model = _SerialModel()`, _need_to_sync untouched";
  idist::sync(/*temporary=*/true);  // still nothing to adopt
  EXPECT_EQ(idist::model_name(), "serial");
  idist::finalize();  // a no-op when serial
  EXPECT_EQ(idist::model_name(), "serial");
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  idist::test::quiet_non_root_ranks();
  const int rc = RUN_ALL_TESTS();
  if (!mpi_finalized()) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) MPI_Finalize();
  }
  return rc;
}
