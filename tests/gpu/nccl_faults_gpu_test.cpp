// Failure handling of the nccl backend on a GPU: the watchdog aborts a communicator whose collective
// runs past the timeout, and every waiting call throws an idist::Error naming the op, rank and time.
// Its own binary: the backend is initialized with a short timeout (IDIST_GPU_TEST_TIMEOUT_S=3 from
// ctest / run.sh) and the communicator is unusable afterwards.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "gpu_support.hpp"
#include "idist/idist.hpp"

namespace idist::gpu_test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

void hold_stream_long(void*) { std::this_thread::sleep_for(8s); }

class NcclFaults : public GpuTest {};

// One rank: the caller's stream is busy for 8 s, so a collective ordered after it cannot finish
// within the 3 s timeout. No peer needed to provoke the deadline.
TEST_F(NcclFaults, ACollectivePastItsDeadlineIsAbortedAndReported) {
  if (get_world_size() != 1)
    GTEST_SKIP() << "the single-rank variant; PeerThatNeverArrives covers " << get_world_size() << " ranks";
  const auto timeout = current_model().timeout();
  DeviceBuffer<float> d(std::vector<float>(16, 1.0f));
  IDIST_CUDA_OK(cudaLaunchHostFunc(nullptr, &hold_stream_long, nullptr));
  const auto start = Clock::now();
  try {
    all_reduce(d.span());
    ADD_FAILURE() << "all_reduce completed although its stream was held past the timeout";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("all_reduce"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("elapsed"), std::string::npos) << msg;
    std::cout << "[ message  ] " << msg << "\n";
  }
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, timeout - 100ms);
  EXPECT_LT(elapsed, timeout + 2s);
  // The watchdog aborts the communicator at the op's deadline: later collectives fail at once.
  std::this_thread::sleep_for(500ms);
  const auto again = Clock::now();
  EXPECT_THROW(barrier(), Error);
  EXPECT_LT(Clock::now() - again, 1s);
  IDIST_CUDA_OK(cudaDeviceSynchronize());  // let the held stream drain before teardown
}

// Several ranks: rank 0 never joins the all_reduce; the others time out, then rank 0's late call
// times out too (its peers aborted). Nobody hangs.
TEST_F(NcclFaults, PeerThatNeverArrives) {
  if (get_world_size() == 1) GTEST_SKIP() << "needs 2 or more ranks (one GPU each); run by tests/gpu/run.sh";
  const auto timeout = current_model().timeout();
  DeviceBuffer<float> d(std::vector<float>(16, 1.0f));
  if (get_rank() == 0) std::this_thread::sleep_for(timeout + 2s);
  const auto start = Clock::now();
  try {
    all_reduce(d.span());
    ADD_FAILURE() << "all_reduce completed on rank " << get_rank() << " although rank 0 skipped it";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("all_reduce"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank " + std::to_string(get_rank())), std::string::npos) << msg;
    if (get_rank() == 1) std::cout << "[ message  ] " << msg << "\n";
  }
  EXPECT_LT(Clock::now() - start, timeout + 2s);
}

}  // namespace
}  // namespace idist::gpu_test
