#pragma once
// The LibTorch layer's side of the nccl backend's stream contract (private to idist_torch). Built
// against a LibTorch with CUDA (IDIST_TORCH_CUDA) and with the nccl backend, loading idist_torch
// installs LibTorch's current stream as the stream collectives order against, and tensors handed to
// a collective are held until it completed on the GPU. Elsewhere both are no-ops.
#include <ATen/core/Tensor.h>

namespace idist::detail {

/// Keeps `t`'s storage alive until the next collective issued on this thread completed on the GPU
/// (only for CUDA tensors, and only where the nccl backend and LibTorch's CUDA are built in).
void hold_until_collective_done(const at::Tensor& t);

}  // namespace idist::detail
