// gtest main of the nccl GPU tests. Without a usable CUDA device every test is skipped with the
// reason, and the process exits with 77 so that ctest reports "Skipped" (SKIP_RETURN_CODE), never a
// silent pass. With a device it initializes the nccl backend (ranks from the environment: one
// process per rank, started by mpirun or tests/gpu/run.sh) and runs the tests on every rank; rank 0
// prints the report, other ranks their failures.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpu_support.hpp"
#include "idist/idist.hpp"
#include "support/rank_report.hpp"

namespace idist::gpu_test {

namespace {
std::string g_skip_reason;

}  // namespace

const std::string& skip_reason() { return g_skip_reason; }

}  // namespace idist::gpu_test

/// IDIST_GPU_TEST_TIMEOUT_S (default 60) bounds every collective of the tests.
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (err != cudaSuccess || devices == 0) {
    idist::gpu_test::g_skip_reason =
        std::string("no CUDA device is visible (") + (err != cudaSuccess ? cudaGetErrorString(err) : "0 devices") +
        (visible ? std::string(", CUDA_VISIBLE_DEVICES=\"") + visible + "\"" : std::string()) +
        "): the nccl GPU tests need a GPU; run tests/gpu/run.sh on a GPU machine";
    (void)cudaGetLastError();
  }
  bool initialized = false;
  if (idist::gpu_test::g_skip_reason.empty()) {
    idist::InitOptions opts;
    const char* t = std::getenv("IDIST_GPU_TEST_TIMEOUT_S");
    opts.timeout = std::chrono::seconds(t ? std::atoi(t) : 60);
    idist::initialize("nccl", opts);  // a failure here is a test failure, not a skip
    initialized = true;
    idist::test::report_only_failures_on_nonzero_rank(idist::get_rank());
  }
  const int rc = RUN_ALL_TESTS();
  if (initialized) idist::finalize();
  const auto* unit = ::testing::UnitTest::GetInstance();
  if (rc == 0 && unit->test_to_run_count() > 0 && unit->skipped_test_count() == unit->test_to_run_count()) return 77;
  return rc;
}
