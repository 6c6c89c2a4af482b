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
