// The configuration functions when nothing was initialized: the serial model's values (ignite's
// _SerialModel), the list of compiled backends and initialize()'s argument checks.
// Registered with CUDA_VISIBLE_DEVICES="" so that the serial model's device is cpu.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "idist/idist.hpp"

namespace {

using namespace std::chrono_literals;

TEST(SerialContext, Defaults) {
  EXPECT_EQ(idist::get_rank(), 0);
  EXPECT_EQ(idist::get_local_rank(), 0);
  EXPECT_EQ(idist::get_world_size(), 1);
  EXPECT_EQ(idist::get_nproc_per_node(), 1);
  EXPECT_EQ(idist::get_node_rank(), 0);
  EXPECT_EQ(idist::get_nnodes(), 1);
  EXPECT_EQ(idist::backend(), std::nullopt);
  EXPECT_EQ(idist::model_name(), "serial");
  EXPECT_EQ(idist::current_model().model_name(), "serial");
  EXPECT_GT(idist::current_model().timeout().count(), 0);
}

TEST(SerialContext, DeviceIsCpuWhenNoGpuIsVisible) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!visible || *visible) GTEST_SKIP() << "run through ctest, which hides GPUs with CUDA_VISIBLE_DEVICES=\"\"";
  EXPECT_EQ(idist::device(), idist::Device{});
  EXPECT_EQ(idist::device().str(), "cpu");
}

TEST(SerialContext, HostnameIsNonEmpty) {
  const std::string h = idist::hostname();
  EXPECT_FALSE(h.empty());
  EXPECT_EQ(h.find('\0'), std::string::npos);
}

TEST(SerialContext, FinalizeAndSyncAreNoOps) {
  idist::finalize();
  idist::sync();  // no MPI context was created outside idist: stays serial
  EXPECT_EQ(idist::model_name(), "serial");
  EXPECT_EQ(idist::get_world_size(), 1);
}

// ignite/distributed/utils.py, sync(temporary): with no context to adopt, the model is the serial one
// again, whatever `temporary`.
TEST(SerialContext, SyncWithoutAContextStaysSerialTemporaryOrNot) {
  idist::sync(/*temporary=*/true);
  EXPECT_EQ(idist::model_name(), "serial");
  idist::sync(/*temporary=*/false);
  EXPECT_EQ(idist::model_name(), "serial");
  EXPECT_EQ(idist::all_reduce(7), 7);
}

TEST(SerialContext, SetLocalRankChecksItsArgument) {
  EXPECT_THROW(idist::set_local_rank(-1), idist::ValueError);
  idist::set_local_rank(0);
  EXPECT_EQ(idist::get_local_rank(), 0);
  idist::set_local_rank(3);  // kept for a later context; the serial model stays local rank 0 (ignite)
  EXPECT_EQ(idist::get_local_rank(), 0);
  idist::set_local_rank(0);
}

TEST(SerialContext, SupportFlags) {
  EXPECT_EQ(idist::has_native_dist_support(), !idist::available_backends().empty());
  EXPECT_FALSE(idist::has_xla_support());
  EXPECT_FALSE(idist::has_hvd_support());
}

TEST(SerialContext, ShowConfigPrintsIgnitesLines) {
  testing::internal::CaptureStderr();
  idist::show_config();
  const std::string out = testing::internal::GetCapturedStderr();
  for (const char* key :
       {"distributed configuration: serial", "backend: None", "device: ", "hostname: ", "world size: 1", "rank: 0",
        "local rank: 0", "num processes per_node: 1", "num nodes: 1", "node rank: 0"})
    EXPECT_NE(out.find(key), std::string::npos) << "missing \"" << key << "\" in:\n" << out;
}

