#pragma once
// Where the LibTorch layer's tests put their modules and tensors: idist::device(), the CPU in the CPU
// registrations (they hide GPUs) and this rank's GPU under nccl, so that one suite checks both.
// Expectations on values compare on the CPU (.cpu()).
#include <torch/torch.h>

#include "idist/idist.hpp"

namespace idist::test {

/// This rank's device: idist::device() as a LibTorch device.
inline torch::Device test_device() { return idist::device(); }

/// Options of a tensor of `dtype` on test_device().
inline torch::TensorOptions on_test_device(torch::Dtype dtype = torch::kFloat) {
  return torch::TensorOptions().dtype(dtype).device(test_device());
}

}  // namespace idist::test
