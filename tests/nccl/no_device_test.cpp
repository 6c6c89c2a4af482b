// initialize("nccl") on a machine (or a CUDA_VISIBLE_DEVICES) without a usable CUDA device: the backend
// is compiled in and fails at once with a clear error, before any rendezvous.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "idist/idist.hpp"
#include "nccl/cuda_error.hpp"
#include "support/scoped_env.hpp"
#include "support/time_scale.hpp"

namespace {

using idist::test::ScopedEnv;

using namespace std::chrono_literals;

int visible_devices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  (void)cudaGetLastError();
  return n;
}

TEST(NcclNoDevice, TheBackendIsCompiledInFirstInIgnitesOrder) {
  const std::vector<std::string> names = idist::available_backends();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "nccl");
}

TEST(NcclNoDevice, InitializeFailsAtOnceWithTheClearError) {
  if (const int n = visible_devices(); n > 0)
    GTEST_SKIP() << n << " CUDA device(s) visible, so initialize(\"nccl\") would succeed; the ctest entry "
                 << "nccl_no_device_hidden runs this test with CUDA_VISIBLE_DEVICES= to check the error anyway";
  // A world of 2 whose rank 0 never comes: a rendezvous would wait for the whole timeout.
  ScopedEnv env;
  env.set("RANK", "1");
  env.set("LOCAL_RANK", "1");
  env.set("WORLD_SIZE", "2");
  env.set("MASTER_PORT", "1");  // nothing listens there
  idist::InitOptions opts;
  opts.timeout = 20s;
  const auto start = std::chrono::steady_clock::now();
  try {
    idist::initialize("nccl", opts);
    idist::finalize();
    FAIL() << "initialize(\"nccl\") succeeded without a CUDA device";
  } catch (const idist::BackendError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("the nccl backend needs a CUDA device; none is visible: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("CUDA_VISIBLE_DEVICES"), std::string::npos) << msg;
    std::cout << "[ message  ] " << msg << "\n";
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, idist::test::scaled(5s))
      << "the device check must come before the rendezvous";
  // The failed initialize leaves the serial model in place.
  EXPECT_EQ(idist::backend(), std::nullopt);
  EXPECT_EQ(idist::model_name(), "serial");
  EXPECT_EQ(idist::get_world_size(), 1);
}

TEST(NcclNoDevice, TheMessageQuotesCudaVisibleDevices) {
  using idist::nccl_backend::no_device_message;
  const std::string hidden = no_device_message("cudaErrorNoDevice: no CUDA-capable device is detected", "");
  EXPECT_NE(hidden.find("cudaErrorNoDevice"), std::string::npos) << hidden;
  EXPECT_NE(hidden.find("CUDA_VISIBLE_DEVICES=\"\""), std::string::npos) << hidden;
  const std::string unset = no_device_message("cudaErrorInsufficientDriver: no driver", std::nullopt);
  EXPECT_NE(unset.find("CUDA_VISIBLE_DEVICES is unset"), std::string::npos) << unset;
  EXPECT_NE(unset.find("gloo or mpi"), std::string::npos) << unset;
}

TEST(NcclNoDevice, CudaVisibleDevicesInTheEnvironmentIsReported) {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!v || visible_devices() > 0) GTEST_SKIP() << "runs under CUDA_VISIBLE_DEVICES= (ctest nccl_no_device_hidden)";
  try {
    idist::initialize("nccl");
    idist::finalize();
    FAIL() << "initialize succeeded";
  } catch (const idist::BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA_VISIBLE_DEVICES=\"" + std::string(v) + "\""), std::string::npos)
        << e.what();
  }
}

}  // namespace
