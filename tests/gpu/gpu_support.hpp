#pragma once
// Support for the nccl GPU tests: the reason they skip, and device buffers.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace idist::gpu_test {

/// Why the GPU tests of this process are skipped ("" when they run). Set by gpu_main.cpp.
const std::string& skip_reason();

/// Base fixture: every test skips, with the reason printed, when no GPU backend could start.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!skip_reason().empty()) GTEST_SKIP() << skip_reason();
  }
};

/// Fails the current test with `what` when `err` is not cudaSuccess.
#define IDIST_CUDA_OK(expr)                                                                \
  do {                                                                                     \
    const cudaError_t idist_err_ = (expr);                                                 \
    ASSERT_EQ(idist_err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(idist_err_); \
  } while (0)

/// `n` elements of T in device memory of the current device, filled from / read back to the host.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const std::vector<T>& host) : n_(host.size()) {
    if (cudaMalloc(&ptr_, std::max<std::size_t>(1, n_ * sizeof(T))) != cudaSuccess)
      throw std::runtime_error("cudaMalloc");
    // Through a plain array: std::vector<bool> has no contiguous data().
    const std::unique_ptr<T[]> staging(new T[std::max<std::size_t>(1, n_)]);
    std::copy(host.begin(), host.end(), staging.get());
    if (n_ && cudaMemcpy(ptr_, staging.get(), n_ * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess)
      throw std::runtime_error("cudaMemcpy H2D");
  }
  explicit DeviceBuffer(std::size_t n) : DeviceBuffer(std::vector<T>(n)) {}
  ~DeviceBuffer() { (void)cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() const { return static_cast<T*>(ptr_); }
  std::size_t size() const { return n_; }
  std::span<T> span() const { return std::span<T>(data(), n_); }
  /// Copies the contents back (synchronous; after the default stream's work).
  std::vector<T> host() const {
    const std::unique_ptr<T[]> staging(new T[std::max<std::size_t>(1, n_)]);
    if (n_ && cudaMemcpy(staging.get(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess)
      throw std::runtime_error("cudaMemcpy D2H");
    return std::vector<T>(staging.get(), staging.get() + n_);
  }

 private:
  void* ptr_ = nullptr;
  std::size_t n_;
};

}  // namespace idist::gpu_test