TEST(AvailableBackends, SubsequenceOfNcclGlooMpi) {
  const std::vector<std::string> all = {"nccl", "gloo", "mpi"};
  const std::vector<std::string> got = idist::available_backends();
  std::size_t pos = 0;
  for (const std::string& b : got) {
    while (pos < all.size() && all[pos] != b) ++pos;
    ASSERT_LT(pos, all.size()) << "'" << b << "' is unknown or out of the order nccl, gloo, mpi";
    ++pos;
  }
#if IDIST_HAVE_MPI
  EXPECT_NE(std::find(got.begin(), got.end(), "mpi"), got.end());
#endif
#if IDIST_HAVE_GLOO
  EXPECT_NE(std::find(got.begin(), got.end(), "gloo"), got.end());
#endif
#if IDIST_HAVE_NCCL
  EXPECT_NE(std::find(got.begin(), got.end(), "nccl"), got.end());
#endif
  EXPECT_EQ(got.size(), std::size_t(IDIST_HAVE_MPI + IDIST_HAVE_GLOO + IDIST_HAVE_NCCL));
}

// ignite/distributed/comp_models/__init__.py, setup_available_computation_models(): the tuple
// registered_computation_models holds _SerialModel, then _NativeDistModel when torch.distributed is
// available; ignite/distributed/utils.py, available_backends(): the concatenation of their
// available_backends (() for _SerialModel, native.py: the available ones of nccl, gloo, mpi).
TEST(RegisteredComputationModels, SerialThenNativeDistServingTheAvailableBackends) {
  const std::vector<idist::ComputationModelInfo> models = idist::registered_computation_models();
  ASSERT_FALSE(models.empty());
  EXPECT_EQ(models[0].name, "serial");
  EXPECT_TRUE(models[0].backends.empty());
  if (!idist::has_native_dist_support()) {
    EXPECT_EQ(models.size(), 1u);
    return;
  }
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[1].name, "native-dist");
  std::vector<std::string> all;
  for (const auto& m : models) all.insert(all.end(), m.backends.begin(), m.backends.end());
  EXPECT_EQ(all, idist::available_backends());
  // The serial model's name is the one model_name() reports while serial.
  EXPECT_EQ(idist::model_name(), models[0].name);
}

TEST(Initialize, UnknownBackendListsTheAvailableOnes) {
  for (const char* bad : {"xyz", "serial", "", "MPI", "horovod"}) {
    try {
      idist::initialize(bad);
      FAIL() << "initialize(\"" << bad << "\") did not throw";
    } catch (const idist::ValueError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::string("'") + bad + "'"), std::string::npos) << msg;
      for (const std::string& b : idist::available_backends())
        EXPECT_NE(msg.find(b), std::string::npos) << msg << " does not list " << b;
    }
    EXPECT_EQ(idist::model_name(), "serial") << "a failed initialize() must leave the serial model";
  }
}

// A misspelt IDIST_LOG_LEVEL stops initialize() before any rendezvous, like IDIST_DISTRIBUTED_DEBUG.
TEST(Initialize, InvalidLogLevelVariableIsAValueError) {
  const std::vector<std::string> names = idist::available_backends();
  const std::string backend = names.empty() ? "mpi" : names.back();
  ::setenv("IDIST_LOG_LEVEL", "loud", 1);
  try {
    idist::initialize(backend);
    idist::finalize();
    ADD_FAILURE() << "initialize with IDIST_LOG_LEVEL=loud did not throw";
  } catch (const idist::ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("IDIST_LOG_LEVEL"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'loud'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("DEBUG, INFO, WARNING, OFF"), std::string::npos) << msg;
  }
  ::unsetenv("IDIST_LOG_LEVEL");
  EXPECT_EQ(idist::model_name(), "serial");
}

TEST(Initialize, NonPositiveTimeoutIsAValueError) {
  const std::vector<std::string> names = idist::available_backends();
  const std::string backend = names.empty() ? "mpi" : names.back();
  for (auto timeout : {0ms, -1ms, std::chrono::milliseconds(-60000)}) {
    idist::InitOptions opts;
    opts.timeout = timeout;
    try {
      idist::initialize(backend, opts);
      idist::finalize();
      FAIL() << "initialize with timeout " << timeout.count() << " ms did not throw";
    } catch (const idist::ValueError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("timeout"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::to_string(timeout.count())), std::string::npos) << msg;
    }
    EXPECT_EQ(idist::model_name(), "serial");
  }
}

}  // namespace
